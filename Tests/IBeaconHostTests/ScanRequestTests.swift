import IBeaconCore
import Synchronization
import Testing

@testable import IBeaconHost

/// `ScanRequest`: the one signature every `SightingSource` implements. The labelled forms callers
/// use build it, and it hands each part through unchanged.
@Suite struct ScanRequestTests {
    /// A source that keeps the request it was asked to scan with and drives it once.
    final class RequestKeeper: SightingSource, Sendable {
        let kept = Mutex<ScanRequest?>(nil)
        var name: String { "keeper" }
        func receiverAddress() async throws -> BDAddress? { nil }
        func close() async {}
        func scan(_ request: ScanRequest) async throws {
            kept.withLock { $0 = request }
            _ = request.receive([], 1.5)
            request.reception(.hearing, 2.5)
            _ = try await request.tick(3.5)
        }
        var request: ScanRequest? { kept.withLock { $0 } }
    }

    @Test func theShortFormAsksForNoWatchdogAndHandsReceiveAndTickThrough() async throws {
        let source = RequestKeeper()
        let seen = Mutex<[String]>([])
        try await source.scan(
            ScanRequest(
                tickInterval: .milliseconds(250),
                receive: { s, t in
                    seen.withLock { $0.append("receive \(s.count) at \(t)") }
                    return .stop
                },
                tick: { t in
                    seen.withLock { $0.append("tick at \(t)") }
                    return .proceed
                }))
        let request = try #require(source.request)
        #expect(request.tickInterval == .milliseconds(250))
        #expect(request.watchdog == nil)
        #expect(request.receive([], 9) == .stop)
        #expect(seen.withLock { $0 } == ["receive 0 at 1.5", "tick at 3.5", "receive 0 at 9.0"])
    }

    @Test func theLongFormHandsEveryPartThrough() async throws {
        let source = RequestKeeper()
        let receptions = Mutex<[String]>([])
        try await source.scan(
            ScanRequest(
                tickInterval: .seconds(1), watchdog: .seconds(3),
                receive: { _, _ in .proceed },
                reception: { r, t in receptions.withLock { $0.append("\(r) at \(t)") } },
                tick: { _ in .stop }))
        let request = try #require(source.request)
        #expect(request.tickInterval == .seconds(1))
        #expect(request.watchdog == .seconds(3))
        #expect(try await request.tick(0) == .stop)
        #expect(receptions.withLock { $0 } == ["hearing at 2.5"])
    }

    /// The tracker every source builds from a request: the request's watchdog, in seconds, and
    /// changes reported to the request's `reception`.
    @Test func itsReceptionTrackerHasItsWatchdogAndReportsToItsReception() {
        let receptions = Mutex<[Reception]>([])
        let request = ScanRequest(
            tickInterval: .seconds(1), watchdog: .seconds(2), receive: { _, _ in .proceed },
            reception: { r, _ in receptions.withLock { $0.append(r) } }, tick: { _ in .proceed })
        let tracker = request.receptionTracker()
        #expect(tracker.watchdog == 2)
        #expect(tracker.watchdogDue(at: 1.9) == nil)
        #expect(tracker.watchdogDue(at: 2.1) == 2)
        let deafness = Deafness(.link, "gone")
        tracker.deaf(deafness, at: 3)
        tracker.hears(at: 4)
        #expect(receptions.withLock { $0 } == [.deaf(deafness), .hearing])
    }
}

/// The scan deadline is on the seam (issue 31 step 2): the request stops at it, whatever the
/// callbacks say, after handing them the batch or tick that reaches it.
@Suite struct ScanDeadlineTests {
    @Test func theRequestStopsAtItsDeadlineAfterTheCallbacks() async throws {
        let seen = Mutex<[Double]>([])
        let request = ScanRequest(
            tickInterval: .seconds(1), watchdog: nil, deadline: 5,
            receive: { _, t in
                seen.withLock { $0.append(t) }
                return .proceed
            }, reception: { _, _ in },
            tick: { t in
                seen.withLock { $0.append(-t) }
                return t < 2 ? .proceed : .stop
            })
        #expect(request.receive([], 4.9) == .proceed)
        #expect(request.receive([], 5) == .stop)
        #expect(try await request.tick(1) == .proceed)
        #expect(try await request.tick(3) == .stop)  // the callback's own stop still counts
        #expect(try await request.tick(6) == .stop)
        #expect(seen.withLock { $0 } == [4.9, 5, -1, -3, -6])
        let open = ScanRequest(
            tickInterval: .seconds(1), watchdog: nil, receive: { _, _ in .proceed }, reception: { _, _ in },
            tick: { _ in .proceed })
        #expect(open.deadline == nil && open.receive([], 1e9) == .proceed)
    }
}
