import IBeaconTestSupport
import Testing

@testable import IBeaconCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the C library writes for `%*.*f`: the reference `Double.fixed` must match.
private func printf(_ value: Double, _ decimals: Int, width: Int = 0) -> String {
    var buffer = [CChar](repeating: 0, count: 512)
    _ = withVaList([Int32(width), Int32(decimals), value]) { vsnprintf(&buffer, buffer.count, "%*.*f", $0) }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

@Suite struct FormattingTests {
    @Test func examples() {
        #expect((-59.25).fixed(1) == "-59.2")  // an exact tie goes to even, like printf
        #expect((-59.35).fixed(1) == "-59.4")  // -59.35 is stored as -59.35000000000000142…
        #expect(0.35.fixed(1) == "0.3")  // 0.34999999999999997…
        #expect(2.5.fixed(0) == "2")
        #expect(3.5.fixed(0) == "4")
        #expect((-0.04).fixed(1) == "-0.0")
        #expect(4.0.fixed(2) == "4.00")
        #expect(12.34.fixed(1, width: 6) == "  12.3")
        #expect(123456.7.fixed(1, width: 3) == "123456.7")
        #expect(Double.nan.fixed(1) == "nan")
        #expect((-Double.infinity).fixed(2) == "-inf")
    }

    /// Values on rounding ties, signs of zero and magnitudes past exact integers: what every
    /// text output (scan, calibrate, profile show, calsim) prints for them.
    static let edges: [(Double, Int, String)] = [
        (0.125, 2, "0.12"), (0.375, 2, "0.38"), (-59.125, 2, "-59.12"), (-59.375, 2, "-59.38"),
        (1.115, 2, "1.11"), (1.005, 2, "1.00"), (2.5, 0, "2"), (-2.5, 0, "-2"), (0.25, 1, "0.2"),
        (1.25, 1, "1.2"), (0.0625, 3, "0.062"), (1.3125, 3, "1.312"), (2.0005, 3, "2.001"),
        (-0.004, 2, "-0.00"), (-0.0, 1, "-0.0"), (0.0, 1, "0.0"), (-0.04, 1, "-0.0"),
        (123456789.125, 2, "123456789.12"), (1e300, 2, "1e+300"), (4.6e15, 0, "4600000000000000.0"), (1e17, 3, "1e+17"),
        (.nan, 2, "nan"), (.infinity, 1, "inf"), (-.infinity, 3, "-inf"),
    ]

    @Test(arguments: edges) func edgeCases(value: Double, decimals: Int, text: String) {
        #expect(value.fixed(decimals) == text)
    }

    @Test func matchesTheCLibraryOnRandomValues() {
        var rng = SplitMix64(seed: 15)
        for i in 0..<20000 {
            let decimals = i % 4
            // Values around the CLI's ranges (dBm, seconds, metres), some on exact ties.
            let magnitude = [1.0, 100.0, 10000.0][i % 3]
            var value = (rng.unit() * 2 - 1) * magnitude
            if i % 5 == 0 { value = (value * 8).rounded() / 8 }
            let width = i % 7 == 0 ? 8 : 0
            #expect(
                value.fixed(decimals, width: width) == printf(value, decimals, width: width), "\(value) %.\(decimals)f")
        }
    }
}
