/// The device event of BlueZ's Stack Internal event (`HCIEventCode.stackInternal`, 0xFD), the
/// one parser of it: lib/hci.h `evt_stack_internal` is Type (2) then data, and for type
/// `EVT_SI_DEVICE` (0x0001) the data is `evt_si_device`: Event (2), Dev_ID (2). The Linux
/// kernel sends it to raw HCI sockets when an adapter is registered, goes up or down, or is
/// removed (hci_sock.c `hci_si_event`).
public struct StackInternalDeviceEvent: Sendable, Equatable {
    /// `HCI_DEV_*` of lib/hci.h. Open: other values survive.
    public struct Kind: RawRepresentable, Hashable, Sendable {
        public let rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }

        public static let registered = Kind(rawValue: 1)
        public static let unregistered = Kind(rawValue: 2)
        public static let up = Kind(rawValue: 3)
        public static let down = Kind(rawValue: 4)
    }

    /// `EVT_SI_DEVICE`: the Type of a device event.
    public static let deviceType: UInt16 = 0x0001

    public var kind: Kind
    /// The adapter's index (`hciN`); nil when the event ends before Dev_ID.
    public var deviceID: UInt16?

    /// The device event in a Stack Internal event's parameters; nil for another type, or
    /// fewer than the four bytes of Type and Event.
    public init?(parameters: [UInt8]) {
        var r = ByteReader(parameters)
        guard let type = try? r.readUInt16LE(), type == Self.deviceType, let kind = try? r.readUInt16LE() else {
            return nil
        }
        self.kind = Kind(rawValue: kind)
        deviceID = try? r.readUInt16LE()
    }

    /// The device event `event` carries; nil for any other event.
    public init?(_ event: HCIEvent) {
        guard case .stackInternal(let parameters) = event else { return nil }
        self.init(parameters: parameters)
    }
}
