import Testing

@testable import IBeaconCore

// Every expected packet below was produced by Bumble 0.0.236's encoder:
// `bytes(HCI_…_Command(...)).hex()` run in a Python venv with bumble==0.0.236; the call is
// quoted next to each vector. The hex includes the H4 type byte 01, the opcode (little-endian)
// and the parameter length.

private func packetHex(_ command: some HCICommand) -> String { command.packet.bytes.hexString }

private func address(_ text: String) throws -> BDAddress { try #require(BDAddress(text)) }

private func interval(_ slots: UInt32, _ set: AdvertisingCommandSet = .legacy) throws -> AdvertisingInterval {
    try AdvertisingInterval(slots: slots, for: set)
}

@Suite("HCI commands encode like Bumble")
struct HCICommandEncodingTests {
    @Test func parameterlessCommands() {
        // Bumble: HCI_Reset_Command() etc. — opcode LE, length 0.
        #expect(packetHex(Reset()) == "01030c00")
        #expect(packetHex(ReadLocalVersionInformation()) == "01011000")
        #expect(packetHex(ReadLocalSupportedCommands()) == "01021000")
        #expect(packetHex(ReadBDAddr()) == "01091000")
        #expect(packetHex(LEReadLocalSupportedFeatures()) == "01032000")
        #expect(packetHex(LEReadAdvertisingPhysicalChannelTxPower()) == "01072000")
        #expect(packetHex(LEReadMaximumAdvertisingDataLength()) == "013a2000")
        #expect(packetHex(LEReadNumberOfSupportedAdvertisingSets()) == "013b2000")
        #expect(packetHex(LEClearAdvertisingSets()) == "013d2000")
        #expect(packetHex(LEReadTransmitPower()) == "014b2000")
    }

    @Test func setEventMask() {
        // Bumble: HCI_Set_Event_Mask_Command(event_mask=(0x2102030405060708).to_bytes(8,'little'))
        // 01 | 010c opcode 0x0C01 | 08 length | 08 07 06 05 04 03 02 21 mask, little-endian
        #expect(
            packetHex(SetEventMask(eventMask: EventMask(rawValue: 0x2102_0304_0506_0708))) == "01010c080807060504030221"
        )
        // Bumble: mask 0x20001FFFFFFFFFFF = default after reset + bit 61 (LE Meta)
        // 01 | 010c | 08 | ff ff ff ff ff 1f 00 20
        #expect(
            packetHex(SetEventMask(eventMask: EventMask.defaultAfterReset.union(.leMeta))) == "01010c08ffffffffff1f0020"
        )
    }

    @Test func leSetEventMask() {
        // Bumble: HCI_LE_Set_Event_Mask_Command(le_event_mask=(0x2101F).to_bytes(8,'little'))
        // 01 | 0120 opcode 0x2001 | 08 | 1f 10 02 00 00 00 00 00: default 0x1F + bit 12 + bit 17
        let mask = LEEventMask.defaultAfterReset.union([.extendedAdvertisingReport, .advertisingSetTerminated])
        #expect(packetHex(LESetEventMask(leEventMask: mask)) == "010120081f10020000000000")
    }

    @Test func leSetRandomAddress() throws {
        // Bumble: HCI_LE_Set_Random_Address_Command(random_address=Address('C1:02:03:04:05:06'))
        // 01 | 0520 | 06 | 06 05 04 03 02 c1 (address, least significant byte first)
        #expect(
            packetHex(LESetRandomAddress(randomAddress: try address("C1:02:03:04:05:06"))) == "010520060605040302c1")
    }

    @Test func leSetAdvertisingParameters() throws {
        let command = try LESetAdvertisingParameters(
            intervalMin: interval(0x00A0), intervalMax: interval(0x0123), advertisingType: .advNonconnInd,
            ownAddressType: .random, peerAddressType: .random, peerAddress: address("A1:B2:C3:D4:E5:F6"),
            channelMap: [.channel37, .channel39], filterPolicy: .filterConnectionRequests)
        // Bumble: HCI_LE_Set_Advertising_Parameters_Command(advertising_interval_min=0x00A0,
        //   advertising_interval_max=0x0123, advertising_type=3, own_address_type=1, peer_address_type=1,
        //   peer_address=Address('A1:B2:C3:D4:E5:F6'), advertising_channel_map=0x05, advertising_filter_policy=0x02)
        // 01 | 0620 | 0f | a000 min | 2301 max | 03 type | 01 own | 01 peer type | f6e5d4c3b2a1 peer | 05 map | 02 policy
        #expect(packetHex(command) == "0106200fa0002301030101f6e5d4c3b2a10502")
    }

    @Test func leSetAdvertisingDataIsPaddedTo31() throws {
        // Bumble: HCI_LE_Set_Advertising_Data_Command(advertising_data=bytes.fromhex('0201061aff4c000215'))
        // 01 | 0820 | 20 (32) | 09 length | 9 data bytes | 22 zero bytes
        let data: [UInt8] = [0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15]
        #expect(
            packetHex(try LESetAdvertisingData(data: data))
                == "01082020090201061aff4c00021500000000000000000000000000000000000000000000")
        // Bumble: HCI_LE_Set_Scan_Response_Data_Command(scan_response_data=bytes.fromhex('0509414243'))
        #expect(
            packetHex(try LESetScanResponseData(data: [0x05, 0x09, 0x41, 0x42, 0x43]))
                == "010920200505094142430000000000000000000000000000000000000000000000000000")
    }

    @Test func enables() {
        // Bumble: HCI_LE_Set_Advertising_Enable_Command(advertising_enable=1)
        #expect(packetHex(LESetAdvertisingEnable(enabled: true)) == "010a200101")
        // Bumble: HCI_LE_Set_Scan_Enable_Command(le_scan_enable=1, filter_duplicates=0)
        #expect(packetHex(LESetScanEnable(enabled: true, filterDuplicates: false)) == "010c20020100")
        // Bumble: HCI_LE_Set_Extended_Scan_Enable_Command(enable=1, filter_duplicates=2, duration=0x0102, period=0x0304)
        // 01 | 4220 | 06 | 01 enable | 02 filter | 0201 duration | 0403 period
        #expect(
            packetHex(
                LESetExtendedScanEnable(
                    enabled: true, filterDuplicates: .resetEachPeriod, duration: 0x0102, period: 0x0304))
                == "01422006010202010403")
    }

    @Test func leSetScanParameters() throws {
        let command = try LESetScanParameters(
            scanType: .active, interval: ScanTiming(slots: 0x0102), window: ScanTiming(slots: 0x0031),
            ownAddressType: .random, filterPolicy: .basicUnfiltered)
        // Bumble: HCI_LE_Set_Scan_Parameters_Command(le_scan_type=1, le_scan_interval=0x0102,
        //   le_scan_window=0x0031, own_address_type=1, scanning_filter_policy=0)
        // 01 | 0b20 | 07 | 01 active | 0201 interval | 3100 window | 01 own | 00 policy
        #expect(packetHex(command) == "010b200701020131000100")
    }

    @Test func leSetAdvertisingSetRandomAddress() throws {
        // Bumble: HCI_LE_Set_Advertising_Set_Random_Address_Command(advertising_handle=0x02, random_address=Address('C1:02:03:04:05:06'))
        let command = try LESetAdvertisingSetRandomAddress(
            advertisingHandle: 0x02, randomAddress: address("C1:02:03:04:05:06"))
        #expect(packetHex(command) == "01352007020605040302c1")
    }

    @Test func leSetExtendedAdvertisingParameters() throws {
        let command = try LESetExtendedAdvertisingParameters(
            advertisingHandle: 0x01, eventProperties: .legacyAdvNonconnInd,
            primaryIntervalMin: interval(0x0000A0, .extended), primaryIntervalMax: interval(0x012345, .extended),
            primaryChannelMap: .all, ownAddressType: .random, advertisingTxPower: -7, primaryPHY: .le1M,
            secondaryMaxSkip: 3, secondaryPHY: .le2M, advertisingSID: 0x0A, scanRequestNotification: true)
        // Bumble: HCI_LE_Set_Extended_Advertising_Parameters_Command(advertising_handle=1,
        //   advertising_event_properties=0x0010, primary_advertising_interval_min=0x0000A0,
        //   primary_advertising_interval_max=0x012345, primary_advertising_channel_map=7, own_address_type=1,
        //   peer_address_type=0, peer_address=00:00:00:00:00:00, advertising_filter_policy=0,
        //   advertising_tx_power=-7 & 0xFF, primary_advertising_phy=1, secondary_advertising_max_skip=3,
        //   secondary_advertising_phy=2, advertising_sid=0x0A, scan_request_notification_enable=1)
        // 01 | 3620 | 19 (25) | 01 handle | 1000 props | a00000 min | 452301 max | 07 map | 01 own | 00 peer type
        // | 000000000000 peer | 00 policy | f9 tx -7 | 01 1M | 03 skip | 02 2M | 0a sid | 01 notify
        #expect(packetHex(command) == "01362019011000a0000045230107010000000000000000f90103020a01")

        let noPreference = try LESetExtendedAdvertisingParameters(
            advertisingHandle: 0x00, eventProperties: .legacyAdvInd,
            primaryIntervalMin: interval(0x000020, .extended), primaryIntervalMax: interval(0xFFFFFF, .extended),
            primaryChannelMap: .channel37, advertisingTxPower: nil, primaryPHY: .leCoded, secondaryPHY: .leCoded,
            advertisingSID: 0x0F)
        // Bumble: same command with handle 0, props 0x0013, min 0x000020, max 0xFFFFFF, map 1, tx 0x7F,
        //   primary PHY 3, skip 0, secondary PHY 3, sid 0x0F, notify 0
        #expect(packetHex(noPreference) == "01362019001300200000ffffff010000000000000000007f0300030f00")
    }

    @Test func leSetExtendedAdvertisingAndScanResponseData() throws {
        // Bumble: HCI_LE_Set_Extended_Advertising_Data_Command(advertising_handle=1, operation=3,
        //   fragment_preference=1, advertising_data=bytes.fromhex('0201061aff4c000215'))
        // 01 | 3720 | 0d | 01 handle | 03 complete | 01 no fragmenting | 09 length | data
        let data: [UInt8] = [0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15]
        #expect(
            packetHex(try LESetExtendedAdvertisingData(advertisingHandle: 1, data: data))
                == "0137200d010301090201061aff4c000215")
        // Bumble: HCI_LE_Set_Extended_Scan_Response_Data_Command(advertising_handle=2, operation=1,
        //   fragment_preference=0, scan_response_data=bytes.fromhex('0509414243'))
        let response = try LESetExtendedScanResponseData(
            advertisingHandle: 2, operation: .firstFragment, avoidFragmentation: false,
            data: [0x05, 0x09, 0x41, 0x42, 0x43])
        #expect(packetHex(response) == "01382009020100050509414243")
    }

    @Test func leSetExtendedAdvertisingEnable() throws {
        let command = try LESetExtendedAdvertisingEnable(
            enable: true,
            sets: [.init(handle: 0x01, duration: 0x0102, maxExtendedEvents: 0x03), .init(handle: 0x02)])
        // Bumble: HCI_LE_Set_Extended_Advertising_Enable_Command(enable=1, advertising_handles=[1,2],
        //   durations=[0x0102,0], max_extended_advertising_events=[3,0])
        // 01 | 3920 | 0a | 01 enable | 02 sets | 01 0201 03 set 1 | 02 0000 00 set 2
        #expect(packetHex(command) == "0139200a01020102010302000000")
        // Bumble: enable=0 and empty lists: disable every set.
        #expect(packetHex(try LESetExtendedAdvertisingEnable(enable: false, sets: [])) == "013920020000")
    }

    @Test func leRemoveAdvertisingSet() throws {
        // Bumble: HCI_LE_Remove_Advertising_Set_Command(advertising_handle=5)
        #expect(packetHex(try LERemoveAdvertisingSet(advertisingHandle: 5)) == "013c200105")
    }

    @Test func leSetExtendedScanParameters() throws {
        let both = try LESetExtendedScanParameters(
            ownAddressType: .random, filterPolicy: .basicUnfiltered,
            le1M: .init(
                scanType: .active, interval: ScanTiming(slots: 0x0102, for: .extended),
                window: ScanTiming(slots: 0x0031, for: .extended)),
            leCoded: .init(
                scanType: .passive, interval: ScanTiming(slots: 0x1234, for: .extended),
                window: ScanTiming(slots: 0x0456, for: .extended)))
        // Bumble: HCI_LE_Set_Extended_Scan_Parameters_Command(own_address_type=1, scanning_filter_policy=0,
        //   scanning_phys=0x05, scan_types=[1,0], scan_intervals=[0x0102,0x1234], scan_windows=[0x0031,0x0456])
        // 01 | 4120 | 0d | 01 own | 00 policy | 05 PHYs | 01 0201 3100 (1M) | 00 3412 5604 (Coded)
        #expect(packetHex(both) == "0141200d01000501020131000034125604")

        let codedOnly = try LESetExtendedScanParameters(
            ownAddressType: .public, filterPolicy: .extendedUnfiltered, le1M: nil,
            leCoded: .init(
                scanType: .passive, interval: ScanTiming(slots: 0xFFFF, for: .extended),
                window: ScanTiming(slots: 0x0004, for: .extended)))
        // Bumble: own 0, policy 2, PHYs 0x04, type 0, interval 0xFFFF, window 0x0004
        #expect(packetHex(codedOnly) == "0141200800020400ffff0400")
    }

    @Test func everyOpcodeMatchesItsCommandType() {
        let pairs: [(HCIOpcode, UInt16)] = [
            (Reset.opcode, 0x0C03), (SetEventMask.opcode, 0x0C01), (ReadLocalVersionInformation.opcode, 0x1001),
            (ReadLocalSupportedCommands.opcode, 0x1002), (ReadBDAddr.opcode, 0x1009), (LESetEventMask.opcode, 0x2001),
            (LEReadLocalSupportedFeatures.opcode, 0x2003), (LESetRandomAddress.opcode, 0x2005),
            (LESetAdvertisingParameters.opcode, 0x2006), (LEReadAdvertisingPhysicalChannelTxPower.opcode, 0x2007),
            (LESetAdvertisingData.opcode, 0x2008), (LESetScanResponseData.opcode, 0x2009),
            (LESetAdvertisingEnable.opcode, 0x200A), (LESetScanParameters.opcode, 0x200B),
            (LESetScanEnable.opcode, 0x200C),
            (LESetAdvertisingSetRandomAddress.opcode, 0x2035), (LESetExtendedAdvertisingParameters.opcode, 0x2036),
            (LESetExtendedAdvertisingData.opcode, 0x2037), (LESetExtendedScanResponseData.opcode, 0x2038),
            (LESetExtendedAdvertisingEnable.opcode, 0x2039), (LEReadMaximumAdvertisingDataLength.opcode, 0x203A),
            (LEReadNumberOfSupportedAdvertisingSets.opcode, 0x203B), (LERemoveAdvertisingSet.opcode, 0x203C),
            (LEClearAdvertisingSets.opcode, 0x203D), (LESetExtendedScanParameters.opcode, 0x2041),
            (LESetExtendedScanEnable.opcode, 0x2042), (LEReadTransmitPower.opcode, 0x204B),
        ]
        for (actual, expected) in pairs { #expect(actual.rawValue == expected) }
    }
}

/// The two pairs of commands that share their parameters (advertising data and scan response
/// data, legacy and extended) are built by one implementation each: every command keeps its own
/// row, its own words in errors, and its bytes up to the longest data allowed.
@Suite("Data commands: one implementation, four commands")
struct HCIDataCommandTests {
    @Test func eachKeepsItsRow() {
        let rows: [(HCICommandSpec, UInt16, String, Int, Int)] = [
            (LESetAdvertisingData.spec, 0x2008, "LE Set Advertising Data", 25, 7),
            (LESetScanResponseData.spec, 0x2009, "LE Set Scan Response Data", 26, 0),
            (LESetExtendedAdvertisingData.spec, 0x2037, "LE Set Extended Advertising Data", 36, 3),
            (LESetExtendedScanResponseData.spec, 0x2038, "LE Set Extended Scan Response Data", 36, 4),
        ]
        for (spec, opcode, name, octet, bit) in rows {
            #expect(spec.opcode.rawValue == opcode)
            #expect(spec.name == name)
            #expect(spec.supportedCommandsBit?.octet == octet && spec.supportedCommandsBit?.bit == bit, "\(name)")
            #expect(HCIOpcode(rawValue: opcode).name == name)
        }
    }

    @Test func eachNamesItsDataWhenTooLong() {
        let errors: [(() throws(ParameterError) -> Void, String)] = [
            (
                { () throws(ParameterError) in _ = try LESetAdvertisingData(data: Array(repeating: 0, count: 32)) },
                "advertising data is 32 long, at most 31 allowed (Core 5.4 Vol 4 Part E §7.8.7)"
            ),
            (
                { () throws(ParameterError) in _ = try LESetScanResponseData(data: Array(repeating: 0, count: 33)) },
                "scan response data is 33 long, at most 31 allowed (Core 5.4 Vol 4 Part E §7.8.8)"
            ),
            (
                { () throws(ParameterError) in
                    _ = try LESetExtendedAdvertisingData(advertisingHandle: 0, data: Array(repeating: 0, count: 252))
                },
                "extended advertising data fragment is 252 long, at most 251 allowed (Core 5.4 Vol 4 Part E §7.8.54)"
            ),
            (
                { () throws(ParameterError) in
                    _ = try LESetExtendedScanResponseData(advertisingHandle: 0, data: Array(repeating: 0, count: 300))
                },
                "extended scan response data fragment is 300 long, at most 251 allowed (Core 5.4 Vol 4 Part E §7.8.55)"
            ),
            (
                { () throws(ParameterError) in _ = try LESetExtendedScanResponseData(advertisingHandle: 0xF0, data: [])
                },
                "Advertising_Handle 0xF0 is out of range: allowed 0x00…0xEF (Core 5.4 Vol 4 Part E §7.8.53)"
            ),
        ]
        for (make, message) in errors {
            do {
                try make()
                Issue.record("accepted: \(message)")
            } catch {
                #expect(error.description == message)
            }
        }
    }

    @Test func theLongestDataEncodesWhole() throws {
        let legacy = (1...31).map { UInt8($0) }
        // 01 | 0920 | 20 (32) | 1f length | 31 data bytes, no padding left
        #expect(packetHex(try LESetScanResponseData(data: legacy)) == "01092020" + "1f" + legacy.hexString)
        let extended = (0..<251).map { UInt8(truncatingIfNeeded: $0 * 7) }
        // 01 | 3820 | ff (255) | 05 handle | 02 last fragment | 00 may fragment | fb (251) length | data
        let response = try LESetExtendedScanResponseData(
            advertisingHandle: 5, operation: .lastFragment, avoidFragmentation: false, data: extended)
        #expect(packetHex(response) == "013820ff" + "050200fb" + extended.hexString)
        // 01 | 3720 | ff | ef handle | 00 intermediate | 01 no fragmenting | fb length | data
        let data = try LESetExtendedAdvertisingData(
            advertisingHandle: 0xEF, operation: .intermediateFragment, data: extended)
        #expect(packetHex(data) == "013720ff" + "ef0001fb" + extended.hexString)
        #expect(data.data == extended && response.data == extended)
        #expect(try LESetScanResponseData(data: legacy).data == legacy)
    }
}

@Suite("HCI command parameters are validated")
struct HCICommandValidationTests {
    @Test func legacyAdvertisingDataOver31BytesThrows() {
        #expect(throws: ParameterError.self) { try LESetAdvertisingData(data: Array(repeating: 0, count: 32)) }
        #expect(throws: ParameterError.self) { try LESetScanResponseData(data: Array(repeating: 0, count: 32)) }
        #expect(throws: Never.self) { try LESetAdvertisingData(data: Array(repeating: 0xAA, count: 31)) }
        #expect(throws: Never.self) { try LESetAdvertisingData(data: []) }
    }

    @Test func fullLegacyPayloadIsNotPadded() throws {
        let data = (1...31).map { UInt8($0) }
        let parameters = try LESetAdvertisingData(data: data).parameters
        #expect(parameters == [31] + data)
    }

    @Test func extendedDataOver251BytesThrows() {
        #expect(throws: ParameterError.self) {
            try LESetExtendedAdvertisingData(advertisingHandle: 0, data: Array(repeating: 0, count: 252))
        }
        #expect(throws: ParameterError.self) {
            try LESetExtendedScanResponseData(advertisingHandle: 0, data: Array(repeating: 0, count: 252))
        }
        #expect(throws: Never.self) {
            try LESetExtendedAdvertisingData(advertisingHandle: 0, data: Array(repeating: 0, count: 251))
        }
    }

    @Test func advertisingHandleAbove0xEFThrows() throws {
        #expect(throws: ParameterError.self) { try LERemoveAdvertisingSet(advertisingHandle: 0xF0) }
        #expect(throws: ParameterError.self) { try LESetExtendedAdvertisingEnable.AdvertisingSet(handle: 0xFF) }
        #expect(throws: Never.self) { try LERemoveAdvertisingSet(advertisingHandle: 0xEF) }
    }

    @Test func legacyParametersRejectExtendedOnlyIntervalsAndBadOrder() throws {
        let big = try AdvertisingInterval(slots: 0x4001, for: .extended)
        let ok = try AdvertisingInterval(milliseconds: 100)
        #expect(throws: ParameterError.self) {
            try LESetAdvertisingParameters(intervalMin: ok, intervalMax: big, advertisingType: .advNonconnInd)
        }
        let slower = try AdvertisingInterval(milliseconds: 200)
        #expect(throws: ParameterError.self) {
            try LESetAdvertisingParameters(intervalMin: slower, intervalMax: ok, advertisingType: .advNonconnInd)
        }
        #expect(throws: ParameterError.self) {
            try LESetAdvertisingParameters(
                intervalMin: ok, intervalMax: ok, advertisingType: .advNonconnInd, channelMap: [])
        }
    }

    @Test func extendedParametersFollowTable7_2AndRanges() throws {
        let i = try AdvertisingInterval(milliseconds: 100, for: .extended)
        // Legacy PDUs with include-TX-power are not in Table 7.2.
        #expect(throws: ParameterError.self) {
            try LESetExtendedAdvertisingParameters(
                advertisingHandle: 0, eventProperties: [.legacy, .includeTxPower], primaryIntervalMin: i,
                primaryIntervalMax: i)
        }
        // Extended PDUs may not be connectable and scannable at once.
        #expect(throws: ParameterError.self) {
            try LESetExtendedAdvertisingParameters(
                advertisingHandle: 0, eventProperties: [.connectable, .scannable], primaryIntervalMin: i,
                primaryIntervalMax: i)
        }
        #expect(throws: ParameterError.self) {
            try LESetExtendedAdvertisingParameters(
                advertisingHandle: 0, eventProperties: .legacyAdvNonconnInd, primaryIntervalMin: i,
                primaryIntervalMax: i,
                advertisingTxPower: 21)
        }
        #expect(throws: ParameterError.self) {
            try LESetExtendedAdvertisingParameters(
                advertisingHandle: 0, eventProperties: .legacyAdvNonconnInd, primaryIntervalMin: i,
                primaryIntervalMax: i,
                primaryPHY: .le2M)
        }
        #expect(throws: ParameterError.self) {
            try LESetExtendedAdvertisingParameters(
                advertisingHandle: 0, eventProperties: .legacyAdvNonconnInd, primaryIntervalMin: i,
                primaryIntervalMax: i,
                advertisingSID: 0x10)
        }
        for props: AdvertisingEventProperties in [
            .legacyAdvInd, .legacyAdvDirectIndLow, .legacyAdvDirectIndHigh, .legacyAdvScanInd, .legacyAdvNonconnInd,
        ] {
            #expect(throws: Never.self) {
                try LESetExtendedAdvertisingParameters(
                    advertisingHandle: 0, eventProperties: props, primaryIntervalMin: i, primaryIntervalMax: i,
                    advertisingTxPower: -127)
            }
        }
        // Table 7.2 values, independently from the spec: 0x13, 0x15, 0x1D, 0x12, 0x10.
        #expect(AdvertisingEventProperties.legacyAdvInd.rawValue == 0x13)
        #expect(AdvertisingEventProperties.legacyAdvDirectIndLow.rawValue == 0x15)
        #expect(AdvertisingEventProperties.legacyAdvDirectIndHigh.rawValue == 0x1D)
        #expect(AdvertisingEventProperties.legacyAdvScanInd.rawValue == 0x12)
        #expect(AdvertisingEventProperties.legacyAdvNonconnInd.rawValue == 0x10)
    }

    @Test func enablingNoExtendedSetThrows() {
        #expect(throws: ParameterError.self) { try LESetExtendedAdvertisingEnable(enable: true, sets: []) }
    }

    @Test func scanWindowLongerThanIntervalThrows() throws {
        let interval = try ScanTiming(milliseconds: 30)
        let window = try ScanTiming(milliseconds: 60)
        #expect(throws: ParameterError.self) {
            try LESetScanParameters(scanType: .passive, interval: interval, window: window)
        }
        #expect(throws: Never.self) { try LESetScanParameters(scanType: .passive, interval: window, window: window) }
        // 0x4001 is only valid for extended scanning.
        let wide = try ScanTiming(slots: 0x4001, for: .extended)
        #expect(throws: ParameterError.self) {
            try LESetScanParameters(scanType: .passive, interval: wide, window: interval)
        }
        #expect(throws: ParameterError.self) {
            try LESetExtendedScanParameters.PHYParameters(scanType: .passive, interval: interval, window: window)
        }
        #expect(throws: ParameterError.self) { try LESetExtendedScanParameters(le1M: nil, leCoded: nil) }
    }

    @Test func errorsSayWhatAndWhere() {
        do {
            _ = try LESetAdvertisingData(data: Array(repeating: 0, count: 32))
            Issue.record("no error")
        } catch {
            #expect(
                error.description == "advertising data is 32 long, at most 31 allowed (Core 5.4 Vol 4 Part E §7.8.7)")
        }
    }
}

@Suite("Return parameters")
struct HCIReturnParameterTests {
    @Test func supportedCommandsBits() throws {
        var octets = [UInt8](repeating: 0, count: 64)
        octets[36] = 0b0000_0100  // octet 36 bit 2: LE Set Extended Advertising Parameters (Bumble's table)
        octets[5] = 0b1000_0000  // octet 5 bit 7: Reset
        let commands = try ReadLocalSupportedCommands.ReturnParameters(octets: octets)
        #expect(commands.supports(octet: 36, bit: 2))
        #expect(!commands.supports(octet: 36, bit: 1))
        #expect(!commands.supports(octet: 64, bit: 0))
        #expect(!commands.supports(octet: 0, bit: 8))
        #expect(commands.supports(.leSetExtendedAdvertisingParameters) == true)
        #expect(commands.supports(.reset) == true)
        #expect(commands.supports(.leSetAdvertisingParameters) == false)
        #expect(commands.supports(HCIOpcode(rawValue: 0xFC01)) == nil)
        #expect(throws: DecodingError.self) { try ReadLocalSupportedCommands.ReturnParameters(octets: [0]) }
    }

    @Test func leFeaturesNames() {
        // 0x3901: bits 0, 8, 11, 12, 13
        let features = LEFeatures(rawValue: 0x3901)
        #expect(features.contains(.encryption))
        #expect(features.contains(.le2MPHY))
        #expect(features.contains(.leCodedPHY))
        #expect(features.contains(.extendedAdvertising))
        #expect(features.contains(.periodicAdvertising))
        #expect(
            features.names == [
                "LE Encryption", "LE 2M PHY", "LE Coded PHY", "LE Extended Advertising", "LE Periodic Advertising",
            ])
        #expect(LEFeatures(rawValue: 1 << 63).names == ["bit 63"])
        #expect(LEFeatures.extendedAdvertising.rawValue == 0x1000)
    }

    @Test func masks() {
        #expect(EventMask.leMeta.rawValue == 0x2000_0000_0000_0000)
        #expect(!EventMask.defaultAfterReset.contains(.leMeta))
        #expect(LEEventMask.defaultAfterReset.rawValue == 0x1F)
        #expect(LEEventMask.extendedAdvertisingReport.rawValue == 0x1000)
        #expect(!LEEventMask.defaultAfterReset.contains(.extendedAdvertisingReport))
        #expect(AdvertisingChannelMap.all.rawValue == 0x07)
    }
}
