import Testing

@testable import IBeaconCore

/// The forms and ranges the command line accepts for a beacon's fields are a profile's.
@Suite struct FieldValuesTests {
    static let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"

    @Test(arguments: [uuid, uuid.lowercased(), "F7826DA6-4FA2-4E98-8024-BC5B71E0893E"])
    func theCanonicalFormIsAProximityUUID(_ text: String) throws {
        let parsed = try #require(ProximityUUID(parsing: text))
        #expect(parsed.description == text.uppercased())
        #expect(parsed.uuid.bytes.prefix(2) == [0xE2, 0xC5] || parsed.uuid.bytes.prefix(2) == [0xF7, 0x82])
    }

    @Test(arguments: [
        "", "nope", "E2C56DB5DFFB48D2B060D0F5A71096E0", "{E2C56DB5-DFFB-48D2-B060-D0F5A71096E0}",
        "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 ", " E2C56DB5-DFFB-48D2-B060-D0F5A71096E0",
        "E2C56DB5-DFFB-48D2-B060-D0F5A71096EG", "E2C56DB5-DFFB-48D2-B060-D0F5A71096E",
        "E2C56DB5:DFFB-48D2-B060-D0F5A71096E0",
        "bakery=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0",
    ])
    func anyOtherFormIsNot(_ text: String) {
        #expect(ProximityUUID(parsing: text) == nil)
    }

    @Test func theExampleIsOne() {
        #expect(ProximityUUID(parsing: ProximityUUID.example) != nil)
        #expect(ProximityUUID.random() != ProximityUUID.random())
    }

    @Test func theRangesAreAProfilesAndSpellTheirUnit() {
        #expect(FieldRange.major.range == Profile.majorRange)
        #expect(FieldRange.minor.range == Profile.minorRange)
        #expect(FieldRange.measuredPower.range == Profile.measuredPowerRange)
        #expect(FieldRange.intervalMs.range == Profile.intervalMsRange)
        #expect(FieldRange.major.text == "0…65535")
        #expect(FieldRange.measuredPower.text == "-127…-1 dBm")
        #expect(FieldRange.measuredPower.bounds == "-127…-1")
        #expect(FieldRange.intervalMs.text == "20…10240")
        #expect(FieldRange.major.contains(0) && FieldRange.major.contains(65535))
        #expect(!FieldRange.major.contains(-1) && !FieldRange.major.contains(65536))
        #expect(!FieldRange.measuredPower.contains(0) && FieldRange.measuredPower.contains(-127))
        #expect(!FieldRange.major.contains(Int.max) && !FieldRange.major.contains(Int.min))
    }
}
