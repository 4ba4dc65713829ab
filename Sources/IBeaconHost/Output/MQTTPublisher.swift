import IBeaconCore
import Logging
import Synchronization

/// One message to a broker.
public struct MQTTMessage: Sendable, Equatable {
    /// How the publisher treats a message that cannot be sent now.
    public enum Kind: Sendable, Equatable {
        /// The current value of a topic: kept (only the latest), sent again after every reconnect.
        case retained
        /// Kept in order while it cannot be sent, within a bound.
        case event
        /// Sent now or never (a distance goes stale).
        case transient
    }
    public var topic: String
    public var payload: String
    public var kind: Kind
    /// Retained on the broker (MQTT RETAIN flag).
    public var retain: Bool { kind == .retained }
    /// At least once (QoS 1: the broker acknowledges it, `delivered`), else at most once (QoS 0).
    public var atLeastOnce: Bool
    public init(topic: String, payload: String, kind: Kind, atLeastOnce: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.kind = kind
        self.atLeastOnce = atLeastOnce
    }
}

/// What a client library tells the publisher. Called from the client's own thread.
public protocol MQTTConnectionHandler: AnyObject, Sendable {
    /// The broker accepted the connection (CONNACK 0).
    func connectionUp()
    /// The connection attempt failed or the connection was lost; `reason` says why.
    func connectionDown(_ reason: String)
    /// A message handed to the client has left it (QoS 0: written to the socket; QoS 1: the
    /// broker acknowledged it, `brokerRefused` first when it refused it).
    func delivered()
    /// The broker acknowledged a QoS 1 message with a refusal (MQTT 5 PUBACK reason code 0x80 or
    /// more, such as Not authorized, 0x87: mosquitto's ACL); `reason` says which.
    func brokerRefused(_ reason: String)
    /// A message arrived on a subscribed topic.
    func received(topic: String, payload: String)
    /// The same, with the message's retain flag (set when the broker replays it from its store).
    func received(topic: String, payload: String, retained: Bool)
    /// The client's loop came round: time to hand it what is waiting.
    func idle()
}

extension MQTTConnectionHandler {
    /// The publisher sends nothing at QoS 1: nothing to do.
    public func brokerRefused(_ reason: String) {}
    public func received(topic: String, payload: String, retained: Bool) { received(topic: topic, payload: payload) }
}

/// A connection to a broker that never blocks its caller (libmosquitto in IBeaconTransports).
public protocol MQTTConnection: Sendable {
    /// `mqtt://host:port`, for the log.
    var brokerDescription: String { get }
    /// Starts connecting in the background (and reconnecting, with back-off, for ever).
    func start(handler: any MQTTConnectionHandler)
    /// Queues a message; false when the client refuses it (not connected).
    func publish(_ message: MQTTMessage) -> Bool
    /// Hands over what is queued, disconnects cleanly (no Last Will) and stops, waiting at most `timeout`.
    func close(timeout: Duration) async
}

/// What the publisher has to send, and what it must send again after every reconnect: pure
/// bookkeeping, so the rules are tested without a broker.
///
/// - Retained topics keep their *current* payload only. A change while disconnected (or while the
///   window is full) just replaces it; every connect marks all of them to be sent again, so a
///   broker restarted without persistence ends up with the same retained picture.
/// - Events are kept in order while they cannot be sent, at most `eventCapacity`: the oldest are
///   dropped and counted.
/// - Transient messages (ranging) are sent when they can be, dropped otherwise: a stale distance
///   is worth nothing.
/// - At most `window` messages are in the client at once (sent, not yet delivered): a broker
///   that stops reading cannot make the client's queue grow.
public struct MQTTOutbox: Sendable {
    public let eventCapacity: Int
    public let window: Int

    /// Retained topics in the order they were first set, and their current payloads.
    private var retainedOrder: [String] = []
    private var retained: [String: String] = [:]
    /// Retained topics to send (again), in order; `dirtySet` mirrors it.
    private var dirty: [String] = []
    private var dirtySet: Set<String> = []
    /// The retained topic sent after every other (availability), and whether it is to be sent.
    private var lastTopic: String?
    private var lastDirty = false
    private var events: [MQTTMessage] = []
    private var eventsHead = 0
    private var transient: [MQTTMessage] = []
    /// Topics to empty once (a removed entity's config and states), in order: not kept as
    /// retained state, so not sent again at every connect or Home Assistant `online`; at most
    /// `removalCapacity` wait (issue 40, hole 5: forged configs by the thousand).
    private var removals: [String] = []
    private var removalSet: Set<String> = []
    public let removalCapacity = 256
    /// Removals refused because `removalCapacity` were waiting.
    public private(set) var droppedRemovals = 0

    public private(set) var connected = false
    public private(set) var outstanding = 0
    /// Events dropped because the queue was full, since the start.
    public private(set) var droppedEvents = 0
    /// Transient messages dropped (no connection, or the window full).
    public private(set) var droppedTransient = 0

    public init(eventCapacity: Int = 1000, window: Int = 64) {
        self.eventCapacity = max(1, eventCapacity)
        self.window = max(1, window)
    }

    public var queuedEvents: Int { events.count - eventsHead }
    public var queuedRemovals: Int { removals.count }

    /// Whether this process publishes `topic` now (a retained topic with a payload).
    public func publishes(_ topic: String) -> Bool {
        guard let payload = retained[topic] else { return false }
        return !payload.isEmpty
    }

    /// Empties `topic` once, unless this process publishes it; false when it is not queued
    /// (published here, or `removalCapacity` removals wait).
    @discardableResult
    public mutating func removeOnce(_ topic: String) -> Bool {
        guard retained[topic] == nil else { return false }
        if removalSet.contains(topic) { return true }
        guard removals.count < removalCapacity else {
            droppedRemovals += 1
            return false
        }
        removalSet.insert(topic)
        removals.append(topic)
        return true
    }
    public var retainedCount: Int { retainedOrder.count + (lastTopic == nil ? 0 : 1) }

    /// Records a retained topic's current payload; it is sent when it changed (or was never sent).
    /// `last`: sent only once every other retained topic is (the availability: Home Assistant shows
    /// an entity's current state the moment it becomes available, so the states go first).
    public mutating func setRetained(_ topic: String, _ payload: String, last: Bool = false) {
        let old = retained.updateValue(payload, forKey: topic)
        if last {
            lastTopic = topic
            if old != payload { lastDirty = true }
            return
        }
        if old == nil { retainedOrder.append(topic) }
        if old != payload { markDirty(topic) }
    }

    public mutating func event(_ message: MQTTMessage) {
        events.append(message)
        if queuedEvents > eventCapacity {
            eventsHead += 1
            droppedEvents += 1
        }
        compactEvents()
    }

    public mutating func transient(_ message: MQTTMessage) {
        guard connected, outstanding + transient.count < window else {
            droppedTransient += 1
            return
        }
        transient.append(message)
    }

    /// Every retained topic is to be sent again (a new connection, or Home Assistant restarted).
    public mutating func resendAll() {
        for topic in retainedOrder { markDirty(topic) }
        if lastTopic != nil { lastDirty = true }
    }

    public mutating func connectionUp() {
        connected = true
        outstanding = 0
        resendAll()
    }

    public mutating func connectionDown() {
        connected = false
        outstanding = 0
        droppedTransient += transient.count
        transient.removeAll()
    }

    public mutating func delivered() { outstanding = max(0, outstanding - 1) }

    /// The next message to hand to the client, nil when there is none or it must wait (not
    /// connected, or `window` messages in the client; `ignoringWindow` on the way out). Order:
    /// retained topics, then events, then transient messages.
    public mutating func next(ignoringWindow: Bool = false) -> MQTTMessage? {
        guard connected, ignoringWindow || outstanding < window else { return nil }
        let message: MQTTMessage
        if !dirty.isEmpty {
            let topic = dirty.removeFirst()
            dirtySet.remove(topic)
            message = MQTTMessage(topic: topic, payload: retained[topic] ?? "", kind: .retained)
        } else if lastDirty, let topic = lastTopic {
            lastDirty = false
            message = MQTTMessage(topic: topic, payload: retained[topic] ?? "", kind: .retained)
        } else if !removals.isEmpty {
            let topic = removals.removeFirst()
            removalSet.remove(topic)
            message = MQTTMessage(topic: topic, payload: "", kind: .retained)
        } else if eventsHead < events.count {
            message = events[eventsHead]
            eventsHead += 1
            compactEvents()
        } else if !transient.isEmpty {
            message = transient.removeFirst()
        } else {
            return nil
        }
        outstanding += 1
        return message
    }

    /// The client refused `message` (the connection went away meanwhile): keep it for later.
    public mutating func refused(_ message: MQTTMessage) {
        outstanding = max(0, outstanding - 1)
        switch message.kind {
        case .retained where message.topic == lastTopic: lastDirty = true
        case .retained where retained[message.topic] == nil: removeOnce(message.topic)
        case .retained: markDirty(message.topic)
        case .event: events.insert(message, at: eventsHead)
        case .transient: droppedTransient += 1
        }
    }

    private mutating func markDirty(_ topic: String) {
        if dirtySet.insert(topic).inserted { dirty.append(topic) }
    }

    private mutating func compactEvents() {
        if eventsHead > 256 && eventsHead * 2 > events.count {
            events.removeFirst(eventsHead)
            eventsHead = 0
        }
    }
}

/// When to answer Home Assistant's `online` on its status topic (it restarted) by publishing
/// discovery and every state again: at once for the first, then at most once per `interval`;
/// the `online`s that come within it are answered together when it is over, so the last one is
/// never left unanswered. Anyone who may publish on `homeassistant/status` (on a usual store
/// broker, every client) can send thousands a second; each used to make every box publish
/// everything again and log a line.
public struct RepublishLimiter: Sendable, Equatable {
    public let interval: Duration
    private var last: Duration?
    /// `online`s received since the last republish and not yet answered.
    public private(set) var waiting = 0

    public init(interval: Duration = .seconds(5)) {
        self.interval = interval
    }

    /// An `online` arrived at `now` (any clock's elapsed time): true when to publish again now.
    public mutating func online(at now: Duration) -> Bool {
        if let last, now - last < interval {
            waiting += 1
            return false
        }
        last = now
        return true
    }

    /// The number of waiting `online`s to answer now with one republish, nil when none is due.
    public mutating func due(at now: Duration) -> Int? {
        guard waiting > 0, let last, now - last >= interval else { return nil }
        let answered = waiting
        waiting = 0
        self.last = now
        return answered
    }
}

/// Publishes what the commands know — region states, events, advertised beacons' status,
/// ranging — to a broker, with Home Assistant discovery, and never holds up the caller: every
/// call updates the outbox under a short lock and hands the client what it can take.
///
/// The interface the commands use is the `add…` and `publish…` calls, `markAvailable` and
/// `close`; the topics and payloads are `MQTTLayout`'s.
///
/// Availability `online` goes out only when the process has determined what it publishes
/// (`markAvailable`, or every region's first state), and after every other retained topic:
/// Home Assistant shows an entity's last state the moment it becomes available, and that must
/// never be a dead process's.
public final class MQTTPublisher: MQTTConnectionHandler, AsyncClosable {
    public let layout: MQTTLayout
    let connection: any MQTTConnection
    let logger: Logger
    private let outbox: Mutex<MQTTOutbox>
    /// Held while taking messages from the outbox and handing them to the client, so that two
    /// threads cannot reorder two payloads of one topic.
    private let sending = Mutex(())
    private let outage = Mutex<(down: Bool, since: ContinuousClock.Instant?, everUp: Bool, reason: String)>(
        (false, nil, false, ""))
    /// When each ranged beacon was last published (source seconds), for the once-a-second limit.
    private let lastRanging = Mutex<[String: Double]>([:])
    /// Home Assistant's restarts, coalesced.
    private let restarts: Mutex<RepublishLimiter>
    private let elapsed: @Sendable () -> Duration
    /// The discovery topics this process publishes (others of its own are removed), the regions
    /// not yet determined, whether `online` was said, and the other boxes already reported.
    private let own = Mutex<(discovery: Set<String>, undetermined: Set<String>, available: Bool, clashes: Set<String>)>(
        ([], [], false, []))
    /// Retained states of removed entities, emptied once Home Assistant has had time to drop the
    /// entity (an empty payload on a topic it still reads is "Erroneous JSON" in its log).
    /// Where commands go (`advertise --mqtt-control`): topic, payload, retain flag.
    private let commands = Mutex<(@Sendable (String, String, Bool) -> Void)?>(nil)
    private let laterRemovals = Mutex<[(due: ContinuousClock.Instant, topics: [String])]>([])
    let removalDelay: Duration
    /// At most this many states wait in `laterRemovals`, and other boxes are remembered.
    static let trackedCapacity = 256
    static let clashCapacity = 16
    /// Log lines about removals and other boxes, at most `linesPerMinute` a minute each.
    private let removalLines = Mutex(LineBudget())
    private let clashLines = Mutex(LineBudget())

    /// `clock` and `republishInterval`: how often Home Assistant's `online` may make this box
    /// publish everything again (`RepublishLimiter`); `removalDelay`: how long after emptying a
    /// removed entity's config its retained states are emptied.
    public init(
        layout: MQTTLayout, connection: any MQTTConnection, logger: Logger, outbox: MQTTOutbox = MQTTOutbox(),
        clock: some Clock<Duration> = ContinuousClock(), republishInterval: Duration = .seconds(5),
        removalDelay: Duration = .seconds(2)
    ) {
        self.layout = layout
        self.removalDelay = removalDelay
        self.connection = connection
        self.logger = logger
        self.outbox = Mutex(outbox)
        self.restarts = Mutex(RepublishLimiter(interval: republishInterval))
        let origin = clock.now
        elapsed = { origin.duration(to: clock.now) }
        self.outbox.withLock { $0.setRetained(layout.boxTopic, layout.boxPayload) }
    }

    /// Availability `online`, after every retained state (once what is published is determined).
    public func markAvailable() {
        let first = own.withLock { o in
            defer { o.available = true }
            return !o.available
        }
        guard first else { return }
        outbox.withLock { $0.setRetained(layout.availabilityTopic, "online", last: true) }
        pump()
    }

    /// Starts connecting in the background.
    public func start() { connection.start(handler: self) }

    /// A snapshot of the bookkeeping (tests, the exit summary).
    public var state: MQTTOutbox { outbox.withLock { $0 } }

    // MARK: The commands' interface

    /// Announces the regions to Home Assistant and sets them unknown until determined; the
    /// process is available once each has its first state.
    public func addRegions(_ regions: [BeaconRegion]) {
        own.withLock { o in
            for r in regions {
                if let d = layout.regionDiscovery(r.name) { o.discovery.insert(d.topic) }
                o.undetermined.insert(r.name)
            }
        }
        outbox.withLock { box in
            for r in regions {
                if let d = layout.regionDiscovery(r.name) { box.setRetained(d.topic, d.payload) }
                setRegion(&box, r.name, .unknown, reason: "monitoring started", time: nil, identity: r.identity)
            }
        }
        pump()
    }

    /// A region's state changed (or was first determined).
    public func publishRegionState(
        _ name: String, _ state: RegionPresence, reason: String, time: String?, identity: String
    ) {
        outbox.withLock { setRegion(&$0, name, state, reason: reason, time: time, identity: identity) }
        let determined = own.withLock { o in
            o.undetermined.remove(name) != nil && o.undetermined.isEmpty
        }
        if determined { markAvailable() } else { pump() }
    }

    private func setRegion(
        _ box: inout MQTTOutbox, _ name: String, _ state: RegionPresence, reason: String, time: String?,
        identity: String
    ) {
        box.setRetained(layout.regionStateTopic(name), state.payload)
        box.setRetained(
            layout.regionAttributesTopic(name),
            MQTTPayload.regionAttributes(name: name, state: state, reason: reason, time: time, identity: identity))
    }

    /// One event, exactly the line `--json` prints; not retained.
    public func publishEvent(json: String) {
        outbox.withLock { $0.event(MQTTMessage(topic: layout.eventTopic, payload: json, kind: .event)) }
        pump()
    }

    /// The receiver's health as Home Assistant diagnostic entities (`monitor`; announced with the
    /// first, which must come before `start`).
    public func publishHealth(_ health: ReceiverHealth) {
        let discovery = layout.healthDiscovery()
        own.withLock { o in for d in discovery { o.discovery.insert(d.topic) } }
        outbox.withLock { box in
            for d in discovery { box.setRetained(d.topic, d.payload) }
            box.setRetained(layout.healthTopic, health.json)
        }
        pump()
    }

    /// The beacons this process advertises: their discovery is sent with their first status, and
    /// others this process once published are removed.
    public func addBeacons(_ names: [String]) {
        own.withLock { o in
            for name in names { if let d = layout.beaconDiscovery(name) { o.discovery.insert(d.topic) } }
        }
    }

    /// The commands that arrive on the beacons' `set` topics go to `handler` (from the client's
    /// thread); announces each beacon's switch and numbers to Home Assistant.
    public func acceptCommands(for names: [String], _ handler: @escaping @Sendable (String, String, Bool) -> Void) {
        commands.withLock { $0 = handler }
        let discovery = names.flatMap { layout.beaconControlDiscovery($0) }
        own.withLock { o in for d in discovery { o.discovery.insert(d.topic) } }
        outbox.withLock { box in for d in discovery { box.setRetained(d.topic, d.payload) } }
        pump()
    }

    /// A beacon's applied settings (retained), published once they are on the air and in its profile.
    public func publishBeaconSettings(_ name: String, _ settings: BeaconSettings) {
        outbox.withLock { $0.setRetained(layout.beaconSettingsTopic(name), settings.json) }
        pump()
    }

    /// An advertised beacon's status (discovery is sent with its first status).
    public func publishBeaconStatus(_ status: BeaconStatusMessage) {
        outbox.withLock { box in
            if let d = layout.beaconDiscovery(status.name) { box.setRetained(d.topic, d.payload) }
            box.setRetained(layout.beaconStateTopic(status.name), status.state.payload)
            box.setRetained(layout.beaconAttributesTopic(status.name), status.json)
        }
        pump()
    }

    /// One beacon's distance for `mqtt_room`, at most once a second per beacon (`t` in seconds
    /// of the caller's clock); not retained, not kept while disconnected.
    public func publishRanging(id: String, name: String, distance: Double, at t: Double) {
        let due = lastRanging.withLock { last in
            if let previous = last[id], t - previous < 1, t >= previous { return false }
            last[id] = t
            return true
        }
        guard due, distance.isFinite else { return }
        let payload = MQTTPayload.ranging(id: id, name: name, distance: distance)
        outbox.withLock { $0.transient(MQTTMessage(topic: layout.rangingTopic, payload: payload, kind: .transient)) }
        pump()
    }

    /// On the way out: availability `offline` (retained, replacing `online`), what is queued
    /// handed over, a clean disconnect; at most a second (`closing` calls it when a command's
    /// scope ends).
    public func close() async { await close(timeout: .seconds(1)) }

    /// `close()` waiting at most `timeout`.
    public func close(timeout: Duration) async {
        outbox.withLock { $0.setRetained(layout.availabilityTopic, "offline", last: true) }
        pump(ignoringWindow: true)
        await connection.close(timeout: timeout)
        let s = state
        if s.droppedEvents > 0 {
            logger.warning("MQTT: \(s.droppedEvents) event(s) were dropped while the broker could not take them")
        }
    }

    // MARK: MQTTConnectionHandler (the client's thread)

    public func connectionUp() {
        let (wasDown, since, everUp) = outage.withLock { o in
            let r = (o.down, o.since, o.everUp)
            o = (false, nil, true, "")
            return r
        }
        let (count, dropped) = outbox.withLock { box in
            box.connectionUp()
            return (box.retainedCount, box.droppedEvents)
        }
        if !everUp && !wasDown {
            logger.notice("MQTT: connected to \(connection.brokerDescription)")
        } else {
            let away = since.map { " after \($0.duration(to: .now).formattedSeconds)" } ?? ""
            let lost = dropped > 0 ? "; \(dropped) event(s) dropped so far (queue full)" : ""
            logger.notice(
                "MQTT: \(connection.brokerDescription) is back\(away); publishing the \(count) retained topics again\(lost)"
            )
        }
        pump()
    }

    public func connectionDown(_ reason: String) {
        outbox.withLock { $0.connectionDown() }
        let first = outage.withLock { o in
            if o.down { return false }
            o.down = true
            o.since = .now
            o.reason = reason
            return true
        }
        guard first else { return }
        let capacity = outbox.withLock { $0.eventCapacity }
        logger.warning(
            "MQTT: \(connection.brokerDescription): \(reason); retrying in the background with back-off (states are sent again when it is back, up to \(capacity) events are kept)"
        )
    }

    public func delivered() {
        outbox.withLock { $0.delivered() }
    }

    public func received(topic: String, payload: String, retained: Bool) {
        if layout.control, layout.commandTarget(topic) != nil || topic.hasPrefix(layout.base + "/beacon/") {
            if let handler = commands.withLock({ $0 }) { handler(topic, payload, retained) }
            return
        }
        received(topic: topic, payload: payload)
    }

    public func received(topic: String, payload: String) {
        if topic == layout.boxTopic {
            noticeOtherBox(payload)
        } else if topic == layout.homeAssistantStatusTopic {
            guard payload == "online", restarts.withLock({ $0.online(at: elapsed()) }) else { return }
            logger.notice("MQTT: Home Assistant restarted (online on \(topic)); publishing discovery and states again")
            outbox.withLock { $0.resendAll() }
            pump()
        } else {
            removeIfStale(topic: topic, payload: payload)
        }
    }

    /// Another box says it publishes under this base and name: said once per box, since their
    /// retained states and availability overwrite each other (Home Assistant still keeps the two
    /// apart: its discovery topics and ids carry the adapter's address).
    /// A flood of forged nodes (issue 40, hole 6) is bounded: `clashCapacity` boxes remembered,
    /// lines limited per minute.
    private func noticeOtherBox(_ payload: String) {
        guard payload.utf8.count <= Self.maximumPayload, let other = layout.otherBox(inBoxPayload: payload),
            own.withLock({ o in o.clashes.count < Self.clashCapacity && o.clashes.insert(other).inserted })
        else { return }
        guard let skipped = clashLines.withLock({ $0.take(at: .now) }) else { return }
        if skipped > 0 {
            logger.error("MQTT: \(skipped) more report(s) of another box under \(layout.base) not logged")
        }
        logger.error(
            "MQTT: another box (\(other.escapedForTerminal)) publishes under \(layout.base.escapedForTerminal) too, as boxes cloned from one image do (one host name): their states and availability overwrite each other there; give each box its own --mqtt-base"
        )
    }

    /// A discovery config of this box's that this process no longer has: emptied (Home Assistant
    /// removes the entity), with its retained states.
    ///
    /// The config names its state topics, and anyone allowed to publish discovery can forge one
    /// (issue 40, holes 2 and 5): a topic this process publishes now (its live states, its
    /// availability) is never emptied, whatever the config says; removals are sent once (not
    /// again at every connect or `online`), at most `MQTTOutbox.removalCapacity` wait and
    /// `trackedCapacity` states wait for later, and the log says it a few times a minute.
    private func removeIfStale(topic: String, payload: String) {
        guard payload.utf8.count <= Self.maximumPayload else { return }
        let current = own.withLock { $0.discovery }
        let stale = layout.staleDiscovery(topic: topic, payload: payload, current: current)
        guard !stale.isEmpty, outbox.withLock({ $0.removeOnce(topic) }) else { return }
        let states = outbox.withLock { box in stale.filter { $0 != topic && !box.publishes($0) } }
        laterRemovals.withLock { later in
            guard later.reduce(0, { $0 + $1.topics.count }) + states.count <= Self.trackedCapacity else { return }
            later.append((.now + removalDelay, states))
        }
        if let skipped = removalLines.withLock({ $0.take(at: .now) }) {
            if skipped > 0 { logger.notice("MQTT: \(skipped) more removal(s) of discovery configs not logged") }
            logger.notice(
                "MQTT: \(topic.escapedForTerminal) is no longer configured here: removing it from Home Assistant")
        }
        pump()
    }

    /// Payloads larger than this (discovery configs and box notes are a few hundred bytes) are ignored.
    static let maximumPayload = 16384

    /// Empties the retained states of removed entities whose time has come.
    private func removeDueStates() {
        let now = ContinuousClock.now
        let due = laterRemovals.withLock { later in
            let due = later.filter { $0.due <= now }.flatMap(\.topics)
            later.removeAll { $0.due <= now }
            return due
        }
        guard !due.isEmpty else { return }
        outbox.withLock { box in for t in due { box.removeOnce(t) } }
    }

    public func idle() {
        removeDueStates()
        if let answered = restarts.withLock({ $0.due(at: elapsed()) }) {
            let seconds = restarts.withLock { $0.interval }.formattedSeconds
            logger.notice(
                "MQTT: \(answered) more online on \(layout.homeAssistantStatusTopic ?? "") within \(seconds) (Home Assistant restarting, or a client flooding the topic); publishing discovery and states again, once for all of them"
            )
            outbox.withLock { $0.resendAll() }
        }
        pump()
    }

    /// Hands the client what the outbox lets through now.
    func pump(ignoringWindow: Bool = false) {
        sending.withLock { _ in
            while let message = outbox.withLock({ $0.next(ignoringWindow: ignoringWindow) }) {
                if !connection.publish(message) {
                    outbox.withLock { $0.refused(message) }
                    return
                }
            }
        }
    }
}

/// How many lines of one kind may be logged: `linesPerMinute` in each minute; the rest are
/// counted and the count said with the next line logged.
struct LineBudget {
    static let linesPerMinute = 5
    private var windowStart: ContinuousClock.Instant?
    private var logged = 0
    private var skipped = 0

    /// nil: do not log; else log, after saying how many were skipped before (when not 0).
    mutating func take(at now: ContinuousClock.Instant) -> Int? {
        if let start = windowStart, now - start < .seconds(60) {
            guard logged < Self.linesPerMinute else {
                skipped += 1
                return nil
            }
            logged += 1
            return 0
        }
        windowStart = now
        logged = 1
        defer { skipped = 0 }
        return skipped
    }
}
