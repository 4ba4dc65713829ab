import Glibc
import IBeaconCore
import IBeaconHost
import Logging
import Synchronization
import SystemPackage

/// A command run for each event (`ibeacon monitor --exec`).
public struct Hook: Sendable {
    /// The program and its arguments, exactly as executed.
    public var arguments: [String]
    /// What the user wrote, for log messages.
    public var text: String
    /// How long one run may take before it is terminated (SIGTERM, then SIGKILL 2 s later).
    public var timeout: Duration

    /// `command` is split into words like a shell would quote them, but not run by one, unless
    /// `shell` is set: then it runs as `/bin/sh -c command`.
    public init(command: String, shell: Bool, timeout: Duration) throws(HookError) {
        text = command
        self.timeout = timeout
        if shell {
            arguments = ["/bin/sh", "-c", command]
        } else {
            do {
                arguments = try CommandWords.split(command)
            } catch {
                throw HookError("--exec \(command): \(error)")
            }
        }
        if arguments.isEmpty { throw HookError("--exec: the command is empty") }
    }

    /// Throws unless the program exists and is executable (checked once at start, so a typo
    /// fails at once rather than at the first event).
    public func checkProgram() throws(HookError) {
        let program = arguments[0]
        let path = Sys.environment().first { $0.hasPrefix("PATH=") }.map { String($0.dropFirst(5)) }
        if Sys.findExecutable(program, path: path) == nil {
            throw HookError(
                program.contains("/")
                    ? "--exec: \(program) does not exist or is not executable"
                    : "--exec: \(program) is not an executable in $PATH; give its full path, or use --exec-shell for a shell command"
            )
        }
    }
}

public struct HookError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// An `--exec` program that is not there (or not executable) is a missing input (66): the
/// command refuses to start rather than monitor without its hooks.
extension HookError: ClassifiedError {
    public var failureKind: FailureKind { .notFound }
}

/// Runs a hook for each event, one run at a time in event order, without ever making the caller
/// wait: `submit` only queues. At most `queueLimit` runs wait; when a slow hook lets the queue
/// fill up, further events are dropped and counted, and the warnings about them rate-limited
/// like those about malformed events (`RepeatLimiter`: the first 5 per 10 s, then one line with
/// the count). Every failure (cannot start, non-zero exit, killed, timed out) is logged with
/// what was run and why.
///
/// A run that outlives its timeout gets SIGTERM, then SIGKILL 2 s later, both to its whole
/// process group: the SIGKILL comes whatever the group's first process did with the SIGTERM.
/// With a `ChildReaper` (the CLI), what a hook leaves running is reaped when it ends and ended
/// by `finish`.
public final class HookRunner: Sendable {
    public struct Counts: Sendable, Equatable {
        public var run = 0
        public var failed = 0
        public var dropped = 0
    }

    struct Job: Sendable {
        var label: String
        var variables: [(String, String)]
    }

    /// Variables for ibeacon itself, never a hook: systemd's (a hook writing to ibeacon's
    /// `NOTIFY_SOCKET` could tell systemd the service is ready or stopping, or feed its
    /// watchdog) and the MQTT password (`/etc/default/ibeacon` gives it to the units).
    public static let withheldVariables: Set<String> = [
        "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID",
        "IBEACON_MQTT_PASSWORD",
    ]

    public let hook: Hook
    public let queueLimit: Int
    let logger: Logger
    let reaper: ChildReaper?
    let continuation: AsyncStream<Job>.Continuation
    let worker: Mutex<Task<Void, Never>?> = Mutex(nil)
    let reaping: Mutex<Task<Void, Never>?> = Mutex(nil)
    let tally = Tally()
    let elapsed: @Sendable () -> Duration

    final class Tally: Sendable {
        let counts = Mutex(Counts())
        let dropWarnings = Mutex(RepeatLimiter())
        /// Set by `finish(grace:startQueued: false)` and when the grace is over: what is still
        /// queued is dropped, never started.
        let closing = Atomic<Bool>(false)
    }

    /// `clock`: what the drop warnings' rate limit counts its 10 s in. `reaper`: reap through
    /// it (and end what hooks leave behind at `finish`); without one, each run's first process
    /// is waited for by its pid.
    public init(
        hook: Hook, queueLimit: Int = 64, reaper: ChildReaper? = nil, clock: some Clock<Duration> = ContinuousClock(),
        logger: Logger
    ) {
        self.hook = hook
        self.queueLimit = queueLimit
        self.logger = logger
        self.reaper = reaper
        let origin = clock.now
        elapsed = { origin.duration(to: clock.now) }
        let (stream, continuation) = AsyncStream<Job>.makeStream(bufferingPolicy: .bufferingOldest(queueLimit))
        self.continuation = continuation
        let task = Task { [hook, logger, tally, reaper] in
            for await job in stream {
                if tally.closing.load(ordering: .sequentiallyConsistent) {
                    tally.counts.withLock { $0.dropped += 1 }
                    continue
                }
                let ok = await Self.run(hook, job, reaper: reaper, logger: logger)
                tally.counts.withLock {
                    $0.run += 1
                    if !ok { $0.failed += 1 }
                }
            }
        }
        worker.withLock { $0 = task }
        if let reaper {
            // Orphans a hook left behind end while no hook runs too: reap them as they do.
            let reaping = Task {
                while !Task.isCancelled {
                    reaper.reap()
                    try? await Task.sleep(for: .milliseconds(500))
                }
            }
            self.reaping.withLock { $0 = reaping }
        }
    }

    /// What has happened so far.
    public var summary: Counts { tally.counts.withLock { $0 } }

    /// Queues a run with `variables` added to the environment; never waits. `label` names the
    /// event in log messages ("exit of bakery").
    public func submit(label: String, variables: [(String, String)]) {
        switch continuation.yield(Job(label: label, variables: variables)) {
        case .dropped:
            let n = tally.counts.withLock {
                $0.dropped += 1
                return $0.dropped
            }
            let verdict = tally.dropWarnings.withLock { $0.record(at: elapsed()) }
            let message =
                "hook queue full (\(queueLimit) waiting behind `\(hook.text.escapedForTerminal)`): the hook for \(label.escapedForTerminal) is dropped (\(n) dropped so far)"
            switch verdict {
            case .suppress: break
            case .log: logger.warning("\(message)")
            case .logWithSummary(let left):
                logger.warning("\(message); \(left) more dropped since the last such warning")
            }
        case .enqueued, .terminated:
            break
        @unknown default:
            break
        }
    }

    /// Stops taking events. The running hook may finish for at most `grace`; then it is
    /// terminated (SIGTERM to its group, SIGKILL 2 s later). Queued runs start within the grace
    /// only when `startQueued` (the source ended by itself); when stopped (a signal) or out of
    /// grace, they are dropped, never started. Then, with a reaper, whatever hooks left running
    /// is ended (SIGTERM, SIGKILL after 1 s).
    public func finish(grace: Duration, startQueued: Bool = true) async {
        continuation.finish()
        if !startQueued { tally.closing.store(true, ordering: .sequentiallyConsistent) }
        let droppedBefore = summary.dropped
        if let task = worker.withLock({ $0 }) {
            let tally = tally
            let timer = Task {
                try? await Task.sleep(for: grace)
                if !Task.isCancelled {
                    tally.closing.store(true, ordering: .sequentiallyConsistent)
                    task.cancel()
                }
            }
            await task.value
            timer.cancel()
        }
        let unstarted = summary.dropped - droppedBefore
        if unstarted > 0 { logger.notice("\(unstarted) queued hook(s) dropped at exit, not started") }
        let left = tally.dropWarnings.withLock { $0.flush() }
        if left > 0 { logger.warning("hook queue full: \(left) more hook(s) dropped since the last such warning") }
        if let reaper {
            reaping.withLock { $0 }?.cancel()
            let ended = reaper.endDescendants()
            if ended > 0 {
                logger.notice(
                    "stopped \(ended) process(es) that hooks of `\(hook.text.escapedForTerminal)` left running")
            }
        }
    }

    /// SIGKILL to every hook process, now: for an exit that cannot wait (a second signal).
    public func killNow() {
        reaper?.killDescendantsNow()
    }

    /// The environment of a run: this process's, without `withheldVariables` and any variable
    /// the event sets, plus the event's.
    static func environment(_ variables: [(String, String)]) -> [String] {
        let names = Set(variables.map(\.0)).union(withheldVariables)
        return Sys.environment().filter { entry in
            !names.contains(String(entry.prefix { $0 != "=" }))
        } + variables.map { "\($0.0)=\($0.1)" }
    }

    /// Starts a run's process (through the reaper when there is one); nil when it cannot be started.
    private static func spawn(_ hook: Hook, _ job: Job, reaper: ChildReaper?, logger: Logger) -> pid_t? {
        let text = hook.text.escapedForTerminal
        let label = job.label.escapedForTerminal
        let pid: pid_t
        do {
            let environment = environment(job.variables)
            if let reaper {
                pid = try reaper.spawn { () throws(Errno) in
                    try Sys.spawnWithoutCapabilities(hook.arguments, environment: environment)
                }
            } else {
                pid = try Sys.spawnWithoutCapabilities(hook.arguments, environment: environment)
            }
        } catch {
            logger.error("hook for \(label): cannot run `\(text)`: \(error)")
            return nil
        }
        logger.debug("hook for \(label): started `\(text)` (pid \(pid))")
        return pid
    }

    /// One run: spawn, wait (polling, so no thread is blocked), enforce the timeout. Returns
    /// whether it succeeded.
    static func run(_ hook: Hook, _ job: Job, reaper: ChildReaper?, logger: Logger) async -> Bool {
        let text = hook.text.escapedForTerminal
        let label = job.label.escapedForTerminal
        let started = ContinuousClock.now
        guard let pid = spawn(hook, job, reaper: reaper, logger: logger) else { return false }
        var delay = Duration.milliseconds(2)
        var terminatedAt: ContinuousClock.Instant?
        var killed = false
        var ended: ProcessTermination?
        while true {
            if ended == nil {
                if let reaper {
                    ended = reaper.termination(of: pid)
                } else {
                    do {
                        ended = try Sys.reap(pid)
                    } catch {
                        logger.warning("hook for \(label): lost track of `\(text)` (pid \(pid)): \(error)")
                        return false
                    }
                }
            }
            let elapsed = started.duration(to: .now)
            if let termination = ended {
                if terminatedAt == nil {
                    let seconds = elapsed.formattedSeconds
                    if termination == .exited(0) {
                        logger.info("hook for \(label): `\(text)` finished in \(seconds)")
                        return true
                    }
                    logger.warning("hook for \(label) failed: `\(text)` \(termination) after \(seconds)")
                    return false
                }
                // Stopped: done once its whole group is gone (or has had its SIGKILL).
                if killed || !Sys.processGroupExists(pid) {
                    logger.warning(
                        "hook for \(label): `\(text)` took longer than \(hook.timeout.formattedSeconds) (--exec-timeout) and was stopped (\(termination))"
                    )
                    return false
                }
            }
            if terminatedAt == nil && (Task.isCancelled || elapsed >= hook.timeout) {
                // Out of time, or shutting down and out of grace: stop it now.
                terminatedAt = .now
                Sys.signalProcessGroup(pid, SIGTERM)
            } else if let terminatedAt, !killed, terminatedAt.duration(to: .now) >= .seconds(2) {
                // To the group even when its first process is gone: a member that ignored the
                // SIGTERM must not outlive the timeout.
                killed = true
                Sys.signalProcessGroup(pid, SIGKILL)
            }
            if Task.isCancelled {
                // Task.sleep returns at once when cancelled: wait without it.
                Sys.sleepBlocking(nanoseconds: 10_000_000)
            } else {
                try? await Task.sleep(for: delay)
            }
            delay = min(delay * 2, .milliseconds(50))
        }
    }
}

/// The monitor run hands its events to the runner.
extension HookRunner: EventHooks {
    public var summaryText: String {
        let h = summary
        return "\(h.run) run, \(h.failed) failed, \(h.dropped) dropped"
    }
}

extension HookRunner {
    /// The runner for `command` (split into words, or run by /bin/sh -c when `shell`), its
    /// program checked to be there and executable unless a shell runs it. ibeacon spawns no
    /// other child, so the runner reaps them all (and, as a subreaper, what hooks leave
    /// running; also as PID 1, where every orphan comes to it).
    public static func checked(command: String, shell: Bool, timeout: Duration, logger: Logger) throws(HookError)
        -> HookRunner
    {
        let hook = try Hook(command: command, shell: shell, timeout: timeout)
        if !shell { try hook.checkProgram() }
        return HookRunner(hook: hook, reaper: ChildReaper(), logger: logger)
    }
}
