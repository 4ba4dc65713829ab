import IBeaconTestSupport
import Testing

@testable import IBeaconCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The one JSON writer: its fast member writers (what `scan --json --reports` prints per
/// report) spell every value exactly as the `JSONValue` path (`jsonLine`, `compactText`) does,
/// and the `JSONValue` path bounds its length so that nothing is ever cut off.
@Suite struct JSONWriterTests {
    /// One object line written by the fast writer, without its line feed.
    func line(_ body: (inout JSONWriter) -> Void) -> String {
        var buffer: [UInt8] = []
        JSONWriter.append(to: &buffer, maximumLength: 4096, body)
        #expect(buffer.last == 0x0A)
        return String(decoding: buffer.dropLast(), as: UTF8.self)
    }

    @Test func numbersAreSpelledAsTheJSONValuePathSpellsThem() {
        var random = SplitMix64(seed: 22)
        var values: [Double] = [
            0, -0.0, 0.5, -59.25, 3, 66.015, 0.00005, -0.00004, 0.99995, 1e14, 123_456_789_012.3456, 1e15, 1e16,
            -1e20, 1.7976931348623157e308, .nan, .infinity, -.infinity, 0.1 + 0.2, 2.675,
        ]
        for _ in 0..<4000 {
            let magnitude = Double.random(in: -6...16, using: &random)
            values.append(Double.random(in: -1...1, using: &random) * pow10(magnitude))
        }
        for v in values {
            #expect(line { $0.number("x", v) } == jsonLine(["x": v]), "\(v)")
            // Three places: what `t` and `lastHeard` hold, rounded first as the commands do. The
            // same text while a millisecond is a fraction the 4-decimal spelling keeps (past
            // ~1e11 s, 3000 years, `.616` rounded again to 4 places can read `.6161`).
            let t = v.rounded(decimals: 3)
            if abs(t) < 1e10 {
                #expect(line { $0.number("t", t, decimals: 3) } == jsonLine(["t": t]), "\(v)")
            }
        }
        #expect(line { $0.number("x", nil) } == #"{"x":null}"#)
        #expect(line { $0.number("x", 12) } == #"{"x":12.0}"#)
    }

    func pow10(_ e: Double) -> Double {
        var r = 1.0
        for _ in 0..<Int(e.rounded(.down).magnitude) { r = e < 0 ? r / 10 : r * 10 }
        return r
    }

    @Test func integersStringsAndNulls() {
        for v in [0, 7, -7, 10, 99, 100, -100, 65535, Int.max, Int.min] {
            #expect(line { $0.integer("n", v) } == jsonLine(["n": v]))
        }
        for s in [
            "", "Store 12", "a\"b\\c", "line\nbreak\ttab\r", "\u{1B}[31m", "C1 \u{9B} bidi \u{202E} \u{2028}", "é€😀",
        ] {
            #expect(line { $0.string("s", s) } == jsonLine(["s": s]))
        }
        #expect(
            line {
                $0.string("a", nil)
                $0.integer("b", nil)
                $0.uuid("c", nil)
            } == #"{"a":null,"b":null,"c":null}"#)
    }

    @Test func bytesAddressesAndUUIDsAsTheirDescriptions() throws {
        var random = SplitMix64(seed: 7)
        for count in [0, 1, 3, 4, 5, 31, 251] {
            let data = (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) }
            #expect(line { $0.hex("data", data) } == jsonLine(["data": data.hexString]))
        }
        for _ in 0..<200 {
            let address = try #require(BDAddress(uint48: UInt64.random(in: 0...0xFFFF_FFFF_FFFF, using: &random)))
            let uuid = UUID(bytes: (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) })
            #expect(line { $0.address("address", address) } == jsonLine(["address": address.description]))
            #expect(line { $0.uuid("uuid", uuid) } == jsonLine(["uuid": uuid.uuidString]))
        }
    }

    @Test func membersKeepOrderAndCommas() {
        let table = JSONTextTable(0..<3, maximumLength: 40) { i, w in
            w.integer("i", i)
            w.string("s", String(i))
        }
        #expect(table.count == 3)
        var entry = ""
        table.withEntry(2) { entry = String(decoding: $0, as: UTF8.self) }
        #expect(entry == #""i":2,"s":"2""#)
        table.withEntry(3) { _ in Issue.record("no entry 3") }
        let text = line { w in
            table.withEntry(1) { w.members($0) }
            w.value("list", .array([.integer(1), .string("x"), .object(JSONObject())]))
            table.withEntry(0) { w.members($0) }
        }
        #expect(text == #"{"i":1,"s":"1","list":[1,"x",{}],"i":0,"s":"0"}"#)
    }

    /// Past `maximumLength` the rest of a value is dropped, never written out of bounds.
    @Test func writesStayWithinTheirBound() {
        let long = String(repeating: "x", count: 100)
        let bytes = JSONWriter.bytes(maximumLength: 10) { w in
            w.literal(long)
            w.digits(123_456_789)
        }
        #expect(bytes.count <= 10)
        #expect(JSONWriter.bytes(maximumLength: 0) { $0.literal(long) }.isEmpty)
    }

    @Test func lineBufferReusesItsStorage() {
        var buffer = JSONLineBuffer()
        buffer.appendLine(maximumLength: 40) { $0.integer("a", 1) }
        buffer.append("{\"b\":2}\n")
        var out: [UInt8] = []
        buffer.drain { out += $0 }
        #expect(String(decoding: out, as: UTF8.self) == "{\"a\":1}\n{\"b\":2}\n")
        #expect(buffer.count == 0)
        buffer.appendLine(maximumLength: 40) { $0.integer("c", 3) }
        out = []
        buffer.drain { out += $0 }
        #expect(String(decoding: out, as: UTF8.self) == "{\"c\":3}\n")
        buffer.drain { _ in Issue.record("nothing waits") }
    }

    /// A value of any shape is written whole, compact and pretty: its length bound holds, and
    /// it reads back equal.
    @Test func anyValueRoundTripsThroughTheWriter() throws {
        var random = SplitMix64(seed: 0x22)
        func value(_ depth: Int) -> JSONValue {
            switch Int.random(in: 0...(depth > 3 ? 5 : 7), using: &random) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &random))
            case 2: return .integer(Int64.random(in: .min ... .max, using: &random))
            case 3:
                let d = Double.random(in: -1e6...1e6, using: &random)
                return .number(d, text: d.description)
            case 4, 5:
                let scalars = (0..<Int.random(in: 0...12, using: &random)).compactMap { _ in
                    Unicode.Scalar(
                        [0x1B, 0x22, 0x5C, 0x0A, 0x9B, 0x202E, 0x41, 0xE9, 0x1F600][
                            Int.random(in: 0...8, using: &random)])
                }
                return .string(String(String.UnicodeScalarView(scalars)))
            case 6: return .array((0..<Int.random(in: 0...4, using: &random)).map { _ in value(depth + 1) })
            default:
                var o = JSONObject()
                for k in 0..<Int.random(in: 0...4, using: &random) { o["k\(k)\u{9B}\""] = value(depth + 1) }
                return .object(o)
            }
        }
        for _ in 0..<500 {
            let v = value(0)
            let compact = v.compactText()
            #expect(compact.utf8.count <= v.maximumLength(indent: nil))
            #expect(try JSONValue.parse(Array(compact.utf8)) == v)
            let pretty = v.serialized()
            #expect(pretty.count <= v.maximumLength(indent: 0) + 1)
            #expect(try JSONValue.parse(pretty) == v)
        }
    }

    /// A `.number` whose text is not JSON is written as its `Double`, or `null`.
    @Test func invalidNumberTextFallsBack() {
        #expect(JSONValue.number(1.5, text: "1,5").compactText() == "1.5")
        #expect(JSONValue.number(.nan, text: "nan").compactText() == "null")
        #expect(JSONValue.array([.number(2, text: "+2"), .integer(-3)]).compactText() == "[2.0,-3]")
    }
}
