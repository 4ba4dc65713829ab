import IBeaconTestSupport
import Testing

@testable import IBeaconCore

@Suite struct AdvertisingTests {
    /// From Bumble 0.0.236 (`bytes(AdvertisingData([(COMPLETE_LOCAL_NAME, b"Store 12"),
    /// (TX_POWER_LEVEL, bytes([0xF8])), (INCOMPLETE_LIST_OF_16_BIT_SERVICE_CLASS_UUIDS,
    /// bytes([0x0F, 0x18]))])).hex()` printed `090953746f7265203132020af803020f18`; Bumble shows it as
    /// `[Complete Local Name]: "Store 12", [TX Power Level]: 248, [Incomplete List of 16-bit
    /// Service Class UUIDs]: UUID-16:180F`.
    static let nameTxService: [UInt8] = [
        0x09, 0x09, 0x53, 0x74, 0x6F, 0x72, 0x65, 0x20, 0x31, 0x32,  // length 9, Complete Local Name, "Store 12"
        0x02, 0x0A, 0xF8,  // length 2, Tx Power Level, -8 dBm
        0x03, 0x02, 0x0F, 0x18,  // length 3, Incomplete List of 16-bit UUIDs, 0x180F (Battery) LE
    ]

    @Test func parsesAndSummarises() throws {
        let s = try ADStructure.parse(Self.nameTxService)
        #expect(
            s.map(\.summary) == [
                "Complete Local Name: \"Store 12\"",
                "Tx Power Level: -8 dBm",
                "Incomplete List of 16-bit Service Class UUIDs: 0x180F",
            ])
        #expect(try ADStructure.encode(s) == Self.nameTxService)
    }

    @Test func keepsUnknownTypes() throws {
        let bytes: [UInt8] = [0x03, 0x77, 0xAB, 0xCD, 0x01, 0x16]
        let s = try ADStructure.parse(bytes)
        #expect(
            s == [
                ADStructure(type: ADType(rawValue: 0x77), data: [0xAB, 0xCD]),
                ADStructure(type: .serviceData16BitUUID, data: []),
            ])
        #expect(s[0].summary == "unknown AD type (0x77): ab cd")
        #expect(ADType(rawValue: 0x77).description == "unknown AD type (0x77)")
        #expect(ADType.manufacturerSpecificData.description == "Manufacturer Specific Data (0xFF)")
        #expect(CompanyIdentifier(rawValue: 0x1234).description == "unknown company (0x1234)")
        #expect(CompanyIdentifier.apple.description == "Apple, Inc. (0x004C)")
        #expect(try ADStructure.encode(s) == bytes)
    }

    @Test func terminatorAndPadding() throws {
        // A zero length ends the significant part; zeros may follow (31-byte HCI buffer).
        let padded: [UInt8] = [0x02, 0x01, 0x06] + [UInt8](repeating: 0, count: 28)
        #expect(try ADStructure.parse(padded) == [ADStructure(type: .flags, data: [0x06])])
        #expect(try ADStructure.parse([]) == [])
        #expect(try ADStructure.parse([0x00]) == [])
    }

    @Test func malformedInputThrows() {
        // Length runs past the end.
        #expect(
            throws: DecodingError.truncated(
                what: "AD structure Flags (0x01) at offset 0 (length 3)", needed: 2, available: 1)
        ) {
            try ADStructure.parse([0x03, 0x01, 0x06])
        }
        // Length byte with no type.
        #expect(throws: DecodingError.truncated(what: "AD type", needed: 1, available: 0)) {
            try ADStructure.parse([0x02, 0x01, 0x06, 0x05])
        }
        // Non-zero byte after the terminator.
        do {
            _ = try ADStructure.parse([0x02, 0x01, 0x06, 0x00, 0x00, 0x02, 0x01, 0x06])
            Issue.record("should throw")
        } catch {
            guard case .invalidValue(let what, let value, _) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(value == 2 && what.contains("offset 5") && what.contains("terminator at offset 3"))
        }
    }

    @Test func encodeRefusesToTruncate() throws {
        // 29 + 2 = 31 bytes: exactly the limit.
        let name = ADStructure(type: .completeLocalName, data: Array("A name of twenty-nine bytes!!".utf8))
        #expect(try ADStructure.encode([name]).count == 31)
        let longer = ADStructure(type: .completeLocalName, data: Array("A name of thirty bytes, oops!!".utf8))  // 32
        #expect(throws: AdvertisingDataError.tooLong(length: 32, limit: 31)) { try ADStructure.encode([longer]) }
        #expect(throws: AdvertisingDataError.self) {
            try ADStructure.encode(IBeaconTests.beacon.adStructures + [ADStructure(type: .txPowerLevel, data: [0])])
        }
        #expect(throws: AdvertisingDataError.structureTooLong(type: .manufacturerSpecificData, count: 255)) {
            try ADStructure.encode(
                [ADStructure(type: .manufacturerSpecificData, data: [UInt8](repeating: 1, count: 255))], limit: 1650)
        }
    }

    @Test func randomInputNeverCrashes() {
        var rng = SplitMix64(seed: 0xAD)
        var ok = 0
        for _ in 0..<5000 {
            let n = Int(rng.next() % 40)
            let bytes = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next() % 6 == 0 ? 0 : rng.next()) }
            if let s = try? ADStructure.parse(bytes) {
                ok += 1
                _ = s.map(\.summary)
                // Re-encoding gives back the significant part.
                if let e = try? ADStructure.encode(s, limit: 1650) {
                    #expect(Array(bytes.prefix(e.count)) == e)
                }
            }
        }
        #expect(ok > 100)
    }

    @Test func flagNames() {
        #expect(ADStructure.flagNames(0x1F).count == 5)
        #expect(
            ADStructure(type: .flags, data: [0x05]).summary
                == "Flags: LE Limited Discoverable Mode, BR/EDR Not Supported (0x05)")
        #expect(ADStructure(type: .flags, data: [0x06, 0x00]).summary == "Flags (0x01): 06 00")
    }
}
