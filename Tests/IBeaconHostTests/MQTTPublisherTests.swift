import FoundationEssentials
import IBeaconCore
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

@testable import IBeaconHost

private func retained(_ topic: String, _ payload: String) -> MQTTMessage {
    MQTTMessage(topic: topic, payload: payload, kind: .retained)
}

private func event(_ n: Int) -> MQTTMessage { MQTTMessage(topic: "b/event", payload: "\(n)", kind: .event) }

private func drain(_ box: inout MQTTOutbox) -> [MQTTMessage] {
    var out: [MQTTMessage] = []
    while let m = box.next() {
        out.append(m)
        box.delivered()
    }
    return out
}

@Suite struct MQTTOutboxTests {
    @Test func whileDisconnectedOnlyTheCurrentStateOfEachTopicIsKept() {
        var box = MQTTOutbox()
        box.setRetained("b/avail", "online")
        box.setRetained("b/region/a/state", "None")
        box.setRetained("b/region/a/state", "ON")
        box.setRetained("b/region/a/state", "OFF")
        #expect(box.next() == nil)  // not connected
        box.connectionUp()
        #expect(drain(&box) == [retained("b/avail", "online"), retained("b/region/a/state", "OFF")])
    }

    /// A broker restarted without persistence has forgotten everything: every connect sends
    /// every retained topic again, unchanged ones included.
    @Test func everyConnectSendsEveryRetainedTopicAgain() {
        var box = MQTTOutbox()
        box.setRetained("b/avail", "online")
        box.setRetained("b/region/a/state", "ON")
        box.connectionUp()
        #expect(drain(&box).count == 2)
        box.setRetained("b/region/a/state", "ON")  // unchanged: nothing to send
        #expect(box.next() == nil)
        box.connectionDown()
        box.connectionUp()
        #expect(drain(&box) == [retained("b/avail", "online"), retained("b/region/a/state", "ON")])
        box.resendAll()  // Home Assistant restarted
        #expect(drain(&box).count == 2)
    }

    @Test func eventsAreBoundedTheOldestDroppedAndCounted() {
        var box = MQTTOutbox(eventCapacity: 5)
        for n in 1...12 { box.event(event(n)) }
        #expect(box.queuedEvents == 5 && box.droppedEvents == 7)
        box.connectionUp()
        #expect(drain(&box).map(\.payload) == ["8", "9", "10", "11", "12"])
    }

    @Test func memoryStaysBoundedAgainstABrokerThatTakesNothing() {
        var box = MQTTOutbox(eventCapacity: 100, window: 8)
        box.connectionUp()
        for n in 1...100_000 {
            box.event(event(n))
            box.setRetained("b/region/\(n % 200)/state", n % 2 == 0 ? "ON" : "OFF")
            _ = box.next()  // handed to the client, never delivered
        }
        #expect(box.outstanding == 8)  // the window: the client's queue cannot grow
        #expect(box.queuedEvents == 100 && box.retainedCount == 200)
        #expect(box.droppedEvents == 100_000 - 100)
    }

    @Test func theWindowHoldsBackUntilDelivered() {
        var box = MQTTOutbox(window: 2)
        box.connectionUp()
        for n in 1...4 { box.event(event(n)) }
        #expect(box.next()?.payload == "1" && box.next()?.payload == "2")
        #expect(box.next() == nil)
        box.delivered()
        #expect(box.next()?.payload == "3")
        #expect(box.next(ignoringWindow: true)?.payload == "4")  // on the way out
    }

    @Test func transientMessagesAreSentNowOrNever() {
        var box = MQTTOutbox(window: 1)
        box.transient(MQTTMessage(topic: "room_presence/k", payload: "a", kind: .transient))
        #expect(box.droppedTransient == 1)
        box.connectionUp()
        box.transient(MQTTMessage(topic: "room_presence/k", payload: "b", kind: .transient))
        box.transient(MQTTMessage(topic: "room_presence/k", payload: "c", kind: .transient))  // window full
        #expect(box.next()?.payload == "b" && box.droppedTransient == 2)
    }

    @Test func aRefusedMessageIsKeptInItsPlace() {
        var box = MQTTOutbox()
        box.connectionUp()
        box.event(event(1))
        box.event(event(2))
        let first = box.next()!
        box.refused(first)
        box.setRetained("b/x", "1")
        let m = box.next()!
        box.refused(m)
        #expect(drain(&box).map(\.payload) == ["1", "1", "2"])
    }
}

/// A connection that records what it is given and is driven by the test.
private final class FakeConnection: MQTTConnection, Sendable {
    let sent = Mutex<[MQTTMessage]>([])
    let up = Atomic(false)
    let handler = Mutex<(any MQTTConnectionHandler)?>(nil)
    var brokerDescription: String { "mqtt://fake:1883" }
    func start(handler: any MQTTConnectionHandler) { self.handler.withLock { $0 = handler } }
    func publish(_ message: MQTTMessage) -> Bool {
        guard up.load(ordering: .relaxed) else { return false }
        sent.withLock { $0.append(message) }
        return true
    }
    func close(timeout: Duration) async {}
    func connect() {
        up.store(true, ordering: .relaxed)
        handler.withLock { $0 }?.connectionUp()
    }
    func drop(_ reason: String) {
        up.store(false, ordering: .relaxed)
        handler.withLock { $0 }?.connectionDown(reason)
    }
}

@Suite struct MQTTPublisherTests {
    let layout = MQTTLayout(base: "t/box", command: "monitor", discoveryPrefix: "ha", node: "box", room: "box")

    @Test func oneLogLinePerOutageAndOneWhenBack() throws {
        let log = RecordingLog()
        let connection = FakeConnection()
        let publisher = MQTTPublisher(layout: layout, connection: connection, logger: log.logger)
        publisher.addRegions([try BeaconRegion(parsing: "deli=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")])
        publisher.start()
        for _ in 1...5 { connection.drop("cannot connect (Connection refused)") }  // five attempts
        connection.connect()
        connection.drop("connection lost (The connection was lost.)")
        connection.drop("cannot connect (Connection refused)")
        connection.connect()
        let mqttLines = log.messages.filter { $0.contains("MQTT") }
        #expect(mqttLines.count == 4, "\(mqttLines)")
        #expect(mqttLines[0].hasPrefix("warning: MQTT: mqtt://fake:1883: cannot connect (Connection refused)"))
        #expect(mqttLines[1].contains("is back after") && mqttLines[3].contains("is back after"))
        #expect(mqttLines[2].contains("connection lost"))
    }

    @Test func afterEveryReconnectTheCurrentPictureIsSentAgain() throws {
        let connection = FakeConnection()
        let publisher = MQTTPublisher(layout: layout, connection: connection, logger: RecordingLog().logger)
        publisher.addRegions([try BeaconRegion(parsing: "deli=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")])
        publisher.start()
        connection.connect()
        publisher.publishRegionState("deli", .inside, reason: "heard", time: nil, identity: "x")
        connection.drop("connection lost")
        publisher.publishRegionState("deli", .outside, reason: "silent", time: nil, identity: "x")
        publisher.publishEvent(json: #"{"event":"exit"}"#)
        connection.sent.withLock { $0.removeAll() }
        connection.connect()
        let sent = connection.sent.withLock { $0 }
        let topics = sent.map(\.topic)
        #expect(topics.contains("ha/binary_sensor/box_1869c382/region_deli/config"))
        #expect(sent.contains(retained("t/box/region/deli/state", "OFF")))
        #expect(sent.contains(retained("t/box/monitor/availability", "online")))
        #expect(sent.last == MQTTMessage(topic: "t/box/event", payload: #"{"event":"exit"}"#, kind: .event))
        // Home Assistant restarting asks for all of it again.
        connection.sent.withLock { $0.removeAll() }
        publisher.received(topic: "ha/status", payload: "online")
        #expect(connection.sent.withLock { $0.count } == 5)
        #expect(connection.sent.withLock { $0.last } == retained("t/box/monitor/availability", "online"))
        publisher.received(topic: "ha/status", payload: "offline")
        #expect(connection.sent.withLock { $0.count } == 5)
    }

    /// Home Assistant shows an entity's last state the moment it becomes available: `online`
    /// waits until every region is determined, and comes after every state, also on reconnects.
    @Test func onlineOnlyOnceEveryRegionIsDeterminedAndAfterTheStates() throws {
        let connection = FakeConnection()
        let publisher = MQTTPublisher(layout: layout, connection: connection, logger: RecordingLog().logger)
        publisher.addRegions([
            try BeaconRegion(parsing: "deli=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"),
            try BeaconRegion(parsing: "bakery=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0:1"),
        ])
        publisher.start()
        connection.connect()
        let online = retained("t/box/monitor/availability", "online")
        publisher.publishRegionState("deli", .inside, reason: "heard", time: nil, identity: "x")
        #expect(!connection.sent.withLock { $0 }.contains(online))
        publisher.publishRegionState("bakery", .outside, reason: "silent", time: nil, identity: "x")
        #expect(connection.sent.withLock { $0.last } == online)
        connection.drop("connection lost")
        connection.sent.withLock { $0.removeAll() }
        connection.connect()
        let sent = connection.sent.withLock { $0 }
        #expect(sent.last == online && sent.filter { $0 == online }.count == 1)
        #expect(sent.contains(retained("t/box/region/bakery/state", "OFF")))
    }

    /// Its own discovery configs come back at connect: one it no longer has is emptied (Home
    /// Assistant removes the entity), its retained states a little later.
    @Test func discoveryThisProcessNoLongerHasIsRemoved() throws {
        let log = RecordingLog()
        let connection = FakeConnection()
        let publisher = MQTTPublisher(
            layout: layout, connection: connection, logger: log.logger, removalDelay: .zero)
        publisher.addRegions([try BeaconRegion(parsing: "deli=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")])
        publisher.start()
        connection.connect()
        let gone = try #require(layout.regionDiscovery("gone"))
        let deli = try #require(layout.regionDiscovery("deli"))
        connection.sent.withLock { $0.removeAll() }
        publisher.received(topic: deli.topic, payload: deli.payload)
        publisher.received(topic: gone.topic, payload: gone.payload)
        #expect(connection.sent.withLock { $0 } == [retained(gone.topic, "")])
        #expect(log.messages.contains { $0.contains("no longer configured here") })
        publisher.idle()
        #expect(
            connection.sent.withLock { $0 }.dropFirst().sorted { $0.topic < $1.topic } == [
                retained("t/box/region/gone/attributes", ""), retained("t/box/region/gone/state", ""),
            ])
    }

    @Test func anotherBoxUnderTheSameBaseIsSaidOnce() {
        let log = RecordingLog()
        let a = MQTTLayout(
            base: "t/box", command: "monitor", discoveryPrefix: "ha", node: "box", adapter: "C0:00:00:00:00:0A",
            room: "box")
        let b = MQTTLayout(
            base: "t/box", command: "monitor", discoveryPrefix: "ha", node: "box", adapter: "C0:00:00:00:00:0B",
            room: "box")
        let publisher = MQTTPublisher(layout: a, connection: FakeConnection(), logger: log.logger)
        publisher.received(topic: a.boxTopic, payload: a.boxPayload)
        #expect(log.messages.isEmpty)
        publisher.received(topic: a.boxTopic, payload: b.boxPayload)
        publisher.received(topic: a.boxTopic, payload: b.boxPayload)
        let said = log.messages.filter {
            $0.contains("another box (box_c0000000000b_1869c382) publishes under t/box too")
        }
        #expect(said.count == 1, "\(log.messages)")
    }

    @Test func rangingAtMostOnceASecondPerBeacon() {
        let connection = FakeConnection()
        let publisher = MQTTPublisher(layout: layout, connection: connection, logger: RecordingLog().logger)
        publisher.start()
        connection.connect()
        connection.sent.withLock { $0.removeAll() }
        for t in stride(from: 0.0, to: 3.0, by: 0.25) {
            publisher.publishRanging(id: "a", name: "a", distance: 1.5, at: t)
            publisher.publishRanging(id: "b", name: "b", distance: 2.5, at: t)
        }
        let sent = connection.sent.withLock { $0 }
        #expect(sent.count == 6 && sent.allSatisfy { $0.topic == "room_presence/box" && !$0.retain })
    }
}

/// Issue 30, item 7: anyone may publish `online` on Home Assistant's status topic.
@Suite struct RepublishLimiterTests {
    @Test func theFirstAtOnceTheRestOnceWhenTheIntervalIsOver() {
        var limiter = RepublishLimiter(interval: .seconds(5))
        #expect(limiter.online(at: .seconds(10)) == true)
        var atOnce = 0
        for i in 1...1999 where limiter.online(at: .seconds(10) + .milliseconds(i)) { atOnce += 1 }
        #expect(atOnce == 0)
        var due = [limiter.due(at: .seconds(14)), limiter.due(at: .seconds(15))]
        due.append(limiter.due(at: .seconds(30)))  // nothing waits: nothing more
        #expect(due == [nil, 1999, nil])
        // A real restart long after: at once again.
        let later = [limiter.online(at: .seconds(40))]
        #expect(later == [true] && limiter.waiting == 0)
    }

    @Test func anOnlineJustAfterTheTrailingRepublishWaitsForTheNextInterval() {
        var limiter = RepublishLimiter(interval: .seconds(5))
        let answers = [limiter.online(at: .zero), limiter.online(at: .seconds(1))]
        let first = limiter.due(at: .seconds(5))
        let next = [limiter.online(at: .seconds(6))]
        let later = [limiter.due(at: .seconds(9)), limiter.due(at: .seconds(10))]
        #expect(answers == [true, false] && first == 1 && next == [false] && later == [nil, 1])
    }
}

@Suite struct HomeAssistantFloodTests {
    let layout = MQTTLayout(base: "t/box", command: "monitor", discoveryPrefix: "ha", node: "box", room: "box")

    /// 2,000 `online` in a second: 2 republishes of the 4 retained topics and 2 log lines
    /// (before: 2,000 of each); an `online` after the interval is answered at once.
    @Test func aFloodOfOnlineIsAnsweredTwiceNotPerMessage() throws {
        let log = RecordingLog()
        let clock = ManualClock()
        let connection = FakeConnection()
        let publisher = MQTTPublisher(
            layout: layout, connection: connection, logger: log.logger, clock: clock, republishInterval: .seconds(5))
        publisher.addRegions([try BeaconRegion(parsing: "deli=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")])
        publisher.start()
        connection.connect()
        connection.sent.withLock { $0.removeAll() }
        for _ in 1...2000 {
            publisher.received(topic: "ha/status", payload: "online")
            clock.advance(by: .microseconds(500))
            publisher.idle()
        }
        #expect(connection.sent.withLock { $0.count } == 4)
        clock.advance(by: .seconds(4))
        publisher.idle()
        #expect(connection.sent.withLock { $0.count } == 8)
        clock.advance(by: .seconds(60))
        publisher.idle()
        #expect(connection.sent.withLock { $0.count } == 8)
        let lines = log.messages.filter { $0.contains("online on ha/status") }
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.last?.contains("1999 more online") == true, "\(lines)")
        publisher.received(topic: "ha/status", payload: "online")
        #expect(connection.sent.withLock { $0.count } == 12)
    }
}

/// Issue 30, item 10: a password file is judged as ssh judges a private key.
@Suite struct SecretFileWarningTests {
    @Test func othersAccessAndAForeignOwnerAreNamedWithTheFix() {
        let path = "/etc/ibeacon/mqtt.password"
        #expect(SafeFile.secretFileWarnings(path: path, mode: 0o100600, owner: 0, user: 0).isEmpty)
        #expect(SafeFile.secretFileWarnings(path: path, mode: 0o100640, owner: 0, user: 0).isEmpty)
        #expect(SafeFile.secretFileWarnings(path: path, mode: 0o100400, owner: 1000, user: 1000).isEmpty)
        let readable = SafeFile.secretFileWarnings(path: path, mode: 0o100644, owner: 0, user: 0)
        #expect(readable.count == 1)
        #expect(readable.first?.contains("readable by every user (mode 0644)") == true)
        #expect(readable.first?.contains("chmod 600 \(path)") == true)
        let writable = SafeFile.secretFileWarnings(path: path, mode: 0o100660, owner: 0, user: 0)
        #expect(writable.first?.contains("writable by users other than its owner (mode 0660)") == true)
        let foreign = SafeFile.secretFileWarnings(path: path, mode: 0o100600, owner: 1000, user: 0)
        #expect(
            foreign == [
                "\(path) holds a password but belongs to uid 1000, neither root nor uid 0 running ibeacon: that user can read it and change it; fix it: chown root \(path)"
            ])
        let both = SafeFile.secretFileWarnings(path: path, mode: 0o100666, owner: 1000, user: 999)
        #expect(both.count == 2 && both[1].contains("chown 999 \(path) (as root)"))
    }
}

/// Issue 40, holes 2, 5 and 6: forged discovery configs and box notes from any client allowed to
/// publish there.
@Suite struct MQTTForgedMessagesTests {
    let layout = MQTTLayout(base: "t/box", command: "monitor", discoveryPrefix: "ha", node: "box", room: "box")

    /// A config the box never published, naming the box's live state and its availability as
    /// its topics.
    func forged(_ n: Int) -> (topic: String, payload: String) {
        let payload =
            #"{"availability_topic":"t/box/monitor/availability","state_topic":"t/box/region/deli/state","#
            + #""json_attributes_topic":"t/box/monitor/availability","n":\#(n)}"#
        return ("ha/binary_sensor/\(layout.node)/forged_\(n)/config", payload)
    }

    fileprivate func running(_ log: RecordingLog) throws -> (MQTTPublisher, FakeConnection) {
        let connection = FakeConnection()
        let publisher = MQTTPublisher(layout: layout, connection: connection, logger: log.logger, removalDelay: .zero)
        publisher.addRegions([try BeaconRegion(parsing: "deli=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")])
        publisher.start()
        connection.connect()
        publisher.publishRegionState("deli", .inside, reason: "heard", time: nil, identity: "x")
        return (publisher, connection)
    }

    @Test func aForgedConfigNeverEmptiesTheLiveStateOrOnline() throws {
        let log = RecordingLog()
        let (publisher, connection) = try running(log)
        #expect(connection.sent.withLock { $0 }.contains(retained("t/box/monitor/availability", "online")))
        connection.sent.withLock { $0.removeAll() }
        let f = forged(1)
        publisher.received(topic: f.topic, payload: f.payload)
        publisher.idle()
        let emptied = connection.sent.withLock { $0 }.filter { $0.payload.isEmpty }.map(\.topic)
        #expect(!emptied.contains("t/box/region/deli/state"))
        #expect(!emptied.contains("t/box/monitor/availability"))
        #expect(!emptied.contains("t/box/region/deli/attributes"))
        #expect(publisher.state.publishes("t/box/region/deli/state"))
        #expect(publisher.state.publishes("t/box/monitor/availability"))
    }

    @Test func aFloodOfForgedConfigsIsBoundedInMemoryLogAndRepublishing() throws {
        let log = RecordingLog()
        let (publisher, connection) = try running(log)
        let retainedBefore = publisher.state.retainedCount
        connection.drop("broker gone")  // nothing leaves: every removal waits
        for n in 0..<2000 {
            let f = forged(n)
            publisher.received(topic: f.topic, payload: f.payload)
        }
        publisher.idle()
        #expect(publisher.state.retainedCount == retainedBefore)
        #expect(publisher.state.queuedRemovals <= publisher.state.removalCapacity)
        let lines = log.messages.filter { $0.contains("no longer configured here") }
        #expect(lines.count <= LineBudget.linesPerMinute, "\(lines.count) lines")
        // Home Assistant's online republishes this box's own topics, not the forged ones.
        connection.connect()
        func drain() {
            for _ in 0..<10 {
                for _ in 0..<64 { publisher.delivered() }
                publisher.idle()
            }
        }
        drain()
        #expect(connection.sent.withLock { $0 }.filter { $0.payload.isEmpty }.count <= 256)
        connection.sent.withLock { $0.removeAll() }
        publisher.received(topic: "ha/status", payload: "online")
        drain()
        #expect(connection.sent.withLock { $0.count } == retainedBefore)
    }

    @Test func aFloodOnTheBoxTopicIsBounded() {
        let log = RecordingLog()
        let publisher = MQTTPublisher(layout: layout, connection: FakeConnection(), logger: log.logger)
        for n in 0..<2000 {
            publisher.received(topic: layout.boxTopic, payload: #"{"node":"forged_\#(n)"}"#)
        }
        let lines = log.messages(atLeast: .error)
        #expect(lines.count <= LineBudget.linesPerMinute + 1, "\(lines.count) lines")
        #expect(lines.first?.contains("another box (forged_0)") == true)
    }
}
