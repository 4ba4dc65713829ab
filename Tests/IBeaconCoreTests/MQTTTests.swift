import FoundationEssentials
import Testing

@testable import IBeaconCore

@Suite struct MQTTBrokerURLTests {
    @Test func defaultsAndExplicitPorts() throws {
        let plain = try MQTTBrokerURL(parsing: "mqtt://broker.lan")
        #expect(plain == MQTTBrokerURL(tls: false, host: "broker.lan", port: 1883))
        let tls = try MQTTBrokerURL(parsing: "MQTTS://10.0.0.2:8884/")
        #expect(tls == MQTTBrokerURL(tls: true, host: "10.0.0.2", port: 8884))
        #expect(try MQTTBrokerURL(parsing: "mqtts://h").port == 8883)
        let v6 = try MQTTBrokerURL(parsing: "mqtt://[fe80::1]:1884")
        #expect(v6.host == "fe80::1" && v6.port == 1884 && v6.description == "mqtt://[fe80::1]:1884")
        let user = try MQTTBrokerURL(parsing: "mqtt://store%2012@broker")
        #expect(user.user == "store 12" && user.description == "mqtt://broker:1883")
    }

    @Test func aPasswordInTheURLIsRefusedSayingWhereToPutIt() {
        #expect {
            try MQTTBrokerURL(parsing: "mqtt://box:s3cret@broker")
        } throws: { error in
            let text = "\(error)"
            return text.contains("password in the URL is refused") && text.contains("--mqtt-password-file")
                && text.contains("IBEACON_MQTT_PASSWORD") && !text.contains("s3cret")
        }
    }

    @Test(arguments: [
        ("broker:1883", "no scheme"),
        ("http://broker", "scheme must be mqtt or mqtts"),
        ("mqtt://", "no host"),
        ("mqtt://broker:0", "within 1…65535"),
        ("mqtt://broker:65536", "within 1…65535"),
        ("mqtt://broker:", "got nothing"),
        ("mqtt://broker:12ab", "within 1…65535"),
        ("mqtt://broker/ibeacon", "--mqtt-base"),
        ("mqtt://broker?x=1", "query or fragment"),
        ("mqtt://bro ker", "not a host name"),
        ("mqtt://[fe80::1", "closing ]"),
        ("mqtt://[zz]", "not an IPv6 address"),
        ("mqtt://@broker", "user name is empty"),
        ("mqtt://%zz@broker", "badly %-encoded"),
        ("mqtt://a%0Ab@broker", "control character"),
    ])
    func unusableURLsSayWhy(_ text: String, _ words: String) {
        #expect {
            try MQTTBrokerURL(parsing: text)
        } throws: { error in
            "\(error)".contains(words) && "\(error)".contains("--mqtt \(text)")
        }
    }
}

@Suite struct MQTTTopicTests {
    @Test func aNameBecomesExactlyOneSafeLevel() {
        #expect(MQTTTopic.level("bakery") == "bakery")
        #expect(MQTTTopic.level("a/b+c#d") == "a_b_c_d")
        #expect(MQTTTopic.level("tab\there\u{0}\u{7F}\u{85}") == "tab_here___")
        #expect(MQTTTopic.level("") == "_")
        #expect(MQTTTopic.level("$SYS") == "_SYS")
        #expect(MQTTTopic.level("Bäckerei café") == "Bäckerei café")  // UTF-8 is fine in topics
    }

    @Test func homeAssistantIdentifiersAreAlphanumeric() {
        #expect(MQTTTopic.identifier("Bäckerei 2/nord") == "B_ckerei_2_nord")
        #expect(MQTTTopic.identifier("store-12_a") == "store-12_a")
        #expect(MQTTTopic.identifier("") == "_")
    }

    @Test(arguments: [
        ("", "empty"), ("a/+/b", "wildcards"), ("a/#", "wildcards"), ("/a", "empty topic level"),
        ("a/", "empty topic level"), ("a//b", "empty topic level"), ("$SYS/x", "belong to the broker"),
        ("a\u{1}b", "control character"), (String(repeating: "x", count: 201), "longer than 200"),
    ])
    func unusablePrefixes(_ text: String, _ words: String) {
        #expect { try MQTTTopic.validatePrefix(text, option: "--mqtt-base") } throws: { "\($0)".contains(words) }
    }

    @Test func namesThatWouldShareATopicAreRefused() throws {
        try MQTTTopic.checkDistinct(["bakery", "deli", "a/b"], kind: "region")
        #expect {
            try MQTTTopic.checkDistinct(["a/b", "a_b"], kind: "region")
        } throws: { "\($0)".contains("\"a/b\" and \"a_b\"") && "\($0)".contains("name them apart") }
        #expect(throws: MQTTSettingError.self) { try MQTTTopic.checkDistinct(["Deli", "deli"], kind: "region") }
    }
}

@Suite struct MQTTPayloadTests {
    let layout = MQTTLayout(
        base: "ibeacon/box1", command: "monitor", discoveryPrefix: "homeassistant", node: "box-1.lan",
        room: "kitchen/2")

    @Test func topicsOfTheLayout() {
        #expect(layout.availabilityTopic == "ibeacon/box1/monitor/availability")
        #expect(layout.regionStateTopic("a/b") == "ibeacon/box1/region/a_b/state")
        #expect(layout.regionAttributesTopic("deli") == "ibeacon/box1/region/deli/attributes")
        #expect(layout.beaconStateTopic("front#door") == "ibeacon/box1/beacon/front_door/state")
        #expect(layout.eventTopic == "ibeacon/box1/event")
        #expect(layout.rangingTopic == "room_presence/kitchen_2")
        #expect(layout.homeAssistantStatusTopic == "homeassistant/status")
        #expect(layout.node == "box-1_lan_0131469e")
    }

    /// The keys and values Home Assistant's binary_sensor discovery reads (FIELD.md).
    @Test func regionDiscoveryIsAPresenceBinarySensorOfThisBox() throws {
        let d = try #require(layout.regionDiscovery("a/b"))
        #expect(d.topic == "homeassistant/binary_sensor/box-1_lan_0131469e/region_a_b/config")
        let config = try #require(try JSONValue.parse(Array(d.payload.utf8)).objectValue)
        // State and attributes in one message: Home Assistant records each change once.
        #expect(config["state_topic"] == .string("ibeacon/box1/region/a_b/attributes"))
        #expect(config["value_template"] == .string(RegionPresence.valueTemplate))
        #expect(config["unique_id"] == .string("ibeacon_box-1_lan_0131469e_region_a_b"))
        #expect(config["device_class"] == .string("presence"))
        #expect(config["payload_on"] == .string("ON") && config["payload_off"] == .string("OFF"))
        #expect(config["availability_topic"] == .string("ibeacon/box1/monitor/availability"))
        #expect(config["json_attributes_topic"] == .string("ibeacon/box1/region/a_b/attributes"))
        let device = try #require(config["device"]?.objectValue)
        #expect(device["identifiers"] == .array([.string("ibeacon_box-1_lan_0131469e")]))
        #expect(device["sw_version"] == .string(ProgramInfo.version))
        #expect(
            config["origin"]
                == .object(JSONObject([("name", .string("ibeacon")), ("sw_version", .string(ProgramInfo.version))])))
        let beacon = try #require(layout.beaconDiscovery("front door"))
        #expect(beacon.topic == "homeassistant/binary_sensor/box-1_lan_0131469e/beacon_front_door/config")
        #expect(beacon.payload.contains(#""device_class":"running""#))
        var off = layout
        off.discoveryPrefix = nil
        #expect(off.regionDiscovery("x") == nil && off.homeAssistantStatusTopic == nil)
    }

    /// Boxes cloned from one image share the host name, not the adapter: the node (device,
    /// discovery topics, unique ids) carries the adapter's address.
    /// Cloned images share the host name and CSR-clone dongles share 00:1A:7D:DA:71:13: two such
    /// boxes under their own bases are two nodes — two devices, other discovery topics and
    /// unique ids, one never removing the other's entities.
    @Test func theBaseKeepsBoxesOfOneHostNameAndOneAddressApart() throws {
        func box(_ base: String) -> MQTTLayout {
            MQTTLayout(
                base: base, command: "advertise", discoveryPrefix: "homeassistant", node: "store-pi",
                adapter: "00:1A:7D:DA:71:13", room: "r")
        }
        let (s12, s13) = (box("chain/store12"), box("chain/store13"))
        #expect(s12.node == "store-pi_001a7dda7113_164b5f65")
        #expect(s13.node == "store-pi_001a7dda7113_3dd98a86")
        let (d12, d13) = (try #require(s12.beaconDiscovery("door")), try #require(s13.beaconDiscovery("door")))
        #expect(d12.topic != d13.topic)
        let ids = try [d12, d13].map { d in
            let config = try #require(try JSONValue.parse(Array(d.payload.utf8)).objectValue)
            let device = try #require(config["device"]?.objectValue)
            return (config["unique_id"], device["identifiers"], device["name"])
        }
        #expect(ids[0].0 != ids[1].0 && ids[0].1 != ids[1].1)
        #expect(ids[0].2 == .string("ibeacon store-pi 00:1A:7D:DA:71:13 (chain/store12)"))
        #expect(s12.healthDiscovery().map(\.topic) != s13.healthDiscovery().map(\.topic))
        // Each box's cleanup takes only configs of its own base, also under the node they shared.
        let shared = "homeassistant/binary_sensor/store-pi_001a7dda7113/beacon_door/config"
        #expect(s12.subscriptions.contains("homeassistant/+/store-pi_001a7dda7113/+/config"))
        let of13 = #"{"availability_topic":"chain/store13/advertise/availability"}"#
        #expect(s12.staleDiscovery(topic: shared, payload: of13, current: []) == [])
        #expect(s13.staleDiscovery(topic: shared, payload: of13, current: []) == [shared])
        // Bases that identifier() would fold into one stay apart, and the digest is stable.
        #expect(box("a/b").node != box("a_b").node)
        #expect(MQTTLayout.baseDigest("chain/store12") == "164b5f65")
        #expect(MQTTLayout.baseDigest("") == MQTTLayout.baseDigest(""))
    }

    @Test func theAdapterKeepsBoxesOfOneHostNameApart() throws {
        let a = MQTTLayout(
            base: "ibeacon/box1", command: "monitor", discoveryPrefix: "homeassistant", node: "box-1.lan",
            adapter: "F0:F1:F2:F3:F4:0A", room: "r")
        let b = MQTTLayout(
            base: "ibeacon/box1", command: "monitor", discoveryPrefix: "homeassistant", node: "box-1.lan",
            adapter: "F0:F1:F2:F3:F4:0B", room: "r")
        #expect(a.node == "box-1_lan_f0f1f2f3f40a_0131469e")
        #expect(
            a.regionDiscovery("x")?.topic
                == "homeassistant/binary_sensor/box-1_lan_f0f1f2f3f40a_0131469e/region_x/config")
        #expect(a.regionDiscovery("x")?.topic != b.regionDiscovery("x")?.topic)
        #expect(a.subscriptions.contains("homeassistant/+/box-1_lan_f0f1f2f3f40a_0131469e/+/config"))
        // Where earlier versions put them: under the host name and address, and the host name alone.
        #expect(a.subscriptions.contains("homeassistant/+/box-1_lan_f0f1f2f3f40a/+/config"))
        #expect(a.subscriptions.contains("homeassistant/+/box-1_lan/+/config"))
        #expect(a.otherBox(inBoxPayload: a.boxPayload) == nil)
        #expect(a.otherBox(inBoxPayload: b.boxPayload) == "box-1_lan_f0f1f2f3f40b_0131469e")
        #expect(a.otherBox(inBoxPayload: "not json") == nil)
    }

    /// A config of this process (its availability topic) that it no longer publishes goes, with
    /// its states; another process's, a current one, or an empty one stays.
    /// Issue 40, hole 2: a forged config naming the availability or another command's topic as
    /// its state: only the config itself is stale, not those.
    @Test func aForgedConfigNamesNoTopicButAnEntitysStates() {
        let layout = MQTTLayout(base: "t/box", command: "monitor", discoveryPrefix: "ha", node: "box", room: "box")
        let payload =
            #"{"availability_topic":"t/box/monitor/availability","state_topic":"t/box/advertise/availability","#
            + #""json_attributes_topic":"t/box/monitor/availability"}"#
        let topic = "ha/binary_sensor/box/forged/config"
        #expect(layout.staleDiscovery(topic: topic, payload: payload, current: []) == [topic])
        let entity =
            #"{"availability_topic":"t/box/monitor/availability","state_topic":"t/box/region/old/state"}"#
        #expect(layout.staleDiscovery(topic: topic, payload: entity, current: []) == [topic, "t/box/region/old/state"])
    }

    @Test func staleDiscoveryIsThisProcessesOnly() throws {
        let old = try #require(layout.regionDiscovery("gone"))
        let kept = try #require(layout.regionDiscovery("kept"))
        #expect(
            layout.staleDiscovery(topic: old.topic, payload: old.payload, current: [kept.topic]) == [
                old.topic, "ibeacon/box1/region/gone/attributes", "ibeacon/box1/region/gone/state",
            ])
        #expect(layout.staleDiscovery(topic: kept.topic, payload: kept.payload, current: [kept.topic]).isEmpty)
        #expect(layout.staleDiscovery(topic: old.topic, payload: "", current: []).isEmpty)
        var advertise = layout
        advertise.command = "advertise"
        let beacon = try #require(advertise.beaconDiscovery("door"))
        #expect(layout.staleDiscovery(topic: beacon.topic, payload: beacon.payload, current: []).isEmpty)
        #expect(layout.staleDiscovery(topic: old.topic, payload: "{not json", current: []).isEmpty)
    }

    /// A steered beacon that left the box's configuration (or a box no longer run with
    /// `--mqtt-control`): each of its entities goes, and its retained settings with them, so no
    /// stale value waits on the broker for the next Home Assistant to show.
    @Test func aSteeredBeaconThatLeftTakesItsSettingsWithIt() throws {
        var advertise = layout
        advertise.command = "advertise"
        let control = advertise.controlled().beaconControlDiscovery("gone")
        #expect(control.count == 6)
        for entity in control {
            #expect(
                advertise.staleDiscovery(topic: entity.topic, payload: entity.payload, current: []) == [
                    entity.topic, "ibeacon/box1/beacon/gone/settings",
                ])
        }
        // Never a command topic, nor another level below the beacon.
        #expect(!advertise.isEntityStateTopic("ibeacon/box1/beacon/gone/set"))
        #expect(!advertise.isEntityStateTopic("ibeacon/box1/region/gone/settings"))
    }

    /// The box's health: two diagnostic sensors of its device, read from one retained message.
    @Test func healthIsTwoDiagnosticSensorsOfTheBox() throws {
        let sensors = layout.healthDiscovery()
        #expect(
            sensors.map(\.topic) == [
                "homeassistant/sensor/box-1_lan_0131469e/monitor_receiver/config",
                "homeassistant/sensor/box-1_lan_0131469e/monitor_reports/config",
            ])
        for s in sensors {
            let config = try #require(try JSONValue.parse(Array(s.payload.utf8)).objectValue)
            #expect(config["entity_category"] == .string("diagnostic"))
            #expect(config["state_topic"] == .string("ibeacon/box1/monitor/health"))
            #expect(config["device"] == layout.deviceJSON)
        }
        var health = ReceiverHealth(device: "hci0", adapter: "00:1A:7D:DA:71:13")
        health.reportsPerMinute = 600
        #expect(health.json.hasPrefix(#"{"receiver":"hearing","reason":null,"cause":null,"reportsPerMinute":600,"#))
        health.deafness = Deafness(.watchdog, "nothing heard for 90 s")
        let object = try #require(try JSONValue.parse(Array(health.json.utf8)).objectValue)
        #expect(object["receiver"] == .string("deaf") && object["cause"] == .string("watchdog"))
        #expect(object["adapter"] == .string("00:1A:7D:DA:71:13") && object["version"] == .string(ProgramInfo.version))
    }

    @Test func statePayloadsAreWhatABinarySensorReads() {
        #expect(RegionPresence.inside.payload == "ON")
        #expect(RegionPresence.outside.payload == "OFF")
        #expect(RegionPresence.unknown.payload == "None")
        #expect(BeaconRunState.advertising.payload == "ON")
        #expect(BeaconRunState.recovering.payload == "OFF" && BeaconRunState.stopped.payload == "OFF")
    }

    @Test func rangingIsTheMqttRoomObject() {
        #expect(
            MQTTPayload.ranging(id: "x-1-2", name: "x", distance: 2.0) == #"{"id":"x-1-2","name":"x","distance":2.00}"#)
        let b = IBeacon(
            proximityUUID: UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!, major: 0x0102, minor: 0x0304,
            measuredPower: -59)
        #expect(MQTTPayload.rangingID(b) == "e2c56db5-dffb-48d2-b060-d0f5a71096e0-258-772")
    }

    @Test func attributesCarryStateReasonAndTime() {
        let text = MQTTPayload.regionAttributes(
            name: "deli", state: .unknown, reason: "monitoring started", time: nil, identity: "E2C5:1")
        #expect(
            text
                == #"{"region":"deli","presence":"unknown","reason":"monitoring started","time":null,"identity":"E2C5:1"}"#
        )
        let b = IBeacon(
            proximityUUID: UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!, major: 0x0102, minor: 0x0304,
            measuredPower: -59)
        let status = BeaconStatusMessage(
            name: "door", state: .recovering, beacon: b, intervalMilliseconds: 100, txPower: nil, device: "hci0",
            since: "2026-11-26T10:00:00.000Z", lastRecovery: "2026-11-26T10:00:00.000Z",
            lastRecoveryCause: "HCI Reset by another host")
        let object = try? JSONValue.parse(Array(status.json.utf8)).objectValue
        #expect(object?["status"] == .string("recovering") && object?["major"] == .integer(258))
        #expect(object?["measuredPower"] == .integer(-59) && object?["txPower"] == .null)
        #expect(object?["lastRecoveryCause"] == .string("HCI Reset by another host"))
    }
}

/// A string of one scalar, for those a literal may not hold (Swift refuses some noncharacters).
private func nc(_ value: UInt32) -> String { String(Character(Unicode.Scalar(value)!)) }

/// Issue 30, items 8 and 9.
@Suite struct MQTTSecurityTests {
    @Test(arguments: [
        ("http://box:S3cr3t@127.0.0.1", "http://box:***@127.0.0.1"),
        ("mqtt://box:S3cr3t@h/topic", "mqtt://box:***@h/topic"),
        ("mqtt//box:S3cr3t@h", "mqtt//box:***@h"),
        ("box:S3cr3t@mqtt://h", "box:***@mqtt://h"),
        ("mqtt://box:S3c@r3t@h:1", "mqtt://box:***@h:1"),
        ("mqtt://box@h:1883", "mqtt://box@h:1883"),
        ("mqtt://h:1883", "mqtt://h:1883"),
    ])
    func aURLIsQuotedWithoutItsPassword(_ text: String, _ shown: String) {
        #expect(MQTTBrokerURL.redacted(text) == shown)
    }

    @Test(arguments: [
        "http://box:S3cr3t@127.0.0.1", "mqtt://box:S3cr3t@h/topic", "mqtt://box:S3cr3t@h?x", "mqtt://box:S3cr3t@[::1",
        "mqtt://box:S3cr3t@h:99999", "mqtt//box:S3cr3t@h",
    ])
    func noErrorQuotesThePassword(_ text: String) {
        #expect {
            try MQTTBrokerURL(parsing: text)
        } throws: { error in
            !"\(error)".contains("S3cr3t")
        }
    }

    @Test func noncharactersAreFoundWhereverTheyAre() {
        #expect(MQTTTopic.noncharacter(in: "Bäckerei café \u{FEFF}\u{200B}") == nil)
        #expect(MQTTTopic.noncharacter(in: "a" + nc(0xFDD0))?.value == 0xFDD0)
        #expect(MQTTTopic.noncharacter(in: "a" + nc(0xFDEF))?.value == 0xFDEF)
        #expect(MQTTTopic.noncharacter(in: "a" + nc(0xFFFE))?.value == 0xFFFE)
        #expect(MQTTTopic.noncharacter(in: "a" + nc(0x1FFFF))?.value == 0x1FFFF)
        #expect(MQTTTopic.noncharacter(in: "a" + nc(0x10FFFE))?.value == 0x10FFFE)
        #expect(MQTTTopic.noncharacter(in: "a\u{FDCF}\u{FDF0}\u{FFFD}") == nil)
    }

    @Test func aRegionNameMQTTCannotCarryIsRefusedNamingTheRule() {
        let layout = MQTTLayout(
            base: "chain/store12", command: "monitor", discoveryPrefix: "homeassistant",
            node: "box", room: "box")
        #expect(throws: Never.self) {
            try layout.checkRegionNames(["bakery", "Bäckerei", String(repeating: "y", count: 60_000)])
        }
        #expect {
            try layout.checkRegionNames(["bakery", "deli" + nc(0xFFFE)])
        } throws: { error in
            "\(error)".hasPrefix("the region \"deli") && "\(error)".contains("contains the Unicode noncharacter U+FFFE")
        }
        #expect {
            try layout.checkRegionNames([String(repeating: "y", count: 65_520)])
        } throws: { error in
            "\(error)".contains("bytes long; MQTT allows at most 65535: give the region a shorter name")
        }
        #expect {
            try layout.checkBeaconNames(["door" + nc(0xFDD0)])
        } throws: { error in
            "\(error)".hasPrefix("the profile \"door")
                && "\(error)".contains("contains the Unicode noncharacter U+FDD0")
        }
        #expect { try MQTTTopic.validatePrefix("a/" + nc(0xFFFF), option: "--mqtt-base") } throws: {
            "\($0)".contains("noncharacter U+FFFF")
        }
    }
}
