import Glibc
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

@testable import IBeaconTransports

@Suite(.serialized) struct HookRunnerTests {
    func waitUntil(seconds: Double = 10, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while !condition() {
            if ContinuousClock.now > deadline { return }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    let variables = [("IBEACON_EVENT", "enter"), ("IBEACON_REGION", "bakery shelf"), ("IBEACON_RSSI", "-61")]

    @Test func runsTheCommandWithTheEventInItsEnvironmentAndNoShell() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let log = RecordingLog()
        // The words reach sh as written: $IBEACON_* is expanded by the sh we start, not by
        // a shell of ours (there is none), and the quoted region name stays one word.
        let hook = try Hook(
            command: "sh -c 'echo \"$IBEACON_EVENT|$IBEACON_REGION|$IBEACON_RSSI\" > \(dir)/out' ignored",
            shell: false, timeout: .seconds(5))
        let runner = HookRunner(hook: hook, logger: log.logger)
        runner.submit(label: "enter of bakery", variables: variables)
        await runner.finish(grace: .seconds(5))
        #expect(String(decoding: try readWholeFile("\(dir)/out"), as: UTF8.self) == "enter|bakery shelf|-61\n")
        #expect(runner.summary == .init(run: 1, failed: 0, dropped: 0))
        #expect(log.contains(.info, "hook for enter of bakery: `sh -c"), "\(log.all)")
    }

    @Test func aShellCommandWhenAsked() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let hook = try Hook(
            command: "echo \"$IBEACON_EVENT\" | tr a-z A-Z > \(dir)/out", shell: true, timeout: .seconds(5))
        let runner = HookRunner(hook: hook, logger: RecordingLog().logger)
        runner.submit(label: "enter of bakery", variables: variables)
        await runner.finish(grace: .seconds(5))
        #expect(String(decoding: try readWholeFile("\(dir)/out"), as: UTF8.self) == "ENTER\n")
    }

    @Test func aFailingCommandIsLoggedWithItsStatus() async throws {
        let log = RecordingLog()
        let runner = HookRunner(
            hook: try Hook(command: "sh -c 'exit 3'", shell: false, timeout: .seconds(5)), logger: log.logger)
        runner.submit(label: "exit of bakery", variables: variables)
        await runner.finish(grace: .seconds(5))
        #expect(runner.summary == .init(run: 1, failed: 1, dropped: 0))
        #expect(
            log.contains(.warning, "hook for exit of bakery failed: `sh -c 'exit 3'` exited with status 3"),
            "\(log.all)")
    }

    @Test func aProgramThatCannotStartIsLogged() async throws {
        let log = RecordingLog()
        let hook = try Hook(command: "/nonexistent/alarm --now", shell: false, timeout: .seconds(5))
        #expect(throws: HookError.self) { try hook.checkProgram() }
        let runner = HookRunner(hook: hook, logger: log.logger)
        runner.submit(label: "exit of bakery", variables: variables)
        await runner.finish(grace: .seconds(5))
        #expect(runner.summary.failed == 1)
        #expect(log.contains(.error, "cannot run `/nonexistent/alarm --now`"), "\(log.all)")
    }

    @Test func programsAreLookedUpInPath() throws {
        try Hook(command: "sh -c true", shell: false, timeout: .seconds(1)).checkProgram()
        #expect(throws: HookError.self) {
            try Hook(command: "no-such-program-ibeacon", shell: false, timeout: .seconds(1)).checkProgram()
        }
    }

    /// A hook slower than its timeout is stopped with SIGTERM, even though this process ignores
    /// SIGTERM (as `runUntilSignalled` makes it) and ignored signals survive exec.
    @Test func aSlowCommandIsTerminatedAfterItsTimeout() async throws {
        let log = RecordingLog()
        let previous = signal(SIGTERM, SIG_IGN)
        defer { signal(SIGTERM, previous) }
        let runner = HookRunner(
            hook: try Hook(command: "sleep 30", shell: false, timeout: .milliseconds(300)), logger: log.logger)
        runner.submit(label: "enter of bakery", variables: variables)
        try await waitUntil { runner.summary.run == 1 }
        #expect(runner.summary == .init(run: 1, failed: 1, dropped: 0))
        // SIGKILL would come 2 s after the 0.3 s timeout: the log line names the signal that ended
        // it (15, SIGTERM), which no wall-clock bound on a loaded machine could show as surely.
        #expect(
            log.contains(.warning, "took longer than 0.3 s (--exec-timeout) and was stopped (was killed by signal 15)"),
            "\(log.all)")
        await runner.finish(grace: .seconds(1))
    }

    /// Every signal this process ignores (the CLI ignores SIGHUP, SIGUSR1, SIGALRM… while it
    /// handles them) is back to its default in the hook.
    @Test func aHookGetsDefaultSignalDispositions() async throws {
        let log = RecordingLog()
        let previous = signal(SIGUSR1, SIG_IGN)
        defer { signal(SIGUSR1, previous) }
        let runner = HookRunner(
            hook: try Hook(command: "sh -c 'kill -USR1 $$; exit 0'", shell: false, timeout: .seconds(5)),
            logger: log.logger)
        runner.submit(label: "enter of bakery", variables: variables)
        await runner.finish(grace: .seconds(5))
        #expect(log.contains(.warning, "was killed by signal \(SIGUSR1)"), "\(log.all)")
    }

    @Test func aSlowCommandNeverMakesTheCallerWaitAndTheOverflowIsDropped() async throws {
        let log = RecordingLog()
        let runner = HookRunner(
            hook: try Hook(command: "sleep 1", shell: false, timeout: .seconds(10)), queueLimit: 2, logger: log.logger)
        let started = ContinuousClock.now
        for i in 0..<10 { runner.submit(label: "event \(i)", variables: variables) }
        #expect(started.duration(to: .now) < .milliseconds(100))
        // One running (or about to), two waiting: the rest dropped and logged.
        #expect((7...8).contains(runner.summary.dropped), "\(runner.summary)")
        // Rate-limited (issue 23): the first five drops are logged, each naming its event.
        #expect(log.contains(.warning, "hook queue full (2 waiting behind `sleep 1`): the hook for event 3 is dropped"))
        // Out of grace: the running one is stopped, the queued ones are not started.
        let finishing = ContinuousClock.now
        await runner.finish(grace: .milliseconds(200))
        #expect(finishing.duration(to: .now) < .seconds(2))
        #expect(runner.summary.run <= 3)
    }

    /// Issue 23, item 7: the hook's first process dies of the SIGTERM, a member of its group
    /// ignores it. The SIGKILL 2 s later still goes to the group, so nothing of the hook
    /// outlives its timeout. (Before: the runner returned when the first process died, and the
    /// member slept on.)
    @Test func theTimeoutKillsTheWholeGroupEvenWhenItsFirstProcessIsGone() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let log = RecordingLog()
        let hook = try Hook(
            command: "sh -c '(trap \"\" TERM; exec sleep 30) & echo $! > \(dir)/member; wait'", shell: false,
            timeout: .milliseconds(300))
        let runner = HookRunner(hook: hook, logger: log.logger)
        runner.submit(label: "enter of bakery", variables: variables)
        try await waitUntil { runner.summary.run == 1 }
        #expect(runner.summary == .init(run: 1, failed: 1, dropped: 0))
        #expect(log.contains(.warning, "was stopped (was killed by signal 15)"), "\(log.all)")
        let member = try #require(
            pid_t(String(decoding: try readWholeFile("\(dir)/member"), as: UTF8.self).filter(\.isNumber)))
        // Gone (or a zombie waiting for init to reap it): not sleeping on.
        try await waitUntil { !isRunning(member) }
        #expect(!isRunning(member))
        await runner.finish(grace: .seconds(1))
    }

    /// Issue 23: a descriptor the invoker left open for ibeacon (not close-on-exec) does not
    /// reach the hook; nor does systemd's NOTIFY_SOCKET (or its LISTEN_*/WATCHDOG_* variables).
    @Test func aHookGetsNeitherTheInvokersDescriptorsNorNotifySocket() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let inherited = open("/dev/null", O_RDONLY)  // no O_CLOEXEC, as an invoker's would be
        #expect(inherited > 2)
        defer { close(inherited) }
        setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1)
        setenv("WATCHDOG_USEC", "1000000", 1)
        setenv("IBEACON_MQTT_PASSWORD", "S3cr3t", 1)  // issue 30, item 11
        defer {
            unsetenv("NOTIFY_SOCKET")
            unsetenv("WATCHDOG_USEC")
            unsetenv("IBEACON_MQTT_PASSWORD")
        }
        let hook = try Hook(
            command: "ls /proc/self/fd > \(dir)/fds; env > \(dir)/env", shell: true, timeout: .seconds(5))
        let runner = HookRunner(hook: hook, logger: RecordingLog().logger)
        runner.submit(label: "enter of bakery", variables: variables)
        try await waitUntil { runner.summary.run == 1 }
        await runner.finish(grace: .seconds(5))
        // ls lists 0, 1, 2 and the descriptor it reads /proc/self/fd with (3): not `inherited`.
        let fds = String(decoding: try readWholeFile("\(dir)/fds"), as: UTF8.self).split(separator: "\n")
        #expect(fds.count <= 4, "\(fds)")
        if inherited != 3 { #expect(!fds.contains(Substring(String(inherited))), "\(fds)") }
        let env = String(decoding: try readWholeFile("\(dir)/env"), as: UTF8.self)
        #expect(!env.contains("NOTIFY_SOCKET") && !env.contains("WATCHDOG_USEC"), "\(env)")
        #expect(!env.contains("IBEACON_MQTT_PASSWORD") && !env.contains("S3cr3t"), "\(env)")
        #expect(env.contains("IBEACON_EVENT=enter"))
    }

    /// Issue 23, item 9: drops are logged like malformed events (the first 5 per 10 s, then one
    /// line with the count), not one line each; a stop drops what is queued without starting it.
    @Test func dropWarningsAreRateLimitedAndAStopStartsNothingQueued() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let log = RecordingLog()
        let clock = ManualClock()
        let hook = try Hook(command: "sh -c 'echo run >> \(dir)/runs; sleep 30'", shell: false, timeout: .seconds(60))
        let runner = HookRunner(hook: hook, queueLimit: 2, clock: clock, logger: log.logger)
        runner.submit(label: "event 0", variables: variables)
        try await waitUntil { (try? readWholeFile("\(dir)/runs"))?.isEmpty == false }
        for i in 1..<20_001 { runner.submit(label: "event \(i)", variables: variables) }
        func dropLines() -> Int { log.messages(atLeast: .trace).filter { $0.hasPrefix("hook queue full") }.count }
        #expect(runner.summary.dropped == 19_998)
        #expect(dropLines() == 5)
        clock.advance(by: .seconds(11))
        runner.submit(label: "event late", variables: variables)
        #expect(dropLines() == 6)
        #expect(
            log.contains(
                .warning,
                "the hook for event late is dropped (19999 dropped so far); 19993 more dropped since the last such warning"
            ), "\(log.all)")
        await runner.finish(grace: .milliseconds(100), startQueued: false)
        // The two queued were dropped, not started and killed: one run in all.
        #expect(String(decoding: try readWholeFile("\(dir)/runs"), as: UTF8.self) == "run\n")
        #expect(runner.summary == .init(run: 1, failed: 1, dropped: 20_001))
        #expect(dropLines() == 6)
    }

    @Test(arguments: ["", "   ", "echo 'unterminated"])
    func emptyOrMalformedCommandsAreRejected(_ command: String) {
        #expect(throws: HookError.self) { try Hook(command: command, shell: false, timeout: .seconds(1)) }
    }
}

/// True while `pid` exists and is not a zombie (`/proc/PID/stat` state other than Z).
func isRunning(_ pid: pid_t) -> Bool {
    guard let stat = try? readWholeFile("/proc/\(pid)/stat") else { return false }
    let text = String(decoding: stat, as: UTF8.self)
    guard let close = text.lastIndex(of: ")") else { return false }
    return !text[text.index(after: close)...].hasPrefix(" Z")
}
