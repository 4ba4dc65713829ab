import FoundationEssentials
import IBeaconCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes to stdout without buffering surprises (status lines must appear under systemd).
func printOut(_ s: String, terminator: String = "\n") { writeAll(STDOUT_FILENO, s + terminator) }

func printError(_ s: String) { writeAll(STDERR_FILENO, s + "\n") }

/// Writes `bytes` to stdout as they are (output gathered in blocks, e.g. `scan --json`).
func writeOut(_ bytes: [UInt8]) { writeAll(STDOUT_FILENO, bytes) }

/// `write(2)` until all of `s` is out, retrying EINTR; on another error (a closed pipe: EPIPE,
/// as SIGPIPE is ignored, see `runUntilSignalled`) the rest is dropped, as there is nowhere left
/// to report it; the process goes on, so advertising is still turned off on the way out.
func writeAll(_ fd: Int32, _ s: String) { writeAll(fd, Array(s.utf8)) }

func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    var done = 0
    while done < bytes.count {
        let n = bytes[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if n > 0 {
            done += n
        } else if n < 0 && errno == EINTR {
            continue
        } else {
            return
        }
    }
}

/// `text` with every control character escaped as `\u{1B}`, so that a name read from a file
/// cannot move the cursor, retitle the terminal or reorder what follows: C0 and C1 controls,
/// DEL, line and paragraph separators, and the bidirectional overrides and isolates.
func terminalSafe(_ text: String) -> String {
    var out = ""
    for scalar in text.unicodeScalars {
        let v = scalar.value
        let unsafe =
            v < 0x20 || (0x7F...0x9F).contains(v) || v == 0x2028 || v == 0x2029
            || (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v) || v == 0x200E || v == 0x200F
        if unsafe {
            out += "\\u{" + String(v, radix: 16, uppercase: true) + "}"
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}

/// True when stdout is a terminal (live tables, progress) rather than a pipe or file.
var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) != 0 }

/// A value a command's `--json` output can hold; converted to Core's `JSONValue`, so what is
/// printed is what the profile writer would write (an empty list is `[]`, never `{}`).
protocol JSONConvertible {
    var jsonValue: JSONValue { get }
}

extension JSONValue: JSONConvertible {
    var jsonValue: JSONValue { self }
}

extension String: JSONConvertible {
    var jsonValue: JSONValue { .string(self) }
}

extension Bool: JSONConvertible {
    var jsonValue: JSONValue { .bool(self) }
}

extension BinaryInteger where Self: JSONConvertible {
    var jsonValue: JSONValue {
        Int64(exactly: self).map(JSONValue.integer) ?? .number(Double(self), text: String(self))
    }
}

extension Int: JSONConvertible {}
extension Int8: JSONConvertible {}
extension Int16: JSONConvertible {}
extension Int32: JSONConvertible {}
extension Int64: JSONConvertible {}
extension UInt8: JSONConvertible {}
extension UInt16: JSONConvertible {}
extension UInt32: JSONConvertible {}
extension UInt64: JSONConvertible {}

extension Double: JSONConvertible {
    /// Rounded to 4 decimals (finer than any measurement here), written in the shortest form
    /// that reads back the same: `-59.25`, `0.1`, `3.0`. NaN and infinity are `null`.
    var jsonValue: JSONValue {
        guard isFinite else { return .null }
        let rounded = (self * 10_000).rounded() / 10_000
        guard rounded.isFinite else { return .number(self, text: description) }
        return .number(rounded, text: (rounded == 0 ? 0 : rounded).description)
    }
}

extension Optional: JSONConvertible where Wrapped: JSONConvertible {
    var jsonValue: JSONValue { self?.jsonValue ?? .null }
}

extension Array: JSONConvertible where Element: JSONConvertible {
    var jsonValue: JSONValue { .array(map(\.jsonValue)) }
}

/// Ordered members of a JSON object, as the commands write them.
typealias JSONPairs = [(String, (any JSONConvertible)?)]

/// A JSON object from ordered pairs (scripts see a stable key order); nil values are `null`.
func jsonObject(_ pairs: KeyValuePairs<String, (any JSONConvertible)?>) -> JSONValue {
    jsonObject(pairs.map { ($0.key, $0.value) })
}

func jsonObject(_ pairs: JSONPairs) -> JSONValue {
    .object(JSONObject(pairs.map { (key: $0.0, value: $0.1?.jsonValue ?? .null) }))
}

/// One compact JSON object on one line.
func jsonLine(_ pairs: KeyValuePairs<String, (any JSONConvertible)?>) -> String {
    jsonObject(pairs).compactText()
}

func jsonLine(_ pairs: JSONPairs) -> String { jsonObject(pairs).compactText() }

/// A JSON string literal (the profile writer's escaping, so both agree).
func jsonString(_ s: String) -> String { JSONWriter.quoted(s) }

/// Writes one compact JSON object straight into bytes, spelled exactly as `jsonLine` spells
/// the same pairs. For output written per report: `scan --json` over a capture prints hundreds
/// of thousands of lines, and building a `JSONValue` per line costs more than reading and
/// decoding the capture. Use `JSONLineBuilder.append(to:maximumLength:)`.
struct JSONLineBuilder {
    private let p: UnsafeMutablePointer<UInt8>
    private let capacity: Int
    private(set) var count = 0
    private var empty = true

    private init(_ p: UnsafeMutablePointer<UInt8>, capacity: Int) {
        self.p = p
        self.capacity = capacity
    }

    /// Appends the object `body` writes, and a newline, to `buffer`. `maximumLength` bounds what
    /// `body` writes (ASCII keys and values; strings that need escaping count 6 bytes a byte).
    static func append(to buffer: inout [UInt8], maximumLength: Int, _ body: (inout JSONLineBuilder) -> Void) {
        // Written into scratch memory and copied once: zero-filling `buffer` and trimming it
        // afterwards cost more than the copy.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: maximumLength + 3) { scratch in
            guard let base = scratch.baseAddress else { return }
            var line = JSONLineBuilder(base, capacity: maximumLength + 3)
            line.byte(UInt8(ascii: "{"))
            body(&line)
            line.byte(UInt8(ascii: "}"))
            line.byte(0x0A)
            buffer.append(contentsOf: UnsafeBufferPointer(start: base, count: line.count))
        }
    }

    @inline(__always) private mutating func byte(_ b: UInt8) {
        guard count < capacity else { return }  // bounded by maximumLength: never reached
        p[count] = b
        count += 1
    }

    private mutating func bytes(_ s: StaticString) {
        copy(UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    @inline(__always) private mutating func copy(_ source: UnsafeBufferPointer<UInt8>) {
        guard let base = source.baseAddress, source.count <= capacity - count else { return }
        (p + count).update(from: base, count: source.count)
        count += source.count
    }

    private mutating func key(_ name: StaticString) {
        // `,"name":` with one bounds check: eleven keys a line.
        let n = name.utf8CodeUnitCount
        guard n + 4 <= capacity - count else { return }  // bounded by maximumLength
        var q = p + count
        if !empty {
            q[0] = UInt8(ascii: ",")
            q += 1
        }
        empty = false
        q[0] = UInt8(ascii: "\"")
        (q + 1).update(from: name.utf8Start, count: n)
        q[n + 1] = UInt8(ascii: "\"")
        q[n + 2] = UInt8(ascii: ":")
        count = q + n + 3 - p
    }

    private mutating func null() { bytes("null") }

    mutating func string(_ name: StaticString, _ value: String?) {
        key(name)
        guard let value else { return null() }
        // Printable ASCII without quote or backslash is written as it is; anything else is escaped
        // by the profile writer's rules.
        let copied = value.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
            guard utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }) else { return false }
            byte(UInt8(ascii: "\""))
            copy(utf8)
            byte(UInt8(ascii: "\""))
            return true
        }
        if copied != true {
            for b in JSONWriter.quoted(value).utf8 { byte(b) }
        }
    }

    mutating func integer(_ name: StaticString, _ value: Int?) {
        key(name)
        guard let value else { return null() }
        digits(value)
    }

    private mutating func digits(_ value: Int) {
        guard value != Int.min else { return bytes("-9223372036854775808") }
        var v = value
        if v < 0 {
            byte(UInt8(ascii: "-"))
            v = -v
        }
        var divisor = 1
        while divisor <= v / 10 { divisor *= 10 }
        while divisor > 0 {
            byte(UInt8(ascii: "0") + UInt8(v / divisor % 10))
            divisor /= 10
        }
    }

    /// A number as the `Double` conversion of `jsonLine` writes it: rounded to `decimals` (≤ 4)
    /// places, in the shortest form that reads back the same (`66.015`, `3.0`, `0.5012`).
    mutating func number(_ name: StaticString, _ value: Double?, decimals: Int = 4) {
        key(name)
        guard let value else { return null() }
        var scale = 1
        for _ in 0..<min(decimals, 4) { scale *= 10 }
        let scaled = (value * Double(scale)).rounded()
        // Up to 15 significant digits the shortest form of the nearest double is the decimal itself.
        guard scaled.isFinite, abs(scaled) < 1e15 else {
            guard case .number(_, let text) = value.jsonValue else { return null() }
            for b in text.utf8 { byte(b) }
            return
        }
        var m = Int(scaled)
        if m < 0 {
            byte(UInt8(ascii: "-"))
            m = -m
        }
        digits(m / scale)
        byte(UInt8(ascii: "."))
        var fraction = m % scale
        var places = scale / 10
        if fraction == 0 { return byte(UInt8(ascii: "0")) }
        while fraction > 0 {
            byte(UInt8(ascii: "0") + UInt8(fraction / places))
            fraction %= places
            places /= 10
        }
    }

    /// Bytes as lowercase hex, like `[UInt8].hexString`.
    mutating func hex(_ name: StaticString, _ data: [UInt8]) {
        key(name)
        byte(UInt8(ascii: "\""))
        data.withUnsafeBufferPointer { source in
            guard 2 * source.count <= capacity - count else { return }  // bounded by maximumLength
            var q = p + count
            for b in source {
                q[0] = Self.hexDigit(b >> 4, upper: false)
                q[1] = Self.hexDigit(b & 0xF, upper: false)
                q += 2
            }
            count += 2 * source.count
        }
        byte(UInt8(ascii: "\""))
    }

    /// A Bluetooth address as `BDAddress.description` prints it (`AA:BB:CC:DD:EE:FF`).
    mutating func address(_ name: StaticString, _ address: BDAddress) {
        key(name)
        byte(UInt8(ascii: "\""))
        var first = true
        for b in address.bytes.reversed() {
            if !first { byte(UInt8(ascii: ":")) }
            first = false
            byte(Self.hexDigit(b >> 4, upper: true))
            byte(Self.hexDigit(b & 0xF, upper: true))
        }
        byte(UInt8(ascii: "\""))
    }

    /// A UUID as `IBeacon.uuidString` prints it (upper-case 8-4-4-4-12); null for nil.
    mutating func uuid(_ name: StaticString, _ uuid: UUID?) {
        key(name)
        guard let uuid else { return null() }
        guard 38 <= capacity - count else { return }  // bounded by maximumLength
        let start = p + count
        start[0] = UInt8(ascii: "\"")
        start[37] = UInt8(ascii: "\"")
        withUnsafeBytes(of: uuid.uuid) { bytes in
            // Byte k starts at column 1 + 2k, plus one for each dash before it (after bytes 3, 5, 7, 9).
            var q = start + 1
            for k in 0..<16 {
                if k == 4 || k == 6 || k == 8 || k == 10 {
                    q[0] = UInt8(ascii: "-")
                    q += 1
                }
                q[0] = Self.hexDigit(bytes[k] >> 4, upper: true)
                q[1] = Self.hexDigit(bytes[k] & 0xF, upper: true)
                q += 2
            }
        }
        count += 38
    }

    /// The hex digit of `v` (0…15), without a branch: report data is random, and a branch on
    /// each digit is mispredicted half the time.
    @inline(__always) private static func hexDigit(_ v: UInt8, upper: Bool) -> UInt8 {
        let letter = (UInt8(9) &- v) >> 7  // 1 for 10…15, else 0
        return UInt8(ascii: "0") &+ v &+ letter &* (upper ? 7 : 39)
    }
}
