import IBeaconCore
import Logging

/// Moves management packets (BlueZ `HCI_CHANNEL_CONTROL`): one packet per read and per write.
public protocol MgmtTransport: AnyObject, Sendable {
    /// `mgmt` (for messages).
    var name: String { get }
    /// Every packet the kernel sends, whole (header included), until the transport closes.
    var incoming: AsyncThrowingStream<[UInt8], any Error> { get }
    func send(_ bytes: [UInt8]) throws
    func close()
}

/// Writes one management command with one `send(2)`; `sendmsg` returns what `send(2)` returned.
/// The management socket takes a whole packet per call. A count of 0 is not a short write to
/// resume: Linux (5.10 and 6.1 alike) returns 0 for a command it answered itself before any
/// handler ran — Unknown Command (the kernels before 5.12 for Add Extended Advertising
/// Parameters), Permission Denied on a socket without CAP_NET_ADMIN, Invalid Index, a length the
/// command does not admit (hci_sock.c `hci_mgmt_cmd`: `err = mgmt_cmd_status(…); goto done;`, and
/// `mgmt_cmd_status` returns 0). The command was consumed and its Command Status is on its way;
/// sending again repeats the command, which goes on until the kernel runs out of buffers (ENOMEM).
public func sendMgmtCommand(_ bytes: [UInt8], through sendmsg: ([UInt8]) throws -> Int) throws {
    let sent = try sendmsg(bytes)
    guard sent == 0 || sent == bytes.count else {
        throw TransportError(
            .io,
            "the management socket took \(sent) of the \(bytes.count) bytes of a command; "
                + "a packet socket never splits one")
    }
}

/// Why a management command did not produce its return parameters.
public enum MgmtError: Error, Sendable, CustomStringConvertible {
    case commandFailed(opcode: MgmtOpcode, index: MgmtIndex, status: MgmtStatus)
    case timeout(opcode: MgmtOpcode, index: MgmtIndex, after: Duration)
    case badReply(opcode: MgmtOpcode, DecodingError)
    case transport(TransportError)
    case closed(opcode: MgmtOpcode)

    public var status: MgmtStatus? {
        if case .commandFailed(_, _, let status) = self { return status }
        return nil
    }

    public var description: String {
        switch self {
        case .commandFailed(let op, let index, let status):
            var s = "\(op) on \(index) failed: \(status)"
            if let hint = status.hint { s += " — \(hint)" }
            return s
        case .timeout(let op, let index, let after):
            return "\(op) on \(index) got no answer from the kernel within \(after.formattedSeconds); raise --timeout"
        case .badReply(let op, let error):
            return "\(op) got a malformed reply from the kernel: \(error)"
        case .transport(let error):
            return error.description
        case .closed(let op):
            return "\(op) was abandoned: the management socket was closed"
        }
    }
}

/// Sends management commands and matches Command Complete / Command Status to them by opcode
/// and controller index; every other event goes to `events`. One command is outstanding at a
/// time (the kernel answers each in order anyway); each has a timeout, measured on an injected
/// clock as `ControllerClient`'s are.
public actor MgmtClient {
    public nonisolated let transport: any MgmtTransport
    /// Events that are not replies to our commands; finished when the transport ends (with
    /// `linkError` set if it failed).
    public nonisolated let events: AsyncStream<MgmtEvent>
    private let sink: AsyncStream<MgmtEvent>.Continuation
    private let logger: Logger
    private let clock: any Clock<Duration>
    public let defaultTimeout: Duration

    /// A reply answers the command of its opcode on its controller index.
    private struct ReplyKey: Equatable, Sendable {
        let opcode: MgmtOpcode
        let index: MgmtIndex
    }
    private var outstanding = OutstandingCommand<ReplyKey>()
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var reader: Task<Void, Never>?
    public private(set) var linkError: TransportError?
    private var isClosed = false

    public init(
        transport: any MgmtTransport, logger: Logger, clock: any Clock<Duration> = ContinuousClock(),
        defaultTimeout: Duration = .seconds(2)
    ) {
        self.transport = transport
        self.logger = logger
        self.clock = clock
        self.defaultTimeout = defaultTimeout
        (events, sink) = AsyncStream.makeStream(of: MgmtEvent.self, bufferingPolicy: .unbounded)
    }

    public func start() {
        guard reader == nil else { return }
        reader = Task { [weak self] in await self?.readLoop() }
    }

    private func readLoop() async {
        do {
            for try await bytes in transport.incoming { receive(bytes) }
            linkEnded(nil)
        } catch let error as TransportError {
            linkEnded(error)
        } catch {
            linkEnded(TransportError(.io, "reading from \(transport.name) failed: \(error)"))
        }
    }

    /// Sends `command` to controller `index` (or `.none`) and returns its decoded return
    /// parameters; a non-success status throws `.commandFailed`.
    public func execute<C: MgmtCommand>(_ command: C, index: MgmtIndex, timeout: Duration? = nil) async throws
        -> C.ReturnParameters
    {
        let bytes = try await exchange(command.packet(index: index), timeout: timeout ?? defaultTimeout)
        do {
            return try C.decodeReturn(bytes)
        } catch {
            throw MgmtError.badReply(opcode: C.opcode, error)
        }
    }

    private func exchange(_ packet: MgmtPacket, timeout: Duration) async throws -> [UInt8] {
        let opcode = MgmtOpcode(rawValue: packet.code)
        await acquireTurn()
        defer { releaseTurn() }
        if let linkError { throw MgmtError.transport(linkError) }
        if isClosed { throw MgmtError.closed(opcode: opcode) }
        let id = outstanding.nextID()
        let clock = self.clock
        return try await withCheckedThrowingContinuation { continuation in
            let timer = Task {
                do { try await clock.sleep(for: timeout) } catch { return }
                self.expire(id: id, after: timeout)
            }
            outstanding.begin(
                id: id, key: ReplyKey(opcode: opcode, index: packet.index), continuation: continuation, timer: timer)
            logger.trace(
                "mgmt send",
                metadata: ["command": "\(opcode)", "packet": "\(packet)", "parameters": "\(packet.parameterDump)"])
            do {
                try transport.send(packet.bytes)
            } catch let error as TransportError {
                finish(id: id, with: .failure(MgmtError.transport(error)))
            } catch {
                finish(id: id, with: .failure(MgmtError.transport(TransportError(.io, "\(error)"))))
            }
        }
    }

    private func acquireTurn() async {
        if !busy {
            busy = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    private func releaseTurn() {
        if waiters.isEmpty { busy = false } else { waiters.removeFirst().resume() }
    }

    private func expire(id: UInt64, after: Duration) {
        guard let (current, key) = outstanding.current, current == id else { return }
        finish(id: id, with: .failure(MgmtError.timeout(opcode: key.opcode, index: key.index, after: after)))
    }

    private func finish(id: UInt64, with result: Result<[UInt8], any Error>) {
        outstanding.finish(id: id, with: result)
    }

    private func receive(_ bytes: [UInt8]) {
        let event: MgmtEvent
        do {
            event = try MgmtEvent(MgmtPacket(decoding: bytes))
        } catch {
            logger.warning("ignoring a malformed management packet: \(error)")
            return
        }
        logger.trace("mgmt receive", metadata: ["event": "\(event.logDescription)"])
        switch event {
        case .commandComplete(let index, let opcode, let status, let parameters):
            if let id = outstanding.id(answeredBy: ReplyKey(opcode: opcode, index: index)) {
                finish(
                    id: id,
                    with: status.isSuccess
                        ? .success(parameters)
                        : .failure(MgmtError.commandFailed(opcode: opcode, index: index, status: status)))
                return
            }
        case .commandStatus(let index, let opcode, let status):
            if let id = outstanding.id(answeredBy: ReplyKey(opcode: opcode, index: index)) {
                // mgmt-api.txt: a Command Status with a failure "also means that the command has
                // finished executing"; a success status is an early one, the Complete follows.
                if !status.isSuccess {
                    finish(
                        id: id, with: .failure(MgmtError.commandFailed(opcode: opcode, index: index, status: status)))
                }
                return
            }
        default:
            break
        }
        sink.yield(event)
    }

    private func linkEnded(_ error: TransportError?) {
        linkError = error
        if let (id, key) = outstanding.current {
            finish(
                id: id,
                with: .failure(error.map { MgmtError.transport($0) } ?? MgmtError.closed(opcode: key.opcode)))
        }
        sink.finish()
    }

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        transport.close()
        if let (id, key) = outstanding.current { finish(id: id, with: .failure(MgmtError.closed(opcode: key.opcode))) }
        sink.finish()
    }
}
