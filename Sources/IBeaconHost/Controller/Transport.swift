import IBeaconCore

/// Moves H4 packets between this host and one controller. Transports do no matching of
/// replies to commands: that is `ControllerClient`'s job.
public protocol HCITransport: AnyObject, Sendable {
    /// What the user named, e.g. `hci0`, `tcp:127.0.0.1:7000`, `serial:/dev/ttyACM0`.
    var name: String { get }
    /// Sends one packet whole. Throws `TransportError`.
    func send(_ packet: H4Packet) async throws
    /// Packets from the controller, in order. The stream finishes after `close()`, and
    /// finishes by throwing a `TransportError` when the link fails (peer closed, read error,
    /// unframeable bytes).
    var incoming: AsyncThrowingStream<H4Packet, any Error> { get }
    /// Releases the underlying descriptor; idempotent.
    func close()
    /// Installs a filter that runs on the transport's own reader thread for every received
    /// packet before it is queued for `incoming`; a packet it returns true for is consumed
    /// there. Scanning uses it to handle advertising reports without a hand-over between
    /// threads per report. Transports without a reader thread ignore it (the default).
    func setPacketFilter(_ filter: (@Sendable (H4Packet) -> Bool)?)
}

extension HCITransport {
    public func setPacketFilter(_ filter: (@Sendable (H4Packet) -> Bool)?) {}
}

/// Receives a copy of every packet that crosses a transport (the btsnoop writer is one).
public protocol PacketRecorder: AnyObject, Sendable {
    func record(_ packet: H4Packet, direction: PacketDirection)
}

/// A transport failure, with what a user should do about it.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The kernel has no Bluetooth support (EAFNOSUPPORT).
        case bluetoothUnavailable
        /// The named adapter does not exist; `available` lists the ones that do.
        case noSuchAdapter(available: [String])
        /// Missing CAP_NET_RAW / CAP_NET_ADMIN, or a device file's permissions.
        case permissionDenied
        /// The adapter is soft- or hard-blocked by rfkill.
        case rfkilled
        /// The device is in use by someone else.
        case busy
        /// A TCP peer refused the connection or was not reachable.
        case connectionRefused
        /// A file or serial device does not exist.
        case notFound
        /// The peer closed the link or the device went away after opening.
        case disconnected
        /// The device specification itself is malformed (a usage error).
        case badSpecification
        /// Any other read/write/ioctl failure.
        case io
    }

    public var kind: Kind
    /// What failed, e.g. `cannot open hci7`.
    public var message: String
    /// How to fix it, when we know.
    public var hint: String?
    /// The errno behind it, when there was one.
    public var errno: Int32?

    public init(_ kind: Kind, _ message: String, hint: String? = nil, errno: Int32? = nil) {
        self.kind = kind
        self.message = message
        self.hint = hint
        self.errno = errno
    }

    public var description: String {
        hint.map { "\(message) — \($0)" } ?? message
    }
}
