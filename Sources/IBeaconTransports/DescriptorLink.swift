import IBeaconCore
import IBeaconHost
import Logging
import Synchronization
import SystemPackage

/// Most packets a transport keeps waiting for its consumer (at most 1028 bytes each, so about
/// 1 MiB): beyond that its reader waits (see `Reader.deliver`).
let maximumWaitingPackets = 1024

/// How the bytes one `read` returns become packets.
enum ReadFraming: Sendable {
    /// A byte stream (serial, TCP): packets may be split across reads or share one; an
    /// `H4Framer` reassembles them.
    case h4Stream
    /// A packet socket (BlueZ raw HCI): every read is exactly one packet, type byte first.
    case packetPerRead
}

/// The I/O machinery under every descriptor-backed transport: one dedicated reader thread
/// blocked in `poll(2)` on the descriptor and a wake-up pipe (no timers, no busy polling),
/// writes serialised by a lock, and a `close()` that stops the reader and then closes the
/// descriptor exactly once.
final class DescriptorLink: Sendable {
    let name: String
    let incoming: AsyncThrowingStream<H4Packet, any Error>

    private let fd: FileDescriptor
    private let isSocket: Bool
    private let wakeRead: FileDescriptor
    private let wakeWrite: FileDescriptor
    private let continuation: AsyncThrowingStream<H4Packet, any Error>.Continuation
    private let sendFailure: @Sendable (Errno) -> TransportError
    /// Whether `close()` has begun, and the reader thread to join.
    private let lifecycle: Mutex<(closing: Bool, reader: Sys.Thread?)>
    /// Held for each whole packet written; `true` once the descriptor is closed.
    private let writer: Mutex<Bool>
    /// Consumes packets on the reader thread (see `HCITransport.setPacketFilter`).
    private let filter: PacketFilterBox

    /// Takes ownership of `fd` and starts reading it.
    ///
    /// - Parameters:
    ///   - inspect: looks at every packet before it is delivered; returning an error finishes the
    ///     stream with it (the BlueZ transport uses it for "adapter went down" notices).
    ///   - sendFailure: turns a failed write into the error `send` throws.
    ///   - describe: what the trace log shows of a received packet (an H4 packet's description,
    ///     which withholds key material; the management socket's own, which withholds every
    ///     parameter).
    init(
        name: String, adopting fd: FileDescriptor, isSocket: Bool, framing: ReadFraming, logger: Logger,
        inspect: @escaping @Sendable (H4Packet) -> TransportError? = { _ in nil },
        describe: @escaping @Sendable (H4Packet) -> String = { "\($0)" },
        sendFailure: @escaping @Sendable (Errno) -> TransportError
    ) throws(TransportError) {
        let wake: (readEnd: FileDescriptor, writeEnd: FileDescriptor)
        do {
            wake = try Sys.pipe()
        } catch {
            Sys.close(fd)
            throw TransportError(.io, "\(name): cannot create a wake-up pipe: \(error)", errno: error.rawValue)
        }
        self.name = name
        self.fd = fd
        self.isSocket = isSocket
        self.wakeRead = wake.readEnd
        self.wakeWrite = wake.writeEnd
        self.sendFailure = sendFailure
        self.lifecycle = Mutex((closing: false, reader: nil))
        self.writer = Mutex(false)
        let filter = PacketFilterBox()
        self.filter = filter
        (incoming, continuation) = AsyncThrowingStream.makeStream(
            of: H4Packet.self, throwing: (any Error).self, bufferingPolicy: .bufferingOldest(maximumWaitingPackets))

        let reader = Reader(
            name: name, fd: fd, wake: wake.readEnd, framing: framing, continuation: continuation,
            inspect: inspect, describe: describe, filter: filter, logger: logger)
        do {
            let thread = try Sys.spawnThread { reader.run() }
            lifecycle.withLock { $0.reader = thread }
        } catch {
            Sys.close(fd)
            Sys.close(wake.readEnd)
            Sys.close(wake.writeEnd)
            throw TransportError(.io, "\(name): cannot start the reader thread: \(error)", errno: error.rawValue)
        }
    }

    deinit { close() }

    func setPacketFilter(_ f: (@Sendable (H4Packet) -> Bool)?) { filter.set(f) }

    /// Writes `bytes` whole; concurrent senders never interleave.
    func send(_ bytes: [UInt8]) throws(TransportError) {
        try writer.withLock { (closed: inout Bool) throws(TransportError) in
            guard !closed else { throw TransportError(.disconnected, "\(name) is closed") }
            do throws(Errno) {
                if isSocket {
                    try Sys.sendAll(fd, bytes)
                } else {
                    try Sys.writeAll(fd, bytes)
                }
            } catch {
                throw sendFailure(error)
            }
        }
    }

    /// One `send(2)` of a whole packet on a packet socket; returns what it returned (see
    /// `sendMgmtCommand` for why a count of 0 is not resent).
    func sendPacket(_ bytes: [UInt8]) throws(TransportError) -> Int {
        try writer.withLock { (closed: inout Bool) throws(TransportError) -> Int in
            guard !closed else { throw TransportError(.disconnected, "\(name) is closed") }
            do throws(Errno) {
                return try Sys.sendPacket(fd, bytes)
            } catch {
                throw sendFailure(error)
            }
        }
    }

    /// Stops the reader, closes the descriptor once and finishes `incoming` (normally, unless
    /// it already finished with an error). Idempotent; returns when the descriptor is closed.
    func close() {
        let reader: Sys.Thread?? = lifecycle.withLock { state in
            if state.closing { return .none }
            state.closing = true
            defer { state.reader = nil }
            return .some(state.reader)
        }
        guard case .some(let thread) = reader else { return }
        // Wake the reader first and wait for it, so it never sees the shutdown below as the
        // peer going away, and never reads a descriptor number that is being reused.
        try? Sys.writeAll(wakeWrite, [1])
        if let thread, !thread.isCurrent { thread.join() }
        // A sender blocked in send(2) (peer not reading) is woken by the shutdown.
        if isSocket { Sys.shutdown(fd) }
        writer.withLock { closed in
            closed = true
            Sys.close(fd)
        }
        Sys.close(wakeRead)
        Sys.close(wakeWrite)
        continuation.finish()
    }
}

/// The reader thread's state; it holds no reference to the transport, so dropping the
/// transport runs its `deinit`, which stops this thread.
private struct Reader: Sendable {
    let name: String
    let fd: FileDescriptor
    let wake: FileDescriptor
    let framing: ReadFraming
    let continuation: AsyncThrowingStream<H4Packet, any Error>.Continuation
    let inspect: @Sendable (H4Packet) -> TransportError?
    let describe: @Sendable (H4Packet) -> String
    let filter: PacketFilterBox
    let logger: Logger

    /// How long reports may gather while scanning (see `run`).
    static let gatherMilliseconds: Int32 = 5

    func run() {
        var framer = H4Framer()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let events: [Int16]
            do {
                events = try Sys.poll([(fd, Sys.pollIn), (wake, Sys.pollIn)], timeoutMilliseconds: -1)
            } catch {
                return finish(TransportError(.io, "\(name): poll failed: \(error)", errno: error.rawValue))
            }
            if events[1] != 0 { return continuation.finish() }  // close() asked us to stop
            if events[0] & Sys.pollInvalid != 0 {
                return finish(TransportError(.io, "\(name): the descriptor was closed under the reader"))
            }
            guard events[0] != 0 else { continue }
            let count: Int
            do {
                count = try Sys.read(fd, into: &buffer)
            } catch .wouldBlock {
                continue
            } catch {
                return finish(readFailure(error, partial: framer.pendingByteCount))
            }
            guard count > 0 else {
                return finish(
                    TransportError(
                        .disconnected,
                        "\(name): the controller closed the connection\(Self.midPacket(framer.pendingByteCount))"))
            }
            let packets: [H4Packet]
            switch framing {
            case .h4Stream:
                do {
                    packets = try framer.push(buffer[0..<count])
                } catch {
                    return finish(TransportError(.io, "\(name): \(error)"))
                }
            case .packetPerRead:
                packets = [H4Packet(type: H4PacketType(rawValue: buffer[0]), body: Array(buffer[1..<count]))]
            }
            for packet in packets {
                if let failure = inspect(packet) { return finish(failure) }
                logger.trace("received", metadata: ["device": "\(name)", "packet": "\(describe(packet))"])
                if filter.consumes(packet) { continue }
                if !deliver(packet) { return continuation.finish() }  // close() asked us to stop
            }
            // While scanning (a filter is installed), a controller can send thousands of reports
            // a second. When nothing more is waiting, let them gather for a few milliseconds and
            // take them together: one wake-up of this thread per batch instead of one per report.
            // close() still interrupts the wait through the wake-up pipe.
            if filter.isActive, (try? Sys.poll([(fd, Sys.pollIn)], timeoutMilliseconds: 0))?.first == 0 {
                if let woken = try? Sys.poll([(wake, Sys.pollIn)], timeoutMilliseconds: Self.gatherMilliseconds),
                    woken.first != 0
                {
                    return continuation.finish()
                }
            }
        }
    }

    /// Hands a packet to the consumer. While `maximumWaitingPackets` are waiting for it, the
    /// reader waits too (1 ms at a time, still woken by `close()`): the kernel's buffer then fills
    /// and a peer flooding the link is slowed down, instead of this process' memory growing.
    /// False when `close()` woke it.
    private func deliver(_ packet: H4Packet) -> Bool {
        while case .dropped = continuation.yield(packet) {
            if let woken = try? Sys.poll([(wake, Sys.pollIn)], timeoutMilliseconds: 1), woken.first != 0 {
                return false
            }
        }
        return true
    }

    private func finish(_ error: TransportError) {
        logger.debug("reader stopped", metadata: ["device": "\(name)", "error": "\(error)"])
        continuation.finish(throwing: error)
    }

    /// Where a link ended inside an H4 packet: said in the error, since it explains garbled data.
    static func midPacket(_ pending: Int) -> String {
        pending > 0 ? " in the middle of a packet (\(pending) byte\(pending == 1 ? "" : "s") of it received)" : ""
    }

    private func readFailure(_ error: Errno, partial: Int) -> TransportError {
        switch error {
        case .ioError, .connectionReset, .brokenPipe, .networkDown, .operationNotSupportedByDevice,
            .noSuchAddressOrDevice, .timedOut, .noRouteToHost:
            TransportError(
                .disconnected, "\(name): the controller went away (read: \(error))\(Self.midPacket(partial))",
                errno: error.rawValue)
        default:
            TransportError(.io, "\(name): read failed: \(error)", errno: error.rawValue)
        }
    }
}

/// The `send` error for the usual errnos of a stream; `permissionHint` is shown for EPERM/EACCES.
func streamSendFailure(name: String, permissionHint: String? = nil) -> @Sendable (Errno) -> TransportError {
    { error in
        switch error {
        case .brokenPipe, .connectionReset, .ioError, .networkDown, .operationNotSupportedByDevice,
            .noSuchAddressOrDevice, .socketNotConnected:
            TransportError(.disconnected, "\(name): the controller went away (write: \(error))", errno: error.rawValue)
        default:
            .systemCall(
                error, "\(name): write failed: \(error)", denied: "\(name): not allowed to send (\(error))",
                hint: permissionHint)
        }
    }
}

/// The packet filter, swapped while the reader thread runs. The closure is held in a class
/// so the mutex guards a plain reference rather than a generic function value.
final class PacketFilterBox: Sendable {
    private final class Filter: Sendable {
        let body: @Sendable (H4Packet) -> Bool
        init(_ body: @escaping @Sendable (H4Packet) -> Bool) { self.body = body }
    }

    private let current = Mutex<Filter?>(nil)

    func set(_ f: (@Sendable (H4Packet) -> Bool)?) {
        let filter = f.map(Filter.init)
        current.withLock { $0 = filter }
    }

    var isActive: Bool { current.withLock { $0 != nil } }

    func consumes(_ packet: H4Packet) -> Bool {
        guard let filter = current.withLock({ $0 }) else { return false }
        return filter.body(packet)
    }
}
