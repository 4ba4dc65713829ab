/// What the kernel sends on the control channel: one case per row of `MgmtEventSpec`
/// (parameters in the rows' doc comments), and `.unknown` for every other code.
public enum MgmtEvent: Sendable, Equatable {
    case commandComplete(index: MgmtIndex, opcode: MgmtOpcode, status: MgmtStatus, returnParameters: [UInt8])
    case commandStatus(index: MgmtIndex, opcode: MgmtOpcode, status: MgmtStatus)
    case controllerError(index: MgmtIndex, code: UInt8)
    case indexAdded(MgmtIndex)
    case indexRemoved(MgmtIndex)
    case newSettings(index: MgmtIndex, MgmtSettings)
    /// Sent to every socket but the one that added the instance.
    case advertisingAdded(index: MgmtIndex, instance: UInt8)
    case advertisingRemoved(index: MgmtIndex, instance: UInt8)
    /// A link to a device is up (sent to every socket), with who initiated it.
    case deviceConnected(index: MgmtIndex, MgmtLink)
    /// A link is down: sent to every socket but the one whose Disconnect ended it (6.1
    /// `mgmt_device_disconnected` skips the Disconnect command's socket; newer kernels do not).
    case deviceDisconnected(index: MgmtIndex, MgmtLink, reason: UInt8)
    /// One report while a program runs discovery (sent to every socket).
    case deviceFound(index: MgmtIndex, MgmtDeviceFound)
    /// Handle 0: a report forwarded while monitors are registered and no controller offload
    /// matched it (`MgmtEvent.unmatchedMonitorHandle`).
    case advMonitorDeviceFound(index: MgmtIndex, handle: UInt16, MgmtDeviceFound)
    case unknown(MgmtPacket)

    /// The Monitor_Handle of an Adv Monitor Device Found the kernel forwards without a match.
    public static let unmatchedMonitorHandle: UInt16 = 0

    /// Decodes an event; codes without a row become `.unknown`, known ones whose length their
    /// row does not admit, or whose fields do not add up, throw.
    public init(_ packet: MgmtPacket) throws(DecodingError) {
        let code = MgmtEventCode(rawValue: packet.code)
        guard let spec = code.spec else {
            self = .unknown(packet)
            return
        }
        try spec.parameters.check(packet.parameters.count, "\(code) parameters")
        var r = ByteReader(packet.parameters)
        guard let event = try Self.read(code, index: packet.index, &r) else {
            self = .unknown(packet)
            return
        }
        self = event
        try r.expectEnd(code.description)
    }

    /// The fields of a row's event; nil for a row without a case (none: a new row needs one).
    private static func read(_ code: MgmtEventCode, index: MgmtIndex, _ r: inout ByteReader) throws(DecodingError)
        -> MgmtEvent?
    {
        switch code {
        case .commandComplete:
            let op = MgmtOpcode(rawValue: try r.readUInt16LE("Command Complete opcode"))
            let status = MgmtStatus(rawValue: try r.readUInt8("Command Complete status"))
            return .commandComplete(index: index, opcode: op, status: status, returnParameters: r.readRest())
        case .commandStatus:
            let op = MgmtOpcode(rawValue: try r.readUInt16LE("Command Status opcode"))
            let status = MgmtStatus(rawValue: try r.readUInt8("Command Status status"))
            return .commandStatus(index: index, opcode: op, status: status)
        case .controllerError:
            return .controllerError(index: index, code: try r.readUInt8("Controller Error code"))
        case .indexAdded:
            return .indexAdded(index)
        case .indexRemoved:
            return .indexRemoved(index)
        case .newSettings:
            return .newSettings(index: index, MgmtSettings(rawValue: try r.readUInt32LE("Current_Settings")))
        case .advertisingAdded:
            return .advertisingAdded(index: index, instance: try r.readUInt8("Advertising Added instance"))
        case .advertisingRemoved:
            return .advertisingRemoved(index: index, instance: try r.readUInt8("Advertising Removed instance"))
        case .deviceConnected:
            let link = try MgmtLink.read(from: &r, "Device Connected")
            let flags = try r.readUInt32LE("Device Connected Flags")
            let length = Int(try r.readUInt16LE("Device Connected EIR_Data_Length"))
            _ = try r.readBytes(length, "Device Connected EIR_Data")
            return .deviceConnected(index: index, MgmtLink(link.address, link.addressType, flags: flags))
        case .deviceDisconnected:
            let link = try MgmtLink.read(from: &r, "Device Disconnected")
            return .deviceDisconnected(index: index, link, reason: try r.readUInt8("Device Disconnected Reason"))
        case .deviceFound:
            return .deviceFound(index: index, try MgmtDeviceFound.read(from: &r, "Device Found"))
        case .advMonitorDeviceFound:
            let handle = try r.readUInt16LE("Adv Monitor Device Found Monitor_Handle")
            return .advMonitorDeviceFound(
                index: index, handle: handle, try MgmtDeviceFound.read(from: &r, "Adv Monitor Device Found"))
        default:
            return nil
        }
    }

    /// What a log shows: a decoded event in full (none of the decoded ones carries a secret),
    /// and for every other code only its name, index and length. The kernel sends New Link Key,
    /// New Long Term Key, New IRK/CSRK, PIN Code / User Confirm / User Passkey Request and
    /// Passkey Notify to every socket opened with CAP_NET_ADMIN: their parameters are keys.
    public var logDescription: String {
        guard case .unknown(let packet) = self else { return "\(self)" }
        return "\(MgmtEventCode(rawValue: packet.code)) on \(packet.index), \(packet.parameters.count) parameter bytes "
            + "not shown"
    }

    /// The wire form, as the kernel would send it (for fakes and tests): `MgmtEvent(event.packet) == event`.
    public var packet: MgmtPacket {
        var w = ByteWriter()
        let (code, index): (MgmtEventCode, MgmtIndex)
        switch self {
        case .commandComplete(let i, let opcode, let status, let returnParameters):
            (code, index) = (.commandComplete, i)
            w.uint16LE(opcode.rawValue)
            w.uint8(status.rawValue)
            w.append(returnParameters)
        case .commandStatus(let i, let opcode, let status):
            (code, index) = (.commandStatus, i)
            w.uint16LE(opcode.rawValue)
            w.uint8(status.rawValue)
        case .controllerError(let i, let error):
            (code, index) = (.controllerError, i)
            w.uint8(error)
        case .indexAdded(let i): (code, index) = (.indexAdded, i)
        case .indexRemoved(let i): (code, index) = (.indexRemoved, i)
        case .newSettings(let i, let settings):
            (code, index) = (.newSettings, i)
            w.uint32LE(settings.rawValue)
        case .advertisingAdded(let i, let instance):
            (code, index) = (.advertisingAdded, i)
            w.uint8(instance)
        case .advertisingRemoved(let i, let instance):
            (code, index) = (.advertisingRemoved, i)
            w.uint8(instance)
        case .deviceConnected(let i, let link):
            (code, index) = (.deviceConnected, i)
            w.append(link.address.bytes)
            w.uint8(link.addressType)
            w.uint32LE(link.flags)
            w.uint16LE(0)  // no EIR data
        case .deviceDisconnected(let i, let link, let reason):
            (code, index) = (.deviceDisconnected, i)
            w.append(link.address.bytes)
            w.uint8(link.addressType)
            w.uint8(reason)
        case .deviceFound(let i, let report):
            (code, index) = (.deviceFound, i)
            w.append(report.bytes)
        case .advMonitorDeviceFound(let i, let handle, let report):
            (code, index) = (.advMonitorDeviceFound, i)
            w.uint16LE(handle)
            w.append(report.bytes)
        case .unknown(let packet):
            return packet
        }
        return MgmtPacket(code: code.rawValue, index: index, parameters: w.bytes)
    }
}

/// The report of Device Found and Adv Monitor Device Found: Address (6), Address_Type (1),
/// RSSI (1), Flags (4), AD_Data_Length (2), AD_Data.
public struct MgmtDeviceFound: Sendable, Equatable {
    public var address: BDAddress
    /// `brEdrAddress`, `lePublicAddress` or `leRandomAddress` (mgmt-api.txt "Address_Type").
    public var addressType: UInt8
    public var rssi: Int8
    public var flags: UInt32
    public var data: [UInt8]

    public static let brEdrAddress: UInt8 = 0
    public static let lePublicAddress: UInt8 = 1
    public static let leRandomAddress: UInt8 = 2
    /// RSSI 127: the controller did not measure it ("not available").
    public static let rssiNotAvailable: Int8 = 127

    public init(address: BDAddress, addressType: UInt8, rssi: Int8, flags: UInt32, data: [UInt8]) {
        self.address = address
        self.addressType = addressType
        self.rssi = rssi
        self.flags = flags
        self.data = data
    }

    /// The LE address type, nil for a BR/EDR device (inquiry results of a discovery).
    public var leAddressType: LEAddressType? {
        switch addressType {
        case Self.lePublicAddress: .public
        case Self.leRandomAddress: .random
        default: nil
        }
    }

    static func read(from r: inout ByteReader, _ event: String) throws(DecodingError) -> MgmtDeviceFound {
        let address = try BDAddress.read(from: &r, "\(event) Address")
        let type = try r.readUInt8("\(event) Address_Type")
        let rssi = try r.readInt8("\(event) RSSI")
        let flags = try r.readUInt32LE("\(event) Flags")
        let length = Int(try r.readUInt16LE("\(event) AD_Data_Length"))
        let data = try r.readBytes(length, "\(event) AD_Data")
        return MgmtDeviceFound(address: address, addressType: type, rssi: rssi, flags: flags, data: data)
    }

    /// The wire form (for tests and fakes).
    public var bytes: [UInt8] {
        var w = ByteWriter()
        w.append(address.bytes)
        w.uint8(addressType)
        w.int8(rssi)
        w.uint32LE(flags)
        w.uint16LE(UInt16(truncatingIfNeeded: data.count))
        w.append(data)
        return w.bytes
    }
}

/// A link of Device Connected / Device Disconnected: the peer's Address (6) and Address_Type (1),
/// and (Device Connected only) its Flags (4).
public struct MgmtLink: Sendable, Equatable, Hashable {
    public var address: BDAddress
    /// `MgmtDeviceFound.brEdrAddress`, `lePublicAddress` or `leRandomAddress`.
    public var addressType: UInt8
    public var flags: UInt32

    /// Device Connected's flag for a link this host initiated (`MGMT_DEV_FOUND_INITIATED_CONN`,
    /// set from `conn->out` by mgmt.c `mgmt_device_connected`, kernel ≥ 5.14): clear when a
    /// central connected to us.
    public static let initiatedFlag: UInt32 = 0x08

    public init(_ address: BDAddress, _ addressType: UInt8, flags: UInt32 = 0) {
        self.address = address
        self.addressType = addressType
        self.flags = flags
    }

    /// An LE link that a central made to this adapter (so: to one of its connectable advertisements).
    public var isIncomingLE: Bool {
        addressType != MgmtDeviceFound.brEdrAddress && flags & Self.initiatedFlag == 0
    }

    static func read(from r: inout ByteReader, _ event: String) throws(DecodingError) -> MgmtLink {
        let address = try BDAddress.read(from: &r, "\(event) Address")
        return MgmtLink(address, try r.readUInt8("\(event) Address_Type"))
    }

    public static func == (a: MgmtLink, b: MgmtLink) -> Bool {
        a.address == b.address && a.addressType == b.addressType
    }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(address)
        hasher.combine(addressType)
    }
}
