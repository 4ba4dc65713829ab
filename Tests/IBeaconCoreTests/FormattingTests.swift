import IBeaconTestSupport
import Testing

@testable import IBeaconCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What the C library writes for `%*.*f`: the digits `Double.fixed` must write.
private func printf(_ value: Double, _ decimals: Int, width: Int = 0) -> String {
    var buffer = [CChar](repeating: 0, count: 512)
    _ = withVaList([Int32(width), Int32(decimals), value]) { vsnprintf(&buffer, buffer.count, "%*.*f", $0) }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// What `gmtime_r` makes of a second since 1970.
private func gmtime(_ seconds: Int64) -> String {
    var t = time_t(seconds)
    var parts = tm()
    gmtime_r(&t, &parts)
    func pad(_ v: Int32, _ n: Int) -> String {
        let s = String(v)
        return String(repeating: "0", count: max(0, n - s.count)) + s
    }
    return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
        + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))Z"
}

@Suite struct FormattingTests {
    @Test func examples() {
        #expect((-59.25).fixed(1) == "-59.3")  // an exact tie goes away from zero, as in --json
        #expect((-59.35).fixed(1) == "-59.4")  // -59.35 is stored as -59.35000000000000142…
        #expect(0.35.fixed(1) == "0.4")  // 0.34999999999999997… × 10 is 3.5 as a Double
        #expect(2.5.fixed(0) == "3")
        #expect(3.5.fixed(0) == "4")
        #expect((-0.04).fixed(1) == "0.0")
        #expect(4.0.fixed(2) == "4.00")
        #expect(12.34.fixed(1, width: 6) == "  12.3")
        #expect(123456.7.fixed(1, width: 3) == "123456.7")
        #expect(Double.nan.fixed(1) == "nan")
        #expect((-Double.infinity).fixed(2) == "-inf")
    }

    /// A change with its sign (calibrate's drift and transients, calsim's bias): `%+.Nf`, except
    /// that a value rounding to zero is `+0.0`, never `-0.0`.
    @Test func signedFixed() {
        #expect(1.46.signedFixed(1) == "+1.5")
        #expect((-0.3).signedFixed(1) == "-0.3")
        #expect((-0.04).signedFixed(1) == "+0.0")
        #expect(0.0.signedFixed(2) == "+0.00")
        #expect((-59.125).signedFixed(2) == "-59.13")
        #expect(Double.infinity.signedFixed(1) == "+inf")
    }

    /// Values on rounding ties, signs of zero and magnitudes past exact integers: what every
    /// text output (scan, calibrate, profile show, monitor, calsim) prints for them.
    static let edges: [(Double, Int, String)] = [
        (0.125, 2, "0.13"), (0.375, 2, "0.38"), (-59.125, 2, "-59.13"), (-59.375, 2, "-59.38"),
        (1.115, 2, "1.12"), (1.005, 2, "1.00"), (2.5, 0, "3"), (-2.5, 0, "-3"), (0.25, 1, "0.3"),
        (1.25, 1, "1.3"), (0.0625, 3, "0.063"), (1.3125, 3, "1.313"), (2.0005, 3, "2.001"),
        (-0.004, 2, "0.00"), (-0.0, 1, "0.0"), (0.0, 1, "0.0"), (-0.04, 1, "0.0"),
        (123456789.125, 2, "123456789.13"), (1e300, 2, "1e+300"), (4.6e15, 0, "4600000000000000"), (1e17, 3, "1e+17"),
        (.nan, 2, "nan"), (.infinity, 1, "inf"), (-.infinity, 3, "-inf"),
    ]

    @Test(arguments: edges) func edgeCases(value: Double, decimals: Int, text: String) {
        #expect(value.fixed(decimals) == text)
    }

    /// A calibration's estimate reads the same in what `calibrate` prints and in the profile it
    /// writes (an estimate of -59.125 printed -59.12 and was written -59.13).
    @Test(arguments: edges.filter { $0.0.isFinite }) func textAndJSONAgree(value: Double, decimals: Int, text: String) {
        #expect(JSONValue.decimal(value, fractionDigits: decimals).description == value.fixed(decimals))
    }

    /// The digits are C's for the rounded value; away from ties they are C's for the value itself.
    @Test func matchesTheCLibraryOnRandomValues() {
        var rng = SplitMix64(seed: 15)
        var ties = 0
        for i in 0..<20000 {
            let decimals = i % 4
            // Values around the CLI's ranges (dBm, seconds, metres), some on exact ties.
            let magnitude = [1.0, 100.0, 10000.0][i % 3]
            var value = (rng.unit() * 2 - 1) * magnitude
            if i % 5 == 0 { value = (value * 8).rounded() / 8 }
            let width = i % 7 == 0 ? 8 : 0
            var scale = 1.0
            for _ in 0..<decimals { scale *= 10 }
            let rounded = (value * scale).rounded() / scale
            let text = value.fixed(decimals, width: width)
            #expect(text == printf(rounded == 0 ? 0 : rounded, decimals, width: width), "\(value) %.\(decimals)f")
            let fraction = abs(value * scale) - abs(value * scale).rounded(.down)
            if abs(fraction - 0.5) > 1e-6 {
                #expect(text == printf(value, decimals, width: width) || printf(value, decimals).hasPrefix("-0"))
            } else {
                ties += 1
            }
        }
        #expect(ties > 500)  // the ties were exercised (857 of 20,000)
    }

    /// The hand-written `isoTime` monitor used, on the same inputs (its output recorded before
    /// it was folded into `iso8601`): milliseconds rounded, 999.5 ms carried into the next second.
    @Test func iso8601Milliseconds() {
        let recorded: [(Double, String)] = [
            (0, "1970-01-01T00:00:00.000Z"), (1_795_000_323.123, "2026-11-18T11:12:03.123Z"),
            (1_795_000_323.9995, "2026-11-18T11:12:04.000Z"), (1_795_000_323.9994, "2026-11-18T11:12:03.999Z"),
            (1_795_000_323.0005, "2026-11-18T11:12:03.000Z"), (951_782_400.5, "2000-02-29T00:00:00.500Z"),
            (4_102_444_799.9999, "2100-01-01T00:00:00.000Z"), (-0.25, "1969-12-31T23:59:59.750Z"),
            (-1, "1969-12-31T23:59:59.000Z"), (1_700_000_000.1234, "2023-11-14T22:13:20.123Z"),
            (1e9 + 0.0625, "2001-09-09T01:46:40.063Z"),
        ]
        for (t, text) in recorded { #expect(iso8601(unixSeconds: t, milliseconds: true) == text) }
    }

    /// Whole seconds, as profiles' calibration timestamps are written (FoundationEssentials'
    /// `.iso8601` before): rounded down to the second.
    @Test func iso8601Seconds() {
        #expect(iso8601(unixSeconds: 0, milliseconds: false) == "1970-01-01T00:00:00Z")
        #expect(iso8601(unixSeconds: 951_782_400, milliseconds: false) == "2000-02-29T00:00:00Z")
        #expect(iso8601(unixSeconds: 1_709_251_199, milliseconds: false) == "2024-02-29T23:59:59Z")
        #expect(iso8601(unixSeconds: -1, milliseconds: false) == "1969-12-31T23:59:59Z")
        #expect(iso8601(unixSeconds: 1_795_000_323.9995, milliseconds: false) == "2026-11-18T11:12:03Z")
        #expect(iso8601(unixSeconds: -0.25, milliseconds: false) == "1969-12-31T23:59:59Z")
    }

    /// The calendar agrees with the C library's from year 1 to 9999, leap days and centuries included.
    @Test func iso8601MatchesGmtime() {
        var rng = SplitMix64(seed: 8601)
        let first: Int64 = -62_135_596_800  // 0001-01-01T00:00:00Z
        let last: Int64 = 253_402_300_799  // 9999-12-31T23:59:59Z
        var samples: [Int64] = [first, last, 0, -1, 951_782_399, 951_868_800, 4_107_542_400, 4_107_542_399]
        for _ in 0..<20000 { samples.append(first + Int64(rng.unit() * Double(last - first))) }
        for s in samples { #expect(iso8601(unixSeconds: Double(s), milliseconds: false) == gmtime(s), "\(s)") }
    }

    @Test func iso8601NeverTraps() {
        #expect(iso8601(unixSeconds: .nan, milliseconds: true) == "nan")
        #expect(iso8601(unixSeconds: -.infinity, milliseconds: false) == "-inf")
        #expect(iso8601(unixSeconds: 1e300, milliseconds: true) == "1e+300")
        #expect(iso8601(unixSeconds: -62_135_596_801, milliseconds: false) == "0000-12-31T23:59:59Z")
    }
}

/// Issue 23: the one escaping rule for names, paths and radio-derived text on the terminal.
/// The spellings of durations and plain numbers in messages, in one place (issue 22).
@Suite struct DurationFormattingTests {
    @Test func durationsReadInSecondsAndSpellWholeMilliseconds() {
        #expect(Duration.milliseconds(1500).seconds == 1.5)
        #expect(Duration.seconds(-2).seconds == -2)
        #expect(Duration.seconds(2).formattedSeconds == "2 s")
        #expect(Duration.milliseconds(500).formattedSeconds == "0.5 s")
        #expect(Duration.microseconds(1_250_900).formattedSeconds == "1.25 s")  // whole ms, truncated
    }

    @Test func cleanNumbersDropAWholeValuesPoint() {
        #expect(30.0.clean == "30")
        #expect((-2.0).clean == "-2")
        #expect(2.5.clean == "2.5")
        #expect(1e15.clean == "1000000000000000.0")
        #expect(1e16.clean == "1e+16")
        #expect(Double.nan.clean == "nan")
    }

    @Test func secondsAreWholeOrOneDecimal() {
        #expect(formatSeconds(10) == "10 s")
        #expect(formatSeconds(180) == "180 s")
        #expect(formatSeconds(2.25) == "2.3 s")  // 22.5 tenths: a half away from zero
        #expect(formatSeconds(0.05) == "0.1 s")
        // Past Int64, and infinity, spelled rather than trapping.
        #expect(formatSeconds(1e19) == "1e+19 s")
        #expect(formatSeconds(.infinity) == "inf s")
        #expect(formatSeconds(.nan) == "nan s")
    }

    @Test func millisecondsWithoutATrailingPointZero() {
        #expect(formatMilliseconds(100) == "100 ms")
        #expect(formatMilliseconds(20.625) == "20.625 ms")
        #expect(formatMilliseconds(37.5, decimals: 1) == "37.5 ms")
        #expect(formatMilliseconds(60, decimals: 1) == "60 ms")
        #expect(formatMilliseconds(0.625, decimals: 1) == "0.6 ms")
        #expect(formatMilliseconds(Double.infinity, decimals: 1) == "inf ms")
    }

    /// The monitor scan window's spelling (`interval 60 ms, window 30 ms`), once integer
    /// arithmetic in tenths of a millisecond, is the same for every slot count.
    @Test func slotMillisecondsInTenthsMatchTheIntegerSpelling() {
        for slots in 0...Int(UInt16.max) {
            let tenths = (slots * 625 + 50) / 100
            let old = tenths % 10 == 0 ? "\(tenths / 10) ms" : "\(tenths / 10).\(tenths % 10) ms"
            #expect(formatMilliseconds(Slots.milliseconds(slots), decimals: 1) == old)
        }
    }

    @Test func paddedHexForCodes() {
        #expect(paddedHex(0x0A, 4) == "000A")
        #expect(paddedHex(0x200A, 2) == "200A")
        #expect(paddedHex(0x3E, 4, uppercase: false) == "003e")
        #expect(HCIOpcode(rawValue: 0x0C03).hex == "0x0C03")
    }

    @Test func paddingNeverTruncates() {
        #expect("7".padded(3, left: true) == "  7")
        #expect("ab".padded(4) == "ab  ")
        #expect("long".padded(2) == "long")
        #expect("x".padded(-1, left: true) == "x")
        #expect(2.5.fixed(2, width: 6) == "  2.50")
    }

    @Test func roundingToDecimals() {
        #expect(1.23456.rounded(decimals: 3) == 1.235)
        #expect((-1.2345).rounded(decimals: 0) == -1)
        #expect(66.01549.rounded(decimals: 4) == (66.01549 * 10_000).rounded() / 10_000)
        var random = SplitMix64(seed: 3)
        for _ in 0..<10_000 {
            let t = Double.random(in: -1e6...1e6, using: &random)
            #expect(t.rounded(decimals: 3) == (t * 1000).rounded() / 1000)
        }
    }
}

@Suite struct TerminalEscapingTests {
    @Test func everyControlThatActsOnATerminalIsEscaped() {
        // ESC (colour), BEL, a newline that would forge a line, CSI as a C1 control, DEL, a
        // right-to-left override, an isolate, the line separator.
        let hostile = "bakery\u{1B}[31mRED\u{07}\nt+1.000 s enter   fake\u{9B}2J\u{7F}\u{202E}gnp.exe\u{2066}x\u{2028}"
        #expect(
            hostile.escapedForTerminal
                == "bakery\\u{1B}[31mRED\\u{7}\\u{A}t+1.000 s enter   fake\\u{9B}2J\\u{7F}\\u{202E}gnp.exe\\u{2066}x\\u{2028}"
        )
        #expect(!hostile.escapedForTerminal.unicodeScalars.contains { $0.isTerminalUnsafe })
    }

    @Test func printableTextIsLeftAsItIs() {
        for text in ["Store 12 bakery", "Bäckerei Müller – Filiale 12", "東京駅 出口", "emoji 🍞", "€ ‘quotes’ …", ""] {
            #expect(text.escapedForTerminal == text)
        }
    }

    @Test func linesKeepTheirOwnBreaks() {
        #expect("a\u{1B}\nb\r\tc".linesEscapedForTerminal == "a\\u{1B}\nb\\u{D}\tc")
        #expect("a\tb".escapedForTerminal == "a\\u{9}b")
    }

    /// JSON output escapes the same characters as \uXXXX: the same value for a parser, and a
    /// JSON line shown on a terminal stays inert.
    @Test func jsonStringsEscapeTheSameCharacters() {
        #expect(JSONWriter.quoted("a\u{9B}b\u{202E}c\u{2028}") == "\"a\\u009Bb\\u202Ec\\u2028\"")
    }
}
