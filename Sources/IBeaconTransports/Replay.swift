import IBeaconCore
import IBeaconHost
import Logging
import Synchronization
import SystemPackage

/// Plays a btsnoop capture back as if it were a controller, so `scan` and `calibrate` can be
/// rerun offline (`btsnoop:FILE`).
///
/// - Each command the host sends is answered with the first not-yet-used recorded Command
///   Complete (0x0E) or Command Status (0x0F) for its opcode, or, when the capture has none,
///   a Command Complete with status 0x00 and Num_HCI_Command_Packets 1.
/// - When the host enables scanning (LE Set Scan Enable 0x200C or LE Set Extended Scan Enable
///   0x2042 with Enable = 1), every recorded LE Meta event (0x3E) follows, in file order, as fast
///   as the consumer takes them; then the stream finishes normally: the end of the capture is
///   the end of the scan.
public final class BTSnoopReplayTransport: HCITransport {
    public let name: String
    public let incoming: AsyncThrowingStream<H4Packet, any Error>
    private let continuation: AsyncThrowingStream<H4Packet, any Error>.Continuation
    private let logger: Logger
    private let replies: [Reply]
    private let reports: [H4Packet]
    private let state: Mutex<State>

    private struct Reply {
        var opcode: UInt16
        var event: H4Packet
    }

    private struct State {
        var used: [Bool]
        var ended = false
    }

    static let commandComplete: UInt8 = 0x0E
    static let commandStatus: UInt8 = 0x0F
    static let leMeta: UInt8 = 0x3E
    static let leSetScanEnable: UInt16 = 0x200C
    static let leSetExtendedScanEnable: UInt16 = 0x2042

    /// Reads the whole capture at `path`.
    public convenience init(path: String, logger: Logger) throws(TransportError) {
        let bytes: [UInt8]
        do {
            bytes = try Sys.readFile(path)
        } catch .noSuchFileOrDirectory {
            throw TransportError(.notFound, "no capture file \(path)", errno: Errno.noSuchFileOrDirectory.rawValue)
        } catch .permissionDenied {
            throw TransportError(
                .permissionDenied, "no permission to read \(path)", errno: Errno.permissionDenied.rawValue)
        } catch {
            throw TransportError(.io, "cannot read \(path): \(error)", errno: error.rawValue)
        }
        let records = try BTSnoopFormat.decode(bytes, file: path)
        self.init(
            name: "btsnoop:\(path)", records: records.map { ($0.packet, $0.direction) },
            timestamps: records.map(\.timestamp), logger: logger)
        logger.debug(
            "replaying capture",
            metadata: ["file": "\(path)", "records": "\(records.count)", "reports": "\(reports.count)"])
    }

    /// Capture time of each replayed LE Meta event, in order: seconds since the capture's first
    /// scan-parameters command (where a live scan's clock starts), else since the first event;
    /// empty without timestamps. `ControllerSightingSource` gives these to consumers instead of
    /// its clock, so a replay stops where the live run did, however fast it is read.
    public let reportTimes: [Double]
    /// Capture time of the last record (the live scan was turned off then), same origin.
    public let endTime: Double?

    /// Replays `records` (packet and the direction it crossed) in this order; `timestamps`
    /// (microseconds, one per record, or none) give `reportTimes`.
    public init(
        name: String, records: [(H4Packet, PacketDirection)], timestamps: [Int64] = [], logger: Logger
    ) {
        self.name = name
        self.logger = logger
        var replies: [Reply] = []
        var reports: [H4Packet] = []
        var reportStamps: [Int64] = []
        var origin: Int64?
        for (index, (packet, direction)) in records.enumerated() {
            let stamp = index < timestamps.count ? timestamps[index] : nil
            // LE Set Scan Parameters (0x200B) / LE Set Extended Scan Parameters (0x2041), before
            // the first report: opcode little endian in the first two bytes of a command.
            if direction == .sent, packet.type == .command, reports.isEmpty, packet.body.count >= 2,
                let stamp, [0x200B, 0x2041].contains(UInt16(packet.body[0]) | UInt16(packet.body[1]) << 8)
            {
                origin = stamp
            }
            guard direction == .received && packet.type == .event else { continue }
            if packet.body.first == Self.leMeta, let stamp { reportStamps.append(stamp) }
            // Event body: code, parameter length, parameters (Core 5.4 Vol 4 Part E §5.4.4).
            let body = packet.body
            guard let code = body.first else { continue }
            switch code {
            case Self.commandComplete where body.count >= 5:
                // Num_HCI_Command_Packets (1), Command_Opcode (2), … (§7.7.14)
                replies.append(Reply(opcode: UInt16(body[3]) | UInt16(body[4]) << 8, event: packet))
            case Self.commandStatus where body.count >= 6:
                // Status (1), Num_HCI_Command_Packets (1), Command_Opcode (2) (§7.7.15)
                replies.append(Reply(opcode: UInt16(body[4]) | UInt16(body[5]) << 8, event: packet))
            case Self.leMeta:
                reports.append(packet)
            default:
                break
            }
        }
        self.replies = replies
        self.reports = reports
        if reportStamps.count == reports.count, let first = origin ?? reportStamps.first {
            reportTimes = reportStamps.map { Double($0 - first) / 1e6 }
            // The recording ended when the live scan was turned off: the capture's last record.
            endTime = timestamps.last.map { Double(max($0, reportStamps.last ?? $0) - first) / 1e6 }
        } else {
            reportTimes = []
            endTime = nil
        }
        self.state = Mutex(State(used: Array(repeating: false, count: replies.count)))
        (incoming, continuation) = AsyncThrowingStream.makeStream(of: H4Packet.self, throwing: (any Error).self)
    }

    public func send(_ packet: H4Packet) async throws {
        try state.withLock { (state: inout State) throws(TransportError) in
            guard !state.ended else { throw TransportError(.disconnected, "the replay of \(name) has ended") }
            guard packet.type == .command else { return }  // outgoing data needs no answer
            let body = packet.body
            guard body.count >= 3 else {
                throw TransportError(.io, "\(name): malformed command \(packet) (shorter than its header)")
            }
            let opcode = UInt16(body[0]) | UInt16(body[1]) << 8
            if let i = replies.indices.first(where: { !state.used[$0] && replies[$0].opcode == opcode }) {
                state.used[i] = true
                continuation.yield(replies[i].event)
            } else {
                // Command Complete: Num_HCI_Command_Packets 1, the opcode, Status 0x00.
                continuation.yield(
                    H4Packet(type: .event, body: [Self.commandComplete, 4, 1, body[0], body[1], 0x00]))
            }
            // LE_Scan_Enable (0x200C) and Enable (0x2042) are both the first parameter.
            let enablesScanning =
                (opcode == Self.leSetScanEnable || opcode == Self.leSetExtendedScanEnable)
                && body.count >= 4 && body[3] == 1
            if enablesScanning {
                for report in reports { continuation.yield(report) }
                state.ended = true
                continuation.finish()
            }
        }
    }

    public func close() {
        state.withLock { $0.ended = true }
        continuation.finish()
    }
}

/// Opens the transport `spec` names.
public func openTransport(_ spec: DeviceSpec, logger: Logger) throws(TransportError) -> any HCITransport {
    switch spec {
    case .hci(let index):
        return try BlueZHCITransport(index: index, logger: logger)
    case .serial(let path, let baudRate, let flowControl):
        return try H4StreamTransport.openSerial(
            path: path, baudRate: baudRate, flowControl: flowControl, logger: logger)
    case .tcp(let host, let port):
        return try H4StreamTransport.connectTCP(host: host, port: port, logger: logger)
    case .btsnoop(let path):
        return try BTSnoopReplayTransport(path: path, logger: logger)
    }
}
