import Testing

@testable import IBeaconCore

@Suite("Units: 0.625 ms slots")
struct UnitsTests {
    @Test func advertisingIntervalFromMilliseconds() throws {
        let i = try AdvertisingInterval(milliseconds: 100)
        #expect(i.slots == 160)  // 100 / 0.625
        #expect(i.milliseconds == 100)
        #expect(i.description == "100 ms (160 slots)")
        #expect(try AdvertisingInterval(milliseconds: 20).slots == 0x0020)
        #expect(try AdvertisingInterval(milliseconds: 10240).slots == 0x4000)
        #expect(try AdvertisingInterval(milliseconds: 1280).slots == 2048)
        // 21 ms = 33.6 slots → 34 slots = 21.25 ms; the description shows what the controller gets.
        #expect(try AdvertisingInterval(milliseconds: 21).description == "21.25 ms (34 slots)")
        #expect(try AdvertisingInterval(slots: 33).description == "20.625 ms (33 slots)")
    }

    /// `Slots` is the one conversion: its integer forms agree with 0.625 ms exactly.
    @Test func slotConversionsAgree() {
        for ms in 0...20_000 {
            #expect(Slots.nearest(milliseconds: ms) == Int((Double(ms) / Slots.unitMilliseconds).rounded()))
            #expect(Slots.nearest(milliseconds: Double(ms)) == (Double(ms) / 0.625).rounded())
        }
        for slots in 0...0x4_0000 {
            #expect(Slots.wholeMilliseconds(slots) == Int(Slots.milliseconds(slots).rounded(.down)))
        }
    }

    @Test func legacyRangeIsEnforced() {
        #expect(throws: ParameterError.self) { try AdvertisingInterval(milliseconds: 19) }
        #expect(throws: ParameterError.self) { try AdvertisingInterval(milliseconds: 10241) }
        #expect(throws: ParameterError.self) { try AdvertisingInterval(milliseconds: -5) }
        #expect(throws: ParameterError.self) { try AdvertisingInterval(milliseconds: Int.max) }
        #expect(throws: ParameterError.self) { try AdvertisingInterval(slots: 0x1F) }
        #expect(throws: ParameterError.self) { try AdvertisingInterval(slots: 0x4001) }
    }

    @Test func extendedRange() throws {
        #expect(try AdvertisingInterval(milliseconds: 20_000, for: .extended).slots == 32_000)
        #expect(try AdvertisingInterval(slots: 0xFF_FFFF, for: .extended).slots == 0xFF_FFFF)
        #expect(try AdvertisingInterval(milliseconds: 10_485_759, for: .extended).slots == 16_777_214)
        #expect(throws: ParameterError.self) { try AdvertisingInterval(slots: 0x100_0000, for: .extended) }
        #expect(throws: ParameterError.self) { try AdvertisingInterval(milliseconds: 10_485_760, for: .extended) }
    }

    @Test func errorMessageIsClear() {
        do {
            _ = try AdvertisingInterval(milliseconds: 15)
            Issue.record("no error")
        } catch {
            #expect(
                error.description
                    == "advertising interval 15 ms is out of range: allowed 20 ms…10240 ms (32…16384 slots of 0.625 ms) (Core 5.4 Vol 4 Part E §7.8.5)"
            )
        }
    }

    @Test func scanTiming() throws {
        #expect(try ScanTiming(milliseconds: 2.5).slots == 4)
        #expect(try ScanTiming(milliseconds: 60).description == "60 ms (96 slots)")
        #expect(try ScanTiming(milliseconds: 10240).slots == 0x4000)
        #expect(throws: ParameterError.self) { try ScanTiming(milliseconds: 2) }
        #expect(throws: ParameterError.self) { try ScanTiming(milliseconds: 10241) }
        #expect(throws: ParameterError.self) { try ScanTiming(milliseconds: .nan) }
        #expect(throws: ParameterError.self) { try ScanTiming(slots: 3, for: .extended) }
        #expect(try ScanTiming(milliseconds: 40959.375, for: .extended).slots == 0xFFFF)
        #expect(throws: ParameterError.self) { try ScanTiming(slots: 0x4001) }
    }
}
