import Testing

@testable import IBeaconCore

/// Issue 11, item 11: a 1 MiB profile of 132 000 keys took 40 s to check, every insertion
/// searching the members before it. Timed as a ratio, so a loaded machine cannot fail it and a
/// quadratic object cannot pass it: 4× the keys must cost well under 16× the time.
@Suite struct JSONObjectScalingTests {
    static func document(keys n: Int) -> [UInt8] {
        var text = "{"
        for k in 0..<n { text += (k == 0 ? "" : ",") + "\"k\(k)\":0" }
        return Array((text + "}").utf8)
    }

    static func secondsToParse(_ bytes: [UInt8]) throws -> Double {
        let clock = ContinuousClock()
        var best = Duration.seconds(1000)
        for _ in 0..<3 {
            let t0 = clock.now
            let value = try JSONValue.parse(bytes)
            best = min(best, clock.now - t0)
            #expect(value.objectValue != nil)
        }
        let (s, atto) = best.components
        return Double(s) + Double(atto) / 1e18
    }

    @Test func buildingAnObjectIsLinearInItsKeys() throws {
        let small = try Self.secondsToParse(Self.document(keys: 33_000))
        let large = try Self.secondsToParse(Self.document(keys: 132_000))
        #expect(large / small < 8, "33k keys: \(small) s, 132k keys: \(large) s")
    }

    @Test func lookupsAndRemovalsKeepTheIndexRight() {
        var o = JSONObject()
        for k in 0..<1000 { o["k\(k)"] = .number(Double(k), text: "\(k)") }
        o["k10"] = nil
        o["k500"] = nil
        #expect(o.count == 998)
        #expect(o.index(of: "k11") == 10)
        #expect(o.index(of: "k501") == 499)
        #expect(o["k999"] == .number(999, text: "999"))
        #expect(o["k10"] == nil)
        o["k10"] = .bool(true)
        #expect(o.keys.last == "k10")
    }

    @Test func aDuplicateKeyIsStillReportedWhereItFirstAppeared() {
        let error = #expect(throws: JSONSyntaxError.self) {
            try JSONValue.parse(Array("{\"a\":1,\"b\":2,\"a\":3}".utf8))
        }
        #expect(error?.message.contains("duplicate key \"a\" (first at line 1, column 2)") == true)
    }
}
