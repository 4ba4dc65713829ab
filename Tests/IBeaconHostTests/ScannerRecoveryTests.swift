import IBeaconCore
import IBeaconTestSupport
import Synchronization
import Testing

@testable import IBeaconHost

@Suite struct ScannerRecoveryTests {
    static func event(_ packet: H4Packet) throws -> HCIEvent { try HCIEvent.decode(packet.body) }

    @Test func controllerStateLossIsRecognisedFromTheEvents() throws {
        let reset = try Self.event(FakeController.commandComplete(.reset, [0]))
        let nop = try Self.event(FakeController.commandComplete(.nop, []))
        let hardware = try HCIEvent.decode([0x10, 0x01, 0x2A])
        // BlueZ stack-internal device events: HCI_DEV_UP (3) and HCI_DEV_DOWN (4) for hci0.
        let up = try HCIEvent.decode([0xFD, 0x04, 0x01, 0x00, 0x03, 0x00])
        let down = try HCIEvent.decode([0xFD, 0x04, 0x01, 0x00, 0x04, 0x00])
        #expect(ControllerStateLoss(reset) == .resetByAnotherHost)
        #expect(ControllerStateLoss(nop) == .poweredUp)
        #expect(ControllerStateLoss(hardware) == .hardwareError(code: 0x2A))
        #expect(ControllerStateLoss(hardware)?.reason == "the controller reported Hardware Error 0x2A")
        #expect(ControllerStateLoss(up) == .adapterUp)
        #expect(ControllerStateLoss(down) == .adapterDown)
        // Answers to other commands and advertising reports are not losses.
        #expect(
            ControllerStateLoss(try Self.event(FakeController.commandComplete(.readBDAddr, [0] + [1, 2, 3, 4, 5, 6])))
                == nil)
        #expect(ControllerStateLoss(try HCIEvent.decode([0x3E, 0x02, 0x02, 0x00])) == nil)
    }

    func scanning(extended: Bool) async throws -> (FakeController, ControllerClient, Scanner) {
        let fake = FakeController(supportsExtended: extended)
        let client = await startedClient(fake)
        var scanner = Scanner(ownsController: true, logger: quietLogger)
        scanner.clock = ManualClock()
        _ = try await scanner.start(on: client)
        #expect(fake.scanning)
        return (fake, client, scanner)
    }

    /// `scanner.recover(after:on:)` with its waits ended by advancing its `ManualClock`.
    func recover(_ scanner: Scanner, after event: HCIEvent, on client: ControllerClient) async throws
        -> LECommandSet?
    {
        let clock = try #require(scanner.clock as? ManualClock)
        return try await advancingThroughWaits(clock) { try await scanner.recover(after: event, on: client) }.result
            .get()
    }

    @Test(arguments: [false, true])
    func scanningStartsAgainAfterAnotherHostResetsTheController(extended: Bool) async throws {
        let (fake, client, scanner) = try await scanning(extended: extended)
        defer { Task { await client.close() } }
        fake.resetByAnotherHost()
        #expect(!fake.scanning)
        let reset = try Self.event(FakeController.commandComplete(.reset, [0]))
        let mode = try await recover(scanner, after: reset, on: client)
        #expect(mode == (extended ? .extended : .legacy))
        #expect(fake.scanning)
        #expect(!fake.scanFilterDuplicates)  // every advertisement is still reported
    }

    @Test func anotherProgramTurningTheScanOffIsUndone() async throws {
        let (fake, client, scanner) = try await scanning(extended: false)
        defer { Task { await client.close() } }
        // Another program's LE Set Scan Enable (off) on the shared socket: only its answer is seen.
        try await fake.send(H4Packet(type: .command, body: [0x0C, 0x20, 0x02, 0x00, 0x00]))
        #expect(!fake.scanning)
        let foreign = try Self.event(FakeController.commandComplete(.leSetScanEnable, [0]))
        #expect(try await recover(scanner, after: foreign, on: client) == .legacy)
        #expect(fake.scanning)
    }

    @Test func otherEventsAndAnAdapterGoingDownChangeNothing() async throws {
        let (fake, client, scanner) = try await scanning(extended: false)
        defer { Task { await client.close() } }
        let before = fake.opcodes.count
        let down = try HCIEvent.decode([0xFD, 0x04, 0x01, 0x00, 0x04, 0x00])
        let report = try HCIEvent.decode([0x3E, 0x02, 0x02, 0x00])
        #expect(try await scanner.recover(after: down, on: client) == nil)
        #expect(try await scanner.recover(after: report, on: client) == nil)
        #expect(fake.opcodes.count == before)  // no command sent
    }

    @Test func anAdapterStillComingUpIsWaitedForOnTheInjectedClock() async throws {
        let (fake, client, scanner) = try await scanning(extended: false)
        defer { Task { await client.close() } }
        let clock = try #require(scanner.clock as? ManualClock)
        fake.resetByAnotherHost()
        // The kernel is still initialising the adapter: the first sends fail with ENETDOWN.
        let notUp = TransportError(.disconnected, "hci1: the controller went away (write: Network is down)", errno: 100)
        fake.sendFailures = [notUp, notUp]
        let reset = try Self.event(FakeController.commandComplete(.reset, [0]))
        let recovering = scanner
        let (result, waits) = await advancingThroughWaits(clock) {
            try await recovering.recover(after: reset, on: client)
        }
        #expect(try result.get() == .legacy)
        // The settle time, then twice as long after each refusal.
        #expect(waits == [.milliseconds(250), .milliseconds(500), .seconds(1)])
        #expect(fake.scanning)
        #expect(fake.sendFailures.isEmpty)
    }

    @Test func aLinkThatIsGoneEndsTheScanAtOnce() async throws {
        let (fake, client, scanner) = try await scanning(extended: false)
        defer { Task { await client.close() } }
        fake.sendFailures = [TransportError(.disconnected, "gone (write: Broken pipe)", errno: 32)]
        let reset = try Self.event(FakeController.commandComplete(.reset, [0]))
        await #expect(throws: ControllerError.self) { try await recover(scanner, after: reset, on: client) }
    }

    @Test func aControllerThatKeepsRefusingEndsTheScanWithItsErrorAfterEightAttempts() async throws {
        let (fake, client, scanner) = try await scanning(extended: false)
        defer { Task { await client.close() } }
        let clock = try #require(scanner.clock as? ManualClock)
        fake.faults[.leSetScanParameters] = .status(.commandDisallowed)
        let sentBefore = fake.opcodes.filter { $0 == .leSetScanParameters }.count
        let reset = try Self.event(FakeController.commandComplete(.reset, [0]))
        let recovering = scanner
        let (result, waits) = await advancingThroughWaits(clock) {
            try await recovering.recover(after: reset, on: client)
        }
        #expect(throws: ControllerError.self) { try result.get() }
        #expect(
            waits == [.milliseconds(250), .milliseconds(500), .seconds(1)] + Array(repeating: .seconds(2), count: 5))
        #expect(fake.opcodes.filter { $0 == .leSetScanParameters }.count - sentBefore == 8)
    }

    /// Issue 24: what each event means for "can the receiver hear?" on the raw path.
    @Test func interruptionsSayWhyTheReceiverCannotHear() throws {
        let reset = try Self.event(FakeController.commandComplete(.reset, [0]))
        let down = try HCIEvent.decode([0xFD, 0x04, 0x01, 0x00, 0x04, 0x00])
        let foreign = try Self.event(FakeController.commandComplete(.leSetScanEnable, [0]))
        let hardware = try HCIEvent.decode([0x10, 0x01, 0x2A])
        let r = try #require(Scanner.interruption(by: reset, on: "hci1"))
        #expect(r.deafness == Deafness(.reset, "the controller was reset by another host") && r.restart)
        let d = try #require(Scanner.interruption(by: down, on: "hci1"))
        #expect(d.deafness == Deafness(.poweredOff, "hci1 went down") && !d.restart)
        let f = try #require(Scanner.interruption(by: foreign, on: "hci1"))
        #expect(f.deafness.cause == .reset && f.deafness.reason.hasPrefix("another program changed the scanning"))
        #expect(Scanner.interruption(by: hardware, on: "hci1")?.deafness.reason.contains("Hardware Error 0x2A") == true)
        #expect(Scanner.interruption(by: try HCIEvent.decode([0x3E, 0x02, 0x02, 0x00]), on: "hci1") == nil)
    }
}

/// The reception every source reports, and its watchdog, on explicit times.
@Suite struct ReceptionTrackerTests {
    final class Log: Sendable {
        let entries = Mutex<[String]>([])
        func add(_ r: Reception, _ t: Double) {
            let what =
                switch r {
                case .hearing: "hearing"
                case .deaf(let d): "deaf \(d.cause.rawValue)"
                }
            entries.withLock { $0.append("\(what) at \(t)") }
        }
        var all: [String] { entries.withLock { $0 } }
    }

    @Test func theWatchdogFiresAfterSilenceAgainWhileSilentAndAReportEndsIt() {
        let log = Log()
        let tracker = ReceptionTracker(watchdog: .seconds(90), report: log.add)
        tracker.heard(at: 10)
        #expect(tracker.watchdogDue(at: 99.9) == nil)
        #expect(tracker.watchdogDue(at: 100.2) == 100)
        tracker.deaf(tracker.watchdogDeafness(restart: "; scan restarted"), at: 100)
        #expect(tracker.deafness?.reason == "no advertisement of any device for 90 s (--watchdog); scan restarted")
        // Still nothing: it fires again 90 s later (another restart), with no second report.
        #expect(tracker.watchdogDue(at: 150) == nil)
        #expect(tracker.watchdogDue(at: 190) == 190)
        tracker.deaf(tracker.watchdogDeafness(restart: ""), at: 190)
        tracker.heard(at: 200)
        #expect(tracker.deafness == nil)
        #expect(log.all == ["deaf watchdog at 100.0", "hearing at 200.0"])
    }

    @Test func anotherReasonSilencesTheWatchdogAndOnlyItsEndMakesTheReceiverHear() {
        let log = Log()
        let tracker = ReceptionTracker(watchdog: .seconds(5), report: log.add)
        tracker.deaf(Deafness(.poweredOff, "hci1 was powered off"), at: 1)
        #expect(tracker.watchdogDue(at: 100) == nil)
        tracker.heard(at: 2)  // a report still in flight ends nothing
        #expect(tracker.deafness?.cause == .poweredOff)
        tracker.hears(at: 100, only: .watchdog)
        #expect(tracker.deafness?.cause == .poweredOff)
        tracker.hears(at: 100)
        // The watchdog counts from when it hears again.
        #expect(tracker.watchdogDue(at: 104.9) == nil)
        #expect(tracker.watchdogDue(at: 105) == 105)
        tracker.deaf(tracker.watchdogDeafness(restart: ""), at: 105)
        // A more telling reason replaces the watchdog's quietly; a report no longer ends it.
        tracker.deaf(Deafness(.poweredOff, "hci1 was powered off"), at: 106)
        tracker.heard(at: 107)
        #expect(tracker.deafness?.cause == .poweredOff)
        #expect(log.all == ["deaf powered-off at 1.0", "hearing at 100.0", "deaf watchdog at 105.0"])
    }

    @Test func noWatchdogWhenZeroOrNil() {
        #expect(ReceptionTracker(watchdog: nil) { _, _ in }.watchdogDue(at: 1e9) == nil)
        #expect(ReceptionTracker(watchdog: .zero) { _, _ in }.watchdogDue(at: 1e9) == nil)
    }
}
