import IBeaconCore
import Logging

/// Why a command did not produce its return parameters.
public enum ControllerError: Error, Sendable, CustomStringConvertible {
    /// The controller answered with a non-zero status.
    case commandFailed(opcode: HCIOpcode, status: HCIStatus)
    /// No Command Complete/Status for the command arrived in time.
    case timeout(opcode: HCIOpcode, after: Duration)
    /// The controller granted no command credit (Num_HCI_Command_Packets = 0) for as long as
    /// the command's timeout, so the command could not be sent.
    case noCredits(opcode: HCIOpcode, after: Duration)
    /// The reply could not be decoded.
    case badReply(opcode: HCIOpcode, DecodingError)
    /// The transport failed or closed.
    case transport(TransportError)
    /// The client was closed while the command was outstanding.
    case closed(opcode: HCIOpcode)

    public var opcode: HCIOpcode? {
        switch self {
        case .commandFailed(let op, _), .timeout(let op, _), .noCredits(let op, _), .badReply(let op, _),
            .closed(let op):
            op
        case .transport: nil
        }
    }

    public var description: String {
        switch self {
        case .commandFailed(let op, let status):
            var s = "\(op) failed: \(status)"
            if let hint = status.hint { s += " — \(hint)" }
            return s
        case .timeout(let op, let after):
            return "\(op) got no answer within \(after.formattedSeconds) — the controller is not responding; "
                + "check that it is attached and powered, or raise --timeout"
        case .noCredits(let op, let after):
            return "\(op) was not sent: the controller granted no command credits (Num_HCI_Command_Packets = 0) "
                + "for \(after.formattedSeconds), so it accepts no commands; reset or re-plug it"
        case .badReply(let op, let error):
            return "\(op) got a malformed reply: \(error)"
        case .transport(let error):
            return error.description
        case .closed(let op):
            return "\(op) was abandoned: the connection to the controller was closed"
        }
    }
}

/// What the controller sent that was not the answer to one of our commands.
public enum ControllerEvent: Sendable {
    case event(HCIEvent)
    /// Asked for by `wake()`.
    case wake
    /// The link to the controller ended: with the transport's error, or nil when it ended
    /// normally (closed by us).
    case linkClosed(TransportError?)
}

/// Sends commands to a controller and matches their replies.
///
/// One command is outstanding at a time, and a command is sent only while the controller has
/// granted a credit (Num_HCI_Command_Packets, Core 5.4 Vol 4 Part E §4.4). Command Complete and
/// Command Status events are matched to the outstanding command by opcode; every other event,
/// and any Command Complete we did not ask for (another host's Reset, a power-up NOP), goes to
/// `events`. Every command has a timeout measured on an injected clock, and so has the wait
/// for a credit: a controller that grants none (Num_HCI_Command_Packets = 0) makes commands fail
/// with `ControllerError.noCredits` instead of hanging.
///
/// `events` is bounded (see `EventQueue`): under a flood, reports beyond its capacity are
/// dropped and counted, repeated events coalesced, and the warnings about them rate-limited.
public actor ControllerClient {
    public nonisolated let transport: any HCITransport
    public nonisolated let events: ControllerEvents
    private nonisolated let eventQueue: EventQueue
    private let logger: Logger
    private let clock: any Clock<Duration>
    public let defaultTimeout: Duration

    private var outstanding = OutstandingCommand<HCIOpcode>()
    private var credits = 1
    private var busy = false
    /// Commands waiting for their turn (a credit, and no other command outstanding); resumed
    /// with false when their wait timed out.
    private var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
    private var reader: Task<Void, Never>?
    private var eventHandler: (@Sendable (HCIEvent) -> Bool)?
    private var linkError: TransportError?
    private var isClosed = false
    /// A wait for a credit timed out and no credit has come since: later commands fail at once
    /// rather than each waiting its whole timeout (so cleanup on the way out is quick too).
    private var starved = false
    /// Time since the client was made, on `clock`: what the rate limiters count their windows in.
    private let elapsed: @Sendable () -> Duration
    private var malformedWarnings = RepeatLimiter()
    /// One line per 10 s about dropped events is enough: the count says the rest.
    private var droppedWarnings = RepeatLimiter(burst: 1)
    /// Events dropped or coalesced because the consumer could not keep up (for tests and logs).
    public private(set) var droppedEvents = 0
    public private(set) var coalescedEvents = 0
    public private(set) var malformedEvents = 0

    public init(
        transport: any HCITransport, logger: Logger, clock: any Clock<Duration> = ContinuousClock(),
        defaultTimeout: Duration = .seconds(2), eventCapacity: Int = EventQueue.defaultCapacity
    ) {
        self.transport = transport
        self.logger = logger
        self.clock = clock
        elapsed = stopwatch(on: clock)
        self.defaultTimeout = defaultTimeout
        // Bounded: a controller can send faster than any consumer handles (or than `info`, which
        // reads none).
        eventQueue = EventQueue(capacity: eventCapacity)
        events = ControllerEvents(queue: eventQueue)
    }

    /// Starts reading from the transport. Call once before `execute`.
    public func start() {
        guard reader == nil else { return }
        reader = Task { [weak self] in await self?.readLoop() }
    }

    /// Reads the transport on the actor itself, so a packet costs no hop between executors.
    private func readLoop() async {
        do {
            var sinceYield = 0
            for try await packet in transport.incoming {
                receive(packet)
                // Under a flood `incoming` never runs dry, so this loop would keep the actor to
                // itself: let the timers (command timeouts) and callers in now and then.
                sinceYield += 1
                if sinceYield >= 64 {
                    sinceYield = 0
                    await Task.yield()
                }
            }
            linkEnded(nil)
        } catch let error as TransportError {
            linkEnded(error)
        } catch {
            linkEnded(TransportError(.io, "reading from \(transport.name) failed: \(error)"))
        }
    }

    /// Handles events synchronously as they are decoded, before `events` sees them; the
    /// handler returns true for an event it consumed. Scanning uses it: every advertising
    /// report then costs no hand-over between tasks, only its decoding.
    public func setEventHandler(_ handler: (@Sendable (HCIEvent) -> Bool)?) {
        eventHandler = handler
        // LE Meta events (advertising reports) can be handled on the transport's reader thread;
        // everything else comes here, where replies are matched to commands.
        transport.setPacketFilter(
            handler.map { handler in
                { @Sendable packet in
                    guard packet.type == .event, packet.body.first == HCIEventCode.leMeta.rawValue,
                        let event = try? HCIEvent.decode(packet.body)
                    else { return false }
                    return handler(event)
                }
            })
    }

    /// Puts `.wake` into `events`, so their consumer can do periodic work (redraw a table,
    /// check a deadline) without a second stream merged in.
    public nonisolated func wake() {
        eventQueue.push(.wake)
    }

    /// Sends `command` and returns its decoded return parameters.
    public func execute<C: HCICommand>(_ command: C, timeout: Duration? = nil) async throws -> C.ReturnParameters {
        let bytes = try await exchange(command.packet, opcode: C.opcode, timeout: timeout ?? defaultTimeout)
        do {
            return try C.decodeReturn(bytes)
        } catch {
            throw ControllerError.badReply(opcode: C.opcode, error)
        }
    }

    /// Sends a command and returns its return parameters after the status byte.
    private func exchange(_ packet: H4Packet, opcode: HCIOpcode, timeout: Duration) async throws -> [UInt8] {
        if let linkError { throw ControllerError.transport(linkError) }
        if isClosed { throw ControllerError.closed(opcode: opcode) }
        let id = outstanding.nextID()
        guard await acquireTurn(id: id, timeout: timeout) else {
            // Waiting for our turn timed out: with no credit granted, the controller refuses
            // commands; otherwise another command held the turn all that time.
            logger.debug("no turn to send", metadata: ["opcode": "\(opcode)", "credits": "\(credits)"])
            if credits <= 0 {
                starved = true
                throw ControllerError.noCredits(opcode: opcode, after: timeout)
            }
            throw ControllerError.timeout(opcode: opcode, after: timeout)
        }
        defer { releaseTurn() }
        if let linkError { throw ControllerError.transport(linkError) }
        if isClosed { throw ControllerError.closed(opcode: opcode) }
        credits -= 1
        logger.trace("command", metadata: ["opcode": "\(opcode)", "bytes": "\(packet)"])
        return try await withCheckedThrowingContinuation { continuation in
            let clock = self.clock
            let timer = Task { [weak self] in
                do {
                    try await clock.sleep(for: timeout)
                } catch { return }  // cancelled: answered in time
                await self?.expire(id: id, opcode: opcode, after: timeout)
            }
            outstanding.begin(id: id, key: opcode, continuation: continuation, timer: timer)
            let transport = self.transport
            Task { [weak self] in
                do {
                    try await transport.send(packet)
                } catch {
                    let te =
                        (error as? TransportError)
                        ?? TransportError(.io, "sending to \(transport.name) failed: \(error)")
                    await self?.sendFailed(id: id, with: ControllerError.transport(te))
                }
            }
        }
    }

    /// Waits until this command may be sent (true, the turn is then held) or `timeout` passes
    /// (false).
    private func acquireTurn(id: UInt64, timeout: Duration) async -> Bool {
        if !busy && (credits > 0 || linkError != nil || isClosed) {
            busy = true
            return true
        }
        if starved && credits <= 0 { return false }
        let clock = self.clock
        let timer = Task { [weak self] in
            do { try await clock.sleep(for: timeout) } catch { return }
            await self?.turnWaitExpired(id: id)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { waiters.append((id, $0)) }
    }

    private func turnWaitExpired(id: UInt64) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: index).continuation.resume(returning: false)
    }

    private func releaseTurn() {
        busy = false
        wakeWaiter()
    }

    private func wakeWaiter() {
        guard !busy, credits > 0 || linkError != nil || isClosed, !waiters.isEmpty else { return }
        busy = true
        waiters.removeFirst().continuation.resume(returning: true)
    }

    private func expire(id: UInt64, opcode: HCIOpcode, after: Duration) {
        guard outstanding.current?.id == id else { return }
        logger.debug("timeout", metadata: ["opcode": "\(opcode)"])
        // A lost reply also loses its credit; assume the controller can take one more command
        // rather than stalling every later command.
        credits = max(credits, 1)
        finish(id: id, with: .failure(ControllerError.timeout(opcode: opcode, after: after)))
    }

    /// The command never reached the controller, so no answer will give its credit back.
    private func sendFailed(id: UInt64, with error: ControllerError) {
        guard outstanding.current?.id == id else { return }
        credits = max(credits, 1)
        finish(id: id, with: .failure(error))
    }

    private func finish(id: UInt64, with result: Result<[UInt8], any Error>) {
        outstanding.finish(id: id, with: result)
    }

    private func receive(_ packet: H4Packet) {
        guard packet.type == .event else { return }  // ACL/SCO/ISO are not ours to handle
        logger.trace("event", metadata: ["bytes": "\(packet)"])
        let event: HCIEvent
        do {
            event = try HCIEvent.decode(packet.body)
        } catch {
            malformedEvents += 1
            switch malformedWarnings.record(at: elapsed()) {
            case .suppress: break
            case .log:
                logger.warning(
                    "ignoring malformed event from controller", metadata: ["error": "\(error)", "bytes": "\(packet)"])
            case .logWithSummary(let n):
                logger.warning(
                    "ignoring malformed event from controller (and \(n) more since the last such warning)",
                    metadata: ["error": "\(error)", "bytes": "\(packet)"])
            }
            return
        }
        switch event {
        case .commandComplete(let n, let opcode, let returnParameters):
            credits = Int(n)
            if n > 0 { starved = false }
            if let id = outstanding.id(answeredBy: opcode) {
                let status = returnParameters.first.map(HCIStatus.init(rawValue:)) ?? .success
                if status != .success {
                    finish(id: id, with: .failure(ControllerError.commandFailed(opcode: opcode, status: status)))
                } else {
                    finish(id: id, with: .success(Array(returnParameters.dropFirst())))
                }
            } else {
                deliver(event)
            }
            wakeWaiter()
        case .commandStatus(let status, let n, let opcode):
            credits = Int(n)
            if n > 0 { starved = false }
            if let id = outstanding.id(answeredBy: opcode) {
                finish(
                    id: id,
                    with: status == .success
                        ? .success([]) : .failure(ControllerError.commandFailed(opcode: opcode, status: status)))
            } else {
                deliver(event)
            }
            wakeWaiter()
        default:
            if let eventHandler, eventHandler(event) { return }
            deliver(event)
        }
    }

    /// Queues an event for `events`; counts (and now and then logs) what the bounded queue
    /// refuses.
    private func deliver(_ event: HCIEvent) {
        switch eventQueue.push(.event(event)) {
        case .queued: return
        case .coalesced:
            coalescedEvents += 1
            return
        case .dropped: droppedEvents += 1
        }
        switch droppedWarnings.record(at: elapsed()) {
        case .suppress: break
        case .log, .logWithSummary:
            logger.warning(
                "the controller sends events faster than they are handled: \(droppedEvents) dropped so far (at most \(eventQueue.capacity) reports are kept waiting)"
            )
        }
    }

    private func linkEnded(_ error: TransportError?) {
        guard linkError == nil else { return }
        // A stream that finishes without an error is a closed client; transports report a peer
        // that went away by throwing.
        linkError = error ?? TransportError(.disconnected, "the connection to \(transport.name) has ended")
        if let (id, opcode) = outstanding.current {
            finish(
                id: id,
                with: .failure(error.map { ControllerError.transport($0) } ?? ControllerError.closed(opcode: opcode)))
        }
        while !waiters.isEmpty { waiters.removeFirst().continuation.resume(returning: true) }
        eventQueue.push(.linkClosed(error))
        eventQueue.finish()
        let malformed = malformedWarnings.flush()
        if malformed > 0 {
            logger.warning("\(malformed) more malformed events from the controller were ignored (not logged each)")
        }
        if droppedWarnings.flush() > 0 {
            logger.warning("\(droppedEvents) events from the controller were dropped in all (sent faster than handled)")
        }
    }

    /// Stops reading and closes the transport. Outstanding commands fail.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        transport.close()
        reader?.cancel()
        linkEnded(nil)
    }
}
