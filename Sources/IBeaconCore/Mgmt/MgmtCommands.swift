/// A management command, in the shape every command has (`WireCommand`): its row of the table
/// (code, name, parameter and reply lengths, `MgmtTable.swift`), how its parameters are written,
/// and how its return parameters are read (one type per command; mgmt-api.txt section named in
/// each doc comment).
public protocol MgmtCommand: WireCommand where Row == MgmtCommandSpec {}

extension MgmtCommand {
    public static var opcode: MgmtOpcode { spec.opcode }

    public func packet(index: MgmtIndex) -> MgmtPacket {
        MgmtPacket(code: Self.opcode.rawValue, index: index, parameters: parameters)
    }
}

/// The management settings bitmask (mgmt-api.txt "Read Controller Information Command").
public struct MgmtSettings: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let powered = MgmtSettings(rawValue: 1 << 0)
    public static let connectable = MgmtSettings(rawValue: 1 << 1)
    public static let fastConnectable = MgmtSettings(rawValue: 1 << 2)
    public static let discoverable = MgmtSettings(rawValue: 1 << 3)
    public static let bondable = MgmtSettings(rawValue: 1 << 4)
    public static let linkLevelSecurity = MgmtSettings(rawValue: 1 << 5)
    public static let secureSimplePairing = MgmtSettings(rawValue: 1 << 6)
    public static let brEdr = MgmtSettings(rawValue: 1 << 7)
    public static let highSpeed = MgmtSettings(rawValue: 1 << 8)
    public static let lowEnergy = MgmtSettings(rawValue: 1 << 9)
    public static let advertising = MgmtSettings(rawValue: 1 << 10)
    public static let secureConnections = MgmtSettings(rawValue: 1 << 11)
    public static let debugKeys = MgmtSettings(rawValue: 1 << 12)
    public static let privacy = MgmtSettings(rawValue: 1 << 13)
    public static let controllerConfiguration = MgmtSettings(rawValue: 1 << 14)
    public static let staticAddress = MgmtSettings(rawValue: 1 << 15)
    public static let phyConfiguration = MgmtSettings(rawValue: 1 << 16)
    public static let widebandSpeech = MgmtSettings(rawValue: 1 << 17)
    public static let qualityReport = MgmtSettings(rawValue: 1 << 18)

    static let names = [
        "powered", "connectable", "fast-connectable", "discoverable", "bondable", "link-security", "ssp",
        "br/edr", "hs", "le", "advertising", "secure-conn", "debug-keys", "privacy", "configuration",
        "static-addr", "phy-configuration", "wide-band-speech", "quality-report",
    ]

    /// `powered le advertising` (btmgmt's names); unknown bits as `bit20`.
    public var description: String {
        (0..<32).filter { rawValue & (1 << UInt32($0)) != 0 }
            .map { $0 < Self.names.count ? Self.names[$0] : "bit\($0)" }
            .joined(separator: " ")
    }
}

/// The Flags of Add Advertising / Add Extended Advertising Parameters and the Supported_Flags
/// of Read Advertising Features (mgmt-api.txt, bits 0–16).
public struct MgmtAdvertisingFlags: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Bit 0. Without it the instance is non-connectable unless the adapter's global
    /// connectable setting is on ("the controller will use advertising based on the
    /// connectable setting").
    public static let connectable = MgmtAdvertisingFlags(rawValue: 1 << 0)
    public static let discoverable = MgmtAdvertisingFlags(rawValue: 1 << 1)
    public static let limitedDiscoverable = MgmtAdvertisingFlags(rawValue: 1 << 2)
    public static let managedFlags = MgmtAdvertisingFlags(rawValue: 1 << 3)
    /// Bit 4: adds a TX Power AD field; it does not set the power.
    public static let txPowerField = MgmtAdvertisingFlags(rawValue: 1 << 4)
    public static let appearance = MgmtAdvertisingFlags(rawValue: 1 << 5)
    public static let localName = MgmtAdvertisingFlags(rawValue: 1 << 6)
    public static let secondaryLE1M = MgmtAdvertisingFlags(rawValue: 1 << 7)
    public static let secondaryLE2M = MgmtAdvertisingFlags(rawValue: 1 << 8)
    public static let secondaryLECoded = MgmtAdvertisingFlags(rawValue: 1 << 9)
    /// Bit 10 (Supported_Flags only): the TX Power parameter can be honoured.
    public static let canSetTxPower = MgmtAdvertisingFlags(rawValue: 1 << 10)
    /// Bit 11 (Supported_Flags only): the controller offloads advertising.
    public static let hardwareOffload = MgmtAdvertisingFlags(rawValue: 1 << 11)
    /// Bits 12–16: which fields of Add Extended Advertising Parameters were set by the caller.
    public static let useDuration = MgmtAdvertisingFlags(rawValue: 1 << 12)
    public static let useTimeout = MgmtAdvertisingFlags(rawValue: 1 << 13)
    public static let useIntervals = MgmtAdvertisingFlags(rawValue: 1 << 14)
    public static let useTxPower = MgmtAdvertisingFlags(rawValue: 1 << 15)
    public static let scanResponse = MgmtAdvertisingFlags(rawValue: 1 << 16)

    static let names = [
        "connectable", "discoverable", "limited-discoverable", "managed-flags", "tx-power-field",
        "appearance", "local-name", "secondary-1M", "secondary-2M", "secondary-coded", "can-set-tx-power",
        "hw-offload", "duration", "timeout", "intervals", "tx-power", "scan-response",
    ]

    public var description: String {
        (0..<32).filter { rawValue & (1 << UInt32($0)) != 0 }
            .map { $0 < Self.names.count ? Self.names[$0] : "bit\($0)" }
            .joined(separator: " ")
    }
}

/// Read Management Version Information (non-controller). Returns Version (1), Revision (2).
public struct MgmtReadVersion: MgmtCommand {
    public struct ReturnParameters: Sendable, Equatable {
        public var version: UInt8
        public var revision: UInt16
        public var description: String { "\(version).\(revision)" }
    }
    public static let spec = MgmtCommandSpec(
        0x0001, "Read Management Version Information", parameters: .exactly(0), returns: .exactly(3))
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> ReturnParameters {
        let v = try r.readUInt8("Version")
        let rev = try r.readUInt16LE("Revision")
        return ReturnParameters(version: v, revision: rev)
    }
}

/// Read Controller Index List (non-controller). Returns Num_Controllers (2),
/// Controller_Index[i] (2 each).
public struct MgmtReadIndexList: MgmtCommand {
    public static let spec = MgmtCommandSpec(
        0x0003, "Read Controller Index List", parameters: .exactly(0), returns: .atLeast(2))
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> [UInt16] {
        let count = Int(try r.readUInt16LE("Num_Controllers"))
        var indices: [UInt16] = []
        for i in 0..<count { indices.append(try r.readUInt16LE("Controller_Index[\(i)]")) }
        return indices
    }
}

/// Read Controller Information. Returns Address (6), Bluetooth_Version (1),
/// Manufacturer (2), Supported_Settings (4), Current_Settings (4), Class_Of_Device (3),
/// Name (249), Short_Name (11): 280 bytes.
public struct MgmtReadControllerInfo: MgmtCommand {
    public struct ReturnParameters: Sendable, Equatable {
        public var address: BDAddress
        public var bluetoothVersion: UInt8
        public var manufacturer: UInt16
        public var supportedSettings: MgmtSettings
        public var currentSettings: MgmtSettings
        public var classOfDevice: UInt32
        public var name: String
        public var shortName: String
    }
    public static let spec = MgmtCommandSpec(
        0x0004, "Read Controller Information", parameters: .exactly(0), returns: .exactly(280))
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> ReturnParameters {
        let address = try BDAddress.read(from: &r, "Address")
        let version = try r.readUInt8("Bluetooth_Version")
        let manufacturer = try r.readUInt16LE("Manufacturer")
        let supported = MgmtSettings(rawValue: try r.readUInt32LE("Supported_Settings"))
        let current = MgmtSettings(rawValue: try r.readUInt32LE("Current_Settings"))
        let cod = try r.readUInt24LE("Class_Of_Device")
        let name = cString(try r.readBytes(249, "Name"))
        let short = cString(try r.readBytes(11, "Short_Name"))
        return ReturnParameters(
            address: address, bluetoothVersion: version, manufacturer: manufacturer, supportedSettings: supported,
            currentSettings: current, classOfDevice: cod, name: name, shortName: short)
    }
}

/// A NUL-padded name field; invalid UTF-8 is replaced, never trusted.
func cString(_ bytes: [UInt8]) -> String {
    String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
}

/// Read Advertising Features. Returns Supported_Flags (4), Max_Adv_Data_Len (1),
/// Max_Scan_Rsp_Len (1), Max_Instances (1), Num_Instances (1), Instance[i] (1 each).
public struct MgmtReadAdvertisingFeatures: MgmtCommand {
    public struct ReturnParameters: Sendable, Equatable {
        public var supportedFlags: MgmtAdvertisingFlags
        public var maxAdvertisingDataLength: UInt8
        public var maxScanResponseLength: UInt8
        public var maxInstances: UInt8
        /// The instances registered now, by any program.
        public var instances: [UInt8]

        public init(
            supportedFlags: MgmtAdvertisingFlags, maxAdvertisingDataLength: UInt8, maxScanResponseLength: UInt8,
            maxInstances: UInt8, instances: [UInt8]
        ) {
            self.supportedFlags = supportedFlags
            self.maxAdvertisingDataLength = maxAdvertisingDataLength
            self.maxScanResponseLength = maxScanResponseLength
            self.maxInstances = maxInstances
            self.instances = instances
        }
    }
    public static let spec = MgmtCommandSpec(
        0x003D, "Read Advertising Features", parameters: .exactly(0), returns: .atLeast(8))
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> ReturnParameters {
        let flags = MgmtAdvertisingFlags(rawValue: try r.readUInt32LE("Supported_Flags"))
        let maxData = try r.readUInt8("Max_Adv_Data_Len")
        let maxScan = try r.readUInt8("Max_Scan_Rsp_Len")
        let maxInstances = try r.readUInt8("Max_Instances")
        let count = Int(try r.readUInt8("Num_Instances"))
        let instances = try r.readBytes(count, "Instance[]")
        return ReturnParameters(
            supportedFlags: flags, maxAdvertisingDataLength: maxData, maxScanResponseLength: maxScan,
            maxInstances: maxInstances, instances: instances)
    }
}

/// Why an advertising command could not be built (validated at construction).
public struct MgmtParameterError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Add Advertising: Instance (1), Flags (4), Duration (2), Timeout (2),
/// Adv_Data_Len (1), Scan_Rsp_Len (1), Adv_Data, Scan_Rsp. Returns Instance (1).
/// The kernel advertises it at its default interval (`le_adv_min_interval`/`max`, 1.28 s
/// unless changed with Set Default System Configuration); there is no interval parameter.
public struct MgmtAddAdvertising: MgmtCommand {
    public var instance: UInt8
    public var flags: MgmtAdvertisingFlags
    public var duration: UInt16
    public var timeout: UInt16
    public var advertisingData: [UInt8]
    public var scanResponse: [UInt8]

    public static let spec = MgmtCommandSpec(0x003E, "Add Advertising", parameters: .atLeast(11), returns: .exactly(1))

    /// Refuses instance 0 and data or a scan response longer than 255 bytes.
    public init(
        instance: UInt8, flags: MgmtAdvertisingFlags = [], duration: UInt16 = 0, timeout: UInt16 = 0,
        advertisingData: [UInt8], scanResponse: [UInt8] = []
    ) throws(MgmtParameterError) {
        try MgmtAdvertisingFields.check(instance: instance, advertisingData, scanResponse)
        self.instance = instance
        self.flags = flags
        self.duration = duration
        self.timeout = timeout
        self.advertisingData = advertisingData
        self.scanResponse = scanResponse
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.mgmtAdvertisingHeader(instance: instance, flags: flags, duration: duration, timeout: timeout)
        w.mgmtAdvertisingPayload(advertisingData, scanResponse)
    }

    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> UInt8 {
        try r.readUInt8("Instance")
    }
}

/// The checks the advertising commands share (Add Advertising, Add Extended Advertising
/// Parameters and Data), made once.
enum MgmtAdvertisingFields {
    /// "The Instance identifier is a value between 1 and the number of supported instances.
    /// The value 0 is reserved."
    static func check(instance: UInt8) throws(MgmtParameterError) {
        guard instance != 0 else { throw MgmtParameterError(message: "advertising instance 0 is reserved") }
    }

    /// The instance, and data and scan response whose lengths fit their one-byte length fields.
    static func check(instance: UInt8, _ advertisingData: [UInt8], _ scanResponse: [UInt8])
        throws(MgmtParameterError)
    {
        try check(instance: instance)
        guard advertisingData.count <= 255, scanResponse.count <= 255 else {
            throw MgmtParameterError(message: "advertising data and scan response are at most 255 bytes each")
        }
    }
}

extension ByteWriter {
    /// Instance (1), Flags (4), Duration (2), Timeout (2): how Add Advertising and Add Extended
    /// Advertising Parameters begin.
    mutating func mgmtAdvertisingHeader(instance: UInt8, flags: MgmtAdvertisingFlags, duration: UInt16, timeout: UInt16)
    {
        uint8(instance)
        uint32LE(flags.rawValue)
        uint16LE(duration)
        uint16LE(timeout)
    }

    /// Adv_Data_Len (1), Scan_Rsp_Len (1), Adv_Data, Scan_Rsp: how Add Advertising and Add
    /// Extended Advertising Data end (lengths checked by `MgmtAdvertisingFields.check`).
    mutating func mgmtAdvertisingPayload(_ advertisingData: [UInt8], _ scanResponse: [UInt8]) {
        uint8(UInt8(advertisingData.count))
        uint8(UInt8(scanResponse.count))
        append(advertisingData)
        append(scanResponse)
    }
}

/// Disconnect: Address (6), Address_Type (1). Returns Address (6), Address_Type (1) once the
/// link is down (Not Connected when there was none).
public struct MgmtDisconnect: MgmtCommand {
    public var link: MgmtLink
    public static let spec = MgmtCommandSpec(0x0014, "Disconnect", parameters: .exactly(7), returns: .exactly(7))

    public init(_ link: MgmtLink) { self.link = link }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.append(link.address.bytes)
        writer.uint8(link.addressType)
    }
    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> MgmtLink {
        try MgmtLink.read(from: &r, "Disconnect")
    }
}

/// Remove Advertising: Instance (1). Returns Instance (1). Instance 0 removes every
/// instance of every program, so this type refuses it.
public struct MgmtRemoveAdvertising: MgmtCommand {
    public var instance: UInt8
    public static let spec = MgmtCommandSpec(
        0x003F, "Remove Advertising", parameters: .exactly(1), returns: .exactly(1))

    public init(instance: UInt8) throws(MgmtParameterError) {
        guard instance != 0 else {
            throw MgmtParameterError(message: "instance 0 would remove every program's advertising")
        }
        self.instance = instance
    }

    public func encodeParameters(into writer: inout ByteWriter) { writer.uint8(instance) }
    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> UInt8 {
        try r.readUInt8("Instance")
    }
}

/// Add Extended Advertising Parameters (kernel ≥ 5.12): Instance (1), Flags (4),
/// Duration (2), Timeout (2), MinInterval (4), MaxInterval (4), TxPower (1). Returns
/// Instance (1), TxPower (1), MaxAdvDataLen (1), MaxScanRspLen (1).
public struct MgmtAddExtendedAdvertisingParameters: MgmtCommand {
    public struct ReturnParameters: Sendable, Equatable {
        public var instance: UInt8
        /// The power the controller selected; `unknownTxPower` when the kernel cannot say (a
        /// controller without LE extended advertising, programmed with the legacy commands).
        public var txPower: Int8
        public var maxAdvertisingDataLength: UInt8
        public var maxScanResponseLength: UInt8
    }

    public var instance: UInt8
    public var flags: MgmtAdvertisingFlags
    public var duration: UInt16
    public var timeout: UInt16
    /// In 0.625 ms slots.
    public var minInterval: UInt32
    public var maxInterval: UInt32
    public var txPower: Int8

    /// The kernel takes a longer block too (`MGMT_ADD_EXT_ADV_PARAMS_MIN_SIZE`, variable length).
    public static let spec = MgmtCommandSpec(
        0x0054, "Add Extended Advertising Parameters", parameters: .atLeast(18), returns: .exactly(4))
    /// "both must have values in the range [0x000020, 0xFFFFFF]".
    public static let intervalRange: ClosedRange<UInt32> = 0x20...0xFF_FFFF
    /// "The acceptable range for requested Tx Power is … [-127, +20] dBm".
    public static let txPowerRange: ClosedRange<Int8> = -127...20
    /// TxPower when the host has no preference (not flagged, so the kernel ignores it).
    public static let noTxPowerPreference: Int8 = 127
    /// The TxPower the kernel returns when it does not know the power (HCI_TX_POWER_INVALID).
    public static let unknownTxPower: Int8 = 127

    /// Legacy PDUs (no secondary PHY flag), with the interval and, when given, the TX power
    /// flagged as set by the caller. `connectable` sets the Connectable flag: the kernel then
    /// advertises ADV_IND from the adapter's identity address; without it ADV_NONCONN_IND from
    /// a non-resolvable private address it makes anew each time it programs the instance
    /// (unless the adapter's own Connectable setting is on, which makes every instance connectable).
    public init(instance: UInt8, interval: AdvertisingInterval, txPower: Int8?, connectable: Bool = false)
        throws(MgmtParameterError)
    {
        try MgmtAdvertisingFields.check(instance: instance)
        let slots = interval.slots
        guard Self.intervalRange.contains(slots) else {
            throw MgmtParameterError(message: "advertising interval \(interval) is outside 0x20…0xFFFFFF slots")
        }
        var flags: MgmtAdvertisingFlags = [.useIntervals]
        if connectable { flags.insert(.connectable) }
        if let txPower {
            guard Self.txPowerRange.contains(txPower) else {
                throw MgmtParameterError(message: "TX power \(txPower) dBm is outside -127…20 dBm")
            }
            flags.insert(.useTxPower)
        }
        self.instance = instance
        self.flags = flags
        self.duration = 0
        self.timeout = 0
        self.minInterval = slots
        self.maxInterval = slots
        self.txPower = txPower ?? Self.noTxPowerPreference
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.mgmtAdvertisingHeader(instance: instance, flags: flags, duration: duration, timeout: timeout)
        w.uint32LE(minInterval)
        w.uint32LE(maxInterval)
        w.int8(txPower)
    }

    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> ReturnParameters {
        let instance = try r.readUInt8("Instance")
        let tx = try r.readInt8("TxPower")
        let maxData = try r.readUInt8("MaxAdvDataLen")
        let maxScan = try r.readUInt8("MaxScanRspLen")
        return ReturnParameters(
            instance: instance, txPower: tx, maxAdvertisingDataLength: maxData, maxScanResponseLength: maxScan)
    }
}

/// Add Extended Advertising Data: Instance (1), Advertising Data Length (1),
/// Scan Response Length (1), Advertising Data, Scan Response. Returns Instance (1).
public struct MgmtAddExtendedAdvertisingData: MgmtCommand {
    public var instance: UInt8
    public var advertisingData: [UInt8]
    public var scanResponse: [UInt8]
    public static let spec = MgmtCommandSpec(
        0x0055, "Add Extended Advertising Data", parameters: .atLeast(3), returns: .exactly(1))

    public init(instance: UInt8, advertisingData: [UInt8], scanResponse: [UInt8] = []) throws(MgmtParameterError) {
        try MgmtAdvertisingFields.check(instance: instance, advertisingData, scanResponse)
        self.instance = instance
        self.advertisingData = advertisingData
        self.scanResponse = scanResponse
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.uint8(instance)
        w.mgmtAdvertisingPayload(advertisingData, scanResponse)
    }

    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> UInt8 {
        try r.readUInt8("Instance")
    }
}

/// One pattern of Add Advertisement Patterns Monitor: AD_Type (1), Offset (1), Length (1),
/// Value (31, zero-padded). The value must fit the 31-byte legacy AD data: 1 ≤ Length,
/// Offset + Length ≤ 31.
public struct MgmtAdvPattern: Sendable, Equatable {
    public var adType: UInt8
    public var offset: UInt8
    public var value: [UInt8]

    public init(adType: UInt8, offset: UInt8 = 0, value: [UInt8]) throws(MgmtParameterError) {
        guard !value.isEmpty, Int(offset) + value.count <= 31 else {
            throw MgmtParameterError(
                message:
                    "an advertisement pattern needs 1…31 bytes within the 31-byte AD data (offset \(offset), \(value.count) bytes)"
            )
        }
        self.adType = adType
        self.offset = offset
        self.value = value
    }

    /// Manufacturer Specific Data starting with Apple's company ID and the iBeacon type and length
    /// (4C 00 02 15).
    public static let iBeacon = try! MgmtAdvPattern(adType: 0xFF, offset: 0, value: [0x4C, 0x00, 0x02, 0x15])
}

/// Add Advertisement Patterns Monitor (kernel ≥ 5.10): Pattern_Count (1), then each
/// pattern (34 bytes). Returns Monitor_Handle (2). Without controller offload the kernel scans
/// passively with duplicate filtering off while a monitor is registered and forwards every
/// report as Adv Monitor Device Found (handle 0), matched or not.
public struct MgmtAddAdvPatternsMonitor: MgmtCommand {
    public var patterns: [MgmtAdvPattern]
    public static let spec = MgmtCommandSpec(
        0x0052, "Add Advertisement Patterns Monitor", parameters: .atLeast(1), returns: .exactly(2))

    public init(patterns: [MgmtAdvPattern]) throws(MgmtParameterError) {
        guard !patterns.isEmpty, patterns.count <= 255 else {
            throw MgmtParameterError(message: "an advertisement monitor needs 1…255 patterns")
        }
        self.patterns = patterns
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.uint8(UInt8(patterns.count))
        for p in patterns {
            w.uint8(p.adType)
            w.uint8(p.offset)
            w.uint8(UInt8(p.value.count))
            w.append(p.value + [UInt8](repeating: 0, count: 31 - p.value.count))
        }
    }

    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> UInt16 {
        try r.readUInt16LE("Monitor_Handle")
    }
}

/// Remove Advertisement Monitor: Monitor_Handle (2). Returns Monitor_Handle (2).
/// Handle 0 removes every program's monitors, so this type refuses it.
public struct MgmtRemoveAdvMonitor: MgmtCommand {
    public var handle: UInt16
    public static let spec = MgmtCommandSpec(
        0x0053, "Remove Advertisement Monitor", parameters: .exactly(2), returns: .exactly(2))

    public init(handle: UInt16) throws(MgmtParameterError) {
        guard handle != 0 else {
            throw MgmtParameterError(message: "monitor handle 0 would remove every program's monitors")
        }
        self.handle = handle
    }

    public func encodeParameters(into writer: inout ByteWriter) { writer.uint16LE(handle) }
    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> UInt16 {
        try r.readUInt16LE("Monitor_Handle")
    }
}

/// One parameter of Read/Set Default System Configuration: Parameter_Type (2), Value_Length (1),
/// Value (0–255). The kernel's values are all 16-bit (net/bluetooth/mgmt_config.c).
public struct MgmtSystemParameter: Sendable, Equatable {
    public var type: UInt16
    public var value: [UInt8]

    public init(type: UInt16, value: [UInt8]) {
        self.type = type
        self.value = value
    }

    /// A 16-bit little-endian value (every type the kernel defines so far).
    public init(type: UInt16, uint16 value: UInt16) {
        self.init(type: type, value: [UInt8(value & 0xFF), UInt8(value >> 8)])
    }

    /// The value as a 16-bit number, nil when it is not two bytes long.
    public var uint16: UInt16? {
        value.count == 2 ? UInt16(value[0]) | UInt16(value[1]) << 8 : nil
    }

    /// "0x0013 LE Scanning Interval for adv monitoring", in 0.625 ms slots.
    public static let leScanIntervalAdvMonitor: UInt16 = 0x0013
    /// "0x0014 LE Scanning Window for adv monitoring", in 0.625 ms slots.
    public static let leScanWindowAdvMonitor: UInt16 = 0x0014

    /// Type/Length/Value entries, as Set Default System Configuration sends them and Read Default
    /// System Configuration returns them.
    public static func encode(_ parameters: [MgmtSystemParameter]) -> [UInt8] {
        var w = ByteWriter()
        for p in parameters {
            w.uint16LE(p.type)
            w.uint8(UInt8(p.value.count))
            w.append(p.value)
        }
        return w.bytes
    }

    static func readList(_ r: inout ByteReader, _ what: String) throws(DecodingError) -> [MgmtSystemParameter] {
        var out: [MgmtSystemParameter] = []
        while !r.isAtEnd {
            let type = try r.readUInt16LE("\(what) Parameter_Type")
            let length = Int(try r.readUInt8("\(what) Value_Length"))
            out.append(MgmtSystemParameter(type: type, value: try r.readBytes(length, "\(what) Value")))
        }
        return out
    }
}

/// Read Default System Configuration (kernel ≥ 5.8): no parameters. Returns every
/// parameter the kernel supports with its current value ("a list of supported default
/// parameters as well as their current value"), as Type/Length/Value entries.
public struct MgmtReadDefaultSystemConfiguration: MgmtCommand {
    public static let spec = MgmtCommandSpec(
        0x004B, "Read Default System Configuration", parameters: .exactly(0), returns: .atLeast(0))
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> [MgmtSystemParameter] {
        try MgmtSystemParameter.readList(&r, spec.name)
    }
}

/// Set Default System Configuration: Type/Length/Value entries; no return parameters.
/// The values are the adapter's defaults for every program until changed again (bluetoothd
/// sets those configured in main.conf when it sets the adapter up).
public struct MgmtSetDefaultSystemConfiguration: MgmtCommand {
    public var entries: [MgmtSystemParameter]
    public static let spec = MgmtCommandSpec(
        0x004C, "Set Default System Configuration", parameters: .atLeast(0), returns: .exactly(0))

    public init(_ parameters: [MgmtSystemParameter]) throws(MgmtParameterError) {
        guard !parameters.isEmpty else {
            throw MgmtParameterError(message: "Set Default System Configuration needs at least one parameter")
        }
        guard parameters.allSatisfy({ $0.value.count <= 255 }) else {
            throw MgmtParameterError(message: "a system configuration value is at most 255 bytes")
        }
        entries = parameters
    }

    public func encodeParameters(into writer: inout ByteWriter) { writer.append(MgmtSystemParameter.encode(entries)) }
    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) {}
}
