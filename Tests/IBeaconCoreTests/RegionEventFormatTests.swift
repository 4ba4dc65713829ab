import FoundationEssentials
import Testing

@testable import IBeaconCore

private let uuid = UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!

/// The event formats moved out of the CLI (issue 31): text, JSON, hook variables, MQTT reason.
/// The end-to-end tests pin them on the real captures; these pin each branch here.
@Suite struct RegionEventFormatTests {
    func monitor() throws -> RegionMonitor {
        RegionMonitor(
            regions: [try BeaconRegion(parsing: "deli=\(uuid.uuidString):1")], configuration: .init(exitAfter: 10))
    }

    let beacon = IBeacon(proximityUUID: uuid, major: 1, minor: 772, measuredPower: -59)

    @Test func insideInTextJSONAndHookVariables() throws {
        var m = try monitor()
        let e = try #require(m.observe(beacon, rssi: -61, at: 1.5).first)
        #expect(e.text(wallClock: nil, origin: nil) == "t+1.500 s inside  deli: \(uuid.uuidString) 1 772 at -61 dBm")
        #expect(
            e.json(wallClock: 1_790_000_000.25, origin: 1_790_000_000 - 1.25)
                == #"{"event":"inside","state":"inside","region":"deli","uuid":"\#(uuid.uuidString)","major":1,"minor":772,"rssi":-61,"time":"2026-09-21T14:13:20.250Z","t":1.500}"#
        )
        let vars = Dictionary(uniqueKeysWithValues: e.hookVariables(wallClock: nil))
        #expect(vars["IBEACON_EVENT"] == "inside" && vars["IBEACON_REGION"] == "deli" && vars["IBEACON_MINOR"] == "772")
        #expect(vars["IBEACON_TIME"] == "" && vars["IBEACON_T"] == "1.500" && vars["IBEACON_SILENT_S"] == "")
        #expect(e.presence == .inside && e.reason == "heard \(uuid.uuidString) 1 772 at -61 dBm")
    }

    @Test func exitSaysHowLongItWasSilent() throws {
        var m = try monitor()
        _ = m.observe(beacon, rssi: -61, at: 1)
        let exit = try #require(m.advance(to: 12).first { $0.kind == .exit })  // due at 1 + 10
        #expect(
            exit.text(wallClock: nil, origin: nil)
                == "t+11.000 s exit    deli: silent for 10.0 s; last heard \(uuid.uuidString) 1 772 at -61 dBm")
        #expect(exit.json(wallClock: nil, origin: nil).contains(#""lastHeard":1.000,"silent":10.000"#))
        #expect(Dictionary(uniqueKeysWithValues: exit.hookVariables(wallClock: nil))["IBEACON_SILENT_S"] == "10.000")
        #expect(exit.presence == .outside && exit.reason == "no beacon heard for 10.0 s")
    }

    /// Outside and unknown carry the region's identity (no beacon caused them), `*` for what
    /// the region leaves open.
    @Test func unknownNamesTheCauseAndTheRegionsIdentity() throws {
        var m = try monitor()
        _ = m.observe(beacon, rssi: -61, at: 1)
        let e = try #require(m.receiverDeaf(Deafness(.poweredOff, "adapter hci0 powered off"), at: 2).first)
        #expect(e.text(wallClock: nil, origin: nil) == "t+2.000 s unknown deli: adapter hci0 powered off")
        #expect(
            e.json(wallClock: nil, origin: nil).hasSuffix(
                #""cause":"powered-off","reason":"adapter hci0 powered off"}"#))
        #expect(e.identity.uuid == uuid.uuidString && e.identity.major == 1 && e.identity.minor == nil)
        #expect(e.presence == .unknown && e.reason == "the receiver cannot hear: adapter hci0 powered off")
        let vars = Dictionary(uniqueKeysWithValues: e.hookVariables(wallClock: nil))
        #expect(vars["IBEACON_MINOR"] == "" && vars["IBEACON_REASON"] == "adapter hci0 powered off")
    }

    /// The final state line of a run says `final` in text and `"final":true` in JSON.
    @Test func theFinalStateLine() throws {
        var m = try monitor()
        _ = m.observe(beacon, rssi: -61, at: 1)
        let state = try #require(m.statusEvents().first)
        #expect(
            state.text(wallClock: nil, origin: nil, final: true).hasPrefix(
                "t+1.000 s final   deli: inside since t+1.000 s"))
        #expect(state.json(wallClock: nil, origin: nil, final: true).hasSuffix(#""sinceTime":null,"final":true}"#))
    }

    /// RegionPresence is the monitor's own state (one type), as MQTT publishes it.
    @Test func presenceIsTheMonitorsState() {
        let states: [RegionMonitor.State] = [.inside, .outside, .unknown]
        #expect(states.map(\.payload) == ["ON", "OFF", "None"])
    }
}

/// One profile-name rule (issue 31): the file name without `.json`, for MQTT and for regions.
@Suite struct ProfileNameRuleTests {
    @Test func theFileNameWithoutJSON() {
        #expect(Profile.name(ofFile: "profiles/store12.json") == "store12")
        #expect(Profile.name(ofFile: "/etc/ibeacon/a.b.json") == "a.b")
        #expect(Profile.name(ofFile: "plain") == "plain")
        #expect(Profile.name(ofFile: "dir/.json") == ".json")
    }

    @Test func aProfilesOwnNameComesFirst() throws {
        let unnamed = try Profile.new(uuid: uuid, major: 1, minor: 2, measuredPower: -59)
        #expect(unnamed.displayName(file: "p/a.b.json") == "a.b")
        let named = try Profile.new(uuid: uuid, major: 1, minor: 2, measuredPower: -59, name: "Deli")
        #expect(named.displayName(file: "p/a.b.json") == "Deli")
    }
}
