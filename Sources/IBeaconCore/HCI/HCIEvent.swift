/// An HCI event, decoded. Core 5.4 Vol 4 Part E §5.4.4 (packet) and §7.7 (events).
/// Decoding is total: events this package does not model are kept as `.leMeta` or `.unknown`
/// with their parameters; malformed ones throw `DecodingError`.
public enum HCIEvent: Hashable, Sendable {
    /// §7.7.14. `returnParameters` starts with the status byte for every command that has one
    /// (all this package sends); it is empty for the NOP opcode 0x0000.
    case commandComplete(numHCICommandPackets: UInt8, opcode: HCIOpcode, returnParameters: [UInt8])
    /// §7.7.15.
    case commandStatus(status: HCIStatus, numHCICommandPackets: UInt8, opcode: HCIOpcode)
    /// §7.7.16. Hardware_Code is vendor-specific.
    case hardwareError(code: UInt8)
    /// §7.7.65.2.
    case leAdvertisingReport([LEAdvertisingReport])
    /// §7.7.65.13.
    case leExtendedAdvertisingReport([LEExtendedAdvertisingReport])
    /// §7.7.65.18: an advertising set stopped (duration or event count reached, or a connection).
    case leAdvertisingSetTerminated(status: HCIStatus, handle: UInt8, connectionHandle: UInt16, completedEvents: UInt8)
    /// Any other LE Meta subevent, parameters after the subevent code.
    case leMeta(subevent: LEMetaSubevent, parameters: [UInt8])
    /// BlueZ's stack-internal event 0xFD (raw HCI sockets only).
    case stackInternal(parameters: [UInt8])
    /// Any other event.
    case unknown(code: HCIEventCode, parameters: [UInt8])

    /// Decodes an event packet body: event code (1), parameter total length (1), parameters.
    /// The H4 packet-type byte is not part of `body`.
    public static func decode(_ body: [UInt8]) throws(DecodingError) -> HCIEvent {
        let (code, parameters) = try parameters(of: body)
        var r = parameters
        let event: HCIEvent
        switch code {
        case .commandComplete:
            let packets = try r.readUInt8("Num_HCI_Command_Packets")
            let opcode = HCIOpcode(rawValue: try r.readUInt16LE("Command_Opcode"))
            event = .commandComplete(numHCICommandPackets: packets, opcode: opcode, returnParameters: r.readRest())
        case .commandStatus:
            let status = HCIStatus(rawValue: try r.readUInt8("Status"))
            let packets = try r.readUInt8("Num_HCI_Command_Packets")
            let opcode = HCIOpcode(rawValue: try r.readUInt16LE("Command_Opcode"))
            event = .commandStatus(status: status, numHCICommandPackets: packets, opcode: opcode)
        case .hardwareError:
            event = .hardwareError(code: try r.readUInt8("Hardware_Code"))
        case .leMeta:
            event = try decodeLEMeta(&r)
        case .stackInternal:
            event = .stackInternal(parameters: r.readRest())
        default:
            event = .unknown(code: code, parameters: r.readRest())
        }
        try r.expectEnd("\(code) parameters")
        return event
    }

    /// The event code, and a reader over exactly the parameters: checks Parameter_Total_Length.
    private static func parameters(of body: [UInt8]) throws(DecodingError) -> (HCIEventCode, ByteReader) {
        var header = ByteReader(body)
        let code = HCIEventCode(rawValue: try header.readUInt8("event code"))
        let length = Int(try header.readUInt8("event parameter length"))
        // §5.4.4: Parameter_Total_Length is the length of all parameters in octets.
        guard header.remaining >= length else {
            throw .truncated(what: "\(code) parameters", needed: length, available: header.remaining)
        }
        guard header.remaining == length else {
            throw .trailingBytes(what: "\(code) parameters", count: header.remaining - length)
        }
        return (code, header)  // exactly the parameters are left
    }

    /// Reads the reports of an LE Advertising Report (0x3E/0x02) or LE Extended Advertising
    /// Report (0x3E/0x0D) event body in place, calling `report` for each in order: what
    /// `decode` reads for those events, without building them (scanning a capture reads
    /// hundreds of thousands). Returns false, having called nothing, for any other event.
    /// Throws exactly where `decode` throws; `report` may have been called for the reports
    /// before the fault, so a caller keeping them discards them on a throw.
    public static func forEachAdvertisingReport(
        in body: [UInt8], _ report: (AdvertisingReportFields) -> Void
    ) throws(DecodingError) -> Bool {
        let (code, parameters) = try parameters(of: body)
        guard code == .leMeta else { return false }
        var r = parameters
        let subevent = LEMetaSubevent(rawValue: try r.readUInt8("LE Meta Subevent_Code"))
        guard subevent == .advertisingReport || subevent == .extendedAdvertisingReport else { return false }
        try readAdvertisingReports(&r, extended: subevent == .extendedAdvertisingReport, report)
        try r.expectEnd("\(code) parameters")
        return true
    }

    /// Num_Reports, then that many reports one after another (despite the spec's per-field
    /// array notation, the Linux kernel, Zephyr and Bumble all read, and controllers send,
    /// whole reports in turn).
    private static func readAdvertisingReports(
        _ r: inout ByteReader, extended: Bool, _ report: (AdvertisingReportFields) -> Void
    ) throws(DecodingError) {
        let count = Int(try r.readUInt8("Num_Reports"))
        for _ in 0..<count { report(try AdvertisingReportFields(decoding: &r, extended: extended)) }
    }

    private static func decodeLEMeta(_ r: inout ByteReader) throws(DecodingError) -> HCIEvent {
        let subevent = LEMetaSubevent(rawValue: try r.readUInt8("LE Meta Subevent_Code"))
        let bytes = r.bytes
        switch subevent {
        case .advertisingReport:
            var reports: [LEAdvertisingReport] = []
            try readAdvertisingReports(&r, extended: false) { reports.append(LEAdvertisingReport($0, in: bytes)) }
            return .leAdvertisingReport(reports)
        case .extendedAdvertisingReport:
            var reports: [LEExtendedAdvertisingReport] = []
            try readAdvertisingReports(&r, extended: true) {
                reports.append(LEExtendedAdvertisingReport($0, in: bytes))
            }
            return .leExtendedAdvertisingReport(reports)
        case .advertisingSetTerminated:
            let status = HCIStatus(rawValue: try r.readUInt8("Status"))
            let handle = try r.readUInt8("Advertising_Handle")
            let connection = try r.readUInt16LE("Connection_Handle")
            let completed = try r.readUInt8("Num_Completed_Extended_Advertising_Events")
            return .leAdvertisingSetTerminated(
                status: status, handle: handle, connectionHandle: connection, completedEvents: completed)
        default:
            return .leMeta(subevent: subevent, parameters: r.readRest())
        }
    }

    /// The status the event carries: Command Status's, the first return parameter of Command
    /// Complete (nil if there is none, as for NOP), Advertising Set Terminated's; else nil.
    public var status: HCIStatus? {
        switch self {
        case .commandComplete(_, _, let returnParameters):
            returnParameters.first.map(HCIStatus.init(rawValue:))
        case .commandStatus(let status, _, _):
            status
        case .leAdvertisingSetTerminated(let status, _, _, _):
            status
        default:
            nil
        }
    }
}

/// Splits Command Complete return parameters for `type`: the status, and the typed return
/// parameters when the status is success (a failing controller may send only the status).
/// On success, missing or extra bytes throw `DecodingError`. Core 5.4 Vol 4 Part E §7.7.14.
public func decodeReturnParameters<C: HCICommand>(
    _ type: C.Type, from returnParameters: [UInt8]
) throws(DecodingError) -> (HCIStatus, C.ReturnParameters?) {
    var r = ByteReader(returnParameters)
    let status = HCIStatus(rawValue: try r.readUInt8("\(C.opcode) Status"))
    guard status.isSuccess else { return (status, nil) }
    return (status, try C.decodeReturn(Array(returnParameters.dropFirst())))
}

/// Reads an RSSI / TX power octet: a signed dBm value, where 127 means "not available".
private func readOptionalPower(_ r: inout ByteReader, _ what: String) throws(DecodingError) -> Int8? {
    let value = try r.readInt8(what)
    return value == 127 ? nil : value
}

/// One report of an LE Advertising Report event. Core 5.4 Vol 4 Part E §7.7.65.2.
public struct LEAdvertisingReport: Hashable, Sendable {
    /// Event_Type[i], 1 octet. An open set.
    public struct EventType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        public static let advInd = EventType(rawValue: 0x00)
        public static let advDirectInd = EventType(rawValue: 0x01)
        public static let advScanInd = EventType(rawValue: 0x02)
        public static let advNonconnInd = EventType(rawValue: 0x03)
        public static let scanRsp = EventType(rawValue: 0x04)

        public var description: String {
            switch self {
            case .advInd: "ADV_IND"
            case .advDirectInd: "ADV_DIRECT_IND"
            case .advScanInd: "ADV_SCAN_IND"
            case .advNonconnInd: "ADV_NONCONN_IND"
            case .scanRsp: "SCAN_RSP"
            default: "unknown event type (0x\([rawValue].hexString.uppercased()))"
            }
        }
    }

    public var eventType: EventType
    public var addressType: LEAddressType
    public var address: BDAddress
    /// Data[i]: the AD structures, 0…31 octets.
    public var data: [UInt8]
    /// RSSI[i] in dBm (−127…+20); nil when the controller reported 127, "not available".
    public var rssi: Int8?

    public init(eventType: EventType, addressType: LEAddressType, address: BDAddress, data: [UInt8], rssi: Int8?) {
        self.eventType = eventType
        self.addressType = addressType
        self.address = address
        self.data = data
        self.rssi = rssi
    }

    /// The report `fields` describes, its data copied from `bytes` (what they were read from).
    init(_ fields: AdvertisingReportFields, in bytes: [UInt8]) {
        self.init(
            eventType: EventType(rawValue: UInt8(truncatingIfNeeded: fields.eventType)),
            addressType: fields.addressType, address: fields.address, data: Array(bytes[fields.data]),
            rssi: fields.rssi)
    }

    /// Encodes the report as it appears in the event (for fakes and round-trip tests).
    public func encode(into w: inout ByteWriter) {
        w.uint8(eventType.rawValue)
        w.uint8(addressType.rawValue)
        w.append(address.bytes)
        w.uint8(UInt8(truncatingIfNeeded: data.count))
        w.append(data)
        w.int8(rssi ?? 127)
    }
}

/// One report of an LE Extended Advertising Report event. Core 5.4 Vol 4 Part E §7.7.65.13.
/// 24 octets plus the data.
public struct LEExtendedAdvertisingReport: Hashable, Sendable {
    /// Event_Type[i], 2 octets: bits 0–4 flags, bits 5–6 data status.
    public struct EventType: OptionSet, Hashable, Sendable {
        public let rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }

        public static let connectable = EventType(rawValue: 1 << 0)
        public static let scannable = EventType(rawValue: 1 << 1)
        public static let directed = EventType(rawValue: 1 << 2)
        public static let scanResponse = EventType(rawValue: 1 << 3)
        /// The advertisement used legacy PDUs.
        public static let legacy = EventType(rawValue: 1 << 4)

        /// Bits 5–6.
        public var dataStatus: DataStatus { DataStatus(rawValue: UInt8((rawValue >> 5) & 0x03)) }

        /// Legacy ADV_NONCONN_IND as an extended report: 0x0010.
        public static let legacyAdvNonconnInd: EventType = [.legacy]
    }

    /// Data status of an extended report (Event_Type bits 5–6).
    public struct DataStatus: RawRepresentable, Hashable, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        public static let complete = DataStatus(rawValue: 0)
        /// More reports with the rest of the data follow.
        public static let incompleteMoreToCome = DataStatus(rawValue: 1)
        /// The data was cut short; no more will come.
        public static let incompleteTruncated = DataStatus(rawValue: 2)
    }

    public var eventType: EventType
    public var addressType: LEAddressType
    public var address: BDAddress
    public var primaryPHY: LEPHY
    /// `.none` when there was no secondary-channel packet.
    public var secondaryPHY: LEPHY
    /// Advertising_SID[i]: 0x00…0x0F, or nil for 0xFF ("No ADI field provided").
    public var advertisingSID: UInt8?
    /// TX_Power[i] in dBm; nil for 127, "not available".
    public var txPower: Int8?
    /// RSSI[i] in dBm; nil for 127, "not available".
    public var rssi: Int8?
    /// Periodic_Advertising_Interval[i] in 1.25 ms units; 0 when there is none.
    public var periodicAdvertisingInterval: UInt16
    public var directAddressType: LEAddressType
    public var directAddress: BDAddress
    public var data: [UInt8]

    public init(
        eventType: EventType, addressType: LEAddressType, address: BDAddress, primaryPHY: LEPHY = .le1M,
        secondaryPHY: LEPHY = .none, advertisingSID: UInt8? = nil, txPower: Int8? = nil, rssi: Int8?,
        periodicAdvertisingInterval: UInt16 = 0, directAddressType: LEAddressType = .public,
        directAddress: BDAddress = .zero, data: [UInt8]
    ) {
        self.eventType = eventType
        self.addressType = addressType
        self.address = address
        self.primaryPHY = primaryPHY
        self.secondaryPHY = secondaryPHY
        self.advertisingSID = advertisingSID
        self.txPower = txPower
        self.rssi = rssi
        self.periodicAdvertisingInterval = periodicAdvertisingInterval
        self.directAddressType = directAddressType
        self.directAddress = directAddress
        self.data = data
    }

    /// The report `fields` describes, its data copied from `bytes` (what they were read from).
    init(_ fields: AdvertisingReportFields, in bytes: [UInt8]) {
        self.init(
            eventType: EventType(rawValue: fields.eventType), addressType: fields.addressType,
            address: fields.address, primaryPHY: fields.primaryPHY, secondaryPHY: fields.secondaryPHY,
            advertisingSID: fields.advertisingSID, txPower: fields.txPower, rssi: fields.rssi,
            periodicAdvertisingInterval: fields.periodicAdvertisingInterval,
            directAddressType: fields.directAddressType, directAddress: fields.directAddress,
            data: Array(bytes[fields.data]))
    }

    public func encode(into w: inout ByteWriter) {
        w.uint16LE(eventType.rawValue)
        w.uint8(addressType.rawValue)
        w.append(address.bytes)
        w.uint8(primaryPHY.rawValue)
        w.uint8(secondaryPHY.rawValue)
        w.uint8(advertisingSID ?? 0xFF)
        w.int8(txPower ?? 127)
        w.int8(rssi ?? 127)
        w.uint16LE(periodicAdvertisingInterval)
        w.uint8(directAddressType.rawValue)
        w.append(directAddress.bytes)
        w.uint8(UInt8(truncatingIfNeeded: data.count))
        w.append(data)
    }
}

/// One report of an LE Advertising Report (Core 5.4 Vol 4 Part E §7.7.65.2) or LE Extended
/// Advertising Report (§7.7.65.13) event, read in place: its fields, and where Data[i] lies in
/// the bytes read. The one reader of both report layouts: `LEAdvertisingReport`,
/// `LEExtendedAdvertisingReport` and scanning (which takes the data without copying it) all
/// go through it.
public struct AdvertisingReportFields: Hashable, Sendable {
    /// True for an extended report.
    public var extended: Bool
    /// Event_Type[i]: one octet in a legacy report, two in an extended one.
    public var eventType: UInt16
    public var addressType: LEAddressType
    public var address: BDAddress
    /// RSSI[i] in dBm; nil for 127, "not available".
    public var rssi: Int8?
    /// The fields only an extended report has; a legacy report gets the values
    /// `LEExtendedAdvertisingReport` defaults to (1M, no secondary PHY, no SID, no TX power).
    public var primaryPHY: LEPHY = .le1M
    public var secondaryPHY: LEPHY = .none
    public var advertisingSID: UInt8?
    public var txPower: Int8?
    public var periodicAdvertisingInterval: UInt16 = 0
    public var directAddressType: LEAddressType = .public
    public var directAddress: BDAddress = .zero
    /// Where Data[i] lies in the reader's `bytes`.
    public var data: Range<Int>

    /// Reads one whole report in spec order. Legacy: Event_Type (1), Address_Type, Address,
    /// Data_Length, Data, RSSI. Extended: Event_Type (2), Address_Type, Address, Primary_PHY,
    /// Secondary_PHY, Advertising_SID, TX_Power, RSSI, Periodic_Advertising_Interval,
    /// Direct_Address_Type, Direct_Address, Data_Length, Data.
    public init(decoding r: inout ByteReader, extended: Bool) throws(DecodingError) {
        self.extended = extended
        eventType = extended ? try r.readUInt16LE("Event_Type") : UInt16(try r.readUInt8("Event_Type"))
        addressType = LEAddressType(rawValue: try r.readUInt8("Address_Type"))
        address = try BDAddress.read(from: &r, "Address")
        guard extended else {
            let length = Int(try r.readUInt8("Data_Length"))
            // §7.7.65.2: Data_Length is 0x00…0x1F.
            guard length <= 31 else {
                throw .invalidValue(what: "LE Advertising Report Data_Length", value: length, allowed: "0…31")
            }
            data = try r.readRange(length, "Data")
            rssi = try readOptionalPower(&r, "RSSI")
            return
        }
        primaryPHY = LEPHY(rawValue: try r.readUInt8("Primary_PHY"))
        secondaryPHY = LEPHY(rawValue: try r.readUInt8("Secondary_PHY"))
        let sid = try r.readUInt8("Advertising_SID")
        advertisingSID = sid == 0xFF ? nil : sid  // 0xFF: "No ADI field provided"
        txPower = try readOptionalPower(&r, "TX_Power")
        rssi = try readOptionalPower(&r, "RSSI")
        periodicAdvertisingInterval = try r.readUInt16LE("Periodic_Advertising_Interval")
        directAddressType = LEAddressType(rawValue: try r.readUInt8("Direct_Address_Type"))
        directAddress = try BDAddress.read(from: &r, "Direct_Address")
        let length = Int(try r.readUInt8("Data_Length"))
        data = try r.readRange(length, "Data")
    }
}
