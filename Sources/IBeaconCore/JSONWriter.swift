#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The project's one JSON writer: every JSON text ibeacon produces — a command's `--json`
/// lines, the profile files, MQTT payloads and discovery documents, the benchmark's result —
/// is spelled here, straight into bytes.
///
/// Fast because `scan --json --reports` over a capture prints hundreds of thousands of lines:
/// a line is written in place into a buffer sized once for it (`maximumLength`), with one
/// bounds check per key or value rather than per byte, branch-free hex digits, and no
/// intermediate `String` or `JSONValue`. `JSONValue`'s `compactText()` and `serialized()` go
/// through the same writer after bounding their length, so a value spelled either way reads
/// the same.
///
/// Spelling: keys in the order written; strings with `"`, `\` and every character that acts on
/// a terminal escaped (`\n`, `\t`… or `\u009B`, uppercase hex: `Unicode.Scalar.isTerminalUnsafe`);
/// integers in decimal; `Double`s rounded to at most 4 decimals in the shortest form that reads
/// back the same (`-59.25`, `3.0`); non-finite numbers `null`.
public struct JSONWriter {
    @usableFromInline let p: UnsafeMutablePointer<UInt8>
    @usableFromInline let capacity: Int
    /// Bytes written.
    @inlinable public var count: Int { position }
    @usableFromInline var position: Int
    /// No member written yet in the object being written (no comma before the next key).
    @usableFromInline var empty = true

    @usableFromInline init(_ p: UnsafeMutablePointer<UInt8>, capacity: Int) {
        self.p = p
        self.capacity = capacity
        self.position = 0
    }

    /// Appends the object `body` writes, and a newline, to `buffer`. `maximumLength` bounds what
    /// `body` writes (for a string, 6 bytes per UTF-8 byte and 2 for the quotes); what goes past
    /// it is dropped, never written out of bounds.
    @inlinable
    public static func append(to buffer: inout [UInt8], maximumLength: Int, _ body: (inout JSONWriter) -> Void) {
        let start = buffer.count
        let written = write(into: &buffer, at: start, maximumLength: maximumLength, body)
        buffer.removeLast(buffer.count - start - written)
    }

    /// Writes the object `body` writes, and a newline, into `buffer` from `offset` (growing it
    /// when fewer than `maximumLength` + 3 bytes follow), and returns how many bytes it wrote.
    /// Straight into the buffer: building a line elsewhere and appending it cost a copy a line.
    @inlinable
    public static func write(
        into buffer: inout [UInt8], at offset: Int, maximumLength: Int, _ body: (inout JSONWriter) -> Void
    ) -> Int {
        writeBytes(into: &buffer, at: offset, capacity: maximumLength + 3) { line in
            line.byte(UInt8(ascii: "{"))
            body(&line)
            line.byte(UInt8(ascii: "}"))
            line.byte(0x0A)
        }
    }

    /// What `body` writes (any JSON text, or part of one), at most `maximumLength` bytes.
    public static func bytes(maximumLength: Int, _ body: (inout JSONWriter) -> Void) -> [UInt8] {
        var buffer: [UInt8] = []
        let written = writeBytes(into: &buffer, at: 0, capacity: maximumLength, body)
        buffer.removeLast(buffer.count - written)
        return buffer
    }

    /// The members of the object `body` writes, without braces and newline (for a
    /// `JSONTextTable`).
    public static func members(maximumLength: Int, _ body: (inout JSONWriter) -> Void) -> [UInt8] {
        var line: [UInt8] = []
        append(to: &line, maximumLength: maximumLength, body)
        return Array(line.dropFirst().dropLast(2))
    }

    @inlinable
    static func writeBytes(
        into buffer: inout [UInt8], at offset: Int, capacity: Int, _ body: (inout JSONWriter) -> Void
    ) -> Int {
        let offset = min(max(offset, 0), buffer.count)
        if buffer.count - offset < capacity {
            buffer.append(contentsOf: repeatElement(0, count: capacity - (buffer.count - offset)))
        }
        return buffer.withUnsafeMutableBufferPointer { storage in
            guard let base = storage.baseAddress else { return 0 }
            var writer = JSONWriter(base + offset, capacity: capacity)
            body(&writer)
            return writer.count
        }
    }

    /// A JSON string literal of `s` (as `literal(_:)` writes it), for messages that quote a
    /// value.
    public static func quoted(_ s: String) -> String {
        String(decoding: bytes(maximumLength: 6 * s.utf8.count + 2) { $0.literal(s) }, as: UTF8.self)
    }

    // MARK: - Bytes

    @inlinable @inline(__always) mutating func byte(_ b: UInt8) {
        guard position < capacity else { return }  // bounded by maximumLength: never reached
        p[position] = b
        position += 1
    }

    @inlinable @inline(__always) mutating func bytes(_ s: StaticString) {
        copy(UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    @inlinable @inline(__always) mutating func copy(_ source: UnsafeBufferPointer<UInt8>) {
        guard let base = source.baseAddress, source.count <= capacity - position else { return }
        (p + position).update(from: base, count: source.count)
        position += source.count
    }

    /// A line feed (after `serialized()`'s document).
    public mutating func newline() { byte(0x0A) }

    @inlinable @inline(__always) mutating func key(_ name: StaticString) {
        // `,"name":` with one bounds check: eleven keys a line.
        let n = name.utf8CodeUnitCount
        guard n + 4 <= capacity - position else { return }  // bounded by maximumLength
        var q = p + position
        if !empty {
            q[0] = UInt8(ascii: ",")
            q += 1
        }
        empty = false
        q[0] = UInt8(ascii: "\"")
        (q + 1).update(from: name.utf8Start, count: n)
        q[n + 1] = UInt8(ascii: "\"")
        q[n + 2] = UInt8(ascii: ":")
        position = q + n + 3 - p
    }

    @inlinable mutating func null() { bytes("null") }

    // MARK: - Members

    /// `"name":"value"`, or `null` for nil.
    @inlinable
    public mutating func string(_ name: StaticString, _ value: String?) {
        key(name)
        guard let value else { return null() }
        literal(value)
    }

    /// `"name":value` in decimal, or `null` for nil.
    @inlinable
    public mutating func integer(_ name: StaticString, _ value: Int?) {
        key(name)
        guard let value else { return null() }
        digits(value)
    }

    /// `"name":value`, `value` spelled as `JSONConvertible`'s `Double` conversion writes it when
    /// rounded to `decimals` (1…4) places: the shortest form that reads back the same (`66.015`,
    /// `3.0`, `0.5012`); `null` for nil or a non-finite value.
    @inlinable @inline(__always)
    public mutating func number(_ name: StaticString, _ value: Double?, decimals: Int = 4) {
        key(name)
        guard let value else { return null() }
        number(value, decimals: decimals)
    }

    /// `"name":` and JSON text written already (an entry of a `JSONTextTable`).
    @inlinable
    public mutating func json(_ name: StaticString, _ value: UnsafeBufferPointer<UInt8>) {
        key(name)
        copy(value)
    }

    /// Members written already (`"a":1,"b":2`, an entry of a `JSONTextTable`).
    @inlinable
    public mutating func members(_ text: UnsafeBufferPointer<UInt8>) {
        guard text.count + 1 <= capacity - position else { return }  // bounded by maximumLength
        if !empty { byte(UInt8(ascii: ",")) }
        empty = false
        copy(text)
    }

    /// `"name":` and `value` written compactly (as `compactText()` spells it).
    public mutating func value(_ name: StaticString, _ value: JSONValue) {
        key(name)
        self.value(value)
    }

    /// Bytes as lowercase hex, like `[UInt8].hexString`.
    @inlinable
    public mutating func hex(_ name: StaticString, _ data: [UInt8]) { hex(name, data[...]) }

    @inlinable
    public mutating func hex(_ name: StaticString, _ data: ArraySlice<UInt8>) {
        key(name)
        byte(UInt8(ascii: "\""))
        data.withUnsafeBufferPointer { source in
            guard 2 * source.count <= capacity - position else { return }  // bounded by maximumLength
            var q = p + position
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
            position += 2 * source.count
        }
        byte(UInt8(ascii: "\""))
    }

    /// A Bluetooth address as `BDAddress.description` prints it (`"AA:BB:CC:DD:EE:FF"`).
    @inlinable
    public mutating func address(_ name: StaticString, _ address: BDAddress) {
        key(name)
        guard 19 <= capacity - position else { return }  // bounded by maximumLength
        let q = p + position
        q[0] = UInt8(ascii: "\"")
        for k in 0..<6 {
            let b = UInt8(truncatingIfNeeded: address.uint48 >> (8 * UInt64(5 - k)))
            q[1 + 3 * k] = Self.hexDigit(b >> 4, upper: true)
            q[2 + 3 * k] = Self.hexDigit(b & 0xF, upper: true)
            q[3 + 3 * k] = UInt8(ascii: ":")
        }
        q[18] = UInt8(ascii: "\"")  // over the colon after the last octet
        position += 19
    }

    /// A UUID as `UUID.uuidString` prints it (upper-case 8-4-4-4-12); null for nil.
    @inlinable
    public mutating func uuid(_ name: StaticString, _ uuid: UUID?) {
        key(name)
        guard let uuid else { return null() }
        guard 38 <= capacity - position else { return }  // bounded by maximumLength
        let q = p + position
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
        raw.storeBytes(of: UInt32(truncatingIfNeeded: a).littleEndian, toByteOffset: 1, as: UInt32.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: a >> 32).littleEndian, toByteOffset: 5, as: UInt32.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: b).littleEndian, toByteOffset: 10, as: UInt32.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: b >> 32).littleEndian, toByteOffset: 15, as: UInt32.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: c).littleEndian, toByteOffset: 20, as: UInt32.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: c >> 32).littleEndian, toByteOffset: 25, as: UInt32.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: d).littleEndian, toByteOffset: 29, as: UInt32.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: d >> 32).littleEndian, toByteOffset: 33, as: UInt32.self)
        position += 38
    }

    // MARK: - Values

    /// A string literal: printable ASCII without quote or backslash as it is, everything else
    /// by the escaping rules above.
    @inlinable
    public mutating func literal(_ value: String) {
        let copied = value.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
            guard utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }) else { return false }
            byte(UInt8(ascii: "\""))
            copy(utf8)
            byte(UInt8(ascii: "\""))
            return true
        }
        if copied != true { escapedLiteral(value) }
    }

    @usableFromInline mutating func escapedLiteral(_ value: String) {
        byte(UInt8(ascii: "\""))
        for u in value.unicodeScalars {
            switch u {
            case "\"": bytes("\\\"")
            case "\\": bytes("\\\\")
            case "\n": bytes("\\n")
            case "\r": bytes("\\r")
            case "\t": bytes("\\t")
            case "\u{08}": bytes("\\b")
            case "\u{0C}": bytes("\\f")
            // Every other character that acts on a terminal (C1, bidi, line separators) too:
            // the same value, and a JSON line shown on a terminal stays one inert line. All
            // are below U+10000: four digits.
            case _ where u.isTerminalUnsafe:
                bytes("\\u")
                for shift in stride(from: 12, through: 0, by: -4) {
                    byte(Self.hexDigit(UInt8(truncatingIfNeeded: u.value >> UInt32(shift)) & 0xF, upper: true))
                }
            default:
                UTF8.encode(u) { byte($0) }
            }
        }
        byte(UInt8(ascii: "\""))
    }

    /// `value` in decimal.
    @inlinable @inline(__always)
    public mutating func digits(_ value: Int) {
        // At most a sign and 19 digits; written from the last digit back, dividing by the
        // constant 10 (a multiplication) rather than by a power of ten per digit.
        guard 20 <= capacity - position else { return }  // bounded by maximumLength
        if value < 0 {
            p[position] = UInt8(ascii: "-")
            position += 1
        }
        var v = value.magnitude
        if v < 100 {
            // RSSI, measured power, most majors and minors.
            if v >= 10 {
                p[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v / 10)
                position += 1
            }
            p[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v % 10)
            position += 1
            return
        }
        var length = 1
        var rest = v / 10
        while rest > 0 {
            length += 1
            rest /= 10
        }
        var q = p + position + length
        repeat {
            q -= 1
            q[0] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v % 10)
            v /= 10
        } while v > 0
        position += length
    }

    /// `value` rounded to `decimals` (1…4) places, in the shortest form that reads back the
    /// same; `null` when not finite.
    @inlinable @inline(__always)
    public mutating func number(_ value: Double, decimals: Int = 4) {
        let places = min(max(decimals, 1), 4)
        var scale = 1
        for _ in 0..<places { scale *= 10 }
        let scaled = (value * Double(scale)).rounded()
        // Up to 15 significant digits the shortest form of the nearest double is the decimal itself.
        guard scaled.isFinite, abs(scaled) < 1e15 else { return slowNumber(value) }
        var m = Int(scaled)
        if m < 0 {
            byte(UInt8(ascii: "-"))
            m = -m
        }
        digits(m / scale)
        var fraction = m % scale
        guard places + 1 <= capacity - position else { return }  // bounded by maximumLength
        p[position] = UInt8(ascii: ".")
        guard fraction != 0 else {
            p[position + 1] = UInt8(ascii: "0")
            position += 2
            return
        }
        // `places` digits with leading zeros, then without the trailing zeros.
        var i = position + places
        while i > position {
            p[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: fraction % 10)
            fraction /= 10
            i -= 1
        }
        var end = position + places
        while p[end] == UInt8(ascii: "0") { end -= 1 }
        position = end + 1
    }

    /// Beyond 10^15 units of the last place: as the `Double` conversion spells it (4 decimals,
    /// shortest round-trip form: `1e+16`), `null` for NaN and infinity.
    @usableFromInline mutating func slowNumber(_ value: Double) {
        guard case .number(_, let text) = value.jsonValue else { return null() }
        for b in text.utf8 { byte(b) }
    }

    /// `value` compactly: no spaces, members and elements separated by commas.
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let b): b ? bytes("true") : bytes("false")
        case .integer(let v): digits(Int(v))
        case .number(let d, let text): numberText(d, text)
        case .string(let s): literal(s)
        case .array(let elements):
            byte(UInt8(ascii: "["))
            for (k, e) in elements.enumerated() {
                if k > 0 { byte(UInt8(ascii: ",")) }
                self.value(e)
            }
            byte(UInt8(ascii: "]"))
        case .object(let object):
            byte(UInt8(ascii: "{"))
            for (k, m) in object.members.enumerated() {
                if k > 0 { byte(UInt8(ascii: ",")) }
                literal(m.key)
                byte(UInt8(ascii: ":"))
                self.value(m.value)
            }
            byte(UInt8(ascii: "}"))
        }
    }

    /// `value` pretty: two-space indent from `indent` levels, `"key": value`, one member or
    /// element per line (`[]` and `{}` when empty); scalars as `value(_:)` writes them.
    public mutating func value(_ value: JSONValue, indent: Int) {
        switch value {
        case .array(let elements) where !elements.isEmpty:
            bytes("[\n")
            for (k, e) in elements.enumerated() {
                pad(indent + 1)
                self.value(e, indent: indent + 1)
                k + 1 < elements.count ? bytes(",\n") : bytes("\n")
            }
            pad(indent)
            byte(UInt8(ascii: "]"))
        case .object(let object) where !object.isEmpty:
            bytes("{\n")
            for (k, m) in object.members.enumerated() {
                pad(indent + 1)
                literal(m.key)
                bytes(": ")
                self.value(m.value, indent: indent + 1)
                k + 1 < object.count ? bytes(",\n") : bytes("\n")
            }
            pad(indent)
            byte(UInt8(ascii: "}"))
        default:
            self.value(value)
        }
    }

    /// A `.number`: its literal text when that is JSON number syntax, else the shortest
    /// round-trip form of the `Double` (JSON syntax too), `null` for NaN and infinity.
    mutating func numberText(_ d: Double, _ text: String) {
        if JSONValue.isValidNumber(text) {
            for b in text.utf8 { byte(b) }
        } else if d.isFinite {
            for b in d.description.utf8 { byte(b) }
        } else {
            null()
        }
    }

    mutating func pad(_ level: Int) {
        for _ in 0..<(2 * level) { byte(0x20) }
    }

    // MARK: - Hex digits

    /// The eight hex digits of the four bytes of `word` (first byte in the low bits), first
    /// character in the low byte: every digit at once in the lanes of one integer.
    @inlinable @inline(__always)
    public static func hexDigits(_ word: UInt32, upper: Bool) -> UInt64 {
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
    @inlinable @inline(__always)
    static func hexDigit(_ v: UInt8, upper: Bool) -> UInt8 {
        let letter = (UInt8(9) &- v) >> 7  // 1 for 10…15, else 0
        return UInt8(ascii: "0") &+ v &+ letter &* (upper ? 7 : 39)
    }
}

extension JSONValue {
    /// At least as many bytes as `JSONWriter` writes for this value: compact (`indent` nil) or
    /// pretty from `indent` levels. Strings position 6 bytes per UTF-8 byte (`\u009B` for a
    /// 2-byte character) and their quotes.
    func maximumLength(indent: Int?) -> Int {
        switch self {
        case .null, .bool: return 5
        case .integer: return 20
        case .number(_, let text): return max(text.utf8.count, 32)
        case .string(let s): return 6 * s.utf8.count + 2
        case .array(let elements):
            let inner = indent.map { $0 + 1 }
            let perElement = indent.map { 2 * ($0 + 1) + 2 } ?? 1
            return elements.reduce(4 + 2 * (indent ?? 0)) { $0 + perElement + $1.maximumLength(indent: inner) }
        case .object(let object):
            let inner = indent.map { $0 + 1 }
            let perMember = indent.map { 2 * ($0 + 1) + 4 } ?? 2
            return object.members.reduce(4 + 2 * (indent ?? 0)) {
                $0 + perMember + 6 * $1.key.utf8.count + 2 + $1.value.maximumLength(indent: inner)
            }
        }
    }
}

/// JSON text written once and copied into many lines: entry `i` is the members (or value)
/// `JSONWriter` wrote for the `i`th input, so a table gives exactly the writer's spelling.
public struct JSONTextTable: Sendable {
    @usableFromInline let text: [UInt8]
    /// Entry `i` is `text[starts[i]..<starts[i + 1]]`.
    @usableFromInline let starts: [Int]

    /// The members `write` writes for every input in `inputs`, in order.
    public init<Input>(
        _ inputs: some Sequence<Input>, maximumLength: Int, _ write: (Input, inout JSONWriter) -> Void
    ) {
        var text: [UInt8] = []
        var starts = [0]
        for input in inputs {
            text += JSONWriter.members(maximumLength: maximumLength) { write(input, &$0) }
            starts.append(text.count)
        }
        self.text = text
        self.starts = starts
    }

    @inlinable public var count: Int { starts.count - 1 }

    /// Calls `body` with entry `i`; does nothing for an `i` outside the table.
    @inlinable public func withEntry(_ i: Int, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        guard i >= 0, i < count else { return }
        text.withUnsafeBufferPointer { all in
            body(UnsafeBufferPointer(rebasing: all[starts[i]..<starts[i + 1]]))
        }
    }
}

/// JSON lines waiting to be written out, written in place into one buffer that is reused from
/// one `drain` to the next.
public struct JSONLineBuffer: Sendable {
    @usableFromInline var storage: [UInt8] = []
    @usableFromInline var length = 0
    /// Bytes waiting.
    @inlinable public var count: Int { length }

    public init() {}

    /// Appends the JSON object `body` writes, as one line.
    @inlinable
    public mutating func appendLine(maximumLength: Int, _ body: (inout JSONWriter) -> Void) {
        length += JSONWriter.write(into: &storage, at: length, maximumLength: maximumLength, body)
    }

    /// Appends `text` as it is (a line written as a `JSONValue`, newline included).
    public mutating func append(_ text: String) {
        let bytes = Array(text.utf8)
        if storage.count < length + bytes.count {
            storage += [UInt8](repeating: 0, count: length + bytes.count - storage.count)
        }
        storage.replaceSubrange(length..<(length + bytes.count), with: bytes)
        length += bytes.count
    }

    /// Hands what is waiting to `write` (when anything is) and empties the buffer.
    public mutating func drain(_ write: (ArraySlice<UInt8>) -> Void) {
        guard length > 0 else { return }
        write(storage[0..<length])
        length = 0
    }
}

/// A value a `--json` line or an MQTT payload can hold, converted to `JSONValue` (so an empty
/// list is `[]`, never `{}`, and numbers are spelled by one rule).
public protocol JSONConvertible {
    var jsonValue: JSONValue { get }
}

extension JSONValue: JSONConvertible {
    public var jsonValue: JSONValue { self }
}

extension String: JSONConvertible {
    public var jsonValue: JSONValue { .string(self) }
}

extension Bool: JSONConvertible {
    public var jsonValue: JSONValue { .bool(self) }
}

extension BinaryInteger where Self: JSONConvertible {
    public var jsonValue: JSONValue {
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
    public var jsonValue: JSONValue {
        guard isFinite else { return .null }
        let rounded = self.rounded(decimals: 4)
        guard rounded.isFinite else { return .number(self, text: description) }
        return .number(rounded, text: (rounded == 0 ? 0 : rounded).description)
    }
}

extension Optional: JSONConvertible where Wrapped: JSONConvertible {
    public var jsonValue: JSONValue { self?.jsonValue ?? .null }
}

extension Array: JSONConvertible where Element: JSONConvertible {
    public var jsonValue: JSONValue { .array(map(\.jsonValue)) }
}

/// Ordered members of a JSON object, as the commands write them.
public typealias JSONPairs = [(String, (any JSONConvertible)?)]

/// A JSON object from ordered pairs (scripts see a stable key order); nil values are `null`.
public func jsonObject(_ pairs: KeyValuePairs<String, (any JSONConvertible)?>) -> JSONValue {
    jsonObject(pairs.map { ($0.key, $0.value) })
}

public func jsonObject(_ pairs: JSONPairs) -> JSONValue {
    .object(JSONObject(pairs.map { (key: $0.0, value: $0.1?.jsonValue ?? .null) }))
}

/// One compact JSON object on one line (without the line feed).
public func jsonLine(_ pairs: KeyValuePairs<String, (any JSONConvertible)?>) -> String {
    jsonObject(pairs).compactText()
}

public func jsonLine(_ pairs: JSONPairs) -> String { jsonObject(pairs).compactText() }
