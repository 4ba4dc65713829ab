import Glibc
import IBeaconHost
import Synchronization
import SystemPackage

/// The one place that waits for this process's children, for a process that owns every child
/// it has (the CLI: only hooks are spawned). It makes the process a child subreaper
/// (`PR_SET_CHILD_SUBREAPER`), so whatever a hook leaves running is reparented here rather than
/// to init, and reaps every child that ends (`waitpid(-1)`) — the hooks it spawned, whose
/// status it keeps for the caller, and every adopted orphan, whose status it discards. As PID 1
/// (a container without an init) orphans come here anyway; reaping them is what keeps the
/// process table from filling with zombies.
///
/// Not for a process where other code spawns and waits for its own children (a test runner):
/// `waitpid(-1)` would take their statuses.
public final class ChildReaper: Sendable {
    private struct State {
        /// Spawned children not yet collected by `termination(of:)`: nil while running.
        var watched: [pid_t: ProcessTermination?] = [:]
        var orphansReaped = 0
    }

    private let state = Mutex(State())

    public init() {
        Sys.becomeChildSubreaper()
    }

    /// Adopted orphans reaped so far.
    public var orphansReaped: Int { state.withLock { $0.orphansReaped } }

    /// Runs `spawn` and watches the child it returns, both under the lock, so that a child
    /// ending at once is not mistaken for an orphan.
    func spawn(_ spawn: () throws(Errno) -> pid_t) throws(Errno) -> pid_t {
        try state.withLock { state throws(Errno) in
            let pid = try spawn()
            state.watched[pid] = .some(nil)
            return pid
        }
    }

    /// Reaps every child that has ended; the status of a watched one is kept.
    public func reap() {
        state.withLock { state in Self.reap(&state) }
    }

    private static func reap(_ state: inout State) {
        while let (pid, termination) = Sys.reapAny() {
            if state.watched[pid] != nil {
                state.watched[pid] = .some(termination)
            } else {
                state.orphansReaped += 1
            }
        }
    }

    /// How a watched child ended, once; nil while it runs.
    func termination(of pid: pid_t) -> ProcessTermination? {
        state.withLock { state in
            Self.reap(&state)
            guard case .some(.some(let termination)) = state.watched[pid] else { return nil }
            state.watched[pid] = nil
            return termination
        }
    }

    /// Ends every descendant still running, for the way out: SIGTERM to each child and to the
    /// process group of each hook still running, SIGKILL to what is left after `grace`, until
    /// none is left (a killed child's own children are reparented here and then ended in
    /// turn) or `limit` has passed. Returns how many were signalled.
    @discardableResult
    public func endDescendants(grace: Duration = .seconds(1), limit: Duration = .seconds(4)) -> Int {
        let started = ContinuousClock.now
        var signalled: Set<pid_t> = []
        while started.duration(to: .now) < limit {
            let hit = signalAll(started.duration(to: .now) < grace ? SIGTERM : SIGKILL)
            if hit.isEmpty { break }
            signalled.formUnion(hit)
            Sys.sleepBlocking(nanoseconds: 10_000_000)
        }
        reap()
        return signalled.count
    }

    /// SIGKILL to every descendant, without waiting long: for an exit that cannot wait (a
    /// second signal). Repeats briefly so that orphans of the killed are caught too.
    public func killDescendantsNow() {
        for _ in 0..<20 {
            if signalAll(SIGKILL).isEmpty { return }
            Sys.sleepBlocking(nanoseconds: 5_000_000)
        }
    }

    /// Reaps, then sends `signal` to every child and to the group of every hook still running;
    /// returns the processes signalled. Children are ours until reaped, and only this lock
    /// reaps, so their numbers cannot have been reused by the time they are signalled.
    private func signalAll(_ signal: Int32) -> Set<pid_t> {
        state.withLock { state in
            Self.reap(&state)
            var hit: Set<pid_t> = []
            for (pid, termination) in state.watched where termination == nil {
                Sys.signalProcessGroup(pid, signal)
                hit.insert(pid)
            }
            for pid in Sys.childProcesses() {
                Sys.signalProcess(pid, signal)
                hit.insert(pid)
            }
            return hit
        }
    }
}
