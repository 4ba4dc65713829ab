import IBeaconCore
import Synchronization

/// The controller events waiting for their consumer, in a bounded queue.
///
/// A controller (or anything posing as one on `tcp:`) can send events faster than any consumer
/// handles them, and a command such as `info` consumes none. So the queue holds at most
/// `capacity` advertising reports; beyond that new reports are dropped and counted. Every other
/// event (resets, Hardware Errors, unsolicited Command Completes) is kept in a reserve of
/// `reserve` more entries, and an event identical to one still waiting is not queued twice
/// (a Hardware Error storm leaves one Hardware Error waiting, so recovery runs once per storm,
/// not once per event). The end of the link is always delivered. The memory held is therefore
/// bounded by `capacity + reserve` events (each at most 257 bytes of parameters).
///
/// One consumer at a time iterates it; a consumer whose task is cancelled gets nil.
public final class EventQueue: Sendable {
    public static let defaultCapacity = 4096
    public static let defaultReserve = 64

    /// What `push` did with an event.
    public enum Outcome: Sendable, Equatable {
        case queued
        /// Identical to an event still waiting: not queued again.
        case coalesced
        /// The queue was full: dropped.
        case dropped
    }

    struct State {
        var buffer: [ControllerEvent?] = []
        var head = 0
        var reports = 0
        var others = 0
        /// Events other than reports that are waiting, for coalescing.
        var waitingOthers: Set<HCIEvent> = []
        var wakeWaiting = false
        var finished = false
        var waiter: (id: UInt64, continuation: CheckedContinuation<ControllerEvent?, Never>)?
        var nextWaiterID: UInt64 = 0

        var count: Int { buffer.count - head }

        mutating func popFirst() -> ControllerEvent? {
            guard head < buffer.count, let e = buffer[head] else { return nil }
            buffer[head] = nil
            head += 1
            // Compact once the consumed prefix dominates: amortised O(1), storage bounded.
            if head >= 1024 && head * 2 >= buffer.count {
                buffer.removeFirst(head)
                head = 0
            }
            switch e {
            case .wake: wakeWaiting = false
            case .event(let event) where EventQueue.isReport(event): reports -= 1
            case .event(let event):
                others -= 1
                waitingOthers.remove(event)
            case .linkClosed: break
            }
            return e
        }
    }

    private let state = Mutex(State())
    /// Most advertising reports waiting at once.
    public let capacity: Int
    /// Most other events waiting at once.
    public let reserve: Int

    public init(capacity: Int = EventQueue.defaultCapacity, reserve: Int = EventQueue.defaultReserve) {
        self.capacity = capacity
        self.reserve = reserve
    }

    static func isReport(_ event: HCIEvent) -> Bool {
        switch event {
        case .leAdvertisingReport, .leExtendedAdvertisingReport: true
        default: false
        }
    }

    /// Events waiting now.
    public var count: Int { state.withLock { $0.count } }

    /// Queues `event` (or hands it to a waiting consumer), unless full or a duplicate.
    @discardableResult
    public func push(_ event: ControllerEvent) -> Outcome {
        let (outcome, handOver): (Outcome, (CheckedContinuation<ControllerEvent?, Never>, ControllerEvent?)?) =
            state.withLock { s in
                if s.finished { return (.dropped, nil) }
                switch event {
                case .wake:
                    if s.wakeWaiting { return (.coalesced, nil) }
                    s.wakeWaiting = true
                case .event(let e) where Self.isReport(e):
                    if s.reports >= capacity { return (.dropped, nil) }
                    s.reports += 1
                case .event(let e):
                    if s.waitingOthers.contains(e) { return (.coalesced, nil) }
                    if s.others >= reserve { return (.dropped, nil) }
                    s.others += 1
                    s.waitingOthers.insert(e)
                case .linkClosed:
                    s.finished = true
                }
                s.buffer.append(event)
                guard let w = s.waiter else { return (.queued, nil) }
                s.waiter = nil
                return (.queued, (w.continuation, s.popFirst()))
            }
        if let (continuation, next) = handOver { continuation.resume(returning: next) }
        return outcome
    }

    /// Ends the queue after what is waiting (without a `.linkClosed`).
    public func finish() {
        let w = state.withLock { s -> CheckedContinuation<ControllerEvent?, Never>? in
            s.finished = true
            guard s.count == 0 else { return nil }
            defer { s.waiter = nil }
            return s.waiter?.continuation
        }
        w?.resume(returning: nil)
    }

    /// The next event; nil once the queue has ended and is empty, or when the task is cancelled.
    public func next() async -> ControllerEvent? {
        let id = state.withLock { s in
            s.nextWaiterID += 1
            return s.nextWaiterID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<ControllerEvent?, Never>) in
                let now: ControllerEvent?? = state.withLock { s in
                    if Task.isCancelled { return .some(nil) }
                    if let e = s.popFirst() { return .some(e) }
                    if s.finished { return .some(nil) }
                    s.waiter = (id, c)
                    return .none
                }
                if let now { c.resume(returning: now) }
            }
        } onCancel: {
            let w = state.withLock { s -> CheckedContinuation<ControllerEvent?, Never>? in
                guard let w = s.waiter, w.id == id else { return nil }
                s.waiter = nil
                return w.continuation
            }
            w?.resume(returning: nil)
        }
    }
}

/// The events of a `ControllerClient`, for `for await`.
public struct ControllerEvents: AsyncSequence, Sendable {
    public typealias Element = ControllerEvent
    public typealias Failure = Never
    let queue: EventQueue

    public struct AsyncIterator: AsyncIteratorProtocol {
        let queue: EventQueue
        public mutating func next() async -> ControllerEvent? { await queue.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(queue: queue) }
}

/// Decides which of many identical warnings reach the log: the first `burst` of every
/// `interval`, then one summary line with the count of those left out when the next one
/// arrives after the interval (or when `flush` is called). A flood of malformed events then
/// costs a few lines every `interval`, not one per event.
public struct RepeatLimiter: Sendable {
    public enum Verdict: Sendable, Equatable {
        case log
        /// Log this one, and say that `suppressed` were left out since the last line.
        case logWithSummary(suppressed: Int)
        case suppress
    }

    public let burst: Int
    public let interval: Duration
    private var windowStart: Duration?
    private var inWindow = 0
    public private(set) var suppressed = 0

    public init(burst: Int = 5, interval: Duration = .seconds(10)) {
        self.burst = burst
        self.interval = interval
    }

    /// `now`: time since any fixed origin.
    public mutating func record(at now: Duration) -> Verdict {
        if let start = windowStart, now - start < interval {
            inWindow += 1
            if inWindow <= burst { return .log }
            suppressed += 1
            return .suppress
        }
        windowStart = now
        inWindow = 1
        let left = suppressed
        suppressed = 0
        return left > 0 ? .logWithSummary(suppressed: left) : .log
    }

    /// How many were left out and not yet reported; resets the count.
    public mutating func flush() -> Int {
        defer { suppressed = 0 }
        return suppressed
    }
}
