import Foundation
import IBeaconCore
import IBeaconHost
import IBeaconTestSupport
import IBeaconTransports
import Synchronization
import Testing

@Suite struct BTSnoopRecorderTests {
    /// 2026-01-02 03:04:05.678901 UTC in microseconds since 1970.
    static let unixTime: Int64 = 1_767_323_045_678_901

    @Test func writesHeaderAndRecordsLikeBumble() throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/capture.btsnoop"
        let clock = Mutex(Self.unixTime)
        let recorder = try BTSnoopFileRecorder(path: path, logger: quietLogger) {
            clock.withLock { now in
                defer { now += 1000 }
                return now
            }
        }
        // Header as Bumble's BtSnooper writes it: "btsnoop\0", version 1, datalink 1002 (0x3EA).
        #expect(try readWholeFile(path) == [UInt8](hex: "6274736e6f6f7000 00000001 000003ea")!)

        recorder.record(Vectors.resetCommand, direction: .sent)
        // Flushed per record: the file holds it before close (a killed process keeps it).
        let afterOne = try readWholeFile(path)
        #expect(afterOne.count == 16 + 24 + 4)

        recorder.record(Vectors.resetComplete, direction: .received)
        let acl = H4Packet(type: .acl, body: [0x40, 0x00, 0x01, 0x00, 0xAA])
        recorder.record(acl, direction: .sent)
        recorder.close()
        recorder.record(Vectors.report1, direction: .received)  // after close: dropped

        let bytes = try readWholeFile(path)
        // Record headers: original length, included length, flags, drops — the first two as
        // Bumble wrote them for the same packets (flags 2 = sent command, 3 = received event).
        let offset: UInt64 = 0x00dc_ddb3_0f2f_8000  // µs from 0 AD to 1970
        let t0 = UInt64(Self.unixTime) + offset
        let expected =
            [UInt8](hex: "6274736e6f6f7000 00000001 000003ea")!
            + [UInt8](hex: "00000004 00000004 00000002 00000000")! + HandmadeBTSnoop.be64(t0)
            + [UInt8](hex: "01030c00")!
            + [UInt8](hex: "00000007 00000007 00000003 00000000")! + HandmadeBTSnoop.be64(t0 + 1000)
            + [UInt8](hex: "040e0401030c00")!
            // ACL sent: flags 0 (data, host to controller).
            + [UInt8](hex: "00000006 00000006 00000000 00000000")! + HandmadeBTSnoop.be64(t0 + 2000)
            + [UInt8](hex: "0240000100aa")!
        #expect(bytes == expected)
        #expect(recorder.failure == nil)
    }

    @Test func cannotCreateInAMissingDirectory() {
        let error = #expect(throws: FileError.self) {
            _ = try BTSnoopFileRecorder(path: "/nonexistent-ibeacon-dir/x.btsnoop", logger: quietLogger)
        }
        #expect(error?.kind == .cannotWrite)
        #expect(error?.description.contains("does not exist") == true)
    }

    /// tshark (Wireshark's decoder, an independent reader) opens what we write.
    @Test func tsharkReadsTheCapture() async throws {
        let tshark = "/usr/bin/tshark"
        try #require(FileManager.default.isExecutableFile(atPath: tshark), "tshark is required for this test")
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/scan.btsnoop"
        let recorder = try BTSnoopFileRecorder(path: path, logger: quietLogger)
        recorder.record(Vectors.resetCommand, direction: .sent)
        recorder.record(Vectors.resetComplete, direction: .received)
        recorder.record(Vectors.scanEnableCommand, direction: .sent)
        recorder.record(Vectors.scanEnableComplete, direction: .received)
        recorder.record(Vectors.report1, direction: .received)
        recorder.record(Vectors.report2, direction: .received)
        recorder.close()
        let lines = try await runTShark(path, fields: ["bthci_cmd.opcode", "bthci_evt.code"])
        #expect(lines == ["0x0c03\t", "\t0x0e", "0x200c\t", "\t0x0e", "\t0x3e", "\t0x3e"])
    }
}

/// Runs tshark on `path` and returns its lines of `-T fields` output. Waited for on a thread of
/// its own: tshark takes a second or more to start, a pool thread's worth of other suites' tasks.
func runTShark(_ path: String, fields: [String]) async throws -> [String] {
    let (status, data) = try await onOwnThread { () throws -> (Int32, Data) in
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/tshark")
        process.arguments = ["-r", path, "-T", "fields"] + fields.flatMap { ["-e", $0] }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, data)
    }
    #expect(status == 0)
    return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
}

/// Collects what a `CaptureSightingSource` delivers.
final class Delivered: Sendable {
    let batches = Mutex<[(addresses: [String], time: Double)]>([])
    let ticks = Mutex<[Double]>([])
}

@Suite struct CaptureSightingSourceTests {
    static let t0: UInt64 = 0x00E2_0000_0000_0000

    /// A phone log that starts mid-session: no Reset, no replies to the scan set-up, a failed
    /// command, other events; reports at 0.5 s, 1.25 s and 3.0 s after the first record.
    static func capture() -> [UInt8] {
        HandmadeBTSnoop.header()
            + HandmadeBTSnoop.record(Vectors.scanEnableDisallowed.bytes, flags: 3, timestamp: t0)
            + HandmadeBTSnoop.record(Vectors.report1.bytes, flags: 3, timestamp: t0 + 500_000)
            // Number Of Completed Packets (0x13): neither a reply nor a report.
            + HandmadeBTSnoop.record(
                [0x04, 0x13, 0x05, 0x01, 0x40, 0x00, 0x01, 0x00], flags: 3, timestamp: t0 + 600_000)
            // A sent packet that looks like an LE Meta event is not a report.
            + HandmadeBTSnoop.record(Vectors.report1.bytes, flags: 2, timestamp: t0 + 700_000)
            + HandmadeBTSnoop.record(Vectors.report2.bytes, flags: 3, timestamp: t0 + 1_250_000)
            + HandmadeBTSnoop.record(Vectors.report1.bytes, flags: 3, timestamp: t0 + 3_000_000)
    }

    static func run(_ source: CaptureSightingSource, stopAt: Double? = nil) async throws -> Delivered {
        let delivered = Delivered()
        try await source.scan(
            ScanRequest(
                tickInterval: .seconds(1),
                receive: { sightings, t in
                    delivered.batches.withLock { $0.append((sightings.map(\.address.description), t)) }
                    if let stopAt, t >= stopAt { return .stop }
                    return .proceed
                },
                tick: { t in
                    delivered.ticks.withLock { $0.append(t) }
                    return .proceed
                }))
        return delivered
    }

    @Test func reportsCarryTheRecordTimesWhateverCommandsAreMissing() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/scan.btsnoop"
        try writeWholeFile(path, Self.capture())
        let source = try CaptureSightingSource(path: path, logger: quietLogger)
        #expect(source.name == "btsnoop:\(path)")
        #expect(try await source.receiverAddress() == nil)
        let delivered = try await Self.run(source)
        let batches = delivered.batches.withLock { $0 }
        #expect(batches.map(\.time) == [0, 0.75, 2.5])
        #expect(batches.map(\.addresses) == [["C0:FF:EE:12:34:56"], ["D1:02:03:04:05:06"], ["C0:FF:EE:12:34:56"]])
        // Every second of capture time from the first report, then once at the end.
        #expect(delivered.ticks.withLock { $0 } == [1, 2, 2.5])
    }

    /// Issue 23: two reports 9.2e12 s apart (a 154-byte file) used to tick through every second
    /// of the gap. Ticks run for `tickedSilence` (60 s) after the first report, then once at
    /// the last tick due before the second, then at the end.
    @Test func aJumpInTimeCostsAMinuteOfTicksNotTheGap() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/gap.btsnoop"
        let gap: UInt64 = 9_000_000_000_000_000_000  // 9e12 s in microseconds
        try writeWholeFile(
            path,
            HandmadeBTSnoop.header() + HandmadeBTSnoop.record(Vectors.report1.bytes, flags: 3, timestamp: Self.t0)
                + HandmadeBTSnoop.record(Vectors.report2.bytes, flags: 3, timestamp: Self.t0 + gap))
        let delivered = try await Self.run(CaptureSightingSource(path: path, logger: quietLogger))
        let seconds = Double(gap) / 1e6
        #expect(delivered.batches.withLock { $0 }.map(\.time) == [0, seconds])
        let ticks = delivered.ticks.withLock { $0 }
        #expect(Array(ticks.prefix(60)) == (1...60).map(Double.init))
        #expect(Array(ticks.dropFirst(60)) == [seconds, seconds], "\(ticks.count) ticks")
    }

    @Test func stopsWhenTheConsumerSays() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/scan.btsnoop"
        try writeWholeFile(path, Self.capture())
        let delivered = try await Self.run(CaptureSightingSource(path: path, logger: quietLogger), stopAt: 0.5)
        #expect(delivered.batches.withLock { $0 }.map(\.time) == [0, 0.75])
    }

    @Test func receiverAddressFromTheRecordedReadBDAddrReply() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/init.btsnoop"
        // Command Complete for Read BD_ADDR (0x1009): status 0, address F0:F1:F2:F3:F4:F5 (little-endian).
        let reply: [UInt8] = [0x04, 0x0E, 0x0A, 0x01, 0x09, 0x10, 0x00, 0xF5, 0xF4, 0xF3, 0xF2, 0xF1, 0xF0]
        try writeWholeFile(
            path, HandmadeBTSnoop.header() + HandmadeBTSnoop.record(reply, flags: 3) + Self.capture().dropFirst(16))
        let source = try CaptureSightingSource(path: path, logger: quietLogger)
        #expect(try await source.receiverAddress()?.description == "F0:F1:F2:F3:F4:F5")
    }

    /// A btmon (Linux monitor) capture in `dir`: each packet received by its controller, a
    /// second apart.
    static func writeMonitorFile(in dir: String, _ records: [(index: UInt16, packet: H4Packet)]) throws -> String {
        let path = dir + "/btmon.btsnoop"
        var file = BTSnoop.fileHeader(datalink: .linuxMonitor)
        for (k, record) in records.enumerated() {
            file += try #require(
                BTSnoop.encodeRecord(
                    packet: record.packet, direction: .received, timestampMicros: Int64(k) * 1_000_000,
                    datalink: .linuxMonitor, controllerIndex: record.index))
        }
        try writeWholeFile(path, file)
        return path
    }

    /// btmon files: the controller index in the flags picks whose reports are read.
    @Test func monitorFilePicksAController() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = try Self.writeMonitorFile(
            in: dir, [(1, Vectors.report1), (0, Vectors.report2), (1, Vectors.report1)])
        // Default: the controller of the first report (hci1).
        let first = try await Self.run(CaptureSightingSource(path: path, logger: quietLogger))
        #expect(first.batches.withLock { $0 }.map(\.time) == [0, 2])
        let zero = try await Self.run(CaptureSightingSource(path: path, controllerIndex: 0, logger: quietLogger))
        #expect(zero.batches.withLock { $0 }.map(\.addresses) == [["D1:02:03:04:05:06"]])
    }

    /// Issue 41, defect 12: `--index 1` still said "pick one with --index N"; `--index 5`, a
    /// controller the file does not hold, read nothing and ended as a success.
    @Test func aGivenIndexIsNeitherAdvisedNorSilentlyEmpty() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = try Self.writeMonitorFile(
            in: dir, [(1, Vectors.report1), (0, Vectors.report2), (1, Vectors.report1)])
        let log = RecordingLog()
        _ = try await Self.run(CaptureSightingSource(path: path, controllerIndex: 1, logger: log.logger))
        let warning = try #require(log.messages.first { $0.contains("several controllers") })
        #expect(warning.contains("read hci1 (--index 1); not read: hci0 (1 reports)"), "\(warning)")
        #expect(!warning.contains("pick one with --index"), "\(warning)")
        let error = await #expect(throws: TransportError.self) {
            _ = try await Self.run(CaptureSightingSource(path: path, controllerIndex: 5, logger: quietLogger))
        }
        #expect(error?.kind == .badSpecification)
        #expect("\(error.map { "\($0)" } ?? "")".contains("holds no record of hci5"))
        #expect("\(error.map { "\($0)" } ?? "")".contains("hci0 (1 reports), hci1 (2 reports)"))
    }

    /// A controller that is in the capture but heard nothing (the advertiser of a btmon recording
    /// of two controllers: make test-kernel's ibeacon_btmon_capture) reads as empty, exit 0: only
    /// an index of which the file holds no record at all is an error.
    @Test func aGivenControllerThatHeardNothingReadsAsEmpty() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let resetComplete = H4Packet(type: .event, body: [0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00])
        let path = try Self.writeMonitorFile(in: dir, [(0, resetComplete), (1, Vectors.report1), (1, Vectors.report1)])
        let zero = try await Self.run(CaptureSightingSource(path: path, controllerIndex: 0, logger: quietLogger))
        #expect(zero.batches.withLock { $0 }.isEmpty)
        await #expect(throws: TransportError.self) {
            _ = try await Self.run(CaptureSightingSource(path: path, controllerIndex: 3, logger: quietLogger))
        }
    }

    /// Cut at every offset after the header: the reports of the complete records are delivered,
    /// then the error is a damaged tail naming the offset of the cut record.
    @Test func truncatedFileDeliversCompleteRecordsThenThrows() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/cut.btsnoop"
        let whole = Self.capture()
        var starts: [Int] = [16]
        var decoder = BTSnoopDecoder()
        decoder.append(whole)
        while try decoder.next() != nil { starts.append(decoder.offset) }
        let reportEnds = [starts[2], starts[5], starts[6]]  // the ends of the three received reports
        for cut in 16..<whole.count {
            try writeWholeFile(path, Array(whole.prefix(cut)))
            let source = try CaptureSightingSource(path: path, logger: quietLogger)
            let delivered = Delivered()
            do {
                try await source.scan(
                    ScanRequest(
                        tickInterval: .seconds(1),
                        receive: { s, t in
                            delivered.batches.withLock { $0.append((s.map(\.address.description), t)) }
                            return .proceed
                        }, tick: { _ in .proceed }))
                #expect(starts.contains(cut), "cut at \(cut) read without error")
            } catch let error as CaptureError {
                #expect(error.isDamagedTail)
                #expect(error.problem.offset == starts.last(where: { $0 <= cut }))
                #expect(error.description.contains("byte offset \(error.problem.offset)"))
            }
            #expect(delivered.batches.withLock { $0.count } == reportEnds.filter { $0 <= cut }.count, "cut at \(cut)")
        }
    }

    static func realCapture() throws -> [UInt8] {
        // $IBEACON_CAPTURES (the Makefile exports it), else shared/captures beside the repository.
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let directory =
            ProcessInfo.processInfo.environment["IBEACON_CAPTURES"].flatMap { $0.isEmpty ? nil : $0 }
            ?? repository.deletingLastPathComponent().appendingPathComponent("shared/captures").path
        let original = directory + "/scientistnobee+DSD6__btsnoop_hci.log"
        return try [UInt8](Data(contentsOf: URL(fileURLWithPath: original)))
    }

    /// A real phone log (scientistnobee/DSD6 btsnoop_hci.log, SOURCES.md in the shared captures:
    /// 12 legacy reports) cut at every offset, through the codec: the complete records are read,
    /// then a truncation at the start of the cut record (none at a boundary). The decoder is a
    /// value: each cut starts from a copy taken at the record boundary before it.
    @Test func everyCutOfARealCaptureThroughTheCodec() throws {
        let whole = try Self.realCapture()
        var boundaries: [(offset: Int, decoder: BTSnoopDecoder)] = []
        var decoder = BTSnoopDecoder()
        // Feed byte by byte up to the header, then record by record.
        for cut in 0...whole.count {
            if cut > 0 { decoder.append(whole[(cut - 1)..<cut]) }
            var copy = decoder
            let record = try copy.next()
            if cut == 16 || record != nil {
                if record != nil { decoder = copy }  // the record that just completed is taken
                boundaries.append((cut, decoder))
                #expect(try decoder.next() == nil, "cut at \(cut)")
            }
            var atEnd = decoder
            do {
                try atEnd.finish()
                #expect(cut >= 16 && boundaries.last?.offset == cut, "cut at \(cut) finished cleanly")
            } catch {
                #expect(error.isDamagedTail, "cut at \(cut)")
                #expect(error.offset == (cut < 16 ? cut : boundaries.last?.offset), "cut at \(cut): \(error)")
                #expect(error.description.hasPrefix("truncated"), "cut at \(cut): \(error)")
            }
        }
        #expect(boundaries.last?.offset == whole.count)
        #expect(boundaries.count == 1 + (boundaries.last?.decoder.recordsRead ?? 0))
    }

    /// The same capture cut through the source (a file truncated in place): at every offset of
    /// the header and the first three records, and 1 byte either side of every record boundary.
    /// Never a crash; the reports of the complete records in order, then a damaged-tail error
    /// naming where the cut record starts.
    @Test func cutsOfARealCaptureThroughTheSource() async throws {
        let whole = try Self.realCapture()
        var starts: [Int] = [16]
        var decoder = BTSnoopDecoder()
        decoder.append(whole)
        while try decoder.next() != nil { starts.append(decoder.offset) }
        #expect(starts.last == whole.count)
        var cuts = Set(0...starts[3])
        for s in starts { cuts.formUnion([s - 1, s, s + 1].filter { $0 <= whole.count }) }
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/cut.log"
        try writeWholeFile(path, whole)
        let file = try #require(FileHandle(forWritingAtPath: path))
        defer { try? file.close() }
        var all: [String]?
        for cut in cuts.sorted(by: >) {
            try file.truncate(atOffset: UInt64(cut))
            let delivered = Delivered()
            var problem: BTSnoopError?
            do {
                let source = try CaptureSightingSource(path: path, logger: quietLogger)
                try await source.scan(
                    ScanRequest(
                        tickInterval: .seconds(1),
                        receive: { s, t in
                            delivered.batches.withLock { $0.append((s.map(\.address.description), t)) }
                            return .proceed
                        }, tick: { _ in .proceed }))
            } catch let error as CaptureError {
                problem = error.problem
            }
            let got = delivered.batches.withLock { $0.flatMap(\.addresses) }
            if all == nil { all = got }
            #expect(got == Array((all ?? []).prefix(got.count)), "cut at \(cut)")
            if cut >= 16, starts.contains(cut) {
                #expect(problem == nil, "cut at \(cut)")
            } else {
                #expect(problem?.isDamagedTail == true, "cut at \(cut)")
                #expect(problem?.offset == (cut < 16 ? cut : starts.last(where: { $0 <= cut })), "cut at \(cut)")
            }
        }
        #expect(all?.count == 12)
    }

    static let badFiles: [([UInt8], String, Bool)] = [
        (Array("hello world, no snoop".utf8), "not a btsnoop file", false),
        (HandmadeBTSnoop.header(datalink: 1003), "datalink HCI BCSP (1003) at byte 12 is not supported", false),
        (Array(HandmadeBTSnoop.header().prefix(8)), "truncated: the file ends after 8 of the 16 bytes", true),
        ([], "truncated: the file ends after 0 of the 16 bytes", true),
        // Neither format: a length of 0x7F454C46 ("\x7FELF") is no PacketLogger record's.
        ([0x7F, 0x45, 0x4C, 0x46] + [UInt8](repeating: 0, count: 40), "nor a PacketLogger (.pklg) file", false),
        // A PacketLogger record whose type is unknown (0x42): not recognised either.
        ([0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 1, 0x42, 0], "nor a PacketLogger (.pklg) file", false),
        // The start of a PacketLogger record, cut inside its header.
        ([0, 0, 0, 12, 0, 0], "truncated: record 1 at byte 0 needs 16 byte(s), the file has 6 left", true),
    ]

    @Test(arguments: badFiles)
    func badFilesFailAtOpenNamingTheFile(bytes: [UInt8], why: String, damaged: Bool) throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/bad.btsnoop"
        try writeWholeFile(path, bytes)
        do {
            _ = try CaptureSightingSource(path: path, logger: quietLogger)
            Issue.record("opened \(bytes.count) bad bytes")
        } catch let error as CaptureError {
            #expect(error.description.hasPrefix("\(path): "))
            #expect(error.description.contains(why), "\(error)")
            #expect(error.isDamagedTail == damaged)
        }
    }

    @Test func missingFileAndDirectory() throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        for (path, message) in [
            (dir + "/none.btsnoop", "no capture file \(dir)/none.btsnoop"),
            (dir, "\(dir) is a directory, not a capture file"),
        ] {
            do {
                _ = try CaptureSightingSource(path: path, logger: quietLogger)
                Issue.record("opened \(path)")
            } catch let error as TransportError {
                #expect(error.kind == .notFound)
                #expect(error.message == message)
            }
        }
    }

    /// Issue 23 item 8: a capture is read by the rules of a profile read. A FIFO is refused
    /// before it is opened (it blocked forever, and --duration never started); a device too.
    @Test func aFIFOOrDeviceIsRefusedWithoutBlocking() throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let fifo = dir + "/pipe.btsnoop"
        #expect(mkfifo(fifo, 0o644) == 0)
        let outcome = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                _ = try CaptureSightingSource(path: fifo, logger: quietLogger)
                outcome.withLock { $0 = "opened" }
            } catch {
                outcome.withLock { $0 = "\(error)" }
            }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 5) == .success, "opening a FIFO as a capture blocked")
        #expect(outcome.withLock { $0 }?.contains("is a FIFO (named pipe), not a regular file") == true)
        do {
            _ = try CaptureSightingSource(path: "/dev/null", logger: quietLogger)
            Issue.record("read /dev/null as a capture")
        } catch let error as TransportError {
            #expect(error.kind == .notFound)
            #expect(error.message.contains("is a character device"), "\(error)")
        }
    }

    /// Another user's link is not followed as root (it was, and a root-only file was read).
    @Test func aLinkOfAnotherUserIsNotFollowed() throws {
        try #require(geteuid() == 0, "planting another user's link needs root (CI runs as root)")
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        #expect(chmod(dir, 0o1777) == 0)
        let secret = dir + "/root-only.btsnoop"
        try writeWholeFile(secret, HandmadeBTSnoop.header())
        #expect(chmod(secret, 0o600) == 0)
        let link = dir + "/capture.btsnoop"
        #expect(symlink(secret, link) == 0)
        #expect(lchown(link, 65534, 65534) == 0)
        do {
            _ = try CaptureSightingSource(path: link, logger: quietLogger)
            Issue.record("followed nobody's link")
        } catch let error as TransportError {
            #expect(error.kind == .notFound)
            #expect(error.message.contains("symbolic link owned by uid 65534"), "\(error)")
        }
        // The user's own link (root's, here) is followed.
        let own = dir + "/mine.btsnoop"
        #expect(symlink(secret, own) == 0)
        _ = try CaptureSightingSource(path: own, logger: quietLogger)
    }

    @Test func readsWhatTheRecorderWrote() async throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/roundtrip.btsnoop"
        let recorder = try BTSnoopFileRecorder(path: path, logger: quietLogger) { 1_000_000 }
        recorder.record(Vectors.scanEnableCommand, direction: .sent)
        recorder.record(Vectors.scanEnableDisallowed, direction: .received)
        recorder.record(Vectors.report2, direction: .received)
        recorder.close()
        let delivered = try await Self.run(CaptureSightingSource(path: path, logger: quietLogger))
        #expect(delivered.batches.withLock { $0 }.map(\.addresses) == [["D1:02:03:04:05:06"]])
    }
}

/// Issue 40, hole 1: a capture never holds keys or pairing parameters.
@Suite struct BTSnoopKeyMaterialTests {
    @Test func theRecorderLeavesOutPacketsCarryingKeys() throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/capture.btsnoop"
        let recorder = try BTSnoopFileRecorder(path: path, logger: quietLogger) { 1_767_323_045_678_901 }
        let key: [UInt8] = [
            0x5E, 0xC4, 0xE7, 0x4B, 0x1D, 0x9A, 0x37, 0xC2, 0x88, 0x61, 0xF0, 0x0D, 0xB3, 0x2A, 0x7E, 0x95,
        ]
        let address: [UInt8] = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66]
        recorder.record(Vectors.resetCommand, direction: .sent)
        recorder.record(H4Packet(type: .event, body: [0x18, 23] + address + key + [4]), direction: .received)
        recorder.record(H4Packet(type: .command, body: [0x1A, 0x20, 18, 0x40, 0x00] + key), direction: .sent)
        recorder.record(
            H4Packet(type: .event, body: [0x3E, 13, 0x05, 0x40, 0x00] + Array(key.prefix(8)) + [0x12, 0x34]),
            direction: .received)
        recorder.record(Vectors.resetComplete, direction: .received)
        recorder.close()
        let bytes = try readWholeFile(path)
        #expect(recorder.withheldPackets == 3)
        // Header, then the two ordinary records only.
        #expect(bytes.count == 16 + (24 + 4) + (24 + 7))
        let keyPrefix = Array(key.prefix(8))
        let found = bytes.indices.contains { i in i + 8 <= bytes.count && Array(bytes[i..<i + 8]) == keyPrefix }
        #expect(!found)
    }
}
