import IBeaconCore
import IBeaconHost
import Logging
import SystemPackage

/// A btsnoop capture that could not be read to its end.
public struct CaptureError: ClassifiedError, Sendable {
    public var path: String
    public var problem: BTSnoopError
    /// Complete records read before the problem, and the advertising reports delivered from them.
    public var records: Int
    public var reports: Int

    public init(path: String, problem: BTSnoopError, records: Int = 0, reports: Int = 0) {
        self.path = path
        self.problem = problem
        self.records = records
        self.reports = reports
    }

    /// True when the file is a capture whose end is cut or damaged (every record before was read).
    public var isDamagedTail: Bool { problem.isDamagedTail }

    /// A cut or damaged end is its own kind (exit 79); a file that is no capture is bad data.
    public var failureKind: FailureKind { isDamagedTail ? .damagedCapture : .badData }

    public var description: String {
        guard problem.isDamagedTail else {
            return "\(path): \(problem); give a btsnoop capture (Android's HCI snoop log, btmon -w, "
                + "Wireshark's BTSnoop format, or ibeacon --btsnoop) or a PacketLogger .pklg (an iPhone's sysdiagnose)"
        }
        return "\(path): \(problem) (byte offset \(problem.offset)); read the \(records) complete record(s) "
            + "before it (\(reports) advertising report(s)) — the recording was cut short or damaged"
    }
}

/// Reads a capture file record by record: one read buffer and the decoder's one record, so
/// memory does not grow with the file.
struct CaptureFileReader: ~Copyable {
    let path: String
    private let fd: FileDescriptor
    private var decoder = CaptureDecoder()
    private var chunk: [UInt8]
    private var atEnd = false

    /// The file is opened before any stored property is set: a throw from an initializer of a
    /// noncopyable type with a `deinit` after some of its properties were set crashes Debian's
    /// swiftlang 6.2.3, whose compiler runs its SIL verifier (README "Build from source").
    init(path: String, chunkSize: Int = 65536) throws(TransportError) {
        self.init(path: path, fd: try Self.open(path), chunkSize: chunkSize)
    }

    private init(path: String, fd: FileDescriptor, chunkSize: Int) {
        self.path = path
        self.fd = fd
        chunk = [UInt8](repeating: 0, count: chunkSize)
    }

    /// The same rules as a profile read (SafeFile): no link another user made is followed,
    /// and a FIFO, device or socket is refused before it is opened.
    private static func open(_ path: String) throws(TransportError) -> FileDescriptor {
        do throws(FileError) {
            return try SafeFile.openForReading(path)
        } catch {
            throw openError(path, error)
        }
    }

    deinit { try? fd.close() }

    /// A refusal of the profile rules keeps its message (a FIFO, device or socket, another
    /// user's link: 66); a missing file, a directory or permission denied get the capture's
    /// own wording (66, 66, 77).
    static func openError(_ path: String, _ error: FileError) -> TransportError {
        if let cause = error.cause,
            [.noSuchFileOrDirectory, .permissionDenied, .notPermitted, .isDirectory].contains(cause)
        {
            return openError(path, cause)
        }
        let hint = error.hint == "give the path of a profile file" ? kindHint : error.hint
        return TransportError(.notFound, "\(error.path): \(error.message)", hint: hint)
    }

    /// What a capture is, for a path that names something else.
    static let kindHint =
        "give the path of a capture file: btsnoop (an Android phone's btsnoop_hci.log, btmon -w)"
        + " or PacketLogger (.pklg, an iPhone's sysdiagnose)"
    /// For a path that names nothing.
    static let missingHint =
        "check the path; a phone's log is copied to this box first (Android: btsnoop_hci.log from its bug report,"
        + " iPhone: the .pklg in its sysdiagnose)"

    static func openError(_ path: String, _ error: Errno) -> TransportError {
        guard error != .isDirectory else {
            return TransportError(
                .notFound, "\(path) is a directory, not a capture file", hint: kindHint, errno: error.rawValue)
        }
        return .opening(path, what: "capture file", verb: "read", error, missingHint: missingHint)
    }

    var datalink: BTSnoopDatalink? { decoder.datalink }
    var format: CaptureFormat? { decoder.format }
    var recordsRead: Int { decoder.recordsRead }

    /// Reads until the file header is complete; throws if the file is not a btsnoop capture.
    mutating func readHeader() throws(TransportError) -> BTSnoopError? {
        while true {
            do {
                if try decoder.readHeader() { return nil }
            } catch {
                return error
            }
            if atEnd {
                do { try decoder.finish() } catch { return error }
                return nil
            }
            try fill()
        }
    }

    private mutating func fill() throws(TransportError) {
        let n: Int
        do {
            n = try Sys.read(fd, into: &chunk)
        } catch {
            throw Self.openError(path, error)
        }
        if n == 0 {
            atEnd = true
        } else {
            decoder.append(chunk[0..<n])
        }
    }

    /// The next record; nil at a clean end. A cut or damaged end throws `BTSnoopError`.
    mutating func next() throws(TransportError) -> Result<BTSnoopRecord, BTSnoopError>? {
        while true {
            do {
                if let record = try decoder.next() { return .success(record) }
                if atEnd {
                    try decoder.finish()
                    return nil
                }
            } catch {
                return .failure(error)
            }
            try fill()
        }
    }
}

/// A btsnoop capture read as the advertising reports it recorded: the LE Advertising Report
/// (0x3E/0x02) and LE Extended Advertising Report (0x3E/0x0D) events received by the host,
/// whatever commands are or are not in the file, in datalinks 1001, 1002 and 2001. Nothing is
/// replayed to a pretend controller: a capture that starts mid-session or recorded a failed
/// command gives its reports all the same.
///
/// Time is the capture's: seconds since the first advertising report read (when the recorded
/// scan was running; a phone log may start minutes earlier), from the record timestamps (a
/// timestamp earlier than the one before it counts as the one before). Ticks fall every
/// `tickInterval` of that time, and once more at the end of the file. Time in a capture jumps
/// (a phone log paused for a night, a timestamp from another clock, a file made to hurt): over
/// a silence, ticks come for `tickedSilence` of capture time after the last record (long enough
/// for the table of `scan` to empty and for calibration's stopping rules to run their course),
/// then once more at the last tick due before the next record. No gap costs more than that:
/// two records 9.2e12 s apart cost a few hundred ticks, not 3.7e13.
///
/// In a Linux monitor (2001) file, the reports come from one controller: `controllerIndex`,
/// or by default the controller of the first advertising report in the file; reports of other
/// controllers are counted and named in a warning at the end.
///
/// A cut or damaged end: every complete record before it is delivered, the last tick runs,
/// then `scan` throws a `CaptureError` naming the byte offset.
public struct CaptureSightingSource: SightingSource {
    public let path: String
    public let controllerIndex: UInt16?
    public let logger: Logger
    /// What the file's content says it is (btsnoop of a datalink, or PacketLogger).
    public let format: CaptureFormat
    /// How `--device` named it (`btsnoop:`, `pklg:` or `capture:`); messages use it.
    public let prefix: String
    /// When set, the capture's time starts at the first advertising report event whose reports
    /// it accepts, and nothing before that event is delivered: a calibration from a phone's log
    /// starts at the beacon, not minutes earlier at another device (nil: the first report).
    public var startsAt: (@Sendable ([Sighting]) -> Bool)?

    /// Opens `path` and checks its header: a file that is not a btsnoop capture (or of a datalink
    /// that carries no HCI packets) fails here, before any scanning.
    public init(path: String, controllerIndex: UInt16? = nil, prefix: String = "btsnoop", logger: Logger) throws {
        self.path = path
        self.controllerIndex = controllerIndex
        self.logger = logger
        self.prefix = prefix
        var reader = try CaptureFileReader(path: path)
        if let problem = try reader.readHeader() { throw CaptureError(path: path, problem: problem) }
        // A file too short to tell: what it is does not matter, reading it fails at its end.
        format = reader.format ?? .btsnoop(.h4)
        if let index = controllerIndex, reader.datalink != .linuxMonitor {
            logger.notice("--index \(index) ignored: \(path) is \(format), one controller")
        }
    }

    public var name: String { "\(prefix):\(path)" }

    public var isLive: Bool { false }

    /// Seconds of capture time after a record that are ticked through in full; see the type.
    public static let tickedSilence = 60.0

    public func close() async {}

    /// The receiver's address as the capture recorded it: the reply to Read BD_ADDR (0x1009),
    /// of the controller whose reports are read. Nil when
    /// the capture has neither (most phone logs start after the controller was set up).
    public func receiverAddress() async throws -> BDAddress? {
        var reader = try CaptureFileReader(path: path)
        var addresses: [UInt16: BDAddress] = [:]
        var chosen = controllerIndex
        while let result = try reader.next() {
            guard case .success(let record) = result else { break }
            let index = record.controllerIndex ?? 0
            guard let packet = record.packet, packet.type == .event, record.direction == .received else { continue }
            let body = packet.body
            if body.count >= 12, body[0] == HCIEventCode.commandComplete.rawValue,
                Self.opcode(body, at: 3) == .readBDAddr, body[5] == HCIStatus.success.rawValue, addresses[index] == nil,
                let address = try? BDAddress(littleEndian: Array(body[6..<12]))
            {
                addresses[index] = address
            }
            if chosen == nil, Self.isAdvertisingReport(body) { chosen = index }
            if let chosen, let address = addresses[chosen] { return address }
        }
        return addresses[chosen ?? 0]
    }

    /// An LE Meta event (0x3E) whose subevent is Advertising Report (0x02) or Extended
    /// Advertising Report (0x0D): checked on the raw bytes, so other events cost no decoding.
    static func isAdvertisingReport(_ body: [UInt8]) -> Bool {
        body.count >= 3 && body[0] == HCIEventCode.leMeta.rawValue
            && (body[2] == LEMetaSubevent.advertisingReport.rawValue
                || body[2] == LEMetaSubevent.extendedAdvertisingReport.rawValue)
    }

    /// The opcode at `offset` of a packet body (little-endian), nil when the body is shorter.
    static func opcode(_ body: [UInt8], at offset: Int) -> HCIOpcode? {
        body.count >= offset + 2 ? HCIOpcode(rawValue: UInt16(body[offset]) | UInt16(body[offset + 1]) << 8) : nil
    }

    /// Whether a host-to-controller command turns scanning on (true) or off (false): LE Set
    /// Scan Enable (0x200C, Core 5.4 Vol 4 Part E §7.8.11) or LE Set Extended Scan Enable
    /// (0x2042, §7.8.65), whose first parameter is `LE_Scan_Enable` / `Enable`. Nil for any
    /// other packet. Read on the raw bytes (opcode little-endian, length, parameters).
    static func scanEnable(_ body: [UInt8]) -> Bool? {
        guard body.count >= 4, let opcode = opcode(body, at: 0),
            opcode == .leSetScanEnable || opcode == .leSetExtendedScanEnable
        else { return nil }
        return body[3] != 0
    }

    /// Reports as `scan(_:)` does; besides, the capture's own commands
    /// say when its receiver could not hear: LE Set (Extended) Scan Enable with Enable 0 makes it
    /// deaf (`Deafness.Cause.scanDisabled`) until one with Enable 1. With a `watchdog`, no
    /// report of any device for that long in capture time makes it deaf until the next report
    /// (a capture cannot be restarted).
    public func scan(_ request: ScanRequest) async throws {
        var reader = try CaptureFileReader(path: path)
        var replay = CaptureReplay(
            tracker: request.receptionTracker(),
            interval: max(request.tickInterval.seconds, 0.001),
            controllerIndex: controllerIndex, startsAt: startsAt)
        var problem: BTSnoopError?
        var stopped = false
        scanning: while true {
            let record: BTSnoopRecord
            switch try reader.next() {
            case nil: break scanning
            case .failure(let error):
                problem = error
                break scanning
            case .success(let r): record = r
            }
            if let index = record.controllerIndex { replay.recorded.insert(index) }
            if try await replay.advance(to: record.timestampMicros, tick: request.tick) == .stop {
                stopped = true
                break scanning
            }
            if replay.followScanEnable(in: record) { continue }
            if let packet = record.packet, packet.type == .event, packet.body.first == 0xFF { replay.vendorEvents += 1 }
            guard let packet = record.packet, packet.type == .event, record.direction == .received,
                Self.isAdvertisingReport(packet.body)
            else { continue }
            do {
                guard try replay.take(packet.body, at: record.timestampMicros, from: record.controllerIndex) else {
                    continue
                }
            } catch {
                logger.debug(
                    "skipped a malformed advertising report event",
                    metadata: ["record": "\(reader.recordsRead)", "error": "\(error)"])
                continue
            }
            if request.receive(replay.sightings, replay.time) == .stop {
                stopped = true
                break
            }
        }
        if !stopped { _ = try await request.tick(replay.time) }
        replay.warnAboutSkippedReports(in: path, logger: logger)
        if case .packetLogger = format, replay.reports == 0, replay.vendorEvents > 0 {
            // An iPhone's controller may filter scans itself and hand results over in its own
            // vendor events, which no one documents (Wireshark does not decode them either).
            let message =
                "\(path) holds no LE advertising report, but \(replay.vendorEvents) vendor-specific event(s): this "
                + "phone's controller may have passed what it heard in its own undocumented format, which is not "
                + "read (docs/CALIBRATION.md, \"A phone's own log\")"
            logger.warning("\(message)")
        }
        if let problem {
            throw CaptureError(path: path, problem: problem, records: reader.recordsRead, reports: replay.reports)
        }
        if let absent = replay.absentIndexError(in: path) { throw absent }
    }
}

/// Where a capture's replay is: its time (seconds since the first report the chosen controller
/// heard), the next tick due, what the capture's own scan enables say, and the sightings of the
/// event read last.
private struct CaptureReplay {
    let tracker: ReceptionTracker
    let interval: Double
    var chosen: UInt16?
    /// The controller was given (`--index N`), not picked as the first heard.
    let given: Bool
    var start: Int64?
    var time = 0.0
    var nextTick: Double
    var otherControllers: [UInt16: Int] = [:]
    /// Every controller index of a record in the capture (a Linux monitor file's).
    var recorded: Set<UInt16> = []
    var reports = 0
    var malformed = 0
    /// Vendor-specific events (0xFF) seen: where an iPhone's offloaded scanning reports.
    var vendorEvents = 0
    /// One array for every event's sightings: `receive` does not keep it, so it stays unique and
    /// is refilled in place.
    var sightings: [Sighting] = []

    let startsAt: (@Sendable ([Sighting]) -> Bool)?

    init(
        tracker: ReceptionTracker, interval: Double, controllerIndex: UInt16?,
        startsAt: (@Sendable ([Sighting]) -> Bool)?
    ) {
        self.startsAt = startsAt
        self.tracker = tracker
        self.interval = interval
        self.nextTick = interval
        self.chosen = controllerIndex
        self.given = controllerIndex != nil
        sightings.reserveCapacity(16)
    }

    /// Moves the capture's time to a record's timestamp (once the first report set its start),
    /// ticking at every interval passed, and the watchdog with the ticks; `.stop` when a tick asks.
    mutating func advance(
        to micros: Int64, tick: @Sendable (Double) async throws -> ScanControl
    ) async throws -> ScanControl {
        guard let start else { return .proceed }
        let before = time
        time = max(time, Double(micros &- start) / 1e6)
        while time >= nextTick {
            if Task.isCancelled { throw CancellationError() }
            if nextTick > before + CaptureSightingSource.tickedSilence {
                // Deep into a silence: on to the last tick due before this record.
                nextTick = min(time, nextTick + ((time - nextTick) / interval).rounded(.down) * interval)
            }
            if let due = tracker.watchdogDue(at: nextTick) {
                tracker.deaf(tracker.watchdogDeafness(restart: " in the capture"), at: due)
            }
            if try await tick(nextTick) == .stop { return .stop }
            nextTick += interval
        }
        return .proceed
    }

    /// When `record` is the capture's own LE Set (Extended) Scan Enable for the chosen
    /// controller: the receiver hears again, or turns deaf; true when it was one.
    func followScanEnable(in record: BTSnoopRecord) -> Bool {
        guard let packet = record.packet, packet.type == .command, record.direction == .sent,
            let enable = CaptureSightingSource.scanEnable(packet.body),
            record.controllerIndex == nil || chosen == nil || record.controllerIndex == chosen
        else { return false }
        if enable {
            tracker.hears(at: time)
        } else {
            tracker.deaf(
                Deafness(
                    .scanDisabled,
                    "the capture's own \(CaptureSightingSource.opcode(packet.body, at: 0) == .leSetExtendedScanEnable ? "LE Set Extended Scan Enable" : "LE Set Scan Enable") turned scanning off"
                ), at: time)
        }
        return true
    }

    /// Decodes an advertising report event into `sightings`; true when they are the chosen
    /// controller's (the first one heard, unless one was given), to be delivered. Throws (and
    /// counts) a malformed event.
    mutating func take(_ event: [UInt8], at micros: Int64, from index: UInt16?) throws -> Bool {
        sightings.removeAll(keepingCapacity: true)
        do {
            _ = try Sighting.append(fromEvent: event, to: &sightings)
        } catch {
            malformed += 1
            throw error
        }
        if let index {
            if chosen == nil { chosen = index }
            if index != chosen {
                otherControllers[index, default: 0] += sightings.count
                return false
            }
        }
        if start == nil {
            guard startsAt?(sightings) ?? true else { return false }
            start = micros
        }
        reports += sightings.count
        tracker.heard(at: time)
        return true
    }

    /// Says how many malformed events were skipped, and which other controllers' reports.
    func warnAboutSkippedReports(in path: String, logger: Logger) {
        if malformed > 0 {
            logger.warning("\(path): \(malformed) malformed advertising report event(s) skipped")
        }
        if !otherControllers.isEmpty && (reports > 0 || !given) {
            let read = given ? "read hci\(chosen ?? 0) (--index \(chosen ?? 0))" : "read hci\(chosen ?? 0)"
            let pick = given ? "" : "; pick one with --index N"
            logger.warning(
                "\(path) holds reports of several controllers: \(read); not read: \(otherReports)\(pick)")
        }
    }

    /// The other controllers' reports: `hci0 (12 reports), hci2 (3 reports)`.
    var otherReports: String {
        otherControllers.keys.sorted().map { "hci\($0) (\(otherControllers[$0] ?? 0) reports)" }
            .joined(separator: ", ")
    }

    /// `--index N` named a controller the capture does not hold at all (no record of it), while
    /// others' reports are there: nothing was read, and that is no success (nil otherwise). A
    /// controller that is in the capture but heard nothing (an advertiser) reads as empty.
    func absentIndexError(in path: String) -> TransportError? {
        guard given, reports == 0, !otherControllers.isEmpty, let chosen, !recorded.contains(chosen) else {
            return nil
        }
        return TransportError(
            .badSpecification, "--index \(chosen): \(path) holds no record of hci\(chosen)",
            hint: "it holds \(otherReports); give one of those with --index, or leave --index out")
    }
}
