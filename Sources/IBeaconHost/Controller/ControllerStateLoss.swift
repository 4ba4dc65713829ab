import IBeaconCore
import SystemPackage

/// An unsolicited event meaning the controller lost, or is about to lose, what a host
/// programmed into it (advertising, scanning): whoever depends on that state must re-apply it.
public enum ControllerStateLoss: Sendable, Equatable {
    /// Hardware Error event (Core 5.4 Vol 4 Part E §7.7.16); a reset follows.
    case hardwareError(code: UInt8)
    /// A Command Complete for HCI_Reset that this host did not send: another host reset it.
    case resetByAnotherHost
    /// Command Complete with opcode 0x0000 (NOP): the controller powered up again.
    case poweredUp
    /// BlueZ stack-internal device event: the adapter went down (state lost; wait for up).
    /// The kernel sends these to raw sockets not bound to an adapter only; a socket bound to
    /// hciN (ours) learns of the adapter coming back from the kernel's own HCI_Reset, and a
    /// command sent before the kernel has finished bringing it up fails with ENETDOWN
    /// (`ControllerError.isAdapterNotUp`), which the callers retry.
    case adapterDown
    /// BlueZ stack-internal device event: the adapter is up again.
    case adapterUp

    /// The loss an event announces; nil for every other event. Only unsolicited events reach
    /// the callers (the controller client consumes the answers to its own commands).
    public init?(_ event: HCIEvent) {
        switch event {
        case .hardwareError(let code):
            self = .hardwareError(code: code)
        case .commandComplete(_, let opcode, _) where opcode == .reset:
            self = .resetByAnotherHost
        case .commandComplete(_, let opcode, _) where opcode == .nop:
            self = .poweredUp
        case .stackInternal:
            switch StackInternalDeviceEvent(event)?.kind {
            case .up?: self = .adapterUp
            case .down?: self = .adapterDown
            default: return nil
            }
        default:
            return nil
        }
    }

    /// What happened, for the log.
    public var reason: String {
        switch self {
        case .hardwareError(let code):
            "the controller reported Hardware Error 0x\([code].hexString.uppercased())"
        case .resetByAnotherHost: "the controller was reset by another host"
        case .poweredUp: "the controller restarted (power-up NOP)"
        case .adapterDown: "the adapter went down"
        case .adapterUp: "the adapter is up again"
        }
    }
}

extension ControllerError {
    /// A command refused because the adapter is not up (yet): a BlueZ socket answers ENETDOWN
    /// while the kernel is still initialising a controller it just reset. Worth retrying; the
    /// link itself is fine.
    public var isAdapterNotUp: Bool {
        guard case .transport(let error) = self else { return false }
        return error.errno == Errno.networkDown.rawValue
    }

    /// After the controller lost its state, whether programming it again deserves another try:
    /// yes for a refusal, a timeout or an adapter still coming up; no when the link is gone
    /// (the event stream reports that, and reconnecting is the caller's business).
    public var isWorthRetrying: Bool {
        if case .transport = self { return isAdapterNotUp }
        return true
    }
}
