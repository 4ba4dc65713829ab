import IBeaconCore
import IBeaconHost
import IBeaconTestSupport
import Synchronization
import Testing

/// A broker and a box in one: `script` answers each publish (acknowledge, refuse, and the
/// box's messages), and `retained` is what the broker hands over at subscription.
private final class ScriptedBroker: MQTTConnection, Sendable {
    let sent = Mutex<[MQTTMessage]>([])
    let retained: [(String, String)]
    let script: @Sendable (MQTTMessage, any MQTTConnectionHandler) -> Void
    let reachable: Bool
    var brokerDescription: String { "mqtt://fake:1883" }
    init(
        retained: [(String, String)] = [], reachable: Bool = true,
        script: @escaping @Sendable (MQTTMessage, any MQTTConnectionHandler) -> Void
    ) {
        self.retained = retained
        self.reachable = reachable
        self.script = script
    }
    let handler = Mutex<(any MQTTConnectionHandler)?>(nil)
    func start(handler: any MQTTConnectionHandler) {
        self.handler.withLock { $0 = handler }
        guard reachable else { return handler.connectionDown("cannot connect (Connection refused)") }
        for (t, p) in retained { handler.received(topic: t, payload: p) }
        handler.connectionUp()
    }
    func publish(_ message: MQTTMessage) -> Bool {
        sent.withLock { $0.append(message) }
        if let h = handler.withLock({ $0 }) { script(message, h) }
        return true
    }
    func close(timeout: Duration) async {}
}

@Suite struct CalibrationSenderTests {
    static let record = CalibrationRecord(
        timestamp: "2026-11-29T04:00:00Z", samples: 412, estimate: -61.37, interval95: 0.81, spread: 2.5,
        method: "apple", receiver: "hci1", receiverAddress: "C0:32:00:00:00:09", offset: 0, txPower: nil)
    let handover = CalibrationHandover(
        beacon: "front-door", measuredPower: -61, record: Self.record, base: "chain/store12")

    @Test func theCommandIsTheContractsPayloadAtQoS1NotRetained() throws {
        #expect(handover.commandTopic == "chain/store12/beacon/front-door/set/calibration")
        let object = try #require(try JSONValue.parse(Array(handover.payload.utf8)).objectValue)
        #expect(object["measuredPower"] == .integer(-61))
        let evidence = try #require(object["calibration"])
        #expect(try CalibrationRecord(json: evidence) == Self.record)
        let broker = ScriptedBroker { _, _ in }
        let sender = CalibrationSender(handover: handover, connection: broker, logger: RecordingLog().logger)
        broker.start(handler: sender)
        let sent = try #require(broker.sent.withLock { $0 }.first)
        #expect(sent.topic == handover.commandTopic && sent.atLeastOnce && !sent.retain)
        #expect(sent.payload == handover.payload)
    }

    @Test func theBoxsSettingsAfterTheAcknowledgementConfirm() async {
        let settings = handover.settingsTopic
        let broker = ScriptedBroker { message, h in
            h.delivered()
            h.received(topic: settings, payload: #"{"measured_power":-61,"tx_power":null,"interval":100}"#)
        }
        let sender = CalibrationSender(handover: handover, connection: broker, logger: RecordingLog().logger)
        let outcome = await sender.run(timeout: .seconds(2))
        #expect(outcome == .confirmed("measured_power -61 in chain/store12/beacon/front-door/settings"))
        #expect(broker.sent.withLock { $0.count } == 1)
    }

    /// What the broker holds from before (the retained settings, even with the same value) is
    /// no answer: only what comes after the broker took the command.
    @Test func retainedSettingsFromBeforeTheCommandAreNoAnswer() async {
        let broker = ScriptedBroker(retained: [(handover.settingsTopic, #"{"measured_power":-61}"#)]) { _, h in
            h.delivered()
        }
        let sender = CalibrationSender(handover: handover, connection: broker, logger: RecordingLog().logger)
        #expect(await sender.run(timeout: .milliseconds(200)) == .noAnswer)
    }

    @Test func otherBeaconsOtherValuesAndJunkAreNoAnswer() async {
        let (settings, event) = (handover.settingsTopic, handover.eventTopic)
        let broker = ScriptedBroker { _, h in
            h.delivered()
            h.received(topic: settings, payload: #"{"measured_power":-59}"#)  // not this value
            h.received(topic: settings, payload: "not json")
            h.received(topic: settings, payload: String(repeating: " ", count: 20000) + #"{"measured_power":-61}"#)
            h.received(
                topic: event,
                payload: #"{"beacon":"back-door","key":"calibration","new":-61,"source":"mqtt","reason":null}"#)
            h.received(
                topic: event, payload: #"{"beacon":"front-door","key":"interval","new":-61,"source":"mqtt"}"#)
        }
        let sender = CalibrationSender(handover: handover, connection: broker, logger: RecordingLog().logger)
        #expect(await sender.run(timeout: .milliseconds(200)) == .noAnswer)
    }

    @Test func aRefusalEventIsTheBoxsRefusalWithItsReason() async {
        let event = handover.eventTopic
        let broker = ScriptedBroker { _, h in
            h.delivered()
            h.received(
                topic: event,
                payload: #"{"event":"refused","beacon":"front-door","key":"calibration","source":"mqtt","#
                    + #""old":-59,"new":-61,"reason":"more than 5 changes a second"}"#)
        }
        let sender = CalibrationSender(handover: handover, connection: broker, logger: RecordingLog().logger)
        let outcome = await sender.run(timeout: .seconds(2))
        #expect(outcome == .refusedByBox("more than 5 changes a second"))
        #expect(outcome.refusedByBox)
        #expect(outcome.problem(handover, timeout: .seconds(2))?.contains("more than 5 changes a second") == true)
    }

    @Test func anAcceptedEventConfirms() async {
        let event = handover.eventTopic
        let broker = ScriptedBroker { _, h in
            h.delivered()
            h.received(
                topic: event,
                payload: #"{"event":"applied","beacon":"front-door","key":"calibration","source":"mqtt","#
                    + #""old":-59,"new":-61,"reason":null}"#)
        }
        let sender = CalibrationSender(handover: handover, connection: broker, logger: RecordingLog().logger)
        #expect(
            await sender.run(timeout: .seconds(2)) == .confirmed("an accepted change to -61 dBm in chain/store12/event")
        )
    }

    @Test func theBrokersRefusalAndAnUnreachableBrokerAreSaid() async {
        let refusing = ScriptedBroker { _, h in
            h.brokerRefused("Not authorized (MQTT reason code 0x87)")
            h.delivered()
        }
        var sender = CalibrationSender(handover: handover, connection: refusing, logger: RecordingLog().logger)
        let refused = await sender.run(timeout: .seconds(2))
        #expect(refused == .refusedByBroker("Not authorized (MQTT reason code 0x87)") && !refused.refusedByBox)
        #expect(refused.problem(handover, timeout: .seconds(2))?.contains("ACL") == true)
        let absent = ScriptedBroker(reachable: false) { _, _ in }
        sender = CalibrationSender(handover: handover, connection: absent, logger: RecordingLog().logger)
        #expect(await sender.run(timeout: .milliseconds(100)) == .notSent("cannot connect (Connection refused)"))
        let silent = ScriptedBroker { _, h in h.delivered() }
        sender = CalibrationSender(handover: handover, connection: silent, logger: RecordingLog().logger)
        let none = await sender.run(timeout: .milliseconds(100))
        #expect(none.problem(handover, timeout: .milliseconds(100))?.contains("no box confirmed it") == true)
    }

    /// The box side (BeaconControl, advertise --mqtt-control) takes exactly what is sent, on the
    /// topic its layout subscribes to, and its events read as the answers they are.
    @Test func theBoxsOwnCodeTakesTheCommandAndItsEventsAnswer() throws {
        let layout = MQTTLayout(
            base: "chain/store12", command: "advertise", discoveryPrefix: nil, node: "box", room: "box"
        ).controlled()
        #expect(layout.beaconCommandTopic("front-door", .calibration) == handover.commandTopic)
        #expect(layout.beaconSettingsTopic("front-door") == handover.settingsTopic)
        #expect(layout.commandTarget(handover.commandTopic)?.key == "calibration")
        let command = try BeaconCommand.parse(key: "calibration", payload: Array(handover.payload.utf8))
        #expect(command == .calibration(measuredPower: -61, record: Self.record))
        let before = BeaconSettings(
            advertising: true, measuredPower: -59, txPower: nil, intervalMs: 100, major: 1, minor: 2)
        let after = command.applied(to: before)
        #expect(handover.answer(topic: handover.settingsTopic, payload: after.json) != nil)
        #expect(handover.answer(topic: handover.settingsTopic, payload: before.json) == nil)
        func event(_ refusal: CommandRefusal?, new: JSONValue) -> String {
            BeaconCommandEvent(
                beacon: "front-door", key: "calibration", source: "mqtt:" + handover.commandTopic,
                old: .integer(-59), new: new, refusal: refusal, time: "2026-11-29T05:00:00.000Z"
            ).json
        }
        let applied = event(nil, new: after.value(of: .calibration))
        #expect(
            handover.answer(topic: handover.eventTopic, payload: applied)
                == .confirmed(
                    "an accepted change to -61 dBm in chain/store12/event"))
        let refused = event(CommandRefusal(.rateLimited, "more than 4 commands a second"), new: .string("{…"))
        #expect(
            handover.answer(topic: handover.eventTopic, payload: refused) == .refused("more than 4 commands a second"))
    }

    @Test func theOptionsOfApplyTo() {
        #expect(CalibrationHandover.optionProblem((nil, false, false, nil)) == nil)
        #expect(CalibrationHandover.optionProblem(("door", true, true, nil)) == nil)
        #expect(
            CalibrationHandover.optionProblem((nil, true, false, nil))?.contains("--mqtt is for --apply-to") == true)
        #expect(CalibrationHandover.optionProblem(("door", false, true, nil))?.contains("needs --mqtt URL") == true)
        #expect(CalibrationHandover.optionProblem(("door", true, false, nil))?.contains("needs --mqtt-base") == true)
        #expect(CalibrationHandover.optionProblem(("a/b", true, true, nil))?.contains("one topic level") == true)
        #expect(CalibrationHandover.optionProblem(("door", true, true, "x.json"))?.contains("drop --write") == true)
    }
}
