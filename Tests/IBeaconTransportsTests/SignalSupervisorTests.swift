import Glibc
import Synchronization
import Testing

@testable import IBeaconTransports

/// The signal handling of the long-running commands (advertise, scan, monitor, calibrate): the
/// names in their messages, the exit statuses, and a supervised body cancelled by a real signal.
/// The forced exits (`_exit` after a second signal or the grace) end the process and are
/// covered end to end (tests/e2e/test_signals.py).
@Suite(.serialized) struct SignalSupervisorTests {
    @Test func everyHandledSignalHasItsName() {
        let expected: [(Int32, String)] = [
            (SIGINT, "SIGINT"), (SIGTERM, "SIGTERM"), (SIGHUP, "SIGHUP"), (SIGUSR1, "SIGUSR1"), (SIGUSR2, "SIGUSR2"),
            (SIGALRM, "SIGALRM"), (SIGVTALRM, "SIGVTALRM"), (SIGPROF, "SIGPROF"), (SIGXCPU, "SIGXCPU"),
            (SIGXFSZ, "SIGXFSZ"), (SIGIO, "SIGIO"), (SIGPWR, "SIGPWR"), (SIGSTKFLT, "SIGSTKFLT"), (SIGPIPE, "SIGPIPE"),
        ]
        for (number, name) in expected {
            #expect(ProcessSignal(rawValue: number).description == name)
        }
        #expect(ProcessSignal(rawValue: 34).description == "signal 34")
        // Every terminating signal is caught, and each has a name for its messages.
        #expect(ProcessSignal.terminating.count == 13)
        #expect(ProcessSignal.terminating.allSatisfy { !$0.description.hasPrefix("signal ") })
        #expect(!ProcessSignal.terminating.contains(.brokenPipe))
    }

    @Test func theExitStatusIs128PlusTheNumber() {
        #expect(ProcessSignal.hangUp.exitStatus == 129)
        #expect(ProcessSignal.interrupt.exitStatus == 130)
        #expect(ProcessSignal.user1.exitStatus == 138)
        #expect(ProcessSignal.terminate.exitStatus == 143)
    }

    @Test func sigintAndSigtermStopAdvertisingButAbortACalibration() {
        typealias Outcome = SignalSupervisor.Outcome
        for signal in [ProcessSignal.interrupt, .terminate] {
            #expect(Outcome(signal: signal, failure: CancellationError()).signalledExit(.stop) == nil)
            let abort = Outcome(signal: signal, failure: nil).signalledExit(.abort)
            #expect(abort?.status == signal.exitStatus)
            #expect(abort?.message == "stopped by \(signal); nothing was written")
        }
        #expect(Outcome(signal: .interrupt, failure: nil).signalledExit(.abort)?.status == 130)
        #expect(Outcome(signal: .terminate, failure: nil).signalledExit(.abort)?.status == 143)
        let hangUp = Outcome(signal: .hangUp, failure: nil).signalledExit(.stop)
        #expect(hangUp?.status == 129)
        #expect(hangUp?.message == "stopped by SIGHUP")
        #expect(Outcome(signal: nil, failure: nil).signalledExit(.abort) == nil)
    }

    struct Broken: Error {}

    /// The cancellation a signal causes is not a failure to report; any other error is, and
    /// without a signal every error is the body's own.
    @Test func onlyTheSignalsOwnCancellationIsSwallowed() {
        typealias Outcome = SignalSupervisor.Outcome
        #expect(Outcome(signal: .terminate, failure: CancellationError()).reportableFailure == nil)
        #expect(Outcome(signal: .terminate, failure: Broken()).reportableFailure is Broken)
        #expect(Outcome(signal: nil, failure: CancellationError()).reportableFailure is CancellationError)
        #expect(Outcome(signal: nil, failure: Broken()).reportableFailure is Broken)
        #expect(Outcome(signal: nil, failure: nil).reportableFailure == nil)
    }

    /// A real signal to this process (SIGPWR, which no other test touches) cancels the body,
    /// which then finishes its cleanup; the outcome names the signal. The grace is long, so a
    /// loaded machine cannot turn this into a forced exit of the test process.
    @Test func aSignalCancelsTheBodyWhichThenCleansUp() async {
        let said = Mutex<[String]>([])
        let cleanedUp = Atomic<Bool>(false)
        let supervisor = SignalSupervisor(
            cleanupSeconds: 600, reapsChildren: true, caught: [.powerFailure], ignored: [],
            say: { message in said.withLock { $0.append(message) } })
        let outcome = await supervisor.run {
            kill(getpid(), SIGPWR)
            do {
                try await Task.sleep(for: .seconds(600))
            } catch {
                cleanedUp.store(true, ordering: .sequentiallyConsistent)
                throw error
            }
        }
        #expect(outcome.signal == .powerFailure)
        #expect(outcome.failure is CancellationError)
        let didCleanUp = cleanedUp.load(ordering: .sequentiallyConsistent)
        #expect(didCleanUp)
        #expect(outcome.signalledExit(.stop)?.status == 128 + SIGPWR)
        #expect(said.withLock { $0 }.isEmpty)
    }

    /// One operator action is one stop request (issue 29): `timeout` and process-group kills
    /// deliver the same signal twice within microseconds. Only another signal, or the same one a
    /// window (1 s) after the first, is a second request that abandons the cleanup.
    @Test func aRepeatWithinTheWindowIsTheSameRequestALaterOneIsNot() {
        let rule = RepeatedSignalRule()
        #expect(rule.window == .seconds(1))
        for signal in [ProcessSignal.terminate, .interrupt, .hangUp] {
            #expect(!rule.isSecondRequest(signal, after: signal, elapsed: .zero))
            #expect(!rule.isSecondRequest(signal, after: signal, elapsed: .microseconds(30)))
            #expect(!rule.isSecondRequest(signal, after: signal, elapsed: .milliseconds(999)))
            #expect(rule.isSecondRequest(signal, after: signal, elapsed: .seconds(1)))
            #expect(rule.isSecondRequest(signal, after: signal, elapsed: .seconds(3)))  // a second Ctrl-C
        }
        #expect(rule.isSecondRequest(.interrupt, after: .terminate, elapsed: .zero))
        #expect(rule.isSecondRequest(.terminate, after: .hangUp, elapsed: .microseconds(1)))
        let narrow = RepeatedSignalRule(window: .milliseconds(10))
        #expect(!narrow.isSecondRequest(.terminate, after: .terminate, elapsed: .milliseconds(9)))
        #expect(narrow.isSecondRequest(.terminate, after: .terminate, elapsed: .milliseconds(10)))
    }

    @Test func withoutASignalTheBodysResultIsReturned() async {
        let supervisor = SignalSupervisor(
            reapsChildren: true, caught: [.powerFailure], ignored: [], say: { _ in Issue.record("nothing to say") })
        let finished = await supervisor.run {}
        #expect(finished.signal == nil && finished.failure == nil)
        let failed = await supervisor.run { throw Broken() }
        #expect(failed.signal == nil && failed.failure is Broken)
    }
}
