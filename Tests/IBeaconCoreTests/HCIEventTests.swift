import Testing

@testable import IBeaconCore

// Event vectors produced by Bumble 0.0.236's encoder (`bytes(HCI_…_Event(...)).hex()` in a
// venv with bumble==0.0.236), with the leading H4 byte 04 removed; the call is quoted next to
// each. Vectors marked "spec" were written by hand from Core 5.4 Vol 4 Part E §7.7.

private func bytes(_ hex: String) throws -> [UInt8] { try #require([UInt8](hex: hex)) }

private func isTruncated(_ error: any Error) -> Bool {
    if case .truncated = error as? DecodingError { return true }
    return false
}

private func commandComplete(_ hex: String) throws -> (UInt8, HCIOpcode, [UInt8]) {
    let event = try HCIEvent.decode(bytes(hex))
    guard case .commandComplete(let packets, let opcode, let returnParameters) = event else {
        Issue.record("not Command Complete: \(event)")
        throw DecodingError.invalidValue(what: "test", value: 0, allowed: "")
    }
    return (packets, opcode, returnParameters)
}

@Suite("HCI events decode")
struct HCIEventDecodingTests {
    @Test func commandCompleteReadLocalVersion() throws {
        // Bumble: HCI_Command_Complete_Event(num_hci_command_packets=1, command_opcode=0x1001,
        //   return_parameters=…(status=0, hci_version=0x0D, hci_subversion=0x0102, lmp_version=0x0C,
        //   company_identifier=0x0304, lmp_subversion=0x0506))
        // 0e code | 0c length | 01 packets | 0110 opcode | 00 status | 0d | 0201 | 0c | 0403 | 0605
        let (packets, opcode, rp) = try commandComplete("0e0c010110000d02010c04030605")
        #expect(packets == 1)
        #expect(opcode == .readLocalVersionInformation)
        let (status, version) = try decodeReturnParameters(ReadLocalVersionInformation.self, from: rp)
        #expect(status == .success)
        #expect(
            version
                == .init(
                    hciVersion: 0x0D, hciSubversion: 0x0102, lmpVersion: 0x0C, companyIdentifier: 0x0304,
                    lmpSubversion: 0x0506))
        #expect(ReadLocalVersionInformation.ReturnParameters.coreVersionName(0x0D) == "5.4")
    }

    @Test func commandCompleteTypedReturns() throws {
        // Bumble: Read BD_ADDR, 2 packets, status 0, bd_addr A1:B2:C3:D4:E5:F6
        let (packets, _, addrRP) = try commandComplete("0e0a02091000f6e5d4c3b2a1")
        #expect(packets == 2)
        #expect(try decodeReturnParameters(ReadBDAddr.self, from: addrRP).1 == BDAddress("A1:B2:C3:D4:E5:F6"))

        // Bumble: LE Read Local Supported Features, le_features 0x3901 (bits 0, 8, 11, 12, 13)
        let features = try decodeReturnParameters(
            LEReadLocalSupportedFeatures.self, from: commandComplete("0e0c010320000139000000000000").2)
        #expect(features.1 == LEFeatures(rawValue: 0x3901))
        #expect(features.1?.contains(.extendedAdvertising) == true)

        // Bumble: LE Read Advertising Physical Channel Tx Power, tx_power_level=-9 (f7)
        #expect(
            try decodeReturnParameters(
                LEReadAdvertisingPhysicalChannelTxPower.self, from: commandComplete("0e0501072000f7").2
            ).1 == -9)
        // Bumble: LE Set Extended Advertising Parameters, selected_tx_power=-3 (fd)
        #expect(
            try decodeReturnParameters(
                LESetExtendedAdvertisingParameters.self, from: commandComplete("0e0501362000fd").2
            ).1?
            .selectedTxPower == -3)
        // Bumble: LE Read Maximum Advertising Data Length, 0x0672 (7206)
        #expect(
            try decodeReturnParameters(
                LEReadMaximumAdvertisingDataLength.self, from: commandComplete("0e06013a20007206").2
            ).1 == 0x0672)
        // Bumble: LE Read Number of Supported Advertising Sets, 10
        #expect(
            try decodeReturnParameters(
                LEReadNumberOfSupportedAdvertisingSets.self, from: commandComplete("0e05013b20000a").2
            ).1 == 10)
        // Bumble: LE Read Transmit Power, min -20 (ec), max 10 (0a)
        #expect(
            try decodeReturnParameters(LEReadTransmitPower.self, from: commandComplete("0e06014b2000ec0a").2).1
                == .init(min: -20, max: 10))
    }

    @Test func commandCompleteWithFailureStatus() throws {
        // Bumble: HCI_Command_Complete_Event(1, 0x200A, HCI_StatusReturnParameters(status=0x0C))
        let event = try HCIEvent.decode(bytes("0e04010a200c"))
        #expect(
            event
                == .commandComplete(numHCICommandPackets: 1, opcode: .leSetAdvertisingEnable, returnParameters: [0x0C]))
        #expect(event.status == .commandDisallowed)
        let (status, value) = try decodeReturnParameters(LESetAdvertisingEnable.self, from: [0x0C])
        #expect(status == .commandDisallowed)
        #expect(value == nil)
        // A failed command with return parameters after the status: not decoded, not an error.
        #expect(try decodeReturnParameters(ReadBDAddr.self, from: [0x01, 1, 2, 3, 4, 5, 6]).1 == nil)
    }

    @Test func returnParameterLengthIsChecked() {
        #expect(throws: DecodingError.self) {
            try decodeReturnParameters(LEReadTransmitPower.self, from: [0x00, 0xEC])
        }
        #expect(throws: DecodingError.self) {
            try decodeReturnParameters(LESetAdvertisingEnable.self, from: [0x00, 0x01])
        }
        #expect(throws: DecodingError.self) { try decodeReturnParameters(Reset.self, from: []) }
    }

    @Test func nopCommandComplete() throws {
        // spec §7.7.14: a controller may send Command Complete with opcode 0x0000 to grant credits.
        // 0e | 03 | 01 packets | 0000 opcode, no return parameters
        let event = try HCIEvent.decode(bytes("0e03010000"))
        #expect(event == .commandComplete(numHCICommandPackets: 1, opcode: .nop, returnParameters: []))
        #expect(event.status == nil)
        #expect(HCIOpcode.nop.description == "NOP (0x0000)")
    }

    @Test func commandStatus() throws {
        // Bumble: HCI_Command_Status_Event(status=0x12, num_hci_command_packets=3, command_opcode=0x2042)
        // 0f | 04 | 12 status | 03 packets | 4220 opcode
        let event = try HCIEvent.decode(bytes("0f0412034220"))
        #expect(
            event
                == .commandStatus(
                    status: .invalidHCICommandParameters, numHCICommandPackets: 3, opcode: .leSetExtendedScanEnable))
        #expect(event.status == .invalidHCICommandParameters)
    }

    @Test func hardwareError() throws {
        // spec §7.7.16: 10 code | 01 length | 2a Hardware_Code
        #expect(try HCIEvent.decode(bytes("10012a")) == .hardwareError(code: 0x2A))
    }

    static let threeReports =
        "3e2e0203"  // LE Meta, length 46, subevent 0x02, Num_Reports 3
        + "03" + "01" + "0605040302c1" + "09" + "0201061aff4c000215" + "c5"  // NONCONN, random, C1:02:…, 9 bytes, -59
        + "00" + "00" + "f6e5d4c3b2a1" + "00" + "7f"  // ADV_IND, public, A1:B2:…, no data, RSSI 127
        + "04" + "01" + "665544332211" + "05" + "0509414243" + "9c"  // SCAN_RSP, random, 11:22:…, 5 bytes, -100

    @Test func multiReportAdvertisingReport() throws {
        // Bumble: HCI_LE_Advertising_Report_Event(reports=[Report(3, 1, C1:02:03:04:05:06, 0201061aff4c000215, -59),
        //   Report(0, 0, A1:B2:C3:D4:E5:F6, b'', 127), Report(4, 1, 11:22:33:44:55:66, 0509414243, -100)])
        let event = try HCIEvent.decode(bytes(Self.threeReports))
        guard case .leAdvertisingReport(let reports) = event else {
            Issue.record("not an advertising report: \(event)")
            return
        }
        #expect(reports.count == 3)
        #expect(
            reports[0]
                == LEAdvertisingReport(
                    eventType: .advNonconnInd, addressType: .random,
                    address: try #require(BDAddress("C1:02:03:04:05:06")),
                    data: try bytes("0201061aff4c000215"), rssi: -59))
        #expect(
            reports[1]
                == LEAdvertisingReport(
                    eventType: .advInd, addressType: .public, address: try #require(BDAddress("A1:B2:C3:D4:E5:F6")),
                    data: [], rssi: nil))
        #expect(
            reports[2]
                == LEAdvertisingReport(
                    eventType: .scanRsp, addressType: .random, address: try #require(BDAddress("11:22:33:44:55:66")),
                    data: try bytes("0509414243"), rssi: -100))
        // Round trip through the encoder.
        var w = ByteWriter()
        w.uint8(0x02)
        w.uint8(3)
        for r in reports { r.encode(into: &w) }
        #expect(try [0x3E, UInt8(w.bytes.count)] + w.bytes == bytes(Self.threeReports))
    }

    @Test func truncatedAdvertisingReportsThrowAtEveryCut() throws {
        let full = try bytes(Self.threeReports)
        let parameters = Array(full.dropFirst(2))
        for cut in 0..<parameters.count {
            // A consistent header claiming only the bytes present, so the report reader hits the end.
            let body = [0x3E, UInt8(cut)] + parameters.prefix(cut)
            #expect(throws: DecodingError.self, "cut at \(cut)") { try HCIEvent.decode(body) }
            do { _ = try HCIEvent.decode(body) } catch { #expect(isTruncated(error), "cut at \(cut): \(error)") }
            // And the raw prefix with the original length byte.
            let raw = Array(full.prefix(cut + 2))
            do { _ = try HCIEvent.decode(raw) } catch { #expect(isTruncated(error), "raw cut at \(cut): \(error)") }
        }
        #expect(throws: DecodingError.self) { try HCIEvent.decode([]) }
        #expect(throws: DecodingError.self) { try HCIEvent.decode([0x3E]) }
    }

    @Test func parameterLengthMustMatch() throws {
        // Declared 2 parameters, 3 present.
        do {
            _ = try HCIEvent.decode([0x10, 0x02, 0x01, 0x02, 0x03])
            Issue.record("no error")
        } catch {
            #expect(error == .trailingBytes(what: "Hardware Error (0x10) parameters", count: 1))
        }
        // Hardware Error with 2 parameter bytes: complete packet, but one byte too many for the event.
        do {
            _ = try HCIEvent.decode([0x10, 0x02, 0x01, 0x02])
            Issue.record("no error")
        } catch {
            #expect(error == .trailingBytes(what: "Hardware Error (0x10) parameters", count: 1))
        }
        // Declared 4, 1 present.
        #expect(throws: DecodingError.self) { try HCIEvent.decode([0x10, 0x04, 0x01]) }
    }

    @Test func overlongLegacyReportDataIsRejected() throws {
        // spec §7.7.65.2: Data_Length 0…31; 32 is invalid even when the bytes are there.
        var params: [UInt8] = [0x02, 0x01, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 32]
        params += [UInt8](repeating: 0xAA, count: 32) + [0xC5]
        do {
            _ = try HCIEvent.decode([0x3E, UInt8(params.count)] + params)
            Issue.record("no error")
        } catch {
            guard case .invalidValue = error else {
                Issue.record("unexpected \(error)")
                return
            }
        }
    }

    static let extendedReports =
        "3e3d0d02"  // LE Meta, length 61, subevent 0x0D, Num_Reports 2
        // Event_Type 0x0010 (legacy, complete) | random | C1:02:03:04:05:06 | 1M | no secondary | SID none
        // | TX n/a | RSSI -59 | no periodic | direct public 00:… | 9 bytes
        + "1000" + "01" + "0605040302c1" + "01" + "00" + "ff" + "7f" + "c5" + "0000" + "00" + "000000000000" + "09"
        + "0201061aff4c000215"
        // Event_Type 0x0021 (connectable, data incomplete, more to come) | public | A1:B2:… | Coded | 2M | SID 5
        // | TX -4 | RSSI n/a | periodic 0x0102 | direct random 11:22:33:44:55:66 | 2 bytes
        + "2100" + "00" + "f6e5d4c3b2a1" + "03" + "02" + "05" + "fc" + "7f" + "0201" + "01" + "665544332211" + "02"
        + "aabb"

    @Test func extendedAdvertisingReport() throws {
        // Bumble: HCI_LE_Extended_Advertising_Report_Event(reports=[…]) with the fields commented above.
        let event = try HCIEvent.decode(bytes(Self.extendedReports))
        guard case .leExtendedAdvertisingReport(let reports) = event else {
            Issue.record("not an extended report: \(event)")
            return
        }
        #expect(reports.count == 2)
        let a = reports[0]
        #expect(a.eventType == .legacyAdvNonconnInd)
        #expect(a.eventType.dataStatus == .complete)
        #expect(a.addressType == .random)
        #expect(a.address == BDAddress("C1:02:03:04:05:06"))
        #expect(a.primaryPHY == .le1M)
        #expect(a.secondaryPHY == LEPHY.none)
        #expect(a.advertisingSID == nil)
        #expect(a.txPower == nil)
        #expect(a.rssi == -59)
        #expect(a.data == (try bytes("0201061aff4c000215")))
        let b = reports[1]
        #expect(b.eventType.contains(.connectable))
        #expect(!b.eventType.contains(.legacy))
        #expect(b.eventType.dataStatus == .incompleteMoreToCome)
        #expect(b.primaryPHY == .leCoded)
        #expect(b.secondaryPHY == .le2M)
        #expect(b.advertisingSID == 5)
        #expect(b.txPower == -4)
        #expect(b.rssi == nil)
        #expect(b.periodicAdvertisingInterval == 0x0102)
        #expect(b.directAddressType == .random)
        #expect(b.directAddress == BDAddress("11:22:33:44:55:66"))
        #expect(b.data == [0xAA, 0xBB])
        var w = ByteWriter()
        w.uint8(0x0D)
        w.uint8(2)
        for r in reports { r.encode(into: &w) }
        #expect(try [0x3E, UInt8(w.bytes.count)] + w.bytes == bytes(Self.extendedReports))

        let parameters = Array(try bytes(Self.extendedReports).dropFirst(2))
        for cut in 0..<parameters.count {
            do {
                _ = try HCIEvent.decode([0x3E, UInt8(cut)] + parameters.prefix(cut))
                Issue.record("cut at \(cut) decoded")
            } catch { #expect(isTruncated(error), "cut at \(cut): \(error)") }
        }
    }

    @Test func advertisingSetTerminated() throws {
        // Bumble: HCI_LE_Advertising_Set_Terminated_Event(status=0x3C, advertising_handle=2,
        //   connection_handle=0x0102, num_completed_extended_advertising_events=3)
        // 3e | 06 | 12 subevent | 3c status | 02 handle | 0201 connection | 03 events
        let event = try HCIEvent.decode(bytes("3e06123c02020103"))
        #expect(
            event
                == .leAdvertisingSetTerminated(
                    status: .advertisingTimeout, handle: 2, connectionHandle: 0x0102, completedEvents: 3))
        #expect(event.status == .advertisingTimeout)
    }

    @Test func unknownEventsAreKept() throws {
        // spec §7.7.19 Number Of Completed Packets: 13 | 05 | 01 handles | 0100 handle | 0200 count
        #expect(
            try HCIEvent.decode(bytes("13050101000200"))
                == .unknown(code: .numberOfCompletedPackets, parameters: [0x01, 0x01, 0x00, 0x02, 0x00]))
        // An unassigned event code.
        #expect(
            try HCIEvent.decode(bytes("990201ff"))
                == .unknown(code: HCIEventCode(rawValue: 0x99), parameters: [0x01, 0xFF]))
        #expect(HCIEventCode(rawValue: 0x99).description == "unknown event (0x99)")
        // An LE subevent without a model: spec §7.7.65.20 Channel Selection Algorithm, 3e | 04 | 14 | 0100 | 01
        #expect(
            try HCIEvent.decode(bytes("3e0414010001"))
                == .leMeta(subevent: .channelSelectionAlgorithm, parameters: [0x01, 0x00, 0x01]))
        // BlueZ stack-internal event: fd | 03 | 0200 type | 01
        #expect(try HCIEvent.decode(bytes("fd03020001")) == .stackInternal(parameters: [0x02, 0x00, 0x01]))
        #expect(try HCIEvent.decode(bytes("fd00")) == .stackInternal(parameters: []))
    }

    @Test func eventCodeNames() {
        #expect(HCIEventCode.commandComplete.description == "Command Complete (0x0E)")
        #expect(HCIEventCode.leMeta.rawValue == 0x3E)
        #expect(LEMetaSubevent.extendedAdvertisingReport.description == "LE Extended Advertising Report (0x0D)")
        #expect(LEMetaSubevent(rawValue: 0x7E).description == "unknown LE subevent (0x7E)")
    }
}

/// BlueZ's stack-internal device event (lib/hci.h `evt_stack_internal`, `evt_si_device`): the one parser.
@Suite struct StackInternalDeviceEventTests {
    @Test func readsTheDeviceEvent() throws {
        // fd | 06 | 0100 EVT_SI_DEVICE | 0400 HCI_DEV_DOWN | 0200 dev_id 2
        let down = try HCIEvent.decode(bytes("fd06010004000200"))
        #expect(
            StackInternalDeviceEvent(down)
                == StackInternalDeviceEvent(parameters: [0x01, 0x00, 0x04, 0x00, 0x02, 0x00]))
        #expect(StackInternalDeviceEvent(down)?.kind == .down)
        #expect(StackInternalDeviceEvent(down)?.deviceID == 2)
        // HCI_DEV_UP (3), HCI_DEV_UNREG (2), HCI_DEV_REG (1).
        #expect(StackInternalDeviceEvent(parameters: [0x01, 0x00, 0x03, 0x00, 0x00, 0x00])?.kind == .up)
        #expect(StackInternalDeviceEvent(parameters: [0x01, 0x00, 0x02, 0x00, 0x00, 0x00])?.kind == .unregistered)
        #expect(StackInternalDeviceEvent(parameters: [0x01, 0x00, 0x01, 0x00, 0x00, 0x00])?.kind == .registered)
        // Without Dev_ID the event is still read; the device is unknown.
        let short = StackInternalDeviceEvent(parameters: [0x01, 0x00, 0x04, 0x00])
        #expect(short?.kind == .down && short?.deviceID == nil)
    }

    @Test func otherTypesAndTruncatedEventsAreNotDeviceEvents() throws {
        // Type 0x0002 (EVT_SI_SECURITY) is no device event.
        #expect(StackInternalDeviceEvent(parameters: [0x02, 0x00, 0x04, 0x00, 0x00, 0x00]) == nil)
        #expect(StackInternalDeviceEvent(parameters: [0x01, 0x00, 0x04]) == nil)
        #expect(StackInternalDeviceEvent(parameters: []) == nil)
        #expect(StackInternalDeviceEvent(try HCIEvent.decode(bytes("100101"))) == nil)  // Hardware Error
    }
}
