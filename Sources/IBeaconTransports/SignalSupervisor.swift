import Dispatch
import Glibc
import IBeaconCore
import IBeaconHost
import Synchronization

/// A signal number (signal(7)): an open set, with names for the signals this program handles.
public struct ProcessSignal: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let interrupt = Self(rawValue: SIGINT)
    public static let terminate = Self(rawValue: SIGTERM)
    public static let hangUp = Self(rawValue: SIGHUP)
    public static let user1 = Self(rawValue: SIGUSR1)
    public static let user2 = Self(rawValue: SIGUSR2)
    public static let alarm = Self(rawValue: SIGALRM)
    public static let virtualAlarm = Self(rawValue: SIGVTALRM)
    public static let profilingTimer = Self(rawValue: SIGPROF)
    public static let cpuLimit = Self(rawValue: SIGXCPU)
    public static let fileSizeLimit = Self(rawValue: SIGXFSZ)
    public static let io = Self(rawValue: SIGIO)
    public static let powerFailure = Self(rawValue: SIGPWR)
    public static let stackFault = Self(rawValue: SIGSTKFLT)
    public static let brokenPipe = Self(rawValue: SIGPIPE)

    /// The signals whose default action ends the process (signal(7)): all are caught, so that
    /// advertising is turned off before exiting. SIGPIPE is ignored instead: a write to a closed
    /// pipe then fails with EPIPE, which the output functions absorb.
    public static let terminating: [Self] = [
        .interrupt, .terminate, .hangUp, .user1, .user2, .alarm, .virtualAlarm, .profilingTimer, .cpuLimit,
        .fileSizeLimit, .io, .powerFailure, .stackFault,
    ]

    private static let names: [Self: String] = [
        .interrupt: "SIGINT", .terminate: "SIGTERM", .hangUp: "SIGHUP", .user1: "SIGUSR1", .user2: "SIGUSR2",
        .alarm: "SIGALRM", .virtualAlarm: "SIGVTALRM", .profilingTimer: "SIGPROF", .cpuLimit: "SIGXCPU",
        .fileSizeLimit: "SIGXFSZ", .io: "SIGIO", .powerFailure: "SIGPWR", .stackFault: "SIGSTKFLT",
        .brokenPipe: "SIGPIPE",
    ]

    /// The signal's name, `SIGHUP`; `signal 34` for one without.
    public var description: String { Self.names[self] ?? "signal \(rawValue)" }

    /// 128 + its number: the exit status of a process that a signal ended (SIGHUP 129).
    public var exitStatus: Int32 { 128 + rawValue }
}

/// What SIGINT and SIGTERM mean to a long-running command.
public enum InterruptMeaning: Sendable {
    /// The normal way to end it (advertise, scan): clean up and exit 0.
    case stop
    /// An abort (calibrate): nothing is written, exit 128 + the signal number (130, 143).
    case abort

    /// Whether `signal` ends the command as if it had finished: SIGINT and SIGTERM stopping it.
    public func endsNormally(_ signal: ProcessSignal) -> Bool {
        self == .stop && (signal == .interrupt || signal == .terminate)
    }
}

/// One operator action is one stop request, however many copies of its signal arrive: `timeout`
/// signals its child and then the child's process group, and so do `kill -- -PGID`, a shell's
/// cleanup trap, `tini -g` and supervisord's `stopasgroup` when the command runs in the group:
/// the same signal twice within microseconds. A signal after the first one is a second request
/// (the cleanup is abandoned) only when it is another signal, or the same one at least
/// `window` after the first (a second Ctrl-C); a repeat within the window changes nothing, and
/// the cleanup still runs (bounded by the supervisor's grace).
public struct RepeatedSignalRule: Sendable {
    /// The default window: `timeout` and a group kill repeat a signal within microseconds; a
    /// person pressing Ctrl-C again takes longer than a second.
    public static let defaultWindow = Duration.seconds(1)

    public let window: Duration

    public init(window: Duration = Self.defaultWindow) { self.window = window }

    /// Whether `signal`, `elapsed` after `first` arrived, asks to abandon the cleanup.
    public func isSecondRequest(_ signal: ProcessSignal, after first: ProcessSignal, elapsed: Duration) -> Bool {
        signal != first || elapsed >= window
    }
}

/// Runs a long-running command's body until it returns or a terminating signal arrives. On a
/// signal the body's task is cancelled so it can clean up (turn advertising off) before the
/// process exits; if that takes longer than `grace`, or a second stop request comes (another
/// signal, or the same one again after `RepeatedSignalRule`'s window), the process exits at once
/// (128 + the signal's number), saying so through `say`. A repeat of the first signal within
/// the window (`timeout`, a process-group kill) is the same request: the cleanup goes on.
///
/// As PID 1 (a container without an init) every orphan of the container is reparented here:
/// they are reaped while the body runs, unless `reapsChildren` (the body has a `ChildReaper` of
/// its own: two would take each other's statuses).
public struct SignalSupervisor: Sendable {
    /// How long the cleanup (turning advertising off, stopping the scan) may take by default
    /// before the process exits anyway: a controller that stopped answering cannot hold it.
    public static let defaultGraceMilliseconds = 1500

    let grace: Double
    let reapsChildren: Bool
    let caught: [ProcessSignal]
    let ignored: [ProcessSignal]
    let onForcedExit: @Sendable () -> Void
    let say: @Sendable (String) -> Void
    let repeats: RepeatedSignalRule
    /// Called for each signal after the first that is taken as the same request (tests).
    let onRepeat: @Sendable (ProcessSignal) -> Void

    /// `cleanupSeconds`: how long the cleanup may take instead of the default (monitor stopping
    /// a hook). `onForcedExit` runs just before a forced exit (monitor: SIGKILL to its hooks, so
    /// that nothing of them outlives it). `say` writes a last message before such an exit.
    /// `caught` and `ignored` are the signals handled (tests narrow them to one). `repeats` says
    /// which later signals are the same stop request; `onRepeat` sees each of those.
    public init(
        cleanupSeconds: Double? = nil, reapsChildren: Bool = false, caught: [ProcessSignal] = ProcessSignal.terminating,
        ignored: [ProcessSignal] = [.brokenPipe], repeats: RepeatedSignalRule = RepeatedSignalRule(),
        onForcedExit: @escaping @Sendable () -> Void = {},
        onRepeat: @escaping @Sendable (ProcessSignal) -> Void = { _ in },
        say: @escaping @Sendable (String) -> Void
    ) {
        self.repeats = repeats
        self.onRepeat = onRepeat
        grace = cleanupSeconds ?? Double(Self.defaultGraceMilliseconds) / 1000
        self.reapsChildren = reapsChildren
        self.caught = caught
        self.ignored = ignored
        self.onForcedExit = onForcedExit
        self.say = say
    }

    /// How the body ended: the first signal received (nil: none came) and what it threw.
    public struct Outcome: Sendable {
        public let signal: ProcessSignal?
        public let failure: (any Error)?

        public init(signal: ProcessSignal?, failure: (any Error)?) {
            self.signal = signal
            self.failure = failure
        }

        /// The body's error worth reporting: not the cancellation a signal caused.
        public var reportableFailure: (any Error)? {
            signal != nil && failure is CancellationError ? nil : failure
        }

        /// The exit status and last message of a command a signal ended; nil when it ends as if
        /// no signal had come (none did, or SIGINT/SIGTERM stopped it as `interrupt` says).
        public func signalledExit(_ interrupt: InterruptMeaning) -> (status: Int32, message: String)? {
            guard let signal, !interrupt.endsNormally(signal) else { return nil }
            return (signal.exitStatus, "stopped by \(signal)" + (interrupt == .abort ? "; nothing was written" : ""))
        }
    }

    /// The first signal received, the body's task, and whether the body has finished; shared
    /// with the handlers.
    private final class State: Sendable {
        let received = Atomic<Int32>(0)
        /// When the first signal arrived (DispatchTime's uptime nanoseconds).
        let receivedAt = Atomic<UInt64>(0)
        let finished = Atomic<Bool>(false)
        /// A handler is ending the process (`onForcedExit`, then `_exit`): the body must not
        /// win the race and return meanwhile.
        let forcing = Atomic<Bool>(false)
        /// The body's task, and whether a signal came before it was started.
        let body = Mutex<(task: Task<Void, any Error>?, cancelled: Bool)>((nil, false))

        func cancel() {
            body.withLock { body in
                body.cancelled = true
                body.task?.cancel()
            }
        }
    }

    /// Runs `body` under the signal handling; returns once it has finished.
    public func run(_ body: @escaping @Sendable () async throws -> Void) async -> Outcome {
        for signal in ignored { Sys.ignoreSignal(signal.rawValue) }
        let state = State()
        let reaping = reapsChildren ? nil : ChildReaper.reapOrphansIfInit()
        defer { reaping?.cancel() }
        let registered = DispatchGroup()
        let sources = caught.map { handle($0, state, registered) }
        defer {
            for source in sources { source.cancel() }
        }
        // Until a source is registered its signal keeps its old disposition (by default it
        // ends the process, before anything is on the air): the body starts only once every
        // handler is in place, so no stop request can fall between the two.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            registered.notify(queue: .global()) { done.resume() }
        }
        let task = Task { try await body() }
        state.body.withLock { shared in
            shared.task = task
            if shared.cancelled { task.cancel() }
        }
        var failure: (any Error)?
        do {
            try await task.value
        } catch {
            failure = error
        }
        state.finished.store(true, ordering: .sequentiallyConsistent)
        while state.forcing.load(ordering: .sequentiallyConsistent) {
            Sys.sleepBlocking(nanoseconds: 1_000_000_000)  // the handler exits the process in a moment
        }
        let received = state.received.load(ordering: .sequentiallyConsistent)
        return Outcome(signal: received == 0 ? nil : ProcessSignal(rawValue: received), failure: failure)
    }

    /// Catches `signal`: the first one cancels the body and starts the grace timer; a second
    /// stop request (`repeats`) ends the process at once, a repeat of the first is ignored.
    ///
    /// Dispatch installs its own handler for the signal when the source is registered (which
    /// happens later, on its manager thread), and leaves `registered` then. The signal is not
    /// set to SIG_IGN first: one arriving in between would be dropped, and the process would
    /// go on as if no stop had been asked for.
    private func handle(_ signal: ProcessSignal, _ state: State, _ registered: DispatchGroup) -> DispatchSourceSignal {
        let source = DispatchSource.makeSignalSource(signal: signal.rawValue, queue: .global())
        registered.enter()
        source.setRegistrationHandler { registered.leave() }
        source.setEventHandler { [self] in
            let now = DispatchTime.now().uptimeNanoseconds
            let first = state.received.compareExchange(
                expected: 0, desired: signal.rawValue, ordering: .sequentiallyConsistent)
            if !first.exchanged {
                repeated(signal, state, now: now)
                return
            }
            state.receivedAt.store(now, ordering: .sequentiallyConsistent)
            state.cancel()
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(grace * 1000))) {
                if !state.finished.load(ordering: .sequentiallyConsistent) {
                    forceExit(
                        signal, state,
                        "\(signal): the cleanup did not finish within \(formatSeconds(grace)) (the controller "
                            + "does not answer); exiting anyway: check with `ibeacon stop` that advertising is off")
                }
            }
        }
        source.resume()
        return source
    }

    /// A signal after the first: the same stop request (ignored) or a second one (exit now).
    private func repeated(_ signal: ProcessSignal, _ state: State, now: UInt64) {
        let first = ProcessSignal(rawValue: state.received.load(ordering: .sequentiallyConsistent))
        var firstAt = state.receivedAt.load(ordering: .sequentiallyConsistent)
        if firstAt == 0 { firstAt = now }  // the first one's handler has not stored its time yet
        let elapsed = Duration.nanoseconds(Int64(clamping: now &- min(now, firstAt)))
        guard repeats.isSecondRequest(signal, after: first, elapsed: elapsed) else {
            onRepeat(signal)
            return
        }
        forceExit(signal, state, "\(signal) again: exiting without finishing the cleanup")
    }

    /// Ends the process now with 128 + `signal`, after `onForcedExit` and a last message.
    private func forceExit(_ signal: ProcessSignal, _ state: State, _ message: String) -> Never {
        state.forcing.store(true, ordering: .sequentiallyConsistent)
        onForcedExit()
        say(message)
        Sys.exitImmediately(signal.exitStatus)
    }
}

extension ChildReaper {
    /// As PID 1, a task reaping every orphan reparented here (a `ChildReaper`); nil otherwise.
    public static func reapOrphansIfInit() -> Task<Void, Never>? {
        guard ProcessContext.processID == 1 else { return nil }
        let reaper = ChildReaper()
        return Task {
            while !Task.isCancelled {
                reaper.reap()
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
    }
}
