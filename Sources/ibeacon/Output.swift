import FoundationEssentials
import IBeaconCore
import IBeaconHost
import IBeaconTransports

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes to stdout without buffering surprises (status lines must appear under systemd).
/// Writes a text to stdout, every line escaped by Core's one rule (`linesEscapedForTerminal`):
/// whatever names, paths or radio-derived strings it holds cannot act on the terminal. The only
/// control sequences ibeacon sends on purpose go through `printTerminalControl`.
func printOut(_ s: String, terminator: String = "\n") {
    writeAll(STDOUT_FILENO, s.linesEscapedForTerminal + terminator)
}

/// `control` (cursor movement, clearing: the live table and progress line) sent as it is,
/// then `text` escaped as `printOut` does.
func printTerminalControl(_ control: String, _ text: String, terminator: String = "\n") {
    writeAll(STDOUT_FILENO, control + text.linesEscapedForTerminal + terminator)
}

/// Writes a message to stderr, escaped as `printOut` does.
func printError(_ s: String) { writeAll(STDERR_FILENO, s.linesEscapedForTerminal + "\n") }

/// `write(2)` until all of `s` is out, retrying EINTR; on another error (a closed pipe: EPIPE,
/// as SIGPIPE is ignored, see `runUntilSignalled`) the rest is dropped, as there is nowhere left
/// to report it; the process goes on, so advertising is still turned off on the way out.
func writeAll(_ fd: Int32, _ s: String) { writeAll(fd, Array(s.utf8)) }

func writeAll(_ fd: Int32, _ bytes: [UInt8]) { writeAll(fd, bytes[...]) }

func writeAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) {
    var done = bytes.startIndex
    while done < bytes.endIndex {
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

/// `text` with every character that acts on a terminal escaped (Core's `escapedForTerminal`).
func terminalSafe(_ text: String) -> String { text.escapedForTerminal }

/// True when stdout is a terminal (live tables, progress) rather than a pipe or file.
var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) != 0 }

/// Columns of the terminal stdout is drawn in: its size now (`TIOCGWINSZ`, so a resized window
/// is followed), else `$COLUMNS`, else 80.
func terminalWidth() -> Int {
    if let columns = Sys.terminalColumns(STDOUT_FILENO) { return columns }
    if let text = ProcessContext.variable("COLUMNS"), let columns = Int(text), columns > 0 {
        return columns
    }
    return 80
}

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
        let start = buffer.count
        let written = write(into: &buffer, at: start, maximumLength: maximumLength, body)
        buffer.removeLast(buffer.count - start - written)
    }

    /// Writes the object `body` writes, and a newline, into `buffer` from `offset` (growing it
    /// when fewer than `maximumLength` + 3 bytes follow), and returns how many bytes it wrote.
    /// Straight into the buffer: building a line elsewhere and appending it cost a copy a line.
    static func write(
        into buffer: inout [UInt8], at offset: Int, maximumLength: Int, _ body: (inout JSONLineBuilder) -> Void
    ) -> Int {
        let capacity = maximumLength + 3
        let offset = min(max(offset, 0), buffer.count)
        if buffer.count - offset < capacity {
            buffer.append(contentsOf: repeatElement(0, count: capacity - (buffer.count - offset)))
        }
        return buffer.withUnsafeMutableBufferPointer { storage in
            guard let base = storage.baseAddress else { return 0 }
            var line = JSONLineBuilder(base + offset, capacity: capacity)
            line.byte(UInt8(ascii: "{"))
            body(&line)
            line.byte(UInt8(ascii: "}"))
            line.byte(0x0A)
            return line.count
        }
    }

    /// The object `body` writes, as bytes without the braces and newline: the members, for a
    /// `JSONTextTable`.
    static func members(maximumLength: Int, _ body: (inout JSONLineBuilder) -> Void) -> [UInt8] {
        var line: [UInt8] = []
        append(to: &line, maximumLength: maximumLength, body)
        return Array(line.dropFirst().dropLast(2))
    }

    @inline(__always) private mutating func byte(_ b: UInt8) {
        guard count < capacity else { return }  // bounded by maximumLength: never reached
        p[count] = b
        count += 1
    }

    @inline(__always) private mutating func bytes(_ s: StaticString) {
        copy(UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    @inline(__always) private mutating func copy(_ source: UnsafeBufferPointer<UInt8>) {
        guard let base = source.baseAddress, source.count <= capacity - count else { return }
        (p + count).update(from: base, count: source.count)
        count += source.count
    }

    @inline(__always) private mutating func key(_ name: StaticString) {
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

    @inline(__always) private mutating func digits(_ value: Int) {
        // At most a sign and 19 digits; written from the last digit back, dividing by the
        // constant 10 (a multiplication) rather than by a power of ten per digit.
        guard 20 <= capacity - count else { return }  // bounded by maximumLength
        if value < 0 {
            p[count] = UInt8(ascii: "-")
            count += 1
        }
        var v = value.magnitude
        if v < 100 {
            // RSSI, measured power, most majors and minors.
            if v >= 10 {
                p[count] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v / 10)
                count += 1
            }
            p[count] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v % 10)
            count += 1
            return
        }
        var length = 1
        var rest = v / 10
        while rest > 0 {
            length += 1
            rest /= 10
        }
        var q = p + count + length
        repeat {
            q -= 1
            q[0] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v % 10)
            v /= 10
        } while v > 0
        count += length
    }

    /// A number as the `Double` conversion of `jsonLine` writes it: rounded to `decimals` (≤ 4)
    /// places, in the shortest form that reads back the same (`66.015`, `3.0`, `0.5012`).
    @inline(__always) mutating func number(_ name: StaticString, _ value: Double?, decimals: Int = 4) {
        key(name)
        guard let value else { return null() }
        let places = min(max(decimals, 1), 4)
        var scale = 1
        for _ in 0..<places { scale *= 10 }
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
        var fraction = m % scale
        guard places + 1 <= capacity - count else { return }  // bounded by maximumLength
        p[count] = UInt8(ascii: ".")
        guard fraction != 0 else {
            p[count + 1] = UInt8(ascii: "0")
            count += 2
            return
        }
        // `places` digits with leading zeros, then without the trailing zeros.
        var i = count + places
        while i > count {
            p[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: fraction % 10)
            fraction /= 10
            i -= 1
        }
        var end = count + places
        while p[end] == UInt8(ascii: "0") { end -= 1 }
        count = end + 1
    }

    /// Writes `name` and a value spelled as JSON already (from a `JSONTextTable`).
    mutating func json(_ name: StaticString, _ value: UnsafeBufferPointer<UInt8>) {
        key(name)
        copy(value)
    }

    /// Writes members spelled as JSON already (`"a":1,"b":2`, from a `JSONTextTable`).
    mutating func members(_ text: UnsafeBufferPointer<UInt8>) {
        guard text.count + 1 <= capacity - count else { return }  // bounded by maximumLength
        if !empty { byte(UInt8(ascii: ",")) }
        empty = false
        copy(text)
    }

    /// Bytes as lowercase hex, like `[UInt8].hexString`.
    mutating func hex(_ name: StaticString, _ data: [UInt8]) { hex(name, data[...]) }

    mutating func hex(_ name: StaticString, _ data: ArraySlice<UInt8>) {
        key(name)
        byte(UInt8(ascii: "\""))
        data.withUnsafeBufferPointer { source in
            guard 2 * source.count <= capacity - count else { return }  // bounded by maximumLength
            var q = p + count
            var i = 0
            while i + 4 <= source.count {
                let word =
                    UInt32(source[i]) | UInt32(source[i + 1]) << 8 | UInt32(source[i + 2]) << 16
                    | UInt32(source[i + 3]) << 24
                UnsafeMutableRawPointer(q).storeBytes(
                    of: Self.hexDigits(word, upper: false).littleEndian, as: UInt64.self)
                q += 8
                i += 4
            }
            while i < source.count {
                q[0] = Self.hexDigit(source[i] >> 4, upper: false)
                q[1] = Self.hexDigit(source[i] & 0xF, upper: false)
                q += 2
                i += 1
            }
            count += 2 * source.count
        }
        byte(UInt8(ascii: "\""))
    }

    /// A Bluetooth address as `BDAddress.description` prints it (`"AA:BB:CC:DD:EE:FF"`).
    mutating func address(_ name: StaticString, _ address: BDAddress) {
        key(name)
        guard 19 <= capacity - count else { return }  // bounded by maximumLength
        let q = p + count
        q[0] = UInt8(ascii: "\"")
        for k in 0..<6 {
            let b = UInt8(truncatingIfNeeded: address.uint48 >> (8 * UInt64(5 - k)))
            q[1 + 3 * k] = Self.hexDigit(b >> 4, upper: true)
            q[2 + 3 * k] = Self.hexDigit(b & 0xF, upper: true)
            q[3 + 3 * k] = UInt8(ascii: ":")
        }
        q[18] = UInt8(ascii: "\"")  // over the colon after the last octet
        count += 19
    }

    /// A UUID as `IBeacon.uuidString` prints it (upper-case 8-4-4-4-12); null for nil.
    mutating func uuid(_ name: StaticString, _ uuid: UUID?) {
        key(name)
        guard let uuid else { return null() }
        guard 38 <= capacity - count else { return }  // bounded by maximumLength
        let q = p + count
        q[0] = UInt8(ascii: "\"")
        q[9] = UInt8(ascii: "-")
        q[14] = UInt8(ascii: "-")
        q[19] = UInt8(ascii: "-")
        q[24] = UInt8(ascii: "-")
        q[37] = UInt8(ascii: "\"")
        let u = uuid.uuid
        // Bytes 0-1 at column 1, 2-3 at 5, 4-5 at 10, 6-7 at 15, 8-9 at 20, 10-11 at 25,
        // 12-13 at 29, 14-15 at 33: four characters a store.
        let a = Self.hexDigits(UInt32(u.0) | UInt32(u.1) << 8 | UInt32(u.2) << 16 | UInt32(u.3) << 24, upper: true)
        let b = Self.hexDigits(UInt32(u.4) | UInt32(u.5) << 8 | UInt32(u.6) << 16 | UInt32(u.7) << 24, upper: true)
        let c = Self.hexDigits(UInt32(u.8) | UInt32(u.9) << 8 | UInt32(u.10) << 16 | UInt32(u.11) << 24, upper: true)
        let d = Self.hexDigits(
            UInt32(u.12) | UInt32(u.13) << 8 | UInt32(u.14) << 16 | UInt32(u.15) << 24, upper: true)
        let raw = UnsafeMutableRawPointer(q)
        func store(_ chars: UInt64, at offset: Int) {
            raw.storeBytes(of: UInt32(truncatingIfNeeded: chars).littleEndian, toByteOffset: offset, as: UInt32.self)
        }
        store(a, at: 1)
        store(a >> 32, at: 5)
        store(b, at: 10)
        store(b >> 32, at: 15)
        store(c, at: 20)
        store(c >> 32, at: 25)
        store(d, at: 29)
        store(d >> 32, at: 33)
        count += 38
    }

    /// The eight hex digits of the four bytes of `word` (first byte in the low bits), first
    /// character in the low byte: every digit at once in the lanes of one integer.
    @inline(__always) static func hexDigits(_ word: UInt32, upper: Bool) -> UInt64 {
        var v = UInt64(word)
        v = (v | v << 16) & 0x0000_FFFF_0000_FFFF  // bytes 0-1 and 2-3 in 32-bit lanes
        v = (v | v << 8) & 0x00FF_00FF_00FF_00FF  // each byte in its own 16-bit lane
        // High nibble first (the lower byte of a lane), then the low nibble.
        let nibbles = (v >> 4) & 0x000F_000F_000F_000F | (v & 0x000F_000F_000F_000F) << 8
        let letters = ((nibbles &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101  // 1 for 10…15
        return nibbles &+ 0x3030_3030_3030_3030 &+ letters &* (upper ? 7 : 39)
    }

    /// The hex digit of `v` (0…15), without a branch: report data is random, and a branch on
    /// each digit is mispredicted half the time.
    @inline(__always) private static func hexDigit(_ v: UInt8, upper: Bool) -> UInt8 {
        let letter = (UInt8(9) &- v) >> 7  // 1 for 10…15, else 0
        return UInt8(ascii: "0") &+ v &+ letter &* (upper ? 7 : 39)
    }
}

/// JSON text written once and copied into many lines: entry `i` is the members (or value)
/// `JSONLineBuilder` wrote for the `i`th input, so a table gives exactly the builder's spelling.
struct JSONTextTable: Sendable {
    private let text: [UInt8]
    /// Entry `i` is `text[starts[i]..<starts[i + 1]]`.
    private let starts: [Int]

    /// The members `write` writes for every input in `inputs`, in order.
    init<Input>(_ inputs: some Sequence<Input>, maximumLength: Int, _ write: (Input, inout JSONLineBuilder) -> Void) {
        var text: [UInt8] = []
        var starts = [0]
        for input in inputs {
            text += JSONLineBuilder.members(maximumLength: maximumLength) { write(input, &$0) }
            starts.append(text.count)
        }
        self.text = text
        self.starts = starts
    }

    var count: Int { starts.count - 1 }

    /// Calls `body` with entry `i`; does nothing for an `i` outside the table.
    func withEntry(_ i: Int, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        guard i >= 0, i < count else { return }
        text.withUnsafeBufferPointer { all in
            body(UnsafeBufferPointer(rebasing: all[starts[i]..<starts[i + 1]]))
        }
    }
}

/// Lines waiting to be written to standard output, written in place into one buffer that is
/// reused from flush to flush.
struct PendingOutput: Sendable {
    private var storage: [UInt8] = []
    /// Bytes waiting.
    private(set) var count = 0

    /// Appends the JSON object `body` writes, as one line.
    mutating func appendLine(maximumLength: Int, _ body: (inout JSONLineBuilder) -> Void) {
        count += JSONLineBuilder.write(into: &storage, at: count, maximumLength: maximumLength, body)
    }

    /// Appends `text` as it is (a line built as a `JSONValue`, newline included).
    mutating func append(_ text: String) {
        let bytes = Array(text.utf8)
        if storage.count < count + bytes.count {
            storage += [UInt8](repeating: 0, count: count + bytes.count - storage.count)
        }
        storage.replaceSubrange(count..<(count + bytes.count), with: bytes)
        count += bytes.count
    }

    /// Writes what is waiting to standard output.
    mutating func flush() {
        guard count > 0 else { return }
        writeAll(STDOUT_FILENO, storage[0..<count])
        count = 0
    }
}
