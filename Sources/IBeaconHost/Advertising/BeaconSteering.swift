import IBeaconCore
import Logging
import Synchronization

/// `advertise --mqtt-control`: takes the commands that arrive on the beacons' `set` topics one
/// at a time, and for each that passes every check puts the new value on the air, then writes
/// it into the beacon's profile (the lock, checks and atomic replace `calibrate` uses), then
/// publishes it as the beacon's settings; a profile that cannot be written puts the old value
/// back on the air. Every command, applied or refused, is an event and a log line.
///
/// Refused, with nothing changed on the air or on disk: a retained message (a command replayed
/// from the broker's store at a reconnect must never apply an old change again), a topic that is
/// not one of this box's beacons', an unknown key, an oversized or malformed payload, a value
/// out of range, and more than `CommandRateLimit.defaultLimit` commands a second.
public final class BeaconSteering: Sendable {
    /// One steerable beacon: its name (its topics), its profile, what is on the air, and its settings.
    public struct Beacon: Sendable, Equatable {
        public var name: String
        public var path: String
        public var spec: BeaconSpec
        public var settings: BeaconSettings

        public init(name: String, path: String, spec: BeaconSpec, settings: BeaconSettings) {
            self.name = name
            self.path = path
            self.spec = spec
            self.settings = settings
        }

        /// What goes on the air for it: its spec, or nil while switched off.
        var onAir: BeaconSpec? { settings.advertising ? spec : nil }
    }

    /// Puts the beacons on the air (nil: that one off) in place of what is there; throws when refused.
    public typealias Air = @Sendable ([BeaconSpec?]) async throws -> AdvertisingStatus?
    /// Writes a command into the profile at `path`; returns the profile as written.
    public typealias Writer = @Sendable (_ path: String, _ command: BeaconCommand) throws -> Profile

    let layout: MQTTLayout
    let air: Air
    let writer: Writer
    let logger: Logger
    /// Where events, settings and new statuses go (the MQTT publisher, the beacons' status).
    let onEvent: @Sendable (BeaconCommandEvent) -> Void
    let onSettings: @Sendable (String, BeaconSettings) -> Void
    let onApplied: @Sendable ([Beacon], AdvertisingStatus?) -> Void
    let elapsed: @Sendable () -> Duration
    let wallClock: @Sendable () -> Double
    private let state: Mutex<(beacons: [Beacon], limit: CommandRateLimit, unreported: Int, reportedAt: Duration?)>
    private let inbox: AsyncStream<(topic: String, payload: [UInt8], retained: Bool)>
    private let feed: AsyncStream<(topic: String, payload: [UInt8], retained: Bool)>.Continuation

    /// At most this many commands wait to be handled; more are dropped (and counted as refused
    /// by the rate limit, which they would be anyway).
    public static let inboxCapacity = 32

    public init(
        beacons: [Beacon], layout: MQTTLayout, air: @escaping Air, writer: @escaping Writer = BeaconSteering.write,
        logger: Logger, clock: some Clock<Duration> = ContinuousClock(),
        wallClock: @escaping @Sendable () -> Double, onEvent: @escaping @Sendable (BeaconCommandEvent) -> Void,
        onSettings: @escaping @Sendable (String, BeaconSettings) -> Void,
        onApplied: @escaping @Sendable ([Beacon], AdvertisingStatus?) -> Void = { _, _ in }
    ) {
        self.layout = layout
        self.air = air
        self.writer = writer
        self.logger = logger
        self.onEvent = onEvent
        self.onSettings = onSettings
        self.onApplied = onApplied
        self.wallClock = wallClock
        let origin = clock.now
        elapsed = { origin.duration(to: clock.now) }
        state = Mutex((beacons, CommandRateLimit(), 0, nil))
        (inbox, feed) = AsyncStream.makeStream(bufferingPolicy: .bufferingOldest(Self.inboxCapacity))
    }

    /// The beacons as they are now.
    public var beacons: [Beacon] { state.withLock { $0.beacons } }

    /// What goes on the air for every beacon now (nil: switched off).
    public var onAir: [BeaconSpec?] { beacons.map(\.onAir) }

    /// Publishes every beacon's settings (once they are on the air).
    public func publishSettings() {
        for b in beacons { onSettings(b.name, b.settings) }
    }

    /// A message on a command topic (from the MQTT client's thread): handled in `run`, in order.
    public func submit(topic: String, payload: String, retained: Bool) {
        if case .dropped = feed.yield((topic, Array(payload.utf8), retained)) {
            state.withLock { $0.unreported += 1 }
        }
    }

    /// Handles the commands submitted, one at a time, until cancelled.
    public func run() async {
        await withTaskCancellationHandler {
            for await message in inbox {
                if let event = await handle(topic: message.topic, payload: message.payload, retained: message.retained)
                {
                    report(event)
                }
            }
        } onCancel: { [feed] in
            feed.finish()
        }
    }

    func report(_ event: BeaconCommandEvent) {
        if event.refusal == nil {
            logger.notice("\(event.text.escapedForTerminal)")
        } else {
            logger.warning("\(event.text.escapedForTerminal)")
        }
        onEvent(event)
    }

    /// One command, start to end; the event to report (nil: a refusal by the rate limit within a
    /// second of the last one reported, counted and said with the next).
    public func handle(topic: String, payload: [UInt8], retained: Bool) async -> BeaconCommandEvent? {
        let now = elapsed()
        let source = "mqtt:" + (topic.count > 200 ? String(topic.prefix(200)) + "…" : topic)
        let target = layout.commandTarget(topic)
        let index = target.flatMap { t in beacons.firstIndex { MQTTTopic.level($0.name) == t.beacon } }
        let beacon = index.map { beacons[$0] }
        let key = BeaconSettingKey(rawValue: target?.key ?? "")
        func event(_ refusal: CommandRefusal?, new: JSONValue? = nil, old: JSONValue? = nil) -> BeaconCommandEvent {
            BeaconCommandEvent(
                beacon: beacon?.name ?? target?.beacon ?? "", key: target?.key ?? "", source: source,
                old: old ?? key.flatMap { k in beacon.map { $0.settings.value(of: k) } } ?? .null,
                new: new ?? .string(String(decoding: payload.prefix(64), as: UTF8.self)), refusal: refusal,
                time: iso8601(unixSeconds: wallClock(), milliseconds: true))
        }
        let admitted = state.withLock { s -> (Bool, Int)? in
            if s.limit.admit(at: now) { return (true, 0) }
            if let last = s.reportedAt, now - last < .seconds(1) {
                s.unreported += 1
                return nil
            }
            s.reportedAt = now
            defer { s.unreported = 0 }
            return (false, s.unreported)
        }
        guard let (ok, unreported) = admitted else { return nil }
        if !ok {
            let more = unreported > 0 ? " (\(unreported) more refused since the last report)" : ""
            return event(
                CommandRefusal(
                    .rateLimited,
                    "more than \(CommandRateLimit.defaultLimit) commands a second reached this box\(more); send one change at a time"
                ))
        }
        if retained {
            return event(
                CommandRefusal(
                    .retained,
                    "a retained command (replayed from the broker's store, or published with the retain flag) is never applied; publish commands without retain, and clear it: mosquitto_pub -r -n -t TOPIC"
                ))
        }
        guard let target else {
            return event(CommandRefusal(.foreignTopic, "\(topic) is not a command topic of this box (\(layout.base))"))
        }
        guard let index, let beacon else {
            return event(
                CommandRefusal(
                    .unknownBeacon,
                    "no beacon \(JSONWriter.quoted(String(target.beacon.prefix(40)))) advertises here; known: "
                        + beacons.map(\.name).joined(separator: ", ")))
        }
        let command: BeaconCommand
        do {
            command = try BeaconCommand.parse(key: target.key, payload: payload)
        } catch {
            return event(error)
        }
        return await apply(command, to: index, beacon, event: event)
    }

    private func apply(
        _ command: BeaconCommand, to index: Int, _ beacon: Beacon,
        event: (CommandRefusal?, JSONValue?, JSONValue?) -> BeaconCommandEvent
    ) async -> BeaconCommandEvent {
        let old = beacon.settings
        let new = command.applied(to: old)
        var changed = beacon
        changed.settings = new
        changed.spec = Self.spec(beacon.spec, with: new)
        if case .calibration(_, let record) = command {
            changed.spec.calibratedTxPower = record.txPower.map { Int8(clamping: $0) }
        }
        let newValue = new.value(of: command.key)
        let oldValue = old.value(of: command.key)
        let before = beacons
        var after = before
        after[index] = changed
        var status: AdvertisingStatus?
        if changed.onAir != beacon.onAir {
            do {
                status = try await air(after.map(\.onAir))
            } catch {
                let why = error is AdvertisingUpdates.NotTaken ? "\(error)" : "the controller refused it (\(error))"
                return event(
                    CommandRefusal(.notApplied, "\(command.key.rawValue): \(why); the previous value stays"),
                    newValue, oldValue)
            }
        }
        let written: Profile
        do {
            written = try writer(beacon.path, command)
        } catch {
            if changed.onAir != beacon.onAir {
                do {
                    status = try await air(before.map(\.onAir))
                } catch {
                    logger.error("putting \(beacon.name)'s previous advertising back failed: \(error)")
                }
            }
            return event(
                CommandRefusal(
                    .notWritten,
                    "\(command.key.rawValue): the profile \(beacon.path) could not be written (\(error)); the previous value is back on the air"
                ),
                newValue, oldValue)
        }
        // The file is what the box comes back with: its settings are what is published.
        changed.settings = BeaconSettings(profile: written)
        state.withLock { $0.beacons[index] = changed }
        onApplied(beacons, status)
        onSettings(changed.name, changed.settings)
        return event(nil, newValue, oldValue)
    }

    /// `spec` carrying `settings`. A random-static address derived from the beacon's identity
    /// (`"address": "random-static"`) follows a new major or minor, as it would at a restart.
    static func spec(_ spec: BeaconSpec, with settings: BeaconSettings) -> BeaconSpec {
        var s = spec
        s.beacon = IBeacon(
            proximityUUID: spec.beacon.proximityUUID, major: UInt16(clamping: settings.major),
            minor: UInt16(clamping: settings.minor), measuredPower: Int8(clamping: settings.measuredPower))
        s.intervalMilliseconds = settings.intervalMs
        s.txPower = settings.txPower.map { Int8(clamping: $0) }
        if case .staticRandom(let a) = spec.address, a == .staticRandom(for: spec.beacon) {
            s.address = .staticRandom(.staticRandom(for: s.beacon))
        }
        return s
    }

    /// Writes `command` into the profile at `path` as `calibrate` writes: checked writable,
    /// locked (`ProfileStore.lock`), read again under the lock (edits made meanwhile are kept),
    /// the one key set, checked to be a profile ibeacon reads, and replaced atomically.
    @Sendable public static func write(path: String, command: BeaconCommand) throws -> Profile {
        try SafeFile.checkWritable(path)
        let lock = try ProfileStore.lock(path)
        defer { lock.unlock() }
        var profile = try Profile.load(bytes: lock.read(), file: path)
        try lock.checkWritable()
        try command.apply(to: &profile)
        let bytes = profile.encoded()
        try CalibrationDestination.checkSize(bytes, path: path)
        try lock.replace(with: bytes)
        return profile
    }
}

extension BeaconSteering.Beacon {
    /// A beacon of `advertise`, from its profile at `path` and the spec made from it.
    public init(path: String, spec: BeaconSpec) throws {
        let profile = try Profile.load(bytes: SafeFile.read(path), file: path)
        self.init(name: Profile.name(ofFile: path), path: path, spec: spec, settings: BeaconSettings(profile: profile))
    }
}
