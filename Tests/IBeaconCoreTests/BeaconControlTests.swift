import Testing

@testable import IBeaconCore

@Suite struct BeaconCommandParsingTests {
    func parse(_ key: String, _ payload: String) throws(CommandRefusal) -> BeaconCommand {
        try BeaconCommand.parse(key: key, payload: Array(payload.utf8))
    }

    func refusal(_ key: String, _ payload: [UInt8]) -> CommandRefusal? {
        do {
            _ = try BeaconCommand.parse(key: key, payload: payload)
            return nil
        } catch {
            return error
        }
    }

    @Test func eachKeyTakesItsValue() throws {
        #expect(try parse("advertising", "ON") == .advertising(true))
        #expect(try parse("advertising", "OFF") == .advertising(false))
        #expect(try parse("measured_power", "-59") == .measuredPower(-59))
        #expect(try parse("tx_power", "-20") == .txPower(-20))
        #expect(try parse("tx_power", "20") == .txPower(20))
        #expect(try parse("interval", "250") == .interval(250))
        #expect(try parse("major", "65535") == .major(65535))
        #expect(try parse("minor", "0") == .minor(0))
    }

    @Test(arguments: [
        ("measured_power", "0"), ("measured_power", "-128"), ("tx_power", "21"), ("tx_power", "-128"),
        ("interval", "19"), ("interval", "10241"), ("major", "65536"), ("minor", "-1"),
        ("major", "9999999999999999"),
    ])
    func outOfRangeIsRefused(key: String, payload: String) {
        #expect(refusal(key, Array(payload.utf8))?.kind == .outOfRange)
    }

    @Test(arguments: [
        ("measured_power", "-59.0"), ("measured_power", " -59"), ("measured_power", "-59\n"), ("major", "+5"),
        ("major", "0x10"), ("major", ""), ("major", "-"), ("minor", "1e3"), ("advertising", "on"),
        ("advertising", "true"), ("advertising", "ON "), ("interval", "１００"),
    ])
    func malformedIsRefused(key: String, payload: String) {
        #expect(refusal(key, Array(payload.utf8))?.kind == .malformed)
    }

    @Test func unknownKeysAreRefusedNamingTheKnownOnes() {
        let r = refusal("uuid", Array("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0".utf8))
        #expect(r?.kind == .unknownKey)
        #expect(r?.reason.contains("measured_power") == true)
        #expect(refusal("Measured_Power", Array("-59".utf8))?.kind == .unknownKey)
    }

    @Test func oversizedPayloadsAreRefusedBeforeParsing() {
        // 17 bytes of digits: never parsed, whatever they say.
        #expect(refusal("major", Array(repeating: UInt8(ascii: "1"), count: 17))?.kind == .oversized)
        #expect(refusal("calibration", Array(repeating: UInt8(ascii: " "), count: 2049))?.kind == .oversized)
        #expect(refusal("major", Array("0000000000000001".utf8)) == nil)
    }

    static let record = CalibrationRecord(
        timestamp: "2026-11-29T04:00:00Z", samples: 120, estimate: -61.4, interval95: 0.8, spread: 3.1,
        method: "trimmed-mean-10", receiver: "hci1", receiverAddress: "00:AA:01:01:00:01", offset: 0, txPower: nil)

    @Test func aCalibrationCarriesItsRecord() throws {
        let payload = "{\"measuredPower\":-61,\"calibration\":\(Self.record.json.compactText())}"
        #expect(try parse("calibration", payload) == .calibration(measuredPower: -61, record: Self.record))
    }

    @Test func aBrokenCalibrationIsRefused() {
        let good = Self.record.json.compactText()
        #expect(refusal("calibration", Array("{\"measuredPower\":-61}".utf8))?.kind == .malformed)
        #expect(refusal("calibration", Array("[1]".utf8))?.kind == .malformed)
        #expect(refusal("calibration", Array("{\"measuredPower\":".utf8))?.kind == .malformed)
        #expect(
            refusal("calibration", Array("{\"measuredPower\":5,\"calibration\":\(good)}".utf8))?.kind == .outOfRange)
        #expect(
            refusal("calibration", Array("{\"measuredPower\":-61,\"calibration\":{\"samples\":3}}".utf8))?.kind
                == .malformed)
        #expect(
            refusal("calibration", Array("{\"measuredPower\":-61,\"calibration\":\(good),\"major\":1}".utf8))?.kind
                == .unknownKey)
    }
}

@Suite struct BeaconCommandApplyTests {
    static let profileText = """
        {
          "name": "Bakery",
          "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0",
          "major": 258,
          "minor": 772,
          "measuredPower": -59,
          "custom": "kept"
        }

        """

    func profile() throws -> Profile { try Profile.load(bytes: Array(Self.profileText.utf8), file: "bakery.json") }

    @Test func aCommandSetsOnlyItsKeyAndTheRestIsKept() throws {
        var p = try profile()
        try BeaconCommand.major(1).apply(to: &p)
        try BeaconCommand.interval(300).apply(to: &p)
        try BeaconCommand.txPower(-8).apply(to: &p)
        #expect(p.major == 1 && p.minor == 772 && p.intervalMs == 300 && p.txPower == -8 && p.name == "Bakery")
        #expect(p.document["custom"] == .string("kept"))
        #expect(p.document.keys.prefix(6) == ["name", "uuid", "major", "minor", "measuredPower", "custom"])
    }

    @Test func advertisingOffIsKeptInTheProfileAndOnRemovesTheKey() throws {
        var p = try profile()
        #expect(p.advertisingEnabled)
        try BeaconCommand.advertising(false).apply(to: &p)
        #expect(!p.advertisingEnabled)
        #expect(p.document["advertising"] == .bool(false))
        let reread = try Profile.load(bytes: p.encoded(), file: "bakery.json")
        #expect(!reread.advertisingEnabled)
        try BeaconCommand.advertising(true).apply(to: &p)
        #expect(p.advertisingEnabled && p.document["advertising"] == nil)
    }

    @Test func aProfileWithANonBooleanAdvertisingIsRefused() {
        let text = Self.profileText.replacing("\"custom\"", with: "\"advertising\": \"no\", \"c\"")
        #expect(throws: ProfileError.self) { try Profile.load(bytes: Array(text.utf8), file: "x.json") }
    }

    @Test func aCalibrationWritesMeasuredPowerAndTheRecord() throws {
        var p = try profile()
        try BeaconCommand.calibration(measuredPower: -61, record: BeaconCommandParsingTests.record).apply(to: &p)
        #expect(p.measuredPower == -61)
        #expect(p.calibrationRecord == BeaconCommandParsingTests.record)
    }

    @Test func settingsFollowTheCommand() throws {
        let s = BeaconSettings(profile: try profile())
        #expect(
            s.json
                == #"{"advertising":true,"measured_power":-59,"tx_power":null,"interval":100,"major":258,"minor":772}"#)
        #expect(BeaconCommand.minor(5).applied(to: s).minor == 5)
        #expect(
            BeaconCommand.calibration(measuredPower: -70, record: BeaconCommandParsingTests.record).applied(to: s)
                .measuredPower == -70)
    }
}

@Suite struct CommandRateLimitTests {
    @Test func fourASecondThenRefusedUntilTheWindowMoves() {
        var limit = CommandRateLimit()
        #expect(CommandRateLimit.defaultLimit == 4)
        let admitted = (0..<6).map { limit.admit(at: .milliseconds(100 * $0)) }
        #expect(admitted == [true, true, true, true, false, false])
        // The first fell out of the window at 1.0 s: one more, then none until the next.
        let later = [1000, 1050, 2100].map { limit.admit(at: .milliseconds($0)) }
        #expect(later == [true, false, true])
    }
}

@Suite struct CommandTopicTests {
    let layout = MQTTLayout(
        base: "chain/store12", command: "advertise", discoveryPrefix: "homeassistant", node: "box",
        adapter: "00:1A:7D:DA:71:13", room: "box")

    @Test func onlyThisBaseAndTheSetLevelAreCommands() {
        #expect(layout.commandTarget("chain/store12/beacon/bakery/set/major")! == ("bakery", "major"))
        #expect(layout.commandTarget("chain/store13/beacon/bakery/set/major") == nil)
        #expect(layout.commandTarget("chain/store12x/beacon/bakery/set/major") == nil)
        #expect(layout.commandTarget("chain/store12/beacon/bakery/state") == nil)
        #expect(layout.commandTarget("chain/store12/beacon/bakery/set/major/x") == nil)
        #expect(layout.commandTarget("chain/store12/beacon//set/major") == nil)
        #expect(layout.beaconCommandTopic("bakery", .measuredPower) == "chain/store12/beacon/bakery/set/measured_power")
        #expect(layout.beaconSettingsTopic("bakery") == "chain/store12/beacon/bakery/settings")
    }

    @Test func commandsAreSubscribedOnlyWithControl() {
        var l = layout
        #expect(l.commandSubscriptions.isEmpty)
        #expect(!l.subscriptions.contains { $0.contains("/set/") })
        l.control = true
        #expect(l.commandSubscriptions == ["chain/store12/beacon/+/set/+"])
    }

    @Test func discoveryHasASwitchAndFiveNumbersReadingTheSettings() throws {
        let configs = layout.beaconControlDiscovery("bakery")
        #expect(
            configs.map(\.topic) == [
                "homeassistant/switch/box_001a7dda7113_164b5f65/beacon_bakery_advertising/config",
                "homeassistant/number/box_001a7dda7113_164b5f65/beacon_bakery_measured_power/config",
                "homeassistant/number/box_001a7dda7113_164b5f65/beacon_bakery_tx_power/config",
                "homeassistant/number/box_001a7dda7113_164b5f65/beacon_bakery_interval/config",
                "homeassistant/number/box_001a7dda7113_164b5f65/beacon_bakery_major/config",
                "homeassistant/number/box_001a7dda7113_164b5f65/beacon_bakery_minor/config",
            ])
        let power = try #require(try JSONValue.parse(Array(configs[1].payload.utf8)).objectValue)
        #expect(power["command_topic"] == .string("chain/store12/beacon/bakery/set/measured_power"))
        #expect(power["state_topic"] == .string("chain/store12/beacon/bakery/settings"))
        #expect(power["min"] == .integer(-127) && power["max"] == .integer(-1))
        #expect(power["unique_id"] == .string("ibeacon_box_001a7dda7113_164b5f65_beacon_bakery_measured_power"))
        #expect(power["retain"] == .bool(false))
        var none = layout
        none.discoveryPrefix = nil
        #expect(none.beaconControlDiscovery("bakery").isEmpty)
    }

    @Test func anEventSaysOldNewSourceAndReason() {
        let e = BeaconCommandEvent(
            beacon: "bakery", key: "major", source: "mqtt:chain/store12/beacon/bakery/set/major", old: .integer(1),
            new: .integer(70000), refusal: CommandRefusal(.outOfRange, "major: out of range"), time: "T")
        #expect(
            e.json
                == #"{"event":"command","result":"refused","beacon":"bakery","key":"major","source":"mqtt:chain/store12/beacon/bakery/set/major","old":1,"new":70000,"refusal":"out-of-range","reason":"major: out of range","time":"T"}"#
        )
        #expect(e.text.contains("refused"))
    }
}
