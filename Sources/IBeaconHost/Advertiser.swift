import IBeaconCore
import Logging

/// Which HCI advertising command set to use. A controller must not get both kinds between
/// resets (Core 5.4 Vol 4 Part E §3.1.1: the other kind then answers Command Disallowed).
/// The user's choice of command set (`--mode`); what was used in the end is an `LECommandSet`.
public enum AdvertisingMode: String, Sendable, CaseIterable {
    /// Extended when the controller supports it (LE feature bit 12), else legacy.
    case auto
    case legacy
    case extended
}

/// The address a beacon advertises from, and what each path makes of it.
///
/// Raw HCI sets any own address (LE Set Random Address / LE Set Advertising Set Random Address)
/// and always advertises non-connectable. The kernel's management interface has no address
/// parameter: it advertises a non-connectable instance from a non-resolvable private address it
/// makes anew each time it programs the instance, and a connectable one from the adapter's
/// identity address (`hci_get_random_address` with `require_privacy = !connectable`,
/// net/bluetooth/hci_sync.c).
public enum BeaconAddress: Sendable, Equatable {
    /// The adapter's identity address, the same at every start. Raw HCI: non-connectable
    /// (ADV_NONCONN_IND) from the public address. Kernel: a connectable instance (ADV_IND).
    case identity
    /// A static random address. Raw HCI only: through the kernel the beacon is non-connectable
    /// from an address the kernel chooses (and says so).
    case staticRandom(BDAddress)
    /// A non-resolvable private address, new for this run: raw HCI uses this one; through the
    /// kernel a non-connectable instance, for which the kernel makes its own.
    case nonResolvable(BDAddress)

    /// The own address raw HCI programs; nil for the public address.
    public var randomAddress: BDAddress? {
        switch self {
        case .identity: nil
        case .staticRandom(let a), .nonResolvable(let a): a
        }
    }
}

/// One beacon to advertise.
public struct BeaconSpec: Sendable, Equatable {
    public var beacon: IBeacon
    public var intervalMilliseconds: Int
    /// Requested TX power in dBm (extended advertising only).
    public var txPower: Int8?
    /// Which address to advertise from.
    public var address: BeaconAddress
    /// The TX power the profile's measured power was calibrated at, if recorded.
    public var calibratedTxPower: Int8?
    /// Where the beacon came from, for messages (the profile path).
    public var label: String

    /// The random own address raw HCI programs; nil for the controller's public address.
    public var randomAddress: BDAddress? { address.randomAddress }

    public init(
        beacon: IBeacon, intervalMilliseconds: Int = 100, txPower: Int8? = nil, address: BeaconAddress = .identity,
        calibratedTxPower: Int8? = nil, label: String
    ) {
        self.beacon = beacon
        self.intervalMilliseconds = intervalMilliseconds
        self.txPower = txPower
        self.address = address
        self.calibratedTxPower = calibratedTxPower
        self.label = label
    }
}

/// What was set up, for the status line, whatever the path (`Adapter`): a controller this host
/// programs over HCI, or the kernel's advertising instances.
public struct AdvertisingStatus: Sendable {
    /// Where one beacon went on the air.
    public enum Placement: Sendable, Equatable {
        /// On a controller this host programs over HCI: the address it advertises from, and its
        /// advertising set (extended commands; nil for legacy).
        case controller(address: BDAddress, handle: UInt8?)
        /// An advertising instance of the kernel's, registered with `method`, connectable or not;
        /// `address` is the one on the air when the kernel's rule fixes it (the adapter's identity
        /// address when connectable), nil when the kernel makes a new non-resolvable one.
        case kernelInstance(UInt8, method: MgmtAdvertisingMethod, connectable: Bool, address: BDAddress?)
    }

    public struct Beacon: Sendable, Equatable {
        public var spec: BeaconSpec
        public var placement: Placement
        /// The TX power the controller uses, when it says; nil when it does not (through the
        /// kernel also when the kernel reports the power as unknown, 127).
        public var txPower: Int8?

        public init(spec: BeaconSpec, placement: Placement, txPower: Int8?) {
            self.spec = spec
            self.placement = placement
            self.txPower = txPower
        }

        /// The address it advertises from, when known.
        public var address: BDAddress? {
            switch placement {
            case .controller(let address, _), .kernelInstance(_, _, _, let address?): address
            case .kernelInstance: nil
            }
        }

        /// Whether it advertises connectable: only a kernel instance registered so (raw HCI
        /// always advertises non-connectable).
        public var connectable: Bool {
            if case .kernelInstance(_, _, let connectable, _) = placement { connectable } else { false }
        }

        /// The kernel's instance number, through the kernel.
        public var instance: UInt8? {
            if case .kernelInstance(let instance, _, _, _) = placement { instance } else { nil }
        }
    }

    /// The HCI command set in use; nil through the kernel, which chooses the commands.
    public var commandSet: LECommandSet?
    public var beacons: [Beacon]
    /// Things the user should know (TX power not honoured, calibrated at another TX power).
    public var warnings: [String]

    public init(commandSet: LECommandSet?, beacons: [Beacon], warnings: [String]) {
        self.commandSet = commandSet
        self.beacons = beacons
        self.warnings = warnings
    }
}

/// A problem with the request itself, independent of any controller error (or, through the
/// kernel, why it cannot advertise besides a command failing).
public struct AdvertisingError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Programs a controller to advertise iBeacons, and turns advertising off again.
public struct Advertiser: Sendable {
    public var beacons: [BeaconSpec]
    public var mode: AdvertisingMode
    /// True when this host owns the controller (H4 transports): it may Reset it and set the
    /// event masks. False on a BlueZ adapter shared with the kernel.
    public var ownsController: Bool
    public var logger: Logger

    public init(beacons: [BeaconSpec], mode: AdvertisingMode, ownsController: Bool, logger: Logger) {
        self.beacons = beacons
        self.mode = mode
        self.ownsController = ownsController
        self.logger = logger
    }

    /// Brings the controller to a known state and starts advertising every beacon.
    /// On failure advertising is left off (best effort) and the error is rethrown.
    public func start(on client: ControllerClient) async throws -> AdvertisingStatus {
        if ownsController { try await client.resetAndUnmaskEvents() }
        let address = try await client.execute(ReadBDAddr())
        let features = try await client.execute(LEReadLocalSupportedFeatures())
        let chosen = try chooseCommandSet(features: features)
        if beacons.isEmpty {  // every beacon switched off (`advertise --mqtt-control`)
            await stop(on: client, commandSet: chosen)
            return AdvertisingStatus(commandSet: chosen, beacons: [], warnings: [])
        }
        do {
            switch chosen {
            case .extended: return try await startExtended(on: client, controllerAddress: address)
            case .legacy: return try await startLegacy(on: client, controllerAddress: address)
            }
        } catch {
            await stop(on: client, commandSet: chosen)
            throw error
        }
    }

    func chooseCommandSet(features: LEFeatures) throws -> LECommandSet {
        let hasExtended = features.contains(.extendedAdvertising)
        switch mode {
        case .auto:
            if !hasExtended && beacons.count > 1 {
                throw AdvertisingError(
                    "this controller supports only legacy advertising (no LE Extended Advertising feature), "
                        + "which is one beacon at a time; advertise one profile per adapter, "
                        + "or use a Bluetooth 5 controller for several")
            }
            return hasExtended ? .extended : .legacy
        case .extended:
            guard hasExtended else {
                throw AdvertisingError(
                    "--mode extended: this controller does not support LE Extended Advertising (feature bit 12); "
                        + "use --mode legacy or --mode auto")
            }
            return .extended
        case .legacy:
            if beacons.count > 1 {
                throw AdvertisingError(
                    "--mode legacy advertises one beacon at a time; several profiles need extended advertising "
                        + "(--mode auto on a Bluetooth 5 controller)")
            }
            return .legacy
        }
    }

    /// The legacy commands that program one beacon, in order: stop whatever is advertising
    /// (parameters cannot change while enabled, §7.8.5), address, parameters, data, and only
    /// then enable, so the first advertising event already carries the beacon.
    public static func legacyCommands(for spec: BeaconSpec) throws -> [any HCICommand] {
        var commands: [any HCICommand] = [LESetAdvertisingEnable(enabled: false)]
        if let random = spec.randomAddress { commands.append(LESetRandomAddress(randomAddress: random)) }
        let interval = try AdvertisingInterval(milliseconds: spec.intervalMilliseconds, for: .legacy)
        commands.append(
            try LESetAdvertisingParameters(
                intervalMin: interval, intervalMax: interval, advertisingType: .advNonconnInd,
                ownAddressType: spec.randomAddress == nil ? .public : .random))
        commands.append(try LESetAdvertisingData(data: spec.beacon.advertisingData))
        commands.append(LESetAdvertisingEnable(enabled: true))
        return commands
    }

    /// The extended commands that program one beacon as advertising set `handle` (legacy
    /// ADV_NONCONN_IND PDUs, which is what phones scan for), without enabling it.
    public static func extendedSetCommands(for spec: BeaconSpec, handle: UInt8) throws -> [any HCICommand] {
        let interval = try AdvertisingInterval(milliseconds: spec.intervalMilliseconds, for: .extended)
        var commands: [any HCICommand] = [
            try LESetExtendedAdvertisingParameters(
                advertisingHandle: handle, eventProperties: .legacyAdvNonconnInd,
                primaryIntervalMin: interval, primaryIntervalMax: interval,
                ownAddressType: spec.randomAddress == nil ? .public : .random,
                advertisingTxPower: spec.txPower, advertisingSID: handle & 0x0F)
        ]
        if let random = spec.randomAddress {
            commands.append(try LESetAdvertisingSetRandomAddress(advertisingHandle: handle, randomAddress: random))
        }
        commands.append(try LESetExtendedAdvertisingData(advertisingHandle: handle, data: spec.beacon.advertisingData))
        return commands
    }

    /// Enables sets `0..<count` together.
    public static func extendedEnableCommand(count: Int) throws -> LESetExtendedAdvertisingEnable {
        try LESetExtendedAdvertisingEnable(
            enable: true, sets: (0..<count).map { try LESetExtendedAdvertisingEnable.AdvertisingSet(handle: UInt8($0)) }
        )
    }

    private func startLegacy(on client: ControllerClient, controllerAddress: BDAddress) async throws
        -> AdvertisingStatus
    {
        let spec = beacons[0]
        for command in try Self.legacyCommands(for: spec) {
            _ = try await client.execute(command)
        }
        let power = try? await client.execute(LEReadAdvertisingPhysicalChannelTxPower())
        var warnings: [String] = []
        if let requested = spec.txPower {
            warnings.append(
                "\(spec.label): txPower \(requested) dBm cannot be honoured with legacy advertising; "
                    + "the controller transmits at \(power.map { "\($0) dBm" } ?? "its own fixed level")")
        }
        if let warning = calibrationWarning(spec, inUse: power) { warnings.append(warning) }
        let placement = AdvertisingStatus.Placement.controller(
            address: spec.randomAddress ?? controllerAddress, handle: nil)
        return AdvertisingStatus(
            commandSet: .legacy, beacons: [.init(spec: spec, placement: placement, txPower: power)], warnings: warnings)
    }

    private func startExtended(on client: ControllerClient, controllerAddress: BDAddress) async throws
        -> AdvertisingStatus
    {
        let supportedSets = try await client.execute(LEReadNumberOfSupportedAdvertisingSets())
        if beacons.count > Int(supportedSets) {
            throw AdvertisingError(
                "\(beacons.count) profiles need \(beacons.count) advertising sets but this controller supports "
                    + "\(supportedSets); advertise fewer profiles on this adapter")
        }
        // Stop every set (Number_of_Sets 0 with Enable 0 disables all, §7.8.56) before reprogramming.
        _ = try await client.execute(LESetExtendedAdvertisingEnable(enable: false, sets: []))
        var status: [AdvertisingStatus.Beacon] = []
        var warnings: [String] = []
        for (index, spec) in beacons.enumerated() {
            let handle = UInt8(index)
            do {
                _ = try await client.execute(LERemoveAdvertisingSet(advertisingHandle: handle))
            } catch ControllerError.commandFailed(_, .unknownAdvertisingIdentifier) {
                // Not there: nothing to remove.
            }
            var selected: Int8?
            for command in try Self.extendedSetCommands(for: spec, handle: handle) {
                let result = try await client.execute(command)
                if let r = result as? LESetExtendedAdvertisingParameters.ReturnParameters {
                    selected = r.selectedTxPower
                }
            }
            if let requested = spec.txPower, let selected, requested != selected {
                warnings.append(
                    "\(spec.label): requested TX power \(requested) dBm, the controller selected \(selected) dBm")
            }
            if let warning = calibrationWarning(spec, inUse: selected) { warnings.append(warning) }
            let placement = AdvertisingStatus.Placement.controller(
                address: spec.randomAddress ?? controllerAddress, handle: handle)
            status.append(.init(spec: spec, placement: placement, txPower: selected))
        }
        _ = try await client.execute(Self.extendedEnableCommand(count: beacons.count))
        return AdvertisingStatus(commandSet: .extended, beacons: status, warnings: warnings)
    }

    /// Measured power tracks TX power about 1:1, so a profile calibrated at another TX power is off.
    func calibrationWarning(_ spec: BeaconSpec, inUse: Int8?) -> String? {
        guard let calibrated = spec.calibratedTxPower, let inUse, calibrated != inUse else { return nil }
        return "\(spec.label): measured power was calibrated at TX \(calibrated) dBm but the controller now "
            + "transmits at \(inUse) dBm; phones will misjudge distance by about \(abs(Int(inUse) - Int(calibrated))) dB "
            + "— run `ibeacon calibrate` again"
    }

    /// Turns advertising off. Errors are logged, not thrown: this runs on the way out.
    public func stop(on client: ControllerClient, commandSet: LECommandSet) async {
        do {
            if commandSet == .extended {
                _ = try await client.execute(
                    LESetExtendedAdvertisingEnable(enable: false, sets: []), timeout: .seconds(1))
                _ = try? await client.execute(LEClearAdvertisingSets(), timeout: .seconds(1))
            } else {
                _ = try await client.execute(LESetAdvertisingEnable(enabled: false), timeout: .seconds(1))
            }
        } catch {
            logger.warning("could not turn advertising off: \(error)")
        }
    }

    /// Turns off advertising that anything left on, whichever command set it used.
    public static func stopAny(on client: ControllerClient, logger: Logger) async throws -> LECommandSet {
        let features = try await client.execute(LEReadLocalSupportedFeatures())
        if features.contains(.extendedAdvertising) {
            do {
                _ = try await client.execute(LESetExtendedAdvertisingEnable(enable: false, sets: []))
                return .extended
            } catch ControllerError.commandFailed(_, .commandDisallowed) {
                // The controller is in legacy mode since its last reset: fall through.
            } catch ControllerError.commandFailed(_, .unknownHCICommand) {
            }
        }
        _ = try await client.execute(LESetAdvertisingEnable(enabled: false))
        return .legacy
    }
}

extension EventMask {
    /// What this host needs: the reset default plus LE Meta (bit 61; masked after Reset,
    /// Core 5.4 Vol 4 Part E §7.3.1) and Hardware Error.
    public static let ibeaconHost = EventMask(
        rawValue: EventMask.defaultAfterReset.rawValue | EventMask.leMeta.rawValue | EventMask.hardwareError.rawValue)
}

extension LEEventMask {
    /// The reset default (0x1F, which includes Advertising Report) plus Extended Advertising
    /// Report (bit 12) and Advertising Set Terminated (bit 17), Core 5.4 Vol 4 Part E §7.8.1.
    public static let ibeaconHost = LEEventMask(
        rawValue: LEEventMask.defaultAfterReset.rawValue | LEEventMask.extendedAdvertisingReport.rawValue
            | LEEventMask.advertisingSetTerminated.rawValue)
}

extension ControllerClient {
    /// On a controller this host owns (H4): Reset, then enable the events advertising and
    /// scanning rely on (after Reset the LE Meta event is masked, Core 5.4 Vol 4 Part E §7.3.1).
    func resetAndUnmaskEvents() async throws {
        _ = try await execute(Reset())
        _ = try await execute(SetEventMask(eventMask: .ibeaconHost))
        _ = try await execute(LESetEventMask(leEventMask: .ibeaconHost))
    }
}
