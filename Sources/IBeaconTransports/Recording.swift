import IBeaconCore
import IBeaconHost
import Logging
import Synchronization
import SystemPackage

/// Writes every packet it is given — but those carrying keys or pairing parameters, which it
/// leaves out — to a btsnoop v1 file (datalink 1002, H4), which Wireshark,
/// tshark and `btmon -r` open. Each record goes out in one `write(2)` as it happens, so a
/// process killed mid-run leaves a readable file.
public final class BTSnoopFileRecorder: PacketRecorder {
    public let path: String
    private let clock: @Sendable () -> Int64
    private let logger: Logger
    /// The open file, nil after `close()` or after a failed write.
    private let file: Mutex<FileDescriptor?>
    private let firstFailure: Mutex<TransportError?>
    private let withheld = Mutex(0)

    /// Creates `path` and writes the file header. An existing file is refused unless
    /// `overwrite` (then replaced by a new file, never truncated through a link); symbolic
    /// links are followed only when they are the user's own or root's; `avoiding` names the files
    /// the capture must never be (the profiles the command reads or writes).
    ///
    /// - Parameter clock: wall-clock time in microseconds since the Unix epoch; nil for the
    ///   system's real-time clock.
    public init(
        path: String, overwrite: Bool = false, avoiding: [SafeFile.ProtectedFile] = [], logger: Logger,
        clock: (@Sendable () -> Int64)? = nil
    ) throws(FileError) {
        self.path = path
        self.clock = clock ?? { Sys.realtimeMicroseconds() }
        self.logger = logger
        let fd = try SafeFile.createForRecording(path, overwrite: overwrite, avoiding: avoiding)
        do throws(Errno) {
            try Sys.writeAll(fd, BTSnoop.fileHeader())
        } catch {
            Sys.close(fd)
            throw FileError(.io, path: path, "cannot write the capture: \(error)")
        }
        self.file = Mutex(fd)
        self.firstFailure = Mutex(nil)
    }

    deinit { close() }

    /// Packets left out because they carry keys or pairing parameters (`H4Packet.carriesSecrets`).
    public var withheldPackets: Int { withheld.withLock { $0 } }

    /// The first write error, if recording stopped because of one.
    public var failure: TransportError? { firstFailure.withLock { $0 } }

    public func record(_ packet: H4Packet, direction: PacketDirection) {
        // Keys and pairing parameters (bluetoothd's pairings, seen on a raw socket) never reach
        // the file: such a packet is left out, not written with its bytes blanked.
        if packet.carriesSecrets {
            withheld.withLock { $0 += 1 }
            return
        }
        let bytes = BTSnoop.encodeRecord(
            packet: packet, direction: direction, timestampMicros: BTSnoop.timestamp(unixMicroseconds: clock()))
        let error = file.withLock { (fd: inout FileDescriptor?) -> Errno? in
            guard let descriptor = fd else { return nil }
            do throws(Errno) {
                try Sys.writeAll(descriptor, bytes)
                return nil
            } catch {
                Sys.close(descriptor)
                fd = nil
                return error
            }
        }
        if let error {
            let failure = TransportError(.io, "recording to \(path) stopped: \(error)", errno: error.rawValue)
            firstFailure.withLock { $0 = $0 ?? failure }
            logger.error("\(failure)")
        }
    }

    /// Closes the file; later records are dropped. Idempotent.
    public func close() {
        file.withLock { fd in
            if let descriptor = fd { Sys.close(descriptor) }
            fd = nil
        }
    }
}

/// Passes everything through to another transport and gives the recorder a copy of every
/// packet sent and received. A received packet is recorded as it is handed on to the
/// consumer, so a reply is always recorded before any command sent in response to it.
public final class RecordingTransport: HCITransport {
    private let inner: any HCITransport
    private let recorder: any PacketRecorder
    public let incoming: AsyncThrowingStream<H4Packet, any Error>

    public init(wrapping inner: any HCITransport, recorder: any PacketRecorder) {
        self.inner = inner
        self.recorder = recorder
        // Bounded like the transports' own streams: while the consumer lags, the forwarder waits
        // (and with it the transport's reader), so a flood cannot pile up here.
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: H4Packet.self, throwing: (any Error).self, bufferingPolicy: .bufferingOldest(maximumWaitingPackets))
        incoming = stream
        let forwarder = Task {
            do {
                for try await packet in inner.incoming {
                    recorder.record(packet, direction: .received)
                    while case .dropped = continuation.yield(packet) {
                        try await Task.sleep(for: .milliseconds(1))
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in forwarder.cancel() }
    }

    public var name: String { inner.name }

    public func send(_ packet: H4Packet) async throws {
        // Recorded before it is written: the reply may be read (and recorded) before the
        // write returns, and the capture must show the command first.
        recorder.record(packet, direction: .sent)
        try await inner.send(packet)
    }

    public func close() { inner.close() }
}
