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

    public init(
        advertiser: MgmtAdvertiser, client: MgmtClient, logger: Logger, clock: any Clock<Duration> = ContinuousClock(),
        onInstancesChanged: @escaping @Sendable ([UInt8]) -> Void = { _ in }
    ) {
        self.advertiser = advertiser
        self.client = client
        self.logger = logger
        self.clock = clock
        self.onInstancesChanged = onInstancesChanged
    }

    /// Our beacons, by position in `advertiser.beacons`, with their instance when registered.
    struct State {
        var registered: [MgmtInstance?]
        var powered: Bool
        var present = true
        /// The adapter's identity address and Connectable setting, for which address is on the air.
        var adapter: MgmtAdapterAddressing?
        /// The warnings of the registration that completed first, reported with `onReady`.
        var warnings: [String] = []
        var readyReported = false
        var instances: [UInt8] { registered.compactMap { $0?.instance } }
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
        for await event in client.events {
            if Task.isCancelled { break }
            guard let why = await cause(of: event, &state, onLost: onLost), state.powered, state.present else {
                continue
            }
            onLost(why)
            if await restore(&state, why: why, refresh: Self.refreshes(after: event), onReady: onReady) {
                onRestored()
            }
        }
        if let error = await client.linkError { throw error }
        await advertiser.remove(state.instances, on: client)
        onInstancesChanged([])
    }

    /// The adapter as Read Controller Information finds it; throws when it has no LE.
    private func initialState() async throws -> State {
        let info = try await client.execute(MgmtReadControllerInfo(), index: index)
        guard info.supportedSettings.contains(.lowEnergy) else {
            throw AdvertisingError("\(name) does not support Bluetooth Low Energy; it cannot advertise an iBeacon")
        }
        return State(
            registered: Array(repeating: nil, count: advertiser.beacons.count),
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
    private func register(_ state: inout State, why: String?, throwing: Bool, refresh: Bool = false) async throws
        -> [String]
    {
        let features = try await client.execute(MgmtReadAdvertisingFeatures(), index: index)
        let listed = Set(features.instances)
        for i in state.registered.indices {
            if let r = state.registered[i], !listed.contains(r.instance) {
                if let why { logger.warning("\(r.spec.label): instance \(r.instance) is gone (\(why))") }
                state.registered[i] = nil
            }
        }
        let missing = state.registered.indices.filter { state.registered[$0] == nil }
        let kept = refresh ? state.registered.indices.filter { state.registered[$0] != nil } : []
        if missing.isEmpty && kept.isEmpty { return advertiser.warnings(features: features, adapter: state.adapter) }
        let fresh = try MgmtAdvertiser.freeInstances(
            missing.count, features: features, reserved: Set(state.instances))
        let plan = zip(missing, fresh).map { ($0, $1, false) } + kept.map { ($0, state.registered[$0]!.instance, true) }
        for (slot, number, again) in plan {
            let spec = advertiser.beacons[slot]
            do {
                let added = try await advertiser.add(spec, instance: number, on: client, adapter: state.adapter)
                state.registered[slot] = added
                if let why {
                    logger.warning(
                        "\(spec.label): \(again ? "registered again" : "put back") as instance \(number) (cause: \(why))"
                    )
                }
            } catch {
                onInstancesChanged(state.instances)
                if throwing {
                    await advertiser.remove(state.instances, on: client)
                    onInstancesChanged([])
                }
                throw error
            }
        }
        onInstancesChanged(state.instances)
        return advertiser.warnings(features: features, adapter: state.adapter)
    }
}
