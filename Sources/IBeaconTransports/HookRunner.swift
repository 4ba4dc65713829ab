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

/// Runs a hook for each event, one run at a time in event order, without ever making the caller
/// wait: `submit` only queues. At most `queueLimit` runs wait; when a slow hook lets the queue
/// fill up, further events are dropped and counted. Every failure (cannot start, non-zero exit,
/// killed, timed out) is logged with what was run and why.
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

    public let hook: Hook
    public let queueLimit: Int
    let logger: Logger
    let continuation: AsyncStream<Job>.Continuation
    let worker: Mutex<Task<Void, Never>?> = Mutex(nil)
    let tally = Tally()

    final class Tally: Sendable {
        let counts = Mutex(Counts())
    }

    public init(hook: Hook, queueLimit: Int = 64, logger: Logger) {
        self.hook = hook
        self.queueLimit = queueLimit
        self.logger = logger
        let (stream, continuation) = AsyncStream<Job>.makeStream(bufferingPolicy: .bufferingOldest(queueLimit))
        self.continuation = continuation
        let task = Task { [hook, logger, tally] in
            for await job in stream {
                let ok = await Self.run(hook, job, logger: logger)
                tally.counts.withLock {
                    $0.run += 1
                    if !ok { $0.failed += 1 }
                }
            }
        }
        worker.withLock { $0 = task }
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
            logger.warning(
                "hook queue full (\(queueLimit) waiting behind `\(hook.text)`): the hook for \(label) is dropped (\(n) dropped so far)"
            )
        case .enqueued, .terminated:
            break
        @unknown default:
            break
        }
    }

    /// Stops taking events and lets the queued runs finish for at most `grace`; then the running
    /// one is terminated and the rest are dropped.
    public func finish(grace: Duration) async {
        continuation.finish()
        guard let task = worker.withLock({ $0 }) else { return }
        let timer = Task {
            try? await Task.sleep(for: grace)
            if !Task.isCancelled { task.cancel() }
        }
        await task.value
        timer.cancel()
    }

    /// One run: spawn, wait (polling, so no thread is blocked), enforce the timeout. Returns
    /// whether it succeeded.
    static func run(_ hook: Hook, _ job: Job, logger: Logger) async -> Bool {
        let names = Set(job.variables.map { $0.0 + "=" })
        let environment =
            Sys.environment().filter { entry in !names.contains { entry.hasPrefix($0) } }
            + job.variables.map { "\($0.0)=\($0.1)" }
        let started = ContinuousClock.now
        let pid: pid_t
        do {
            pid = try Sys.spawn(hook.arguments, environment: environment)
        } catch {
            logger.error("hook for \(job.label): cannot run `\(hook.text)`: \(error)")
            return false
        }
        logger.debug("hook for \(job.label): started `\(hook.text)` (pid \(pid))")
        var delay = Duration.milliseconds(2)
        var terminatedAt: ContinuousClock.Instant?
        var killed = false
        while true {
            let termination: ProcessTermination?
            do {
                termination = try Sys.reap(pid)
            } catch {
                logger.warning("hook for \(job.label): lost track of `\(hook.text)` (pid \(pid)): \(error)")
                return false
            }
            let elapsed = started.duration(to: .now)
            if let termination {
                let seconds = elapsed.formattedSeconds
                if terminatedAt != nil {
                    logger.warning(
                        "hook for \(job.label): `\(hook.text)` took longer than \(hook.timeout.formattedSeconds) (--exec-timeout) and was stopped (\(termination))"
                    )
                    return false
                }
                switch termination {
                case .exited(0):
                    logger.info("hook for \(job.label): `\(hook.text)` finished in \(seconds)")
                    return true
                default:
                    logger.warning("hook for \(job.label) failed: `\(hook.text)` \(termination) after \(seconds)")
                    return false
                }
            }
            if Task.isCancelled && terminatedAt == nil {
                // Shutting down and out of grace: stop it now.
                terminatedAt = .now
                Sys.signalProcessGroup(pid, SIGTERM)
            } else if terminatedAt == nil && elapsed >= hook.timeout {
                terminatedAt = .now
                Sys.signalProcessGroup(pid, SIGTERM)
            } else if let terminatedAt, !killed, terminatedAt.duration(to: .now) >= .seconds(2) {
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
