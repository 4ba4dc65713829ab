import IBeaconCore
import Logging
import Synchronization

/// Keeps beacons on the air: starts advertising, watches the controller, and re-applies the
/// advertising whenever the controller loses it (another host's Reset, a power-up, a Hardware
/// Error, the adapter going down and up, the transport dropping), until cancelled; then turns
/// advertising off.
///
/// Idle, it blocks on controller events and one long timer (the health check): no polling.
public struct AdvertisingSession: Sendable {
    public typealias Connect = @Sendable () async throws -> ControllerClient

    public var advertiser: Advertiser
    public var connect: Connect
    public var clock: any Clock<Duration>
    /// How often to check that the controller still answers; nil disables the check.
    public var healthCheckInterval: Duration?
    /// Quiet time to wait after a reset before re-applying, so the kernel's own
    /// initialisation sequence (on a BlueZ adapter) has finished.
    public var settleTime: Duration
    /// Longest wait between reconnection attempts.
    public var maximumBackoff: Duration
    public var logger: Logger
    /// New beacons while running (`advertise --mqtt-control`); nil: none come.
    public var updates: AdvertisingUpdates?

    public init(
        advertiser: Advertiser, connect: @escaping Connect, clock: any Clock<Duration> = ContinuousClock(),
        healthCheckInterval: Duration? = .seconds(30), settleTime: Duration = .milliseconds(250),
        maximumBackoff: Duration = .seconds(30), logger: Logger
    ) {
        self.advertiser = advertiser
        self.connect = connect
        self.clock = clock
        self.healthCheckInterval = healthCheckInterval
        self.settleTime = settleTime
        self.maximumBackoff = maximumBackoff
        self.logger = logger
    }

    /// Why advertising had to be re-applied.
    enum Trigger: Sendable {
        case controllerReset(String)
        case adapterDown
        case adapterUp
        case linkClosed(TransportError?)
        case healthCheck
        /// New beacons wait in `updates`.
        case reconfigure
    }

    /// Runs until the task is cancelled. Setup errors before the first successful start are
    /// thrown (the caller exits with them); later problems are logged and recovered from.
    /// `onReady` is called once advertising is first on; `onLost` with the cause when the
    /// controller lost it (re-applying starts); `onRecovered` after each recovery.
    public func run(
        onReady: @Sendable (AdvertisingStatus) -> Void,
        onLost: @Sendable (String) -> Void = { _ in },
        onRecovered: @Sendable (AdvertisingStatus) -> Void = { _ in }
    ) async throws {
        var client = try await connect()
        var advertiser = self.advertiser
        var status: AdvertisingStatus
        do {
            status = try await advertiser.start(on: client)
        } catch {
            await client.close()
            throw error
        }
        onReady(status)

        let watch = TriggerWatch(healthCheckInterval: healthCheckInterval, clock: clock)
        watch.watch(client)
        defer { watch.finish() }
        updates?.attach(watch.poke)
        defer { updates?.detach() }

        for await (trigger, g) in watch.triggers where g == watch.generation || trigger.isReconfigure {
            announce(trigger, on: client, onLost: onLost)
            switch trigger {
            case .reconfigure:
                status = await reconfigure(&advertiser, on: client, status: status)
                continue
            case .adapterDown:
                continue
            case .controllerReset, .adapterUp:
                break
            case .healthCheck, .linkClosed:
                await client.close()
                guard let c = await reconnect() else { return }
                client = c
                watch.watch(client)
            }
            if Task.isCancelled { break }
            if let (s, elapsed) = await reapply(advertiser, on: client) {
                status = s
                logger.notice("advertising resumed after \(elapsed.formattedSeconds)")
                onRecovered(s)
            }
            // A change that waited while the controller was lost (its wake-up coalesced away).
            status = await reconfigure(&advertiser, on: client, status: status)
        }
        for change in updates?.take() ?? [] { change.done(.failure(CancellationError())) }
        await advertiser.stop(on: client, commandSet: status.commandSet ?? .legacy)
        await client.close()
    }

    /// Logs what the controller lost and why, and tells `onLost`.
    private func announce(_ trigger: Trigger, on client: ControllerClient, onLost: @Sendable (String) -> Void) {
        let name = client.transport.name
        switch trigger {
        case .adapterDown:
            logger.warning("\(name) went down; advertising will resume when it is back up")
            onLost("\(name) went down")
        case .controllerReset(let why):
            logger.warning("\(why); re-applying advertising")
            onLost(why)
        case .adapterUp:
            logger.warning("\(name) is up again; re-applying advertising")
            onLost("\(name) went down and up")
        case .linkClosed(let error):
            logger.warning("lost \(name): \(error?.description ?? "closed"); waiting for it to return")
            onLost("lost \(name): \(error?.description ?? "closed")")
        case .healthCheck:
            logger.warning("the controller stopped answering; reconnecting")
            onLost("the controller stopped answering")
        case .reconfigure:
            break
        }
    }

    /// Maps a controller event to a trigger; nil for events that do not affect advertising.
    static func classify(_ event: ControllerEvent) -> Trigger? {
        guard case .event(let event) = event else {
            if case .linkClosed(let error) = event { return .linkClosed(error) }
            return nil  // a wake-up
        }
        if let loss = ControllerStateLoss(event) {
            switch loss {
            case .adapterDown: return .adapterDown
            case .adapterUp: return .adapterUp
            default: return .controllerReset(loss.reason)
            }
        }
        switch event {
        case .commandComplete(_, let opcode, _) where Self.reprogrammingOpcodes.contains(opcode):
            return .controllerReset("another program changed the advertising (\(opcode))")
        case .leAdvertisingSetTerminated(_, let handle, _, _):
            return .controllerReset("advertising set \(handle) was terminated by the controller")
        default:
            return nil
        }
    }

    /// Commands from another host that stop or replace our advertising.
    static let reprogrammingOpcodes: Set<HCIOpcode> = [
        .leSetAdvertisingEnable, .leSetAdvertisingParameters, .leSetAdvertisingData,
        .leSetExtendedAdvertisingEnable, .leSetExtendedAdvertisingParameters, .leRemoveAdvertisingSet,
        .leClearAdvertisingSets,
    ]

    /// Re-applying after a reset: the settle time first, then back-off up to 2 s, until
    /// cancelled or the controller refuses for good.
    var reapplyPolicy: RetryPolicy {
        RetryPolicy(firstDelay: settleTime, maximumDelay: .seconds(2), waitsBeforeFirstAttempt: true)
    }

    /// Reconnecting a lost link: at once, then after 0.5 s, doubling up to `maximumBackoff`.
    var reconnectPolicy: RetryPolicy {
        RetryPolicy(firstDelay: .milliseconds(500), maximumDelay: maximumBackoff, waitsBeforeFirstAttempt: false)
    }

    /// Waits for the controller to settle, then starts advertising again (`reapplyPolicy`);
    /// returns the status and the time it took, nil when cancelled or refused for good.
    private func reapply(_ advertiser: Advertiser, on client: ControllerClient) async
        -> (AdvertisingStatus, Duration)?
    {
        let logger = self.logger
        return try? await reapplyPolicy.run(on: clock) {
            try await advertiser.start(on: client)
        } retrying: { error, _, _ in
            guard let error = error as? ControllerError else {
                logger.error("re-applying advertising failed: \(error)")
                return true
            }
            if !error.isWorthRetrying { return false }
            logger.warning("re-applying advertising failed: \(error); retrying")
            return true
        }
    }

    /// Puts the latest waiting change on the air in place of the current beacons, on the same
    /// connection (`Advertiser.start` stops what is advertising before it programs the new, so
    /// old and new are never on the air together); when the controller refuses it, the previous
    /// beacons go back and the change is answered with the error. Nothing waiting: `status`.
    private func reconfigure(_ advertiser: inout Advertiser, on client: ControllerClient, status: AdvertisingStatus)
        async -> AdvertisingStatus
    {
        let changes = updates?.take() ?? []
        guard let latest = changes.last else { return status }
        let previous = advertiser.beacons
        advertiser.beacons = latest.beacons.compactMap { $0 }
        do {
            let applied = try await advertiser.start(on: client)
            for change in changes { change.done(.success(applied)) }
            return applied
        } catch {
            logger.warning("the changed advertising was refused (\(error)); putting the previous back")
            advertiser.beacons = previous
            let back = try? await advertiser.start(on: client)
            for change in changes { change.done(.failure(error)) }
            return back ?? status
        }
    }

    /// Reconnects (`reconnectPolicy`); nil when cancelled.
    private func reconnect() async -> ControllerClient? {
        let logger = self.logger
        return try? await reconnectPolicy.run(on: clock) {
            try await connect()
        } retrying: { error, delay, _ in
            logger.warning("controller not available (\(error)); retrying in \(delay.formattedSeconds)")
            return true
        }.value
    }
}

extension AdvertisingSession.Trigger {
    var isReconfigure: Bool { if case .reconfigure = self { true } else { false } }
}

/// Every client's events (and its health check) feed one stream of triggers, tagged with the
/// client's generation so that late events of a replaced client are ignored.
///
/// A client's event stream is never iterated by a task we cancel (cancelling the iteration would
/// end the stream): each watcher ends when its client is closed. Only the latest trigger waits:
/// a storm of resets or Hardware Errors while advertising is being re-applied leaves one more
/// re-application to do, not one per event.
private final class TriggerWatch {
    typealias Trigger = AdvertisingSession.Trigger
    let triggers: AsyncStream<(Trigger, Int)>
    private let sink: AsyncStream<(Trigger, Int)>.Continuation
    private let current = CurrentGeneration()
    private let healthCheckInterval: Duration?
    private let clock: any Clock<Duration>
    /// The generation of the client watched last: the one advertising now.
    private(set) var generation = 0
    private var watchers: [Task<Void, Never>] = []

    init(healthCheckInterval: Duration?, clock: any Clock<Duration>) {
        (triggers, sink) = AsyncStream.makeStream(of: (Trigger, Int).self, bufferingPolicy: .bufferingNewest(1))
        self.healthCheckInterval = healthCheckInterval
        self.clock = clock
    }

    /// Starts watching `client`'s events (and checking its health): it becomes the current one.
    func watch(_ client: ControllerClient) {
        generation += 1
        let g = generation
        let (current, sink) = (current, sink)
        current.value.store(g, ordering: .relaxed)
        watchers.append(
            Task {
                for await event in client.events {
                    // A replaced client's late events must not push out the current one's.
                    if let t = AdvertisingSession.classify(event), current.value.load(ordering: .relaxed) == g {
                        sink.yield((t, g))
                    }
                }
            })
        if let interval = healthCheckInterval {
            let clock = self.clock
            watchers.append(
                Task { await TriggerWatch.checkHealth(of: client, every: interval, on: clock, sink: sink, g) })
        }
    }

    /// Reads the address every `interval`; a timeout (or no credits) yields `.healthCheck`.
    private static func checkHealth(
        of client: ControllerClient, every interval: Duration, on clock: any Clock<Duration>,
        sink: AsyncStream<(Trigger, Int)>.Continuation, _ g: Int
    ) async {
        while !Task.isCancelled {
            do { try await clock.sleep(for: interval) } catch { return }
            do {
                _ = try await client.execute(ReadBDAddr())
            } catch ControllerError.timeout, ControllerError.noCredits {
                sink.yield((.healthCheck, g))
                return
            } catch ControllerError.transport, ControllerError.closed {
                return  // the event stream reports the link loss
            } catch {
                // Any answer, even an error status, means the controller is alive.
            }
        }
    }

    /// Tells the loop that a change waits (from any thread).
    var poke: @Sendable () -> Void {
        let (sink, current) = (sink, current)
        return { sink.yield((.reconfigure, current.value.load(ordering: .relaxed))) }
    }

    /// Cancels every watcher and ends the trigger stream.
    func finish() {
        for watcher in watchers { watcher.cancel() }
        sink.finish()
    }
}

/// The generation of the client advertising now, shared with the watchers of every client.
private final class CurrentGeneration: Sendable {
    let value = Atomic(0)
}
