import IBeaconCore
import IBeaconTestSupport
import Testing

/// Golden bytes written by hand from BlueZ doc/mgmt-api.txt ("Packet Structures": code, index,
/// parameter length, little-endian; then each command's parameter table), not from the encoder.
@Suite struct MgmtCodecTests {
    /// An iBeacon's 30 bytes (content irrelevant to the layout; lopsided so a swap shows).
    let data: [UInt8] =
        [0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15] + (1...16).map { UInt8($0) } + [
            0x01, 0x02, 0x03, 0x04, 0xC5,
        ]

    @Test func addExtendedAdvertisingParameters() throws {
        let command = try MgmtAddExtendedAdvertisingParameters(
            instance: 2, interval: AdvertisingInterval(milliseconds: 100, for: .extended), txPower: -4)
        #expect(
            command.packet(index: MgmtIndex(1)).bytes == [
                0x54, 0x00,  // Command Code 0x0054
                0x01, 0x00,  // Controller Index: hci1
                0x12, 0x00,  // Parameter Length: 18
                0x02,  // Instance
                0x00, 0xC0, 0x00, 0x00,  // Flags: bit 14 (intervals) | bit 15 (tx power); not connectable
                0x00, 0x00,  // Duration
                0x00, 0x00,  // Timeout (none: survives a power cycle)
                0xA0, 0x00, 0x00, 0x00,  // MinInterval 160 × 0.625 ms = 100 ms
                0xA0, 0x00, 0x00, 0x00,  // MaxInterval
                0xFC,  // TxPower -4 dBm
            ])
    }

    @Test func addExtendedAdvertisingParametersConnectable() throws {
        // The kernel advertises from the adapter's identity address only for a connectable
        // instance (hci_get_random_address, require_privacy = !connectable).
        let command = try MgmtAddExtendedAdvertisingParameters(
            instance: 1, interval: AdvertisingInterval(milliseconds: 250, for: .extended), txPower: nil,
            connectable: true)
        #expect(
            command.packet(index: MgmtIndex(0)).bytes == [
                0x54, 0x00,  // Command Code 0x0054
                0x00, 0x00,  // Controller Index: hci0
                0x12, 0x00,  // Parameter Length: 18
                0x01,  // Instance
                0x01, 0x40, 0x00, 0x00,  // Flags: bit 0 (connectable) | bit 14 (intervals)
                0x00, 0x00,  // Duration
                0x00, 0x00,  // Timeout
                0x90, 0x01, 0x00, 0x00,  // MinInterval 400 × 0.625 ms = 250 ms
                0x90, 0x01, 0x00, 0x00,  // MaxInterval
                0x7F,  // TxPower: no preference (not flagged)
            ])
    }

    @Test func setDefaultSystemConfiguration() throws {
        let command = try MgmtSetDefaultSystemConfiguration([
            MgmtSystemParameter(type: MgmtSystemParameter.leScanWindowAdvMonitor, uint16: 0x0060)
        ])
        #expect(
            command.packet(index: MgmtIndex(1)).bytes == [
                0x4C, 0x00,  // Command Code 0x004C
                0x01, 0x00,  // Controller Index: hci1
                0x05, 0x00,  // Parameter Length: 5
                0x14, 0x00,  // Parameter_Type 0x0014: LE Scanning Window for adv monitoring
                0x02,  // Value_Length
                0x60, 0x00,  // Value: 96 × 0.625 ms = 60 ms
            ])
        #expect(throws: MgmtParameterError.self) { try MgmtSetDefaultSystemConfiguration([]) }
    }

    @Test func readDefaultSystemConfigurationReturn() throws {
        let reply: [UInt8] = [
            0x13, 0x00, 0x02, 0x60, 0x00,  // 0x0013 adv monitor interval: 0x0060
            0x14, 0x00, 0x02, 0x30, 0x00,  // 0x0014 adv monitor window: 0x0030
            0x1F, 0x00, 0x01, 0x01,  // a one-byte type a newer kernel may add survives
        ]
        let got = try MgmtReadDefaultSystemConfiguration.decodeReturn(reply)
        #expect(got.map(\.type) == [0x13, 0x14, 0x1F])
        #expect(got.map(\.uint16) == [0x0060, 0x0030, nil])
        #expect(got[2].value == [0x01])
        // A Value_Length running past the end is an error, not a shorter value.
        #expect(throws: DecodingError.self) {
            try MgmtReadDefaultSystemConfiguration.decodeReturn([0x13, 0x00, 0x02, 0x60])
        }
        #expect(try MgmtReadDefaultSystemConfiguration.decodeReturn([]).isEmpty)
    }

    @Test func addExtendedAdvertisingParametersWithoutTxPowerLeavesItUnflagged() throws {
        let command = try MgmtAddExtendedAdvertisingParameters(
            instance: 1, interval: AdvertisingInterval(milliseconds: 1000, for: .extended), txPower: nil)
        let p = command.parameters
        #expect(Array(p[1...4]) == [0x00, 0x40, 0x00, 0x00])  // bit 14 only
        #expect(Array(p[9...12]) == [0x40, 0x06, 0x00, 0x00])  // 1600 slots
        #expect(p[17] == 0x7F)  // 127: no preference
    }

    @Test func addExtendedAdvertisingParametersReturn() throws {
        // Instance 2, TxPower -4, MaxAdvDataLen 31, MaxScanRspLen 31.
        let rp = try MgmtAddExtendedAdvertisingParameters.decodeReturn([0x02, 0xFC, 0x1F, 0x1F])
        #expect(rp.instance == 2)
        #expect(rp.txPower == -4)
        #expect(rp.maxAdvertisingDataLength == 31)
        #expect(rp.maxScanResponseLength == 31)
        #expect(throws: DecodingError.self) { try MgmtAddExtendedAdvertisingParameters.decodeReturn([0x02, 0xFC]) }
    }

    @Test func addExtendedAdvertisingData() throws {
        let bytes = try MgmtAddExtendedAdvertisingData(instance: 2, advertisingData: data).packet(index: MgmtIndex(0))
            .bytes
        #expect(Array(bytes[0..<9]) == [0x55, 0x00, 0x00, 0x00, 0x21, 0x00, 0x02, 0x1E, 0x00])  // 33 = 3 + 30
        #expect(Array(bytes[9...]) == data)
    }

    @Test func addAdvertising() throws {
        let bytes = try MgmtAddAdvertising(instance: 3, advertisingData: data).packet(index: MgmtIndex(0)).bytes
        #expect(
            Array(bytes[0..<17]) == [
                0x3E, 0x00, 0x00, 0x00, 0x29, 0x00,  // Add Advertising, hci0, 41 bytes
                0x03,  // Instance
                0x00, 0x00, 0x00, 0x00,  // Flags: none (non-connectable, our own Flags AD kept)
                0x00, 0x00, 0x00, 0x00,  // Duration, Timeout
                0x1E, 0x00,  // Adv_Data_Len 30, Scan_Rsp_Len 0
            ])
        #expect(Array(bytes[17...]) == data)
    }

    /// Every field lopsided and a scan response, so a swapped or dropped field shows.
    @Test func addAdvertisingWithEveryField() throws {
        let command = try MgmtAddAdvertising(
            instance: 5, flags: [.useTxPower, .useIntervals], duration: 0x0102, timeout: 0x0304,
            advertisingData: [0xA1, 0xA2], scanResponse: [0xB1, 0xB2, 0xB3])
        #expect(
            command.packet(index: MgmtIndex(2)).bytes == [
                0x3E, 0x00, 0x02, 0x00, 0x10, 0x00,  // Add Advertising, hci2, 16 bytes
                0x05,  // Instance
                0x00, 0xC0, 0x00, 0x00,  // Flags: bit 14 | bit 15
                0x02, 0x01,  // Duration 0x0102
                0x04, 0x03,  // Timeout 0x0304
                0x02, 0x03,  // Adv_Data_Len, Scan_Rsp_Len
                0xA1, 0xA2,  // Adv_Data
                0xB1, 0xB2, 0xB3,  // Scan_Rsp
            ])
        #expect(throws: MgmtParameterError.self) {
            try MgmtAddAdvertising(instance: 1, advertisingData: [UInt8](repeating: 0, count: 256))
        }
        #expect(throws: MgmtParameterError.self) {
            try MgmtAddAdvertising(instance: 1, advertisingData: [], scanResponse: [UInt8](repeating: 0, count: 256))
        }
    }

    @Test func addExtendedAdvertisingDataWithScanResponse() throws {
        let command = try MgmtAddExtendedAdvertisingData(
            instance: 7, advertisingData: [0xA1, 0xA2], scanResponse: [0xB1, 0xB2, 0xB3])
        #expect(
            command.packet(index: MgmtIndex(0)).bytes == [
                0x55, 0x00, 0x00, 0x00, 0x08, 0x00,  // Add Extended Advertising Data, hci0, 8 bytes
                0x07,  // Instance
                0x02, 0x03,  // Adv_Data_Len, Scan_Rsp_Len
                0xA1, 0xA2,  // Adv_Data
                0xB1, 0xB2, 0xB3,  // Scan_Rsp
            ])
        #expect(throws: MgmtParameterError.self) {
            try MgmtAddExtendedAdvertisingData(instance: 0, advertisingData: [])
        }
        #expect(throws: MgmtParameterError.self) {
            try MgmtAddExtendedAdvertisingData(instance: 1, advertisingData: [UInt8](repeating: 0, count: 256))
        }
    }

    /// A reply with a byte too many is refused, naming the command whose reply it is.
    @Test func trailingBytesNameTheCommand() {
        func trailing(_ what: String) -> DecodingError { .trailingBytes(what: "\(what) return parameters", count: 1) }
        #expect(throws: trailing("Read Controller Index List")) {
            try MgmtReadIndexList.decodeReturn([0x00, 0x00, 0xFF])
        }
        #expect(throws: trailing("Read Advertising Features")) {
            try MgmtReadAdvertisingFeatures.decodeReturn([0, 0, 0, 0, 31, 31, 5, 0, 0xFF])
        }
        #expect(throws: trailing("Add Advertising")) { try MgmtAddAdvertising.decodeReturn([0x01, 0xFF]) }
        #expect(throws: trailing("Remove Advertising")) { try MgmtRemoveAdvertising.decodeReturn([0x01, 0xFF]) }
        #expect(throws: trailing("Add Extended Advertising Parameters")) {
            try MgmtAddExtendedAdvertisingParameters.decodeReturn([0x02, 0xFC, 0x1F, 0x1F, 0xFF])
        }
        #expect(throws: trailing("Add Extended Advertising Data")) {
            try MgmtAddExtendedAdvertisingData.decodeReturn([0x01, 0xFF])
        }
        #expect(throws: trailing("Add Advertisement Patterns Monitor")) {
            try MgmtAddAdvPatternsMonitor.decodeReturn([0x01, 0x00, 0xFF])
        }
        #expect(throws: trailing("Remove Advertisement Monitor")) {
            try MgmtRemoveAdvMonitor.decodeReturn([0x01, 0x00, 0xFF])
        }
        #expect(throws: trailing("Set Default System Configuration")) {
            try MgmtSetDefaultSystemConfiguration.decodeReturn([0xFF])
        }
    }

    @Test func removeAdvertisingAndInstanceZeroRefused() throws {
        #expect(
            try MgmtRemoveAdvertising(instance: 2).packet(index: MgmtIndex(0)).bytes == [
                0x3F, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02,
            ])
        #expect(throws: MgmtParameterError.self) { try MgmtRemoveAdvertising(instance: 0) }
        #expect(throws: MgmtParameterError.self) { try MgmtAddAdvertising(instance: 0, advertisingData: []) }
        #expect(throws: MgmtParameterError.self) {
            try MgmtAddExtendedAdvertisingParameters(
                instance: 1, interval: AdvertisingInterval(milliseconds: 100, for: .extended), txPower: 21)
        }
    }

    @Test func readAdvertisingFeaturesReply() throws {
        let event = try MgmtEvent(
            MgmtPacket(decoding: [
                0x01, 0x00, 0x00, 0x00, 0x0D, 0x00,  // Command Complete, hci0, 13 bytes
                0x3D, 0x00, 0x00,  // Read Advertising Features, Success
                0x01, 0x04, 0x00, 0x00,  // Supported_Flags: connectable, can-set-tx-power
                0xFB, 0x1F,  // Max_Adv_Data_Len 251, Max_Scan_Rsp_Len 31
                0x05, 0x02, 0x01, 0x03,  // Max_Instances 5, Num_Instances 2: 1 and 3
            ]))
        guard case .commandComplete(MgmtIndex(0), .readAdvertisingFeatures, .success, let rp) = event else {
            Issue.record("not a Command Complete: \(event)")
            return
        }
        let features = try MgmtReadAdvertisingFeatures.decodeReturn(rp)
        #expect(features.supportedFlags == [.connectable, .canSetTxPower])
        #expect(features.maxAdvertisingDataLength == 251)
        #expect(features.maxScanResponseLength == 31)
        #expect(features.maxInstances == 5)
        #expect(features.instances == [1, 3])
    }

    @Test func readControllerInfoReply() throws {
        var bytes: [UInt8] = [0x00, 0x00, 0x00, 0x01, 0xAA, 0x00]  // 00:AA:01:00:00:00, LSB first
        bytes += [0x09, 0xF1, 0x05]  // Bluetooth 5.0, manufacturer 1521
        bytes += [0xFF, 0xFF, 0x00, 0x00]  // Supported_Settings
        bytes += [0x01, 0x02, 0x00, 0x00]  // Current_Settings: powered, le
        bytes += [0x0C, 0x01, 0x1A]  // Class_Of_Device 0x1A010C
        bytes += Array("shop".utf8) + [UInt8](repeating: 0, count: 249 - 4)
        bytes += [UInt8](repeating: 0, count: 11)
        let info = try MgmtReadControllerInfo.decodeReturn(bytes)
        #expect(info.address.description == "00:AA:01:00:00:00")
        #expect(info.manufacturer == 1521)
        #expect(info.currentSettings == [.powered, .lowEnergy])
        #expect(info.classOfDevice == 0x1A_010C)
        #expect(info.name == "shop")
        #expect(info.currentSettings.description == "powered le")
        #expect(throws: DecodingError.self) { try MgmtReadControllerInfo.decodeReturn(Array(bytes.dropLast())) }
    }

    /// Event code, controller index, parameter length (little-endian), parameters.
    @Test func events() throws {
        #expect(  // Advertising Removed, hci0: instance 2
            try MgmtEvent(MgmtPacket(decoding: [0x24, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02]))
                == .advertisingRemoved(index: MgmtIndex(0), instance: 2))
        #expect(  // Advertising Added, hci1: instance 4
            try MgmtEvent(MgmtPacket(decoding: [0x23, 0x00, 0x01, 0x00, 0x01, 0x00, 0x04]))
                == .advertisingAdded(index: MgmtIndex(1), instance: 4))
        #expect(  // New Settings, hci1, 4 bytes: bits 0 (powered) and 9 (le)
            try MgmtEvent(MgmtPacket(decoding: [0x06, 0x00, 0x01, 0x00, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00]))
                == .newSettings(index: MgmtIndex(1), [.powered, .lowEnergy]))
        #expect(  // Index Removed, hci0, no parameters
            try MgmtEvent(MgmtPacket(decoding: [0x05, 0x00, 0x00, 0x00, 0x00, 0x00])) == .indexRemoved(MgmtIndex(0)))
        #expect(  // Command Status, no controller (0xFFFF): Add Advertising (0x003E), Invalid Parameters (0x0D)
            try MgmtEvent(MgmtPacket(decoding: [0x02, 0x00, 0xFF, 0xFF, 0x03, 0x00, 0x3E, 0x00, 0x0D]))
                == .commandStatus(index: .none, opcode: .addAdvertising, status: .invalidParameters))
        // A code without a row (0x0099) is kept whole.
        let unknown = try MgmtPacket(decoding: [0x99, 0x00, 0x00, 0x00, 0x01, 0x00, 0x07])
        #expect(try MgmtEvent(unknown) == .unknown(unknown))
    }

    @Test func malformedPacketsThrowAndNeverTrap() {
        #expect(throws: DecodingError.self) { try MgmtPacket(decoding: [0x01, 0x00, 0x00]) }  // short header
        #expect(throws: DecodingError.self) { try MgmtPacket(decoding: [0x24, 0x00, 0x00, 0x00, 0x02, 0x00, 0x02]) }
        #expect(throws: DecodingError.self) {  // a byte past the stated length
            try MgmtPacket(decoding: [0x24, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00])
        }
        #expect(throws: DecodingError.self) {  // Advertising Removed with no instance
            try MgmtEvent(MgmtPacket(decoding: [0x24, 0x00, 0x00, 0x00, 0x00, 0x00]))
        }
        var rng = SplitMix64(seed: 12)
        for _ in 0..<2000 {
            let bytes = (0..<Int(rng.next() % 16)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if let packet = try? MgmtPacket(decoding: bytes) { _ = try? MgmtEvent(packet) }
        }
    }

    @Test func statusesAreOpen() {
        #expect(MgmtStatus.busy.description == "Busy (0x0A)")
        #expect(MgmtStatus.permissionDenied.description == "Permission Denied (0x14)")
        #expect(MgmtStatus(rawValue: 0x7F).description == "unknown management status (0x7F)")
        #expect(MgmtStatus.permissionDenied.hint?.contains("CAP_NET_ADMIN") == true)
        #expect(MgmtOpcode(rawValue: 0x003E).description == "Add Advertising (0x003E)")
        #expect(MgmtOpcode(rawValue: 0x0099).description == "management command 0x0099")
    }

    @Test func addAdvPatternsMonitorWithTheIBeaconPattern() throws {
        // Pattern_Count 1; AD_Type 0xFF, Offset 0, Length 4, Value 4C 00 02 15 + 27 zero bytes.
        let expected: [UInt8] =
            [0x52, 0x00, 0x01, 0x00, 0x23, 0x00, 0x01, 0xFF, 0x00, 0x04, 0x4C, 0x00, 0x02, 0x15]
            + [UInt8](repeating: 0, count: 27)
        #expect(try MgmtAddAdvPatternsMonitor(patterns: [.iBeacon]).packet(index: MgmtIndex(1)).bytes == expected)
        #expect(try MgmtAddAdvPatternsMonitor.decodeReturn([0x02, 0x01]) == 0x0102)
        #expect(throws: DecodingError.self) { try MgmtAddAdvPatternsMonitor.decodeReturn([0x02]) }
        #expect(throws: MgmtParameterError.self) { try MgmtAddAdvPatternsMonitor(patterns: []) }
        #expect(throws: MgmtParameterError.self) { try MgmtAdvPattern(adType: 0xFF, offset: 28, value: [1, 2, 3, 4]) }
        #expect(throws: MgmtParameterError.self) { try MgmtAdvPattern(adType: 0xFF, value: []) }
    }

    @Test func removeAdvMonitorRefusesHandleZero() throws {
        #expect(
            try MgmtRemoveAdvMonitor(handle: 0x0201).packet(index: MgmtIndex(0)).bytes == [
                0x53, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0x02,
            ])
        #expect(try MgmtRemoveAdvMonitor.decodeReturn([0x01, 0x00]) == 1)
        #expect(throws: MgmtParameterError.self) { try MgmtRemoveAdvMonitor(handle: 0) }
    }

    @Test func deviceFoundEvents() throws {
        let address = try BDAddress(littleEndian: [0x01, 0x02, 0x03, 0x04, 0x05, 0xC6])
        let report = MgmtDeviceFound(address: address, addressType: 2, rssi: -59, flags: 4, data: [0x02, 0x01, 0x06])
        // Device Found (0x0012) on hci1: Address, Address_Type 2 (LE random), RSSI 0xC5 (-59),
        // Flags 4 (LE), AD_Data_Length 3, AD_Data.
        let deviceFound: [UInt8] = [
            0x12, 0x00, 0x01, 0x00, 0x11, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0xC6, 0x02, 0xC5, 0x04, 0x00, 0x00,
            0x00, 0x03, 0x00, 0x02, 0x01, 0x06,
        ]
        #expect(try MgmtEvent(MgmtPacket(decoding: deviceFound)) == .deviceFound(index: MgmtIndex(1), report))
        // Adv Monitor Device Found (0x002F): Monitor_Handle 0 first, then the same.
        let monitorFound: [UInt8] =
            [0x2F, 0x00, 0x01, 0x00, 0x13, 0x00, 0x00, 0x00] + deviceFound.dropFirst(6)
        #expect(
            try MgmtEvent(MgmtPacket(decoding: monitorFound))
                == .advMonitorDeviceFound(index: MgmtIndex(1), handle: 0, report))
        #expect(report.leAddressType == .random)
        #expect(MgmtDeviceFound(address: address, addressType: 0, rssi: 0, flags: 0, data: []).leAddressType == nil)
        // A data length past the end is malformed, not a crash.
        var short = deviceFound
        short[4] = 0x10
        short.removeLast()
        short[18] = 0x05
        #expect(throws: DecodingError.self) { try MgmtEvent(MgmtPacket(decoding: short)) }
    }
}

/// The table (`MgmtTable.swift`): every view of a command or event comes from its row.
@Suite struct MgmtTableTests {
    @Test func commandRowsAreUniqueAndNameTheOpcodes() {
        let specs = MgmtCommandSpec.commands.map { $0.spec }
        #expect(Set(specs.map(\.opcode)).count == specs.count)
        #expect(Set(specs.map(\.name)).count == specs.count)
        #expect(specs.map(\.opcode.rawValue) == specs.map(\.opcode.rawValue).sorted())
        for spec in specs {
            #expect(spec.opcode.spec?.name == spec.name)
            #expect(spec.opcode.description == "\(spec.name) (\(spec.opcode.hex))")
        }
        #expect(MgmtOpcode.addAdvertising.name == "Add Advertising")
        #expect(MgmtOpcode(rawValue: 0x0099).spec == nil)
    }

    /// What the encoders write is what the rows (and so the kernel's handler table) admit.
    @Test func everyEncodedCommandHasALengthItsRowAdmits() throws {
        let interval = try AdvertisingInterval(milliseconds: 100, for: .extended)
        let commands: [any MgmtCommand] = [
            MgmtReadVersion(), MgmtReadIndexList(), MgmtReadControllerInfo(),
            MgmtDisconnect(MgmtLink(BDAddress("4A:11:22:33:44:55")!, MgmtDeviceFound.leRandomAddress)),
            MgmtReadAdvertisingFeatures(),
            try MgmtAddAdvertising(instance: 1, advertisingData: [0x02, 0x01, 0x06], scanResponse: [0x01]),
            try MgmtRemoveAdvertising(instance: 1), MgmtReadDefaultSystemConfiguration(),
            try MgmtSetDefaultSystemConfiguration([
                MgmtSystemParameter(type: MgmtSystemParameter.leScanWindowAdvMonitor, uint16: 0x0060)
            ]),
            try MgmtAddAdvPatternsMonitor(patterns: [.iBeacon, .iBeacon]), try MgmtRemoveAdvMonitor(handle: 1),
            try MgmtAddExtendedAdvertisingParameters(instance: 1, interval: interval, txPower: -4),
            try MgmtAddExtendedAdvertisingData(instance: 1, advertisingData: [0x02, 0x01, 0x06]),
        ]
        #expect(commands.count == MgmtCommandSpec.commands.count)
        for command in commands {
            let spec = type(of: command).spec
            #expect(spec.parameters.admits(command.parameters.count), "\(spec.name)")
        }
    }

    @Test func repliesAreCheckedAgainstTheRowFirst() {
        // Add Extended Advertising Parameters returns exactly 4 bytes: 2 is short, whatever field it stops in.
        #expect(
            throws: DecodingError.truncated(
                what: "Add Extended Advertising Parameters return parameters", needed: 4, available: 2)
        ) {
            try MgmtAddExtendedAdvertisingParameters.decodeReturn([0x02, 0xFC])
        }
        // Read Controller Information is exactly 280 bytes.
        #expect(throws: DecodingError.trailingBytes(what: "Read Controller Information return parameters", count: 1)) {
            try MgmtReadControllerInfo.decodeReturn([UInt8](repeating: 0, count: 281))
        }
    }

    /// Device Connected as the 6.1 kernel sends it for a central's LE link (mgmt.c
    /// `mgmt_device_connected`: flags 0, EIR data with the name when known), and with the
    /// "initiated" flag for a link this host made; Disconnect's parameters.
    @Test func deviceConnectedSaysWhoMadeTheLink() throws {
        let incoming: [UInt8] =
            [0x0B, 0x00, 0x01, 0x00, 0x13, 0x00] + [0x55, 0x44, 0x33, 0x22, 0x11, 0x4A, 0x02]
            + [0x00, 0x00, 0x00, 0x00] + [0x06, 0x00] + [0x05, 0x09, 0x50, 0x69, 0x78, 0x6C]
        guard case .deviceConnected(let index, let link) = try MgmtEvent(MgmtPacket(decoding: incoming)) else {
            Issue.record("not Device Connected")
            return
        }
        #expect(index == MgmtIndex(1))
        #expect(link.address == BDAddress("4A:11:22:33:44:55")!)
        #expect(link.isIncomingLE)
        var initiated = incoming
        initiated[13] = 0x08
        guard case .deviceConnected(_, let own) = try MgmtEvent(MgmtPacket(decoding: initiated)) else {
            Issue.record("not Device Connected")
            return
        }
        #expect(own.flags == MgmtLink.initiatedFlag && !own.isIncomingLE)
        #expect(!MgmtLink(link.address, MgmtDeviceFound.brEdrAddress).isIncomingLE)
        #expect(MgmtDisconnect(link).parameters == [0x55, 0x44, 0x33, 0x22, 0x11, 0x4A, 0x02])
    }

    /// One event of every row: the fake kernel's encoder and the decoder agree.
    @Test func everyEventRoundTrips() throws {
        let report = MgmtDeviceFound(
            address: BDAddress("C6:05:04:03:02:01")!, addressType: MgmtDeviceFound.leRandomAddress, rssi: -59,
            flags: 4, data: [0x02, 0x01, 0x06])
        let hci1 = MgmtIndex(1)
        let events: [MgmtEvent] = [
            .commandComplete(index: hci1, opcode: .addAdvertising, status: .success, returnParameters: [0x01]),
            .commandStatus(index: .none, opcode: .addAdvertising, status: .invalidParameters),
            .controllerError(index: hci1, code: 0x2A),
            .indexAdded(hci1),
            .indexRemoved(hci1),
            .newSettings(index: hci1, [.powered, .lowEnergy]),
            .deviceConnected(index: hci1, MgmtLink(report.address, report.addressType, flags: MgmtLink.initiatedFlag)),
            .deviceDisconnected(index: hci1, MgmtLink(report.address, report.addressType), reason: 0x13),
            .deviceFound(index: hci1, report),
            .advertisingAdded(index: hci1, instance: 4),
            .advertisingRemoved(index: hci1, instance: 2),
            .advMonitorDeviceFound(index: hci1, handle: MgmtEvent.unmatchedMonitorHandle, report),
        ]
        #expect(events.map { MgmtEventCode(rawValue: $0.packet.code) } == MgmtEventSpec.events.map(\.code))
        for event in events {
            let packet = event.packet
            #expect(MgmtEventCode(rawValue: packet.code).spec?.parameters.admits(packet.parameters.count) == true)
            #expect(try MgmtEvent(MgmtPacket(decoding: packet.bytes)) == event)
        }
        #expect(MgmtEventCode.advertisingAdded.description == "Advertising Added (0x0023)")
        #expect(MgmtEventCode(rawValue: 0x0099).description == "management event 0x0099")
    }

    @Test func anEventOfALengthItsRowRefusesThrows() {
        let indexRemovedWithAByte = MgmtPacket(
            code: MgmtEventCode.indexRemoved.rawValue, index: MgmtIndex(0), parameters: [0x01])
        #expect(throws: DecodingError.trailingBytes(what: "Index Removed (0x0005) parameters", count: 1)) {
            try MgmtEvent(indexRemovedWithAByte)
        }
        let newSettingsShort = MgmtPacket(
            code: MgmtEventCode.newSettings.rawValue, index: MgmtIndex(0), parameters: [0x01, 0x02, 0x00])
        #expect(throws: DecodingError.truncated(what: "New Settings (0x0006) parameters", needed: 4, available: 3)) {
            try MgmtEvent(newSettingsShort)
        }
    }
}
