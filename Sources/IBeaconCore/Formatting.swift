extension Double {
    /// The value with exactly `decimals` digits after the point (`"%*.*f"` with `width`, spaces
    /// on the left): |value| × 10^decimals rounded to the nearest integer, a half away from zero
    /// (Swift's `rounded()`, as every `--json` number is rounded), no `-` on a value that rounds
    /// to zero, `nan`/`inf`/`-inf`. The one fixed-decimals spelling of the project, for text and
    /// JSON alike (`JSONValue.decimal`), so a value printed and the same value written to a file
    /// read the same. Written here so that no module needs Foundation's `String(format:)`.
    ///
    /// `decimals` is clamped to 0…15; from 9 × 10^15 units of the last place up (past the
    /// integers a `Double` holds exactly) the value is spelled as Swift's shortest round-trip
    /// form.
    public func fixed(_ decimals: Int, width: Int = 0) -> String {
        let text = fixedText(max(0, min(decimals, 15)))
        return text.padded(width, left: true)
    }

    /// `fixed(decimals)` with its sign always written, as `%+.Nf` (a change: `+1.5`, `-0.3`):
    /// a value that rounds to zero is `+0.0`, never `-0.0` (-0.04 → `+0.0`).
    public func signedFixed(_ decimals: Int) -> String {
        let text = fixed(decimals)
        return text.hasPrefix("-") ? text : "+" + text
    }

    private func fixedText(_ digits: Int) -> String {
        guard isFinite else { return isNaN ? "nan" : (self < 0 ? "-inf" : "inf") }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }  // exact up to 10^22
        let units = (abs(self) * scale).rounded()
        guard units < 9e15 else { return description }
        let n = UInt64(units)
        let sign = self < 0 && n != 0 ? "-" : ""
        guard digits > 0 else { return sign + String(n) }
        let unit = UInt64(scale)
        let fraction = String(n % unit)
        return sign + String(n / unit) + "." + String(repeating: "0", count: digits - fraction.count) + fraction
    }
}

extension Double {
    /// `30` rather than `30.0`; other values as they are (`2.5`, `1e+20`): a number as the user
    /// would write it.
    public var clean: String { self == rounded() && abs(self) < 1e15 ? String(Int64(self)) : String(self) }

    /// The value rounded to `decimals` places, a half away from zero (`(v × 10^decimals)
    /// .rounded() / 10^decimals`): what a `--json` time (3 places) or number (4) holds.
    @inlinable public func rounded(decimals: Int) -> Double {
        var scale = 1.0
        for _ in 0..<max(0, decimals) { scale *= 10 }
        return (self * scale).rounded() / scale
    }
}

extension String {
    /// Padded with spaces to `width` characters, on the left when `left` is set (right-aligned
    /// numbers); never truncated.
    public func padded(_ width: Int, left: Bool = false) -> String {
        let pad = String(repeating: " ", count: max(0, width - count))
        return left ? pad + self : self + pad
    }
}

/// A duration in seconds for messages: `12 s` when whole, else one decimal (`2.5 s`).
public func formatSeconds(_ s: Double) -> String {
    // Past Int64 (and for infinity) as `fixed` spells it, rather than trapping.
    s == s.rounded() && abs(s) < 9e18 ? "\(Int64(s)) s" : "\(s.fixed(1)) s"
}

extension Duration {
    /// The duration in seconds, as a `Double` (what clocks and `--json` times are compared in).
    public var seconds: Double {
        let (s, attos) = components
        return Double(s) + Double(attos) / 1e18
    }

    /// `2 s`, `0.5 s`: whole milliseconds, without a trailing `.0`.
    public var formattedSeconds: String {
        let (s, attos) = components
        let ms = s * 1000 + attos / 1_000_000_000_000_000
        if ms % 1000 == 0 { return "\(ms / 1000) s" }
        return "\(Double(ms) / 1000) s"
    }
}

/// Milliseconds for messages, without a trailing `.0` (`100 ms`, `37.5 ms`, `0.625 ms`:
/// multiples of a 0.625 ms slot are exact in binary); with `decimals`, rounded to that many
/// places first (`0.6 ms` for 0.625 with one decimal).
public func formatMilliseconds(_ ms: Double, decimals: Int? = nil) -> String {
    guard let decimals, ms.isFinite else { return "\(ms.clean) ms" }
    var text = ms.fixed(decimals)
    if text.contains(".") {
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
    }
    return text + " ms"
}

/// `v` in hex with at least `width` digits, uppercase unless asked (`paddedHex(0x0A, 4)` is `000A`):
/// codes and opcodes in messages.
func paddedHex(_ v: UInt32, _ width: Int, uppercase: Bool = true) -> String {
    let s = String(v, radix: 16, uppercase: uppercase)
    return String(repeating: "0", count: max(0, width - s.count)) + s
}

/// A UTC time in ISO 8601: `2026-11-24T07:12:03Z`, or with `milliseconds`
/// `2026-11-24T07:12:03.123Z` (the fraction rounded to the nearest millisecond, a half up, and
/// 999.5 ms carried into the next second). Without milliseconds the time is rounded down to
/// its second. Proleptic Gregorian calendar and no leap seconds, as `gmtime` counts; a year
/// before 0 or after 9999 is written with as many digits as it needs. The one ISO-8601
/// spelling of the project (calibration timestamps, monitor events); hand-written because
/// FoundationEssentials' `Date.ISO8601FormatStyle` truncates the milliseconds of the nearest
/// `Double` (`…03.123` prints `…03.122`). Non-finite input is spelled as the `Double` is.
public func iso8601(unixSeconds: Double, milliseconds: Bool) -> String {
    // ±1e15 s is ±31 million years: far past any clock, and still exact in Int64 arithmetic.
    guard unixSeconds.isFinite, abs(unixSeconds) < 1e15 else { return unixSeconds.description }
    let whole = unixSeconds.rounded(.down)
    var seconds = Int64(whole)
    var millis: Int64 = 0
    if milliseconds {
        millis = Int64(((unixSeconds - whole) * 1000).rounded())
        if millis == 1000 {
            millis = 0
            seconds += 1
        }
    }
    let (days, secondOfDay) = floorDivision(seconds, 86_400)
    let (year, month, day) = civilDate(daysSince1970: days)
    func pad(_ v: Int64, _ n: Int) -> String {
        let s = String(v.magnitude)
        return (v < 0 ? "-" : "") + String(repeating: "0", count: max(0, n - s.count)) + s
    }
    let time = "\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))"
    return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T" + time + (milliseconds ? ".\(pad(millis, 3))Z" : "Z")
}

/// Quotient rounded down and a remainder in 0..<divisor (`divisor` > 0).
private func floorDivision(_ a: Int64, _ divisor: Int64) -> (Int64, Int64) {
    let q = a / divisor
    let r = a % divisor
    return r < 0 ? (q - 1, r + divisor) : (q, r)
}

/// Year, month (1…12) and day (1…31) of a day counted from 1970-01-01, in the proleptic
/// Gregorian calendar (H. Hinnant's `civil_from_days`: eras of 400 years starting on 1 March).
private func civilDate(daysSince1970: Int64) -> (year: Int64, month: Int64, day: Int64) {
    let (era, dayOfEra) = floorDivision(daysSince1970 + 719_468, 146_097)
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)  // from 1 March
    let shiftedMonth = (5 * dayOfYear + 2) / 153  // 0 = March
    let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
    let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
    return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
}

extension Unicode.Scalar {
    /// A character that acts on a terminal or a log line instead of being shown: C0 controls
    /// (newline, ESC, BEL…), DEL, C1 controls (U+0080–U+009F: CSI, OSC…), the line and
    /// paragraph separators U+2028/U+2029, and the bidirectional controls that reorder what
    /// follows (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069).
    public var isTerminalUnsafe: Bool {
        switch value {
        case 0..<0x20, 0x7F...0x9F, 0x061C, 0x200E, 0x200F, 0x2028...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}

extension String {
    /// The text as it may reach a terminal, a log or the journal: every `isTerminalUnsafe`
    /// character written as `\u{1B}` (uppercase hex, Swift's spelling), everything else as it
    /// is. The one rule for every name, path or radio-derived string ibeacon prints or logs: a
    /// profile's `name` or a file name cannot colour the screen, retitle the terminal, hide text
    /// behind a bidi override, or start a line that reads like an event or a log entry.
    public var escapedForTerminal: String {
        // Fast path: every unsafe character's UTF-8 starts with a byte below 0x20, 0x7F, 0xC2
        // (U+0080–U+00BF), 0xD8 (U+061C) or 0xE2 (U+2000–U+2FFF).
        guard utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 || $0 == 0xD8 || $0 == 0xE2 }) else {
            return self
        }
        var out = ""
        out.unicodeScalars.reserveCapacity(unicodeScalars.count)
        for scalar in unicodeScalars {
            if scalar.isTerminalUnsafe {
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// `escapedForTerminal` for each line of a text whose line breaks and tabs are its own (a
    /// table, tab-separated columns, a message with an indented list): those are kept, anything
    /// else unsafe is escaped. A value that must not add a line or a column is escaped with
    /// `escapedForTerminal` where it is put in.
    public var linesEscapedForTerminal: String {
        guard utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 || $0 == 0xD8 || $0 == 0xE2 }) else {
            return self
        }
        return split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.split(separator: "\t", omittingEmptySubsequences: false).map { String($0).escapedForTerminal }
                .joined(separator: "\t")
        }.joined(separator: "\n")
    }
}
