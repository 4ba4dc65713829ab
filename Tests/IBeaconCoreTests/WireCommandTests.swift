import Testing

@testable import IBeaconCore

/// Issue 31 step 4: one command shape for HCI and management commands. Both tables' types are
/// `WireCommand`s, and a reply is decoded by one rule, with errors worded one way.
@Suite struct WireCommandTests {
    @Test func everyCommandOfBothTablesHasTheOneShape() {
        let hci: [any WireCommand.Type] = HCICommandSpec.commands
        let mgmt: [any WireCommand.Type] = MgmtCommandSpec.commands
        #expect(hci.count == HCICommandSpec.commands.count && mgmt.count == MgmtCommandSpec.commands.count)
        let titles = (hci + mgmt).map { $0.returnParametersName }
        #expect(titles.contains("Read BD_ADDR (0x1009) return parameters"))
        #expect(titles.contains("Add Advertising return parameters"))
        #expect(Set(titles).count == titles.count)
    }

    @Test func aByteLeftOverIsRefusedTheSameWayOnBothInterfaces() throws {
        let address: [UInt8] = [0xF6, 0xE5, 0xD4, 0xC3, 0xB2, 0xA1]
        #expect(try ReadBDAddr.decodeReturn(address) == BDAddress("A1:B2:C3:D4:E5:F6"))
        #expect(throws: DecodingError.trailingBytes(what: "Read BD_ADDR (0x1009) return parameters", count: 1)) {
            try ReadBDAddr.decodeReturn(address + [0x00])
        }
        #expect(throws: DecodingError.trailingBytes(what: "Remove Advertising return parameters", count: 1)) {
            try MgmtRemoveAdvertising.decodeReturn([0x01, 0x00])
        }
    }

    @Test func aShortReplyIsRefusedByTheRowOrByTheFieldThatRunsPastTheEnd() {
        // The management row knows the length and refuses before reading a field; HCI's rows
        // hold no lengths, so the first field that runs past the end refuses it.
        #expect(throws: DecodingError.truncated(what: "Remove Advertising return parameters", needed: 1, available: 0))
        {
            try MgmtRemoveAdvertising.decodeReturn([])
        }
        #expect(throws: DecodingError.self) { try ReadBDAddr.decodeReturn([0xF6, 0xE5]) }
    }

    @Test func parametersAreWrittenIntoOneWriterForBoth() throws {
        #expect(LESetAdvertisingEnable(enabled: true).parameters == [0x01])
        #expect(LESetAdvertisingEnable(enabled: true).packet.body == [0x0A, 0x20, 0x01, 0x01])
        let remove = try MgmtRemoveAdvertising(instance: 3)
        #expect(remove.parameters == [0x03])
        #expect(remove.packet(index: MgmtIndex(0)).bytes == [0x3F, 0x00, 0x00, 0x00, 0x01, 0x00, 0x03])
    }
}
