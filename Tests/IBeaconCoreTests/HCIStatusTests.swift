import Testing

@testable import IBeaconCore

@Suite("HCI status and opcode names")
struct HCIStatusTests {
    @Test func everyCoreCodeHasAName() {
        for code in UInt8(0x00)...0x45 {
            let status = HCIStatus(rawValue: code)
            #expect(status.name != nil, "0x\([code].hexString)")
            #expect(!status.description.hasPrefix("unknown"), "0x\([code].hexString)")
        }
    }

    @Test func namesFollowTheSpecTable() {
        // Core 5.4 Vol 1 Part F §1.3, spot checks across the table.
        #expect(HCIStatus.success.description == "Success (0x00)")
        #expect(HCIStatus(rawValue: 0x01).description == "Unknown HCI Command (0x01)")
        #expect(HCIStatus.commandDisallowed.description == "Command Disallowed (0x0C)")
        #expect(HCIStatus(rawValue: 0x11).name == "Unsupported Feature or Parameter Value")
        #expect(HCIStatus(rawValue: 0x12).name == "Invalid HCI Command Parameters")
        #expect(HCIStatus(rawValue: 0x3C).name == "Advertising Timeout")
        #expect(HCIStatus(rawValue: 0x42).name == "Unknown Advertising Identifier")
        #expect(HCIStatus(rawValue: 0x45).description == "Packet Too Long (0x45)")
        #expect(HCIStatus.limitReached.rawValue == 0x43)
        #expect(HCIStatus.invalidHCICommandParameters.rawValue == 0x12)
    }

    @Test func unknownCodesPrintAsUnknown() {
        #expect(HCIStatus(rawValue: 0x7F).description == "unknown status (0x7F)")
        #expect(HCIStatus(rawValue: 0x46).name == nil)
        #expect(HCIStatus(rawValue: 0xFF).description == "unknown status (0xFF)")
    }

    @Test func hints() {
        #expect(HCIStatus.commandDisallowed.hint?.contains("legacy and extended") == true)
        #expect(HCIStatus.invalidHCICommandParameters.hint == "a parameter is out of the range this controller accepts")
        #expect(HCIStatus.unknownHCICommand.hint == "the controller does not support this command")
        #expect(HCIStatus.memoryCapacityExceeded.hint != nil)
        #expect(HCIStatus.unsupportedFeatureOrParameterValue.hint != nil)
        #expect(HCIStatus.success.hint == nil)
        #expect(HCIStatus.isSuccessOnlyForZero)
    }

    @Test func opcodeNamesAndValues() {
        // Opcodes from FIELD.md / Core 5.4 Vol 4 Part E §7, names as the spec titles the commands.
        let expected: [(UInt16, String)] = [
            (0x0000, "NOP"), (0x0C01, "Set Event Mask"), (0x0C03, "Reset"), (0x1001, "Read Local Version Information"),
            (0x1002, "Read Local Supported Commands"), (0x1009, "Read BD_ADDR"), (0x2001, "LE Set Event Mask"),
            (0x2003, "LE Read Local Supported Features"), (0x2005, "LE Set Random Address"),
            (0x2006, "LE Set Advertising Parameters"), (0x2007, "LE Read Advertising Physical Channel Tx Power"),
            (0x2008, "LE Set Advertising Data"), (0x2009, "LE Set Scan Response Data"),
            (0x200A, "LE Set Advertising Enable"), (0x200B, "LE Set Scan Parameters"), (0x200C, "LE Set Scan Enable"),
            (0x2035, "LE Set Advertising Set Random Address"), (0x2036, "LE Set Extended Advertising Parameters"),
            (0x2037, "LE Set Extended Advertising Data"), (0x2038, "LE Set Extended Scan Response Data"),
            (0x2039, "LE Set Extended Advertising Enable"), (0x203A, "LE Read Maximum Advertising Data Length"),
            (0x203B, "LE Read Number of Supported Advertising Sets"), (0x203C, "LE Remove Advertising Set"),
            (0x203D, "LE Clear Advertising Sets"), (0x2041, "LE Set Extended Scan Parameters"),
            (0x2042, "LE Set Extended Scan Enable"), (0x204B, "LE Read Transmit Power"),
        ]
        for (raw, name) in expected {
            #expect(HCIOpcode(rawValue: raw).name == name)
        }
        #expect(HCIOpcode.allKnown.map(\.rawValue) == expected.map(\.0))
        #expect(HCIOpcode.leSetAdvertisingEnable.description == "LE Set Advertising Enable (0x200A)")
        #expect(HCIOpcode.leSetAdvertisingEnable.ogf == 0x08)
        #expect(HCIOpcode.leSetAdvertisingEnable.ocf == 0x000A)
        #expect(HCIOpcode(rawValue: 0xFC01).description == "unknown command (0xFC01)")
    }
}

extension HCIStatus {
    fileprivate static var isSuccessOnlyForZero: Bool {
        (UInt8(0)...UInt8(255)).allSatisfy { HCIStatus(rawValue: $0).isSuccess == ($0 == 0) }
    }
}

@Suite("One row per HCI command and status")
struct HCITableTests {
    @Test func statusRowsAreIndexedByCode() {
        #expect(HCIStatus.table.count == 0x46)
        for (index, row) in HCIStatus.table.enumerated() {
            #expect(Int(row.code) == index, "row \(row.name) at index \(index)")
        }
    }

    @Test func commandRowsAreUnique() {
        let specs = HCICommandSpec.commands.map { $0.spec }
        #expect(Set(specs.map(\.opcode)).count == specs.count, "two command types share an opcode")
        #expect(Set(specs.map(\.name)).count == specs.count, "two command types share a name")
        let bits = specs.compactMap(\.supportedCommandsBit).map { $0.octet * 8 + $0.bit }
        #expect(Set(bits).count == bits.count, "two command types share a Supported_Commands bit")
        #expect(bits.allSatisfy { (0..<512).contains($0) })
        #expect(HCIOpcode.allKnown.count == specs.count + 1)  // + NOP
        #expect(specs.map(\.opcode.rawValue) == specs.map(\.opcode.rawValue).sorted(), "keep the list in opcode order")
    }

    @Test func everyCommandButReadLocalSupportedCommandsHasABit() {
        for type in HCICommandSpec.commands where type != ReadLocalSupportedCommands.self {
            #expect(type.spec.supportedCommandsBit != nil, "\(type.spec.name)")
        }
        #expect(ReadLocalSupportedCommands.spec.supportedCommandsBit == nil)
    }
}
