import IBeaconCore
import Logging

/// Which management commands registered an instance.
public enum MgmtAdvertisingMethod: String, Sendable {
    /// Add Extended Advertising Parameters + Data (kernel ≥ 5.12): the profile's interval and
    /// TX power are honoured.
    case extendedParameters = "add-ext-adv"
    /// Add Advertising (older kernels): the kernel uses its default advertising interval.
    case addAdvertising = "add-adv"
}

/// One beacon registered with the kernel as an advertising instance.
public struct MgmtInstance: Sendable, Equatable {
    public var spec: BeaconSpec
    public var instance: UInt8
    public var method: MgmtAdvertisingMethod
    /// The power the controller selected, when the kernel says (extended parameters only, and
    /// not its "unknown", 127).
    public var txPower: Int8?
    /// Registered with the Connectable flag (for `BeaconAddress.identity`).
    public var connectable = false
    /// The address on the air when the kernel's rule fixes it: the adapter's identity address for
    /// connectable advertising (by the flag, or by the adapter's Connectable setting); nil when
    /// the kernel makes a new non-resolvable private address.
    public var address: BDAddress?
}

/// What the kernel's address rule needs to know about the adapter (Read Controller Info).
public struct MgmtAdapterAddressing: Sendable, Equatable {
    /// The identity (public) address.
    public var identity: BDAddress
    /// The adapter's own Connectable setting: while on, the kernel advertises every instance
    /// connectable from the identity address ("the controller will use advertising based on
    /// the connectable setting", mgmt-api.txt; `mgmt_get_connectable` in hci_sync.c).
    public var connectable: Bool

    public init(identity: BDAddress, connectable: Bool) {
        self.identity = identity
        self.connectable = connectable
    }

    init(_ info: MgmtReadControllerInfo.ReturnParameters) {
        self.init(identity: info.address, connectable: info.currentSettings.contains(.connectable))
    }
}

/// Registers iBeacons as kernel advertising instances and takes them away again, touching
/// only instance numbers it registered itself.
public struct MgmtAdvertiser: Sendable {
    public var beacons: [BeaconSpec]
    public var index: MgmtIndex
    public var logger: Logger

    public init(beacons: [BeaconSpec], index: MgmtIndex, logger: Logger) {
        self.beacons = beacons
        self.index = index
        self.logger = logger
    }

    /// The lowest `count` instance numbers in 1…maxInstances that no program uses and that are
    /// not in `reserved`. Never 0 (reserved by mgmt-api.txt).
    public static func freeInstances(
        _ count: Int, features: MgmtReadAdvertisingFeatures.ReturnParameters, reserved: Set<UInt8> = []
    ) throws(AdvertisingError) -> [UInt8] {
        let used = Set(features.instances).union(reserved)
        let free = features.maxInstances == 0 ? [] : (1...features.maxInstances).filter { !used.contains($0) }
        guard free.count >= count else {
            throw AdvertisingError(
                "the kernel has \(free.count) free advertising instance(s) of \(features.maxInstances) "
                    + "(in use: \(features.instances.map(String.init).joined(separator: ", "))), "
                    + "\(count) needed; remove other advertisements (`btmgmt rm-adv N`) or advertise fewer profiles")
        }
        return Array(free.prefix(count))
    }

    /// Whether `spec` is registered connectable: the kernel advertises from the adapter's identity
    /// address only then (`BeaconAddress`), so that is how a beacon keeps one address.
    public static func connectable(_ spec: BeaconSpec) -> Bool { spec.address == .identity }

    /// Registers `spec` as `instance`: extended parameters first, Add Advertising if the kernel
    /// does not know that command (Unknown Command / Not Supported). `adapter` (when known) says
    /// which address the result goes out from.
    public func add(
        _ spec: BeaconSpec, instance: UInt8, on client: MgmtClient, adapter: MgmtAdapterAddressing? = nil
    ) async throws -> MgmtInstance {
        let data = spec.beacon.advertisingData
        let interval = try AdvertisingInterval(milliseconds: spec.intervalMilliseconds, for: .extended)
        let connectable = Self.connectable(spec)
        let onAir = adapter.flatMap { connectable || $0.connectable ? $0.identity : nil }
        do {
            let rp = try await client.execute(
                MgmtAddExtendedAdvertisingParameters(
                    instance: instance, interval: interval, txPower: spec.txPower, connectable: connectable),
                index: index)
            _ = try await client.execute(
                MgmtAddExtendedAdvertisingData(instance: instance, advertisingData: data), index: index)
            let known = rp.txPower == MgmtAddExtendedAdvertisingParameters.unknownTxPower ? nil : rp.txPower
            return MgmtInstance(
                spec: spec, instance: instance, method: .extendedParameters, txPower: known,
                connectable: connectable, address: onAir)
        } catch MgmtError.commandFailed(_, _, let status) where status == .unknownCommand || status == .notSupported {
            let why =
                "this kernel has no Add Extended Advertising Parameters (before 5.12): using Add Advertising; "
                + "the kernel then advertises at its default interval (1.28 s unless configured), "
                + "not the profile's \(spec.intervalMilliseconds) ms"
            logger.notice("\(why)")
            _ = try await client.execute(
                MgmtAddAdvertising(instance: instance, flags: connectable ? [.connectable] : [], advertisingData: data),
                index: index)
            return MgmtInstance(
                spec: spec, instance: instance, method: .addAdvertising, txPower: nil, connectable: connectable,
                address: onAir)
        }
    }

    /// Removes our instances (best effort: one that is already gone is not an error).
    public func remove(_ instances: [UInt8], on client: MgmtClient) async {
        for instance in instances {
            do {
                _ = try await client.execute(MgmtRemoveAdvertising(instance: instance), index: index)
                logger.debug("removed advertising instance \(instance) on \(index)")
            } catch MgmtError.commandFailed(_, _, .invalidParameters) {
                // Already removed (by another program, or a power cycle for timed instances).
            } catch {
                logger.warning("could not remove advertising instance \(instance) on \(index): \(error)")
            }
        }
    }

    /// Warnings for what the management path cannot honour.
    func warnings(features: MgmtReadAdvertisingFeatures.ReturnParameters, adapter: MgmtAdapterAddressing? = nil)
        -> [String]
    {
        var out: [String] = []
        for spec in beacons {
            guard case .staticRandom(let address) = spec.address else { continue }
            out.append(
                "\(spec.label): through the kernel a beacon cannot have its own address (the kernel advertises "
                    + "connectable from the adapter's identity address, or non-connectable from a non-resolvable "
                    + "address it makes anew at every start); not \(address) but a new address at every start. "
                    + "Use --device raw:\(index) to advertise from \(address), or \"address\": \"public\" for the "
                    + "adapter's own address")
        }
        if let adapter, adapter.connectable, beacons.contains(where: { !Self.connectable($0) }) {
            out.append(
                "\(index) is connectable (its Connectable setting is on, e.g. set by bluetoothd), so the kernel "
                    + "advertises every instance connectable from \(adapter.identity), whatever the profile's address")
        }
        if beacons.contains(where: { $0.txPower != nil }), !features.supportedFlags.contains(.canSetTxPower) {
            out.append(
                "this controller cannot set the advertising TX power through the kernel; the profile's TX power is a request only"
            )
        }
        return out
    }
}

/// Keeps the beacons registered with the kernel until cancelled: reacts to Advertising
/// Removed/Added, New Settings and Index Removed/Added by putting its own instances back (and
/// saying why), waits while the adapter is powered off, and removes its instances on the way out.
public struct MgmtAdvertisingSession: Sendable {
    public var advertiser: MgmtAdvertiser
    public var client: MgmtClient
    public var logger: Logger
    /// What the waits between attempts at putting the advertising back sleep on, and the time
    /// they took is measured on (a `ManualClock` in tests).
    public var clock: any Clock<Duration>
    /// Called whenever the set of our instance numbers changes (the CLI records them for `stop`).
    public var onInstancesChanged: @Sendable ([UInt8]) -> Void
    /// Time on `clock` since the session was made (for the connection log's windows).
    private let elapsed: @Sendable () -> Duration
    /// New beacons while running (`advertise --mqtt-control`); nil: none come.
    public var updates: AdvertisingUpdates?

    public init(
        advertiser: MgmtAdvertiser, client: MgmtClient, logger: Logger, clock: any Clock<Duration> = ContinuousClock(),
        onInstancesChanged: @escaping @Sendable ([UInt8]) -> Void = { _ in }
    ) {
        self.advertiser = advertiser
        self.client = client
        self.logger = logger
        self.clock = clock
        self.onInstancesChanged = onInstancesChanged
        elapsed = stopwatch(on: clock)
    }

    /// Our beacons, by position in `advertiser.beacons`, with their instance when registered.
    struct State {
        /// The beacons advertised now (`advertiser.beacons` until a change replaces them).
        var beacons: [BeaconSpec]
        var registered: [MgmtInstance?]
        var powered: Bool
        var present = true
        /// The adapter's identity address and Connectable setting, for which address is on the air.
        var adapter: MgmtAdapterAddressing?
        /// The warnings of the registration that completed first, reported with `onReady`.
        var warnings: [String] = []
        var readyReported = false
        /// Centrals whose links to the adapter are up (LE links they made: to a connectable
        /// advertisement, which the kernel pauses while connected).
        var centrals: Set<MgmtLink> = []
        /// Reported lost because of a central (`onLost`), not yet reported back (`onRestored`).
        var pausedByCentral = false
        /// Bumped at every central's connection: a quiet period that ends with another number is stale.
        var quietGeneration = 0
        /// Which connections reach the log (the first 5 a minute, then a count).
        var connectionLog = RepeatLimiter(burst: 5, interval: .seconds(60))
        var instances: [UInt8] { registered.compactMap { $0?.instance } }
        /// Whether a central can connect to one of our beacons: registered connectable, or the
        /// adapter's Connectable setting makes every instance connectable.
        var connectableOnAir: Bool {
            registered.contains { $0?.connectable == true }
                || (adapter?.connectable == true && registered.contains { $0 != nil })
        }
    }

    private var index: MgmtIndex { advertiser.index }
    private var name: String { index.description }

    /// Runs until cancelled. Errors before the first registration are thrown; later ones are logged.
    /// `onLost` is called with the cause when the kernel or another program took our advertising
    /// away (putting it back starts), `onRestored` once it is back.
    public func run(
        onReady: @Sendable (AdvertisingStatus) -> Void, onLost: @Sendable (String) -> Void = { _ in },
        onRestored: @Sendable () -> Void = {}
    ) async throws {
        var state = try await initialState()
        if state.powered {
            state.warnings = try await register(&state, why: nil, throwing: true)
            reportReadyIfDone(&state, onReady)
        } else {
            logger.warning(
                "\(name) is powered off; advertising will start when it is powered on (e.g. `bluetoothctl power on`)")
        }
        let (inputs, feed) = AsyncStream.makeStream(of: Input.self, bufferingPolicy: .unbounded)
        let events = client.events
        let pump = Task {
            for await event in events { feed.yield(.event(event)) }
            feed.finish()
        }
        defer { pump.cancel() }
        updates?.attach { feed.yield(.reconfigure) }
        defer { updates?.detach() }
        for await input in inputs {
            if Task.isCancelled { break }
            let event: MgmtEvent
            switch input {
            case .quiet(let generation):
                centralsGone(&state, generation: generation, onRestored: onRestored)
                continue
            case .reconfigure:
                await reconfigure(&state)
                continue
            case .event(let e): event = e
            }
            if await handleCentral(event, &state, feed: feed, onLost: onLost) { continue }
            guard let why = await cause(of: event, &state, onLost: onLost), state.powered, state.present else {
                continue
            }
            onLost(why)
            if await restore(&state, why: why, refresh: Self.refreshes(after: event), onReady: onReady),
                !state.pausedByCentral
            {
                onRestored()
            }
        }
        for change in updates?.take() ?? [] { change.done(.failure(CancellationError())) }
        if let error = await client.linkError { throw error }
        await advertiser.remove(state.instances, on: client)
        onInstancesChanged([])
    }

    /// What the session's loop waits on: the kernel's events, and the end of a quiet period
    /// after the last central left (`quietPeriod`).
    enum Input: Sendable {
        case event(MgmtEvent)
        case quiet(generation: Int)
        /// A change waits in `updates`.
        case reconfigure
    }

    /// Puts the latest waiting change on the air. A beacon that stays (same label) and changed
    /// is added again under its own instance number, which updates the instance in place
    /// (mgmt-api.txt, Add Advertising: "an existing instance … will be updated"), so the old and
    /// the new advertisement are never both on the air and the beacon is never off; one switched
    /// off is removed, one switched on is added under a free number. A refused change puts the
    /// previous beacons back and is answered with the error.
    private func reconfigure(_ state: inout State) async {
        let changes = updates?.take() ?? []
        guard let latest = changes.last else { return }
        let previous = state
        do {
            try await place(latest.beacons.compactMap { $0 }, &state)
            let beacons = state.registered.compactMap { $0 }.map { i in
                AdvertisingStatus.Beacon(
                    spec: i.spec,
                    placement: .kernelInstance(
                        i.instance, method: i.method, connectable: i.connectable, address: i.address),
                    txPower: i.txPower)
            }
            let status = AdvertisingStatus(commandSet: nil, beacons: beacons, warnings: [])
            for change in changes { change.done(.success(status)) }
        } catch {
            logger.warning("the changed advertising was refused (\(error)); putting the previous back")
            let wanted = previous.beacons
            try? await place(wanted, &state)
            for change in changes { change.done(.failure(error)) }
        }
    }

    /// Makes the registered instances those of `beacons` (matched to the current ones by label).
    private func place(_ beacons: [BeaconSpec], _ state: inout State) async throws {
        var old: [String: MgmtInstance] = [:]
        for r in state.registered.compactMap({ $0 }) { old[r.spec.label] = r }
        let staying = Set(beacons.map(\.label))
        let gone = old.values.filter { !staying.contains($0.spec.label) }.map(\.instance)
        if !gone.isEmpty {
            await advertiser.remove(gone, on: client)
            for label in old.keys where !staying.contains(label) { old[label] = nil }
        }
        state.beacons = beacons
        state.registered = beacons.map { old[$0.label] }
        onInstancesChanged(state.instances)
        for (slot, spec) in beacons.enumerated() {
            if let current = state.registered[slot] {
                if current.spec != spec { try await add(slot, number: current.instance, again: true, &state, why: nil) }
            } else {
                let features = try await client.execute(MgmtReadAdvertisingFeatures(), index: index)
                let number = try MgmtAdvertiser.freeInstances(1, features: features, reserved: Set(state.instances))[0]
                try await add(slot, number: number, again: false, &state, why: nil)
            }
        }
    }

    /// How long no central may have been connected before the status says "advertising" again
    /// after one paused the beacon: a central reconnecting in a loop then keeps the status at
    /// `recovering` instead of flapping it (and the MQTT state) at every connection.
    static let quietPeriod = Duration.seconds(2)

    /// A central connecting to the adapter while one of our beacons is connectable: the kernel
    /// stops advertising that instance for as long as the link is up (hci_event.c re-enables it in
    /// `hci_disconn_complete_evt`), and bluetoothd would serve the central its GATT database. So
    /// the link is dropped at once (Disconnect), the status says `recovering` with the cause
    /// meanwhile, and the log says so (rate-limited). Whether `event` was such a link event.
    private func handleCentral(
        _ event: MgmtEvent, _ state: inout State, feed: AsyncStream<Input>.Continuation, onLost: (String) -> Void
    ) async -> Bool {
        switch event {
        case .deviceConnected(index, let link) where link.isIncomingLE && state.connectableOnAir:
            state.centrals.insert(link)
            state.quietGeneration += 1
            let cause =
                "a central (\(link.address)) connected to \(name); the kernel pauses a connectable beacon while "
                + "it is connected: disconnecting it"
            if !state.pausedByCentral {
                state.pausedByCentral = true
                onLost(cause)
            }
            let took = stopwatch(on: clock)
            let down = await disconnect(link)
            if down { state.centrals.remove(link) }
            logConnection(&state, link, took: took(), down: down)
        case .deviceDisconnected(index, let link, _) where state.centrals.contains(link):
            state.centrals.remove(link)
        default:
            return false
        }
        if state.centrals.isEmpty && state.pausedByCentral {
            let generation = state.quietGeneration
            Task { [clock] in
                try? await clock.sleep(for: Self.quietPeriod)
                feed.yield(.quiet(generation: generation))
            }
        }
        return true
    }

    /// Drops a central's link; whether it is down (also when it already was).
    private func disconnect(_ link: MgmtLink) async -> Bool {
        do {
            _ = try await client.execute(MgmtDisconnect(link), index: index)
            return true
        } catch MgmtError.commandFailed(_, _, .notConnected) {
            return true
        } catch {
            logger.warning("could not disconnect the central \(link.address) from \(name): \(error)")
            return false
        }
    }

    /// One line per dropped connection, the first 5 a minute, then how many were left out.
    private func logConnection(_ state: inout State, _ link: MgmtLink, took: Duration, down: Bool) {
        let line =
            "a central (\(link.address)) connected to \(name), which pauses our connectable beacon: "
            + (down ? "disconnected it after \(took.formattedSeconds)" : "could not disconnect it")
        switch state.connectionLog.record(at: elapsed()) {
        case .log: logger.warning("\(line)")
        case .logWithSummary(let suppressed):
            logger.warning("\(line) (\(suppressed) more such connection(s) not logged in the last minute)")
        case .suppress: break
        }
    }

    /// The quiet period after the last central left has ended: unless another one connected
    /// since, the kernel has resumed our beacon (on disconnection), so the status says so again.
    private func centralsGone(_ state: inout State, generation: Int, onRestored: () -> Void) {
        guard generation == state.quietGeneration, state.centrals.isEmpty, state.pausedByCentral else { return }
        state.pausedByCentral = false
        let left = state.connectionLog.flush()
        let unlogged = left > 0 ? " (\(left) connection(s) not logged)" : ""
        logger.notice(
            "no central connected to \(name) for \(Self.quietPeriod.formattedSeconds): advertising\(unlogged)")
        onRestored()
    }

    /// The adapter as Read Controller Information finds it; throws when it has no LE.
    private func initialState() async throws -> State {
        let info = try await client.execute(MgmtReadControllerInfo(), index: index)
        guard info.supportedSettings.contains(.lowEnergy) else {
            throw AdvertisingError("\(name) does not support Bluetooth Low Energy; it cannot advertise an iBeacon")
        }
        return State(
            beacons: advertiser.beacons, registered: Array(repeating: nil, count: advertiser.beacons.count),
            powered: info.currentSettings.contains(.powered), adapter: MgmtAdapterAddressing(info))
    }

    /// Calls `onReady` once, when every beacon is registered for the first time.
    private func reportReadyIfDone(_ state: inout State, _ onReady: (AdvertisingStatus) -> Void) {
        guard !state.readyReported, state.registered.allSatisfy({ $0 != nil }) else { return }
        state.readyReported = true
        let beacons = state.registered.compactMap { $0 }.map { i in
            AdvertisingStatus.Beacon(
                spec: i.spec,
                placement: .kernelInstance(
                    i.instance, method: i.method, connectable: i.connectable, address: i.address),
                txPower: i.txPower)
        }
        onReady(AdvertisingStatus(commandSet: nil, beacons: beacons, warnings: state.warnings))
    }

    /// What an event means for our advertising, with `state` brought up to date: why it has to be
    /// put back, or nil when there is nothing to do (yet: a power-off or a removed adapter is
    /// waited out, and said in the log and to `onLost`).
    private func cause(of event: MgmtEvent, _ state: inout State, onLost: (String) -> Void) async -> String? {
        switch event {
        case .advertisingRemoved(index, let instance) where state.instances.contains(instance):
            forget(&state, instance: instance)
            return "instance \(instance) was removed by another program (Advertising Removed; e.g. bluetoothd "
                + "starting, or `btmgmt rm-adv`)"
        case .advertisingAdded(index, let instance) where state.instances.contains(instance):
            // The kernel reports our own additions to every socket but ours: this is someone else
            // writing over our instance number.
            forget(&state, instance: instance)
            return "another program registered instance \(instance), which was ours (Advertising Added)"
        case .newSettings(index, let settings):
            state.adapter?.connectable = settings.contains(.connectable)
            let powered = settings.contains(.powered)
            if powered == state.powered { return nil }
            state.powered = powered
            guard powered else {
                logger.warning("\(name) was powered off (New Settings); waiting for it to be powered on again")
                onLost("\(name) was powered off")
                return nil
            }
            return "\(name) was powered on again (New Settings)"
        case .indexRemoved(index):
            state.present = false
            state.powered = false
            for i in state.registered.indices { state.registered[i] = nil }
            onInstancesChanged(state.instances)
            logger.warning("\(name) was removed (Index Removed); waiting for it to come back")
            onLost("\(name) was removed")
            return nil
        case .indexAdded(index):
            return await adapterCameBack(&state)
        default:
            return nil
        }
    }

    /// Index Added: the adapter is back; the cause to put the advertising back once it is powered.
    private func adapterCameBack(_ state: inout State) async -> String? {
        state.present = true
        let info = try? await client.execute(MgmtReadControllerInfo(), index: index)
        state.powered = info?.currentSettings.contains(.powered) ?? false
        state.adapter = info.map(MgmtAdapterAddressing.init)
        guard state.powered else {
            logger.warning("\(name) is back (Index Added) but powered off; waiting for it to be powered on")
            return nil
        }
        return "\(name) is back (Index Added)"
    }

    /// Whether our instances still listed are registered again too: not when another program
    /// only took one of ours; yes after a power cycle or a returning adapter, when the
    /// controller may have lost what the kernel kept.
    private static func refreshes(after event: MgmtEvent) -> Bool {
        switch event {
        case .advertisingRemoved, .advertisingAdded: false
        default: true
        }
    }

    /// Puts the advertising back after `why`, retrying by `restorePolicy`; whether it is back.
    private func restore(
        _ state: inout State, why: String, refresh: Bool, onReady: (AdvertisingStatus) -> Void
    ) async -> Bool {
        do {
            let (warnings, elapsed) = try await restorePolicy.run(on: clock) {
                try await register(&state, why: why, throwing: false, refresh: refresh)
            } retrying: { error, delay, failures in
                await shouldRetryRestoring(after: error, nextDelay: delay, failures: failures)
            }
            if !state.readyReported { state.warnings = warnings }
            reportReadyIfDone(&state, onReady)
            logger.notice("advertising checked and restored after \(elapsed.formattedSeconds) (\(why))")
            return true
        } catch {
            // Logged by `shouldRetryRestoring`, or cancelled during a wait: on the way out.
            return false
        }
    }

    /// Putting the advertising back after an event: the kernel may still be busy with the
    /// adapter (an HCI reset answers the first commands with Failed), so at once, then after
    /// 0.1 s, doubling, `restoreAttempts` attempts (about 3 s; `shouldRetryRestoring` stops at
    /// the last and logs it as an error).
    var restorePolicy: RetryPolicy {
        RetryPolicy(firstDelay: .milliseconds(100), maximumDelay: .milliseconds(1600), waitsBeforeFirstAttempt: false)
    }

    /// Whether to try again after the `failures`-th failure to put the advertising back; says
    /// why not (or that it retries) in the log. Not when the adapter is powering off, nor after
    /// `restoreAttempts`, nor once cancelled.
    private func shouldRetryRestoring(after error: any Error, nextDelay: Duration, failures: Int) async -> Bool {
        let info = try? await client.execute(MgmtReadControllerInfo(), index: index)
        if let info, !info.currentSettings.contains(.powered) {
            // The kernel removes instances as it powers the adapter off, before New
            // Settings says so: a refusal then only means "wait for the power".
            logger.debug("\(name) is powering off; waiting for it to be powered on (\(error))")
            return false
        }
        if failures == Self.restoreAttempts || Task.isCancelled {
            logger.error("putting the advertising back failed: \(error)")
            return false
        }
        logger.info("putting the advertising back failed (\(error)); retrying in \(nextDelay.formattedSeconds)")
        return true
    }

    /// Attempts at putting the advertising back before giving up with an error.
    static let restoreAttempts = 6

    private func forget(_ state: inout State, instance: UInt8) {
        for i in state.registered.indices where state.registered[i]?.instance == instance {
            state.registered[i] = nil
        }
    }

    /// Registers every beacon that is missing (not registered, or its instance number no longer
    /// listed by the kernel), keeping its old number when that is still free. With `refresh`,
    /// also registers again the ones still listed (same number: the kernel updates the instance
    /// and programs the controller again), for when the controller may have lost them while the
    /// kernel kept them (a power cycle, an HCI reset).
    ///
    /// The 6.1 kernel's Read Advertising Features leaves out every instance whose number exceeds
    /// the count of instances (mgmt.c `read_adv_features`: "Only instances 1-le_num_of_adv_sets
    /// are externally visible", tested against `adv_instance_cnt`). So one of ours missing from
    /// the list may still be there, hidden: it is registered again under its own number (no other
    /// program took that number, or Advertising Added would have said so). And new numbers are
    /// taken one at a time, reading the list again after each addition: every addition raises the
    /// count, which brings hidden numbers below it into the list, and the lowest number missing
    /// from the list is never a hidden one (fewer than `count` numbers up to `count` are listed
    /// while any is hidden, so a free one is at most `count`, and hidden ones are above it).
    private func register(_ state: inout State, why: String?, throwing: Bool, refresh: Bool = false) async throws
        -> [String]
    {
        var features = try await client.execute(MgmtReadAdvertisingFeatures(), index: index)
        let listed = Set(features.instances)
        var hidden: [Int] = []
        for i in state.registered.indices {
            guard let r = state.registered[i], !listed.contains(r.instance) else { continue }
            if Int(r.instance) > features.instances.count {
                hidden.append(i)
                continue
            }
            if let why { logger.warning("\(r.spec.label): instance \(r.instance) is gone (\(why))") }
            state.registered[i] = nil
        }
        let missing = state.registered.indices.filter { state.registered[$0] == nil }
        let kept = refresh ? state.registered.indices.filter { state.registered[$0] != nil } : hidden
        if missing.isEmpty && kept.isEmpty { return advertiser.warnings(features: features, adapter: state.adapter) }
        _ = try MgmtAdvertiser.freeInstances(missing.count, features: features, reserved: Set(state.instances))
        do {
            for slot in kept {
                try await add(slot, number: state.registered[slot]!.instance, again: true, &state, why: why)
            }
            for (n, slot) in missing.enumerated() {
                if n > 0 { features = try await client.execute(MgmtReadAdvertisingFeatures(), index: index) }
                let number = try MgmtAdvertiser.freeInstances(1, features: features, reserved: Set(state.instances))[0]
                try await add(slot, number: number, again: false, &state, why: why)
            }
        } catch {
            if throwing {
                await advertiser.remove(state.instances, on: client)
                onInstancesChanged([])
            }
            throw error
        }
        return advertiser.warnings(features: features, adapter: state.adapter)
    }

    /// Registers the beacon of `slot` as instance `number`, recorded before it is added (an
    /// advertiser killed at any point leaves a record of everything it may have added) and
    /// recorded again after.
    private func add(_ slot: Int, number: UInt8, again: Bool, _ state: inout State, why: String?) async throws {
        let spec = state.beacons[slot]
        onInstancesChanged(Array(Set(state.instances + [number])).sorted())
        let added: MgmtInstance
        do {
            added = try await advertiser.add(spec, instance: number, on: client, adapter: state.adapter)
        } catch {
            onInstancesChanged(state.instances)
            throw error
        }
        state.registered[slot] = added
        onInstancesChanged(state.instances)
        if let why {
            logger.warning(
                "\(spec.label): \(again ? "registered again" : "put back") as instance \(number) (cause: \(why))")
        }
    }
}
