/// A JSON value (RFC 8259) that keeps what a hand-edited profile file needs kept.
///
/// Hand-written rather than Foundation's `JSONSerialization`/`JSONDecoder` because those lose
/// object key order (a rewrite would shuffle the user's file) and cannot tell `12` from `12.0`
/// (both become the same `NSNumber`/`Double`), so "`major` must be an integer" could not be
/// checked as written. Here integer literals (no fraction, no exponent) that fit in `Int64` are
/// `.integer`; every other number is `.number` and keeps its literal text.
public enum JSONValue: Sendable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    /// A literal with neither fraction nor exponent that fits in `Int64` (`-0` reads as 0).
    case integer(Int64)
    /// Any other number. `text` is the literal as written, and what the serializer writes
    /// back when it is valid JSON number syntax.
    case number(Double, text: String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// A number written with exactly `fractionDigits` (0…9) decimals, e.g. `-59.25`, `4.00`:
    /// spelled by `Double.fixed`, so the text a command prints and the file it writes agree.
    /// Non-finite values have no JSON spelling and become `.null`.
    public static func decimal(_ value: Double, fractionDigits: Int) -> JSONValue {
        guard value.isFinite else { return .null }
        let text = value.fixed(max(0, min(fractionDigits, 9)))
        return .number(Double(text) ?? value, text: text)
    }

    /// A short human rendering for messages: `70000`, `12.0`, `"abc"`, `true`, `null`,
    /// `an array`, `an object`.
    public var description: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .integer(let i): return String(i)
        case .number(_, let text): return text
        case .string(let s): return JSONWriter.quoted(s)
        case .array(let a): return a.isEmpty ? "an empty array" : "an array"
        case .object(let o): return o.isEmpty ? "an empty object" : "an object"
        }
    }

    /// What kind of value this is, for messages: `a string`, `a number`, …
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .integer: return "an integer"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    public var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    public var integerValue: Int64? { if case .integer(let i) = self { return i } else { return nil } }
    /// The value of `.integer` or `.number` as a `Double`.
    public var doubleValue: Double? {
        switch self {
        case .integer(let i): return Double(i)
        case .number(let d, _): return d
        default: return nil
        }
    }
}

/// A JSON object whose members keep the order they were read or added in. Lookups and
/// insertions go through a key → position index, so building an object of n members is
/// O(n), not O(n²) (a 1 MiB profile can hold 100 000 keys).
public struct JSONObject: Sendable, Equatable, Sequence {
    public typealias Member = (key: String, value: JSONValue)
    public private(set) var members: [Member] = []
    /// Where each key is in `members`.
    private var positions: [String: Int] = [:]

    public init() {}
    public init(_ members: [Member]) {
        for m in members { self[m.key] = m.value }
    }

    public var count: Int { members.count }
    public var isEmpty: Bool { members.isEmpty }
    public var keys: [String] { members.map(\.key) }

    /// Lookup by key. Setting a present key replaces its value in place (position kept);
    /// setting a new key appends it at the end; setting `nil` removes the member (O(n): the
    /// members after it move up).
    public subscript(key: String) -> JSONValue? {
        get { positions[key].map { members[$0].value } }
        set {
            switch (positions[key], newValue) {
            case (let i?, let v?): members[i].value = v
            case (let i?, nil):
                members.remove(at: i)
                positions[key] = nil
                for j in i..<members.count { positions[members[j].key] = j }
            case (nil, let v?):
                positions[key] = members.count
                members.append((key, v))
            case (nil, nil): break
            }
        }
    }

    public func index(of key: String) -> Int? { positions[key] }

    /// Appends a member unless `key` is present (one hash lookup, for the parser); returns
    /// the position of the member already there, nil when appended.
    mutating func appendUnlessPresent(_ key: String, _ value: JSONValue) -> Int? {
        if let present = positions.updateValue(members.count, forKey: key) {
            positions[key] = present
            return present
        }
        members.append((key, value))
        return nil
    }

    /// Replaces the value of the member at `index`.
    mutating func setValue(at index: Int, _ value: JSONValue) { members[index].value = value }

    public func makeIterator() -> IndexingIterator<[Member]> { members.makeIterator() }

    public static func == (a: JSONObject, b: JSONObject) -> Bool {
        a.members.count == b.members.count
            && zip(a.members, b.members).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}

/// Why a byte sequence is not JSON text, with a 1-based line and column (columns count
/// Unicode scalars, so they match what an editor shows for UTF-8 text).
public struct JSONSyntaxError: Error, Equatable, Sendable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    /// Byte offset of the problem.
    public var offset: Int
    public var message: String

    public var description: String { "line \(line), column \(column): \(message)" }
}

extension JSONValue {
    /// Maximum nesting of arrays and objects accepted by `parse` (RFC 8259 §9 lets a parser
    /// limit depth; a profile is two levels deep).
    public static let maximumDepth = 64

    /// Parses one JSON text (RFC 8259). Total: every input either yields a value or a
    /// `JSONSyntaxError` naming where and what; nothing traps.
    public static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        return try parser.parseDocument()
    }

    /// Compact JSON on one line, no spaces (`{"a":1,"b":[]}`): what a command's `--json`
    /// prints, one value per line.
    public func compactText() -> String {
        String(decoding: JSONWriter.bytes(maximumLength: maximumLength(indent: nil)) { $0.value(self) }, as: UTF8.self)
    }

    /// Pretty JSON: two-space indent, `"key": value`, one member or element per line, and a
    /// trailing newline. `parse(serialized())` gives back an equal value.
    public func serialized() -> [UInt8] {
        JSONWriter.bytes(maximumLength: maximumLength(indent: 0) + 1) { w in
            w.value(self, indent: 0)
            w.newline()
        }
    }
}

// MARK: - Parser

private struct JSONParser {
    let bytes: [UInt8]
    var i = 0
    var depth = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() throws(JSONSyntaxError) -> JSONValue {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            throw error(
                at: 0,
                "the text starts with a UTF-8 byte order mark (EF BB BF), which JSON text must not have "
                    + "(RFC 8259 §8.1); save the file as UTF-8 without BOM")
        }
        skipWhitespace()
        if i == bytes.count {
            throw error(
                at: i, bytes.isEmpty ? "empty input: expected a JSON value" : "only whitespace: expected a JSON value")
        }
        let value = try parseValue()
        skipWhitespace()
        if i < bytes.count {
            throw error(at: i, "unexpected \(describe(i)) after the end of the JSON value; remove it")
        }
        return value
    }

    mutating func skipWhitespace() {
        // RFC 8259 §2: ws = space, horizontal tab, line feed, carriage return.
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D {
            i += 1
        }
    }

    mutating func parseValue() throws(JSONSyntaxError) -> JSONValue {
        guard i < bytes.count else { throw error(at: i, "unexpected end of input: expected a JSON value") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        case UInt8(ascii: "'"):
            throw error(at: i, "strings must use double quotes (\"), not single quotes")
        default:
            throw error(
                at: i,
                "unexpected \(describe(i)): expected a JSON value (object, array, string, number, true, false or null)")
        }
    }

    mutating func literal(_ word: String) throws(JSONSyntaxError) {
        let w = Array(word.utf8)
        guard bytes.count - i >= w.count, Array(bytes[i..<i + w.count]) == w else {
            throw error(at: i, "invalid literal: expected \(word)")
        }
        i += w.count
        if i < bytes.count, isIdentifierByte(bytes[i]) {
            throw error(at: i, "invalid literal: unexpected \(describe(i)) after \(word)")
        }
    }

    func isIdentifierByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
    }

    mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > JSONValue.maximumDepth {
            throw error(at: i, "nesting is deeper than \(JSONValue.maximumDepth) levels")
        }
    }

    mutating func parseObject() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        let open = i
        i += 1
        var object = JSONObject()
        var keyOffsets: [Int] = []  // where each member's name starts, for duplicate messages
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") {
            i += 1
            depth -= 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard i < bytes.count else {
                throw error(at: i, "unexpected end of input: object opened at \(position(open)) is not closed with }")
            }
            guard bytes[i] == UInt8(ascii: "\"") else {
                if bytes[i] == UInt8(ascii: "}") {
                    throw error(at: i, "trailing comma before } is not allowed in JSON")
                }
                throw error(at: i, "unexpected \(describe(i)): expected a member name in double quotes")
            }
            let keyOffset = i
            let key = try parseString()
            if let first = object.appendUnlessPresent(key, .null) {
                throw error(
                    at: keyOffset,
                    "duplicate key \(JSONWriter.quoted(key)) (first at \(position(keyOffsets[first]))); keep only one")
            }
            keyOffsets.append(keyOffset)
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else {
                throw error(at: i, "unexpected \(describe(i)): expected : after member name \(JSONWriter.quoted(key))")
            }
            i += 1
            skipWhitespace()
            object.setValue(at: keyOffsets.count - 1, try parseValue())
            skipWhitespace()
            guard i < bytes.count else {
                throw error(at: i, "unexpected end of input: object opened at \(position(open)) is not closed with }")
            }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if bytes[i] == UInt8(ascii: "}") {
                i += 1
                break
            }
            throw error(
                at: i, "unexpected \(describe(i)): expected , or } after the value of \(JSONWriter.quoted(key))")
        }
        depth -= 1
        return .object(object)
    }

    mutating func parseArray() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        let open = i
        i += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") {
            i += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") {
                throw error(at: i, "trailing comma before ] is not allowed in JSON")
            }
            elements.append(try parseValue())
            skipWhitespace()
            guard i < bytes.count else {
                throw error(at: i, "unexpected end of input: array opened at \(position(open)) is not closed with ]")
            }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if bytes[i] == UInt8(ascii: "]") {
                i += 1
                break
            }
            throw error(at: i, "unexpected \(describe(i)): expected , or ] in array")
        }
        depth -= 1
        return .array(elements)
    }

    /// RFC 8259 §7. The opening quote is at `i`.
    mutating func parseString() throws(JSONSyntaxError) -> String {
        let open = i
        i += 1
        var scalars = String.UnicodeScalarView()
        while true {
            guard i < bytes.count else {
                throw error(at: open, "string is not closed: missing \" before the end of input")
            }
            let b = bytes[i]
            switch b {
            case UInt8(ascii: "\""):
                i += 1
                return String(scalars)
            case UInt8(ascii: "\\"):
                scalars.append(try parseEscape())
            case 0x00..<0x20:
                let hint = b == 0x0A ? "; a string cannot span lines, write \\n" : b == 0x09 ? "; write \\t" : ""
                throw error(
                    at: i, "control character U+\(paddedHex(UInt32(b), 4)) must be escaped inside a string\(hint)")
            case 0x00..<0x80:
                scalars.append(Unicode.Scalar(b))
                i += 1
            default:
                scalars.append(try decodeUTF8())
            }
        }
    }

    /// The backslash is at `i`.
    mutating func parseEscape() throws(JSONSyntaxError) -> Unicode.Scalar {
        let start = i
        guard i + 1 < bytes.count else { throw error(at: i, "unexpected end of input in an escape sequence") }
        let c = bytes[i + 1]
        i += 2
        switch c {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let high = try hex4(at: start)
            if (0xDC00...0xDFFF).contains(high) {
                throw error(
                    at: start,
                    "\\u\(paddedHex(high, 4)) is a lone low surrogate; it must follow a high surrogate (\\uD800–\\uDBFF)"
                )
            }
            if (0xD800...0xDBFF).contains(high) {
                guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                    throw error(
                        at: start, "\\u\(paddedHex(high, 4)) is a high surrogate not followed by a \\u low surrogate")
                }
                let lowStart = i
                i += 2
                let low = try hex4(at: lowStart)
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw error(
                        at: lowStart,
                        "\\u\(paddedHex(high, 4)) must be followed by a low surrogate (\\uDC00–\\uDFFF), not \\u\(paddedHex(low, 4))"
                    )
                }
                let value = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                guard let s = Unicode.Scalar(value) else { throw error(at: start, "invalid surrogate pair") }
                return s
            }
            guard let s = Unicode.Scalar(high) else { throw error(at: start, "invalid \\u escape") }
            return s
        default:
            throw error(
                at: start,
                "invalid escape \\\(printable(c)) in string; valid escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX"
            )
        }
    }

    /// Four hex digits at `i` (after `\u`).
    mutating func hex4(at escapeStart: Int) throws(JSONSyntaxError) -> UInt32 {
        var v: UInt32 = 0
        for k in 0..<4 {
            guard i < bytes.count, let d = Character(Unicode.Scalar(bytes[i])).hexDigitValue, bytes[i] < 0x80 else {
                throw error(at: escapeStart, "\\u must be followed by 4 hex digits (found \(k))")
            }
            v = v << 4 | UInt32(d)
            i += 1
        }
        return v
    }

    /// One UTF-8 encoded scalar (lead byte ≥ 0x80 at `i`), rejecting overlong forms,
    /// surrogates and values above U+10FFFF (RFC 3629 §4).
    mutating func decodeUTF8() throws(JSONSyntaxError) -> Unicode.Scalar {
        let start = i
        let b0 = bytes[i]
        let count: Int
        let minimum: UInt32
        var value: UInt32
        switch b0 {
        case 0xC2...0xDF:
            count = 2
            minimum = 0x80
            value = UInt32(b0 & 0x1F)
        case 0xE0...0xEF:
            count = 3
            minimum = 0x800
            value = UInt32(b0 & 0x0F)
        case 0xF0...0xF4:
            count = 4
            minimum = 0x10000
            value = UInt32(b0 & 0x07)
        default:
            throw error(
                at: start,
                "invalid UTF-8: byte 0x\(paddedHex(UInt32(b0), 2)) cannot start a character; save the file as UTF-8")
        }
        guard bytes.count - start >= count else {
            throw error(at: start, "invalid UTF-8: character cut off by the end of input")
        }
        for k in 1..<count {
            let b = bytes[start + k]
            guard b & 0xC0 == 0x80 else {
                throw error(
                    at: start,
                    "invalid UTF-8: byte 0x\(paddedHex(UInt32(b), 2)) is not a continuation byte; save the file as UTF-8"
                )
            }
            value = value << 6 | UInt32(b & 0x3F)
        }
        guard value >= minimum, value <= 0x10FFFF, !(0xD800...0xDFFF).contains(value),
            let scalar = Unicode.Scalar(value)
        else {
            throw error(
                at: start, "invalid UTF-8: overlong, surrogate or out-of-range encoding; save the file as UTF-8")
        }
        i += count
        return scalar
    }

    /// RFC 8259 §6: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    mutating func parseNumber() throws(JSONSyntaxError) -> JSONValue {
        let start = i
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < bytes.count, isDigit(bytes[i]) else {
            throw error(at: start, "invalid number: expected a digit after -")
        }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
            if i < bytes.count, isDigit(bytes[i]) {
                throw error(
                    at: start,
                    "invalid number: leading zeros are not allowed in JSON (write \(stripLeadingZeros(from: start)))")
            }
        } else {
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
        }
        var isInteger = true
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            guard i < bytes.count, isDigit(bytes[i]) else {
                throw error(at: start, "invalid number: expected a digit after the decimal point")
            }
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            isInteger = false
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < bytes.count, isDigit(bytes[i]) else {
                throw error(at: start, "invalid number: expected a digit in the exponent")
            }
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
        }
        if i < bytes.count, isIdentifierByte(bytes[i]) || bytes[i] == UInt8(ascii: ".") {
            throw error(at: i, "invalid number: unexpected \(describe(i))")
        }
        let text = String(decoding: bytes[start..<i], as: UTF8.self)
        if isInteger, let v = Int64(text) { return .integer(v) }
        guard let d = Double(text), d.isFinite else {
            throw error(at: start, "number \(text) is too large to represent")
        }
        return .number(d, text: text)
    }

    func stripLeadingZeros(from start: Int) -> String {
        var j = start
        var out = ""
        if bytes[j] == UInt8(ascii: "-") {
            out = "-"
            j += 1
        }
        while j + 1 < bytes.count, bytes[j] == UInt8(ascii: "0"), isDigit(bytes[j + 1]) { j += 1 }
        var k = j
        while k < bytes.count, isDigit(bytes[k]) { k += 1 }
        return out + String(decoding: bytes[j..<k], as: UTF8.self)
    }

    func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    // MARK: messages

    func describe(_ offset: Int) -> String {
        guard offset < bytes.count else { return "end of input" }
        let b = bytes[offset]
        if b >= 0x21 && b < 0x7F { return "character '\(printable(b))'" }
        if b >= 0x80, let s = scalar(at: offset) { return "character '\(s)' (U+\(paddedHex(s.value, 4)))" }
        return "byte 0x\(paddedHex(UInt32(b), 2))" + (b >= 0x80 || b < 0x20 ? " (binary data or not UTF-8 text?)" : "")
    }

    func scalar(at offset: Int) -> Unicode.Scalar? {
        var copy = self
        copy.i = offset
        return try? copy.decodeUTF8()
    }

    func printable(_ b: UInt8) -> String {
        b >= 0x20 && b < 0x7F ? String(UnicodeScalar(b)) : "0x" + paddedHex(UInt32(b), 2)
    }

    func position(_ offset: Int) -> String {
        let (line, column) = lineColumn(offset)
        return "line \(line), column \(column)"
    }

    func lineColumn(_ offset: Int) -> (Int, Int) {
        var line = 1
        var column = 1
        for b in bytes[0..<min(offset, bytes.count)] {
            if b == 0x0A {
                line += 1
                column = 1
            } else if b & 0xC0 != 0x80 {
                column += 1
            }
        }
        return (line, column)
    }

    func error(at offset: Int, _ message: String) -> JSONSyntaxError {
        let (line, column) = lineColumn(offset)
        return JSONSyntaxError(line: line, column: column, offset: offset, message: message)
    }
}

extension JSONValue {
    /// Whether `text` is one JSON number literal (RFC 8259 §6): a `.number` is written as its
    /// text only then.
    static func isValidNumber(_ text: String) -> Bool {
        var p = JSONParser(bytes: Array(text.utf8))
        guard let first = p.bytes.first, first == UInt8(ascii: "-") || p.isDigit(first) else { return false }
        guard (try? p.parseNumber()) != nil else { return false }
        return p.i == p.bytes.count
    }
}
