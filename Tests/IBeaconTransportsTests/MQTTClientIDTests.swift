import IBeaconCore
import IBeaconHost
import Testing

@testable import IBeaconTransports

/// Issue 40, hole 7: a client id anyone could compute (`ibeacon-HOST-COMMAND-PID`) let a sweep
/// of ~3,000 ids kick the box off the broker. The id ends in 64 bits from the system RNG.
@Suite struct MQTTClientIDTests {
    static func opener() throws -> MQTTOpener {
        MQTTOpener(
            broker: try MQTTBrokerURL(parsing: "mqtt://broker.lan"), user: nil, password: nil, caFile: nil,
            certFile: nil, keyFile: nil, command: "monitor",
            layout: { _ in MQTTLayout(base: "ibeacon", command: "monitor", discoveryPrefix: nil, node: "box", room: "x")
            })
    }

    @Test func theClientIDEndsInARandomPartThatIsStableForTheProcess() throws {
        let id = try Self.opener().clientID
        let guessable = "ibeacon-\(MQTTTopic.identifier(ProcessContext.hostName))-monitor-\(ProcessContext.processID)"
        #expect(id != guessable)
        #expect(id.hasPrefix(guessable + "-"))
        let nonce = id.dropFirst(guessable.count + 1)
        #expect(nonce.count == 16 && nonce.allSatisfy(\.isHexDigit))
        // The same id for every connection of this process (a reconnect keeps its session).
        #expect(try Self.opener().clientID == id)
        #expect(
            try Self.opener().settings(
                MQTTLayout(base: "b", command: "monitor", discoveryPrefix: nil, node: "n", room: "r")
            ).clientID == id)
    }

    @Test func eachDrawIsNew() {
        let draws = Set((0..<64).map { _ in makeClientNonce() })
        #expect(draws.count == 64)
        #expect(draws.allSatisfy { $0.count == 16 && $0.allSatisfy(\.isHexDigit) })
    }
}
