import IBeaconTestSupport
import Testing

@testable import IBeaconCore

/// `IBeacon.find(inAdvertisingData:)` is the allocation-free path the scanner uses; it must
/// agree with the general AD parser followed by `find(in:)` on every input.
@Suite struct IBeaconFastPathTests {
    static let golden: [UInt8] = [UInt8](hex: "0201061aff4c000215f7826da64fa24e988024bc5b71e0893e01020304c5")!

    func reference(_ data: [UInt8]) -> IBeacon? {
        (try? ADStructure.parse(data)).flatMap { IBeacon.find(in: $0) }
    }

    @Test func goldenVector() {
        let b = IBeacon.find(inAdvertisingData: Self.golden)
        #expect(b?.major == 0x0102)
        #expect(b?.minor == 0x0304)
        #expect(b?.measuredPower == -59)
        #expect(b?.uuidString == "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")
        #expect(b == reference(Self.golden))
    }

    @Test func agreesWithTheParserOnMutationsAndRandomBytes() {
        var rng = SplitMix64(seed: 0x1BEAC0)  // from CalibrationTests
        var agreeing = 0
        for round in 0..<20_000 {
            var data: [UInt8]
            switch round % 4 {
            case 0:  // the golden vector with one byte changed
                data = Self.golden
                data[Int(rng.next() % UInt64(data.count))] = UInt8(truncatingIfNeeded: rng.next())
            case 1:  // cut short or padded
                data = Array(Self.golden.prefix(Int(rng.next() % 32)))
                if rng.next() % 2 == 0 { data += [0, 0, UInt8(truncatingIfNeeded: rng.next() % 2)] }
            case 2:  // an iBeacon behind other structures
                data = [0x03, 0x03, 0xAA, 0xFE] + Array(Self.golden.dropFirst(3))
                if rng.next() % 3 == 0 { data[0] = UInt8(truncatingIfNeeded: rng.next() % 40) }
            default:  // random bytes
                data = (0..<Int(rng.next() % 40)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            let fast = IBeacon.find(inAdvertisingData: data)
            #expect(fast == reference(data), "disagree on \(data.hexString)")
            if fast == reference(data) { agreeing += 1 }
        }
        #expect(agreeing == 20_000)
    }
}

/// The fast path on a slice of a larger buffer (as scanning passes report data): indices start
/// past zero and the data may end at the buffer's end.
@Suite struct IBeaconSliceTests {
    @Test func findsTheBeaconInASliceAtEitherEdge() {
        let golden = IBeaconFastPathTests.golden
        let buffer: [UInt8] = [0xEE, 0xEE, 0x05] + golden
        let slice = buffer[3...]
        #expect(slice.startIndex == 3)
        #expect(IBeacon.find(inAdvertisingData: slice) == IBeacon.find(inAdvertisingData: golden))
        #expect(IBeacon.find(inAdvertisingData: slice)?.minor == 0x0304)
        // Cut by one at the end: the structure runs past the slice, so no iBeacon.
        #expect(IBeacon.find(inAdvertisingData: buffer[3..<(buffer.count - 1)]) == nil)
        // A slice that starts one byte early reads a different first length: no iBeacon.
        #expect(IBeacon.find(inAdvertisingData: buffer[2...]) == nil)
    }
}
