import IBeaconTestSupport
import Testing

@testable import IBeaconCore

@Suite struct JSONTests {
    func parse(_ s: String) throws -> JSONValue { try JSONValue.parse(Array(s.utf8)) }

    func syntaxError(_ bytes: [UInt8]) -> JSONSyntaxError? {
        do {
            _ = try JSONValue.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test func integersAndNumbersStayDistinct() throws {
        #expect(try parse("12") == .integer(12))
        #expect(try parse("-0") == .integer(0))
        #expect(try parse("12.0") == .number(12.0, text: "12.0"))
        #expect(try parse("1e2") == .number(100, text: "1e2"))
        #expect(try parse("-1.5E-3") == .number(-0.0015, text: "-1.5E-3"))
        // Larger than Int64: kept as a number with its text.
        #expect(try parse("9223372036854775808") == .number(9_223_372_036_854_775_808, text: "9223372036854775808"))
        #expect(try parse("-9223372036854775808") == .integer(Int64.min))
    }

    @Test func objectKeepsOrderAndSetInPlace() throws {
        let v = try parse(#"{"z": 1, "a": 2, "m": [true, null, "x"]}"#)
        var o = try #require(v.objectValue)
        #expect(o.keys == ["z", "a", "m"])
        o["a"] = .string("two")
        o["new"] = .integer(4)
        #expect(o.keys == ["z", "a", "m", "new"])
        #expect(o["a"] == .string("two"))
        o["z"] = nil
        #expect(o.keys == ["a", "m", "new"])
    }

    @Test func stringsAndEscapes() throws {
        #expect(try parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{08}\u{0C}\n\r\t"))
        #expect(try parse(#""\u00e9\u20AC""#) == .string("é€"))
        #expect(try parse(#""\uD83D\uDE00""#) == .string("😀"))
        #expect(try parse("\"Bäckerei 🥐\"") == .string("Bäckerei 🥐"))
    }

    @Test func prettySerializationIsExact() throws {
        var o = JSONObject()
        o["name"] = .string("Store \"12\"\n")
        o["n"] = .integer(-59)
        o["x"] = .number(12.0, text: "12.0")
        o["list"] = .array([.integer(1), .object(JSONObject([("k", .null)]))])
        o["empty"] = .array([])
        o["eo"] = .object(JSONObject())
        let text = String(decoding: JSONValue.object(o).serialized(), as: UTF8.self)
        let expected = """
            {
              "name": "Store \\"12\\"\\n",
              "n": -59,
              "x": 12.0,
              "list": [
                1,
                {
                  "k": null
                }
              ],
              "empty": [],
              "eo": {}
            }

            """
        #expect(text == expected)
        #expect(try JSONValue.parse(Array(text.utf8)) == .object(o))
    }

    @Test func roundTripOfVariedDocuments() throws {
        let docs = [
            #"{"a":[1,2.50,-3e+2,{"b":"\u0001 é"}],"c":{},"d":[],"e":false,"f":null}"#,
            "[]", "\"just a string\"", "-0.0", "[[[[]]]]", #"{"":""}"#,
        ]
        for d in docs {
            let v = try parse(d)
            #expect(try JSONValue.parse(v.serialized()) == v, "\(d)")
        }
    }

    @Test func decimalFormatting() {
        #expect(JSONValue.decimal(-59.254, fractionDigits: 2) == .number(-59.25, text: "-59.25"))
        #expect(JSONValue.decimal(4, fractionDigits: 2).description == "4.00")
        #expect(JSONValue.decimal(-0.004, fractionDigits: 2).description == "0.00")
        #expect(JSONValue.decimal(0.05, fractionDigits: 1).description == "0.1")
        #expect(JSONValue.decimal(.nan, fractionDigits: 2) == .null)
    }

    /// Ties, signs of zero, huge and non-finite values: what a profile's calibration record holds.
    static let decimalEdges: [(Double, Int, String)] = [
        (0.125, 2, "0.13"), (0.375, 2, "0.38"), (-59.125, 2, "-59.13"), (-59.375, 2, "-59.38"),
        (1.115, 2, "1.12"), (1.005, 2, "1.00"), (2.5, 0, "3"), (-2.5, 0, "-3"), (0.25, 1, "0.3"),
        (1.25, 1, "1.3"), (0.0625, 3, "0.063"), (1.3125, 3, "1.313"), (2.0005, 3, "2.001"),
        (-0.004, 2, "0.00"), (-0.0, 1, "0.0"), (0.0, 1, "0.0"), (-0.04, 1, "0.0"),
        (123456789.125, 2, "123456789.13"), (1e300, 2, "1e+300"), (4.6e15, 0, "4600000000000000"), (1e17, 3, "1e+17"),
        (.nan, 2, "null"), (.infinity, 1, "null"), (-.infinity, 3, "null"),
    ]

    @Test(arguments: decimalEdges) func decimalEdgeCases(value: Double, digits: Int, text: String) {
        #expect(JSONValue.decimal(value, fractionDigits: digits).description == text)
    }

    /// (input, expected line, column, words the message must contain)
    static let malformed: [(String, Int, Int, String)] = [
        ("", 1, 1, "empty"),
        ("   \n ", 2, 2, "whitespace"),
        ("{\"a\": 1} x", 1, 10, "after the end"),
        ("{\"a\": 01}", 1, 7, "leading zeros"),
        ("{\"a\": -}", 1, 7, "digit after -"),
        ("{\"a\": 1.}", 1, 7, "decimal point"),
        ("{\"a\": 1e}", 1, 7, "exponent"),
        ("{\"a\": +1}", 1, 7, "unexpected character '+'"),
        ("{\"a\": \"\\x\"}", 1, 8, "invalid escape \\x"),
        ("{\"a\": \"\\u12\"}", 1, 8, "4 hex digits"),
        ("{\"a\": \"\\uDC00\"}", 1, 8, "lone low surrogate"),
        ("{\"a\": \"\\uD800\"}", 1, 8, "high surrogate"),
        ("{\"a\": \"line\nbreak\"}", 1, 12, "control character"),
        ("{\"a\": 1,}", 1, 9, "trailing comma"),
        ("[1, 2,]", 1, 7, "trailing comma"),
        ("{\"a\" 1}", 1, 6, "expected :"),
        ("{\"a\": 1 \"b\": 2}", 1, 9, "expected , or }"),
        ("{\n  \"a\": 1,\n  \"a\": 2\n}", 3, 3, "duplicate key \"a\""),
        ("{'a': 1}", 1, 2, "double quotes"),
        ("{\"a\": tru}", 1, 7, "expected true"),
        ("{\"a\": nulls}", 1, 11, "after null"),
        ("{\"a\": \"open", 1, 7, "not closed"),
        ("{\"a\": [1, 2", 1, 12, "not closed with ]"),
        ("{\"a\": 1e999}", 1, 7, "too large"),
        ("{\"é\": x}", 1, 7, "unexpected character 'x'"),
    ]

    @Test(arguments: malformed)
    func syntaxErrors(_ c: (String, Int, Int, String)) throws {
        let e = try #require(syntaxError(Array(c.0.utf8)), "\(c.0) should not parse")
        #expect(e.line == c.1 && e.column == c.2, "\(c.0): \(e)")
        #expect(e.message.contains(c.3), "\(c.0): \(e.message)")
    }

    @Test func byteOrderMarkIsRejected() throws {
        let e = try #require(syntaxError([0xEF, 0xBB, 0xBF] + Array("{}".utf8)))
        #expect(e.message.contains("byte order mark"))
    }

    @Test func invalidUTF8IsRejected() throws {
        let cases: [[UInt8]] = [
            [0x22, 0xC3, 0x28, 0x22],  // bad continuation
            [0x22, 0xC0, 0xAF, 0x22],  // overlong '/'
            [0x22, 0xED, 0xA0, 0x80, 0x22],  // UTF-16 surrogate encoded in UTF-8
            [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],  // above U+10FFFF
            [0x22, 0xE2, 0x82],  // cut off
            [0x22, 0xFF, 0x22],
        ]
        for c in cases {
            let e = try #require(syntaxError(c), "\(c.hexString) should not parse")
            #expect(e.message.contains("UTF-8"), "\(c.hexString): \(e.message)")
            #expect(e.offset == 1)
        }
    }

    @Test func nestingLimit() throws {
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: Never.self) { try parse(ok) }
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        let e = try #require(syntaxError(Array(deep.utf8)))
        #expect(e.message.contains("deeper than 64"))
        // 100 000 levels must not overflow the stack: rejected at level 65.
        let hostile = String(repeating: "{\"a\":", count: 100_000)
        #expect(syntaxError(Array(hostile.utf8))?.message.contains("deeper") == true)
    }

    @Test func randomBytesNeverCrash() {
        var rng = SplitMix64(seed: 0x1B3AC0)
        let alphabet = Array("{}[]\":,0123456789-+.eE tfnrul\\\n".utf8) + [0x00, 0xC3, 0xFF, 0xE2, 0x82]
        var accepted = 0
        for _ in 0..<3000 {
            let n = Int(rng.next() % 24)
            let bytes = (0..<n).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            if let v = try? JSONValue.parse(bytes) {
                accepted += 1
                #expect((try? JSONValue.parse(v.serialized())) == v)
            }
        }
        #expect(accepted > 0)
    }
}
