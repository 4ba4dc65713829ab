import Foundation
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Synchronization
import Testing

@Suite struct BTSnoopRecorderTests {
    /// 2026-01-02 03:04:05.678901 UTC in microseconds since 1970.
    static let unixTime: Int64 = 1_767_323_045_678_901

    @Test func writesHeaderAndRecordsLikeBumble() throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/capture.btsnoop"
        let clock = Mutex(Self.unixTime)
        let recorder = try BTSnoopFileRecorder(path: path, logger: testLogger) {
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
        let error = transportError {
            _ = try BTSnoopFileRecorder(path: "/nonexistent-ibeacon-dir/x.btsnoop", logger: testLogger)
        }
        #expect(error?.kind == .notFound)
    }

    /// tshark (Wireshark's decoder, an independent reader) opens what we write.
    @Test func tsharkReadsTheCapture() async throws {
        let tshark = "/usr/bin/tshark"
        try #require(FileManager.default.isExecutableFile(atPath: tshark), "tshark is required for this test")
        let dir = try makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/scan.btsnoop"
        let recorder = try BTSnoopFileRecorder(path: path, logger: testLogger)
        // Recorded through a RecordingTransport around a replay, as the CLI's --record does.
        let replay = BTSnoopReplayTransport(
            name: "test", records: [(Vectors.report1, .received), (Vectors.report2, .received)], logger: testLogger)
        let transport = RecordingTransport(wrapping: replay, recorder: recorder)
        let dog = watchdog(transport)
        defer { dog.cancel() }
        // Like a host, wait for each reply before the next command.
        var packets = transport.incoming.makeAsyncIterator()
        try await transport.send(Vectors.resetCommand)
        #expect(try await packets.next()?.body.first == 0x0E)
        try await transport.send(Vectors.scanEnableCommand)
        var received: [H4Packet] = []
        while let packet = try await packets.next() { received.append(packet) }
        #expect(received.count == 3)
        recorder.close()

        let process = Process()
        process.executableURL = URL(fileURLWithPath: tshark)
        process.arguments = ["-r", path, "-T", "fields", "-e", "bthci_cmd.opcode", "-e", "bthci_evt.code"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        // Sent Reset, its (synthetic) Command Complete, sent LE Set Scan Enable, its Command
        // Complete, then the two LE Meta advertising reports.
        #expect(lines == ["0x0c03\t", "\t0x0e", "0x200c\t", "\t0x0e", "\t0x3e", "\t0x3e"])
    }
}

@Suite struct ReplayTests {
    /// A capture written byte by byte here (not by the module's writer): flags 2 = sent
    /// command, 3 = received event.
    static func capture() -> [UInt8] {
        HandmadeBTSnoop.header()
            + HandmadeBTSnoop.record(Vectors.resetCommand.bytes, flags: 2)
            + HandmadeBTSnoop.record(Vectors.resetComplete.bytes, flags: 3)
            + HandmadeBTSnoop.record([0x01, 0x0B, 0x20, 0x00], flags: 2)  // LE Set Scan Parameters
            + HandmadeBTSnoop.record(Vectors.scanParametersStatus.bytes, flags: 3)
            + HandmadeBTSnoop.record(Vectors.report1.bytes, flags: 3)
            // Number Of Completed Packets (0x13): neither a reply nor a report.
            + HandmadeBTSnoop.record([0x04, 0x13, 0x05, 0x01, 0x40, 0x00, 0x01, 0x00], flags: 3)
            + HandmadeBTSnoop.record(Vectors.scanEnableDisallowed.bytes, flags: 3)
            + HandmadeBTSnoop.record(Vectors.report2.bytes, flags: 3)
            + HandmadeBTSnoop.record(Vectors.scanEnableComplete.bytes, flags: 3)
            // A sent packet that looks like an LE Meta event must not be replayed.
            + HandmadeBTSnoop.record(Vectors.report1.bytes, flags: 2)
    }

    @Test(arguments: [false, true])
    func answersCommandsThenStreamsReports(extended: Bool) async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/scan.btsnoop"
        try writeWholeFile(path, Self.capture())
        let transport = try openTransport(DeviceSpec(parsing: "btsnoop:\(path)"), logger: testLogger)
        #expect(transport.name == "btsnoop:\(path)")
        let dog = watchdog(transport)
        defer { dog.cancel() }
        var packets = transport.incoming.makeAsyncIterator()

        try await transport.send(Vectors.resetCommand)
        #expect(try await packets.next() == Vectors.resetComplete)
        // Not in the capture: synthetic Command Complete (0E, length 4, 1 packet, 0x2001, status 0).
        try await transport.send(H4Packet(type: .command, body: [0x01, 0x20, 0x08, 0, 0, 0, 0, 0, 0, 0, 0]))
        #expect(try await packets.next() == H4Packet(type: .event, body: [0x0E, 0x04, 0x01, 0x01, 0x20, 0x00]))
        // Recorded Command Status.
        try await transport.send(H4Packet(type: .command, body: [0x0B, 0x20, 0x00]))
        #expect(try await packets.next() == Vectors.scanParametersStatus)
        // A second Reset: the recorded reply is used up, so a synthetic one.
        try await transport.send(Vectors.resetCommand)
        #expect(try await packets.next() == H4Packet(type: .event, body: [0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00]))
        // Disabling the scan answers with the first recorded 0x200C reply and streams nothing.
        try await transport.send(Vectors.scanDisableCommand)
        #expect(try await packets.next() == Vectors.scanEnableDisallowed)

        if extended {
            try await transport.send(Vectors.extendedScanEnableCommand)
            #expect(
                try await packets.next() == H4Packet(type: .event, body: [0x0E, 0x04, 0x01, 0x42, 0x20, 0x00]))
        } else {
            try await transport.send(Vectors.scanEnableCommand)
            #expect(try await packets.next() == Vectors.scanEnableComplete)
        }
        #expect(try await packets.next() == Vectors.report1)
        #expect(try await packets.next() == Vectors.report2)
        // The end of the capture ends the scan: a normal finish, not an error.
        #expect(try await packets.next() == nil)
        do {
            try await transport.send(Vectors.resetCommand)
            Issue.record("send after the replay ended succeeded")
        } catch let error as TransportError {
            #expect(error.kind == .disconnected)
        }
    }

    @Test func missingFile() {
        let error = transportError {
            _ = try BTSnoopReplayTransport(path: "/nonexistent/scan.btsnoop", logger: testLogger)
        }
        #expect(error?.kind == .notFound)
        #expect(error?.message == "no capture file /nonexistent/scan.btsnoop")
    }

    static let badFiles: [([UInt8], String)] = [
        // Not a btsnoop file at all.
        (Array("hello world, no snoop".utf8), "missing the 'btsnoop' signature at offset 0"),
        // Datalink 1003 (BCSP) is not something we can replay.
        (
            HandmadeBTSnoop.header(datalink: 1003),
            "unsupported datalink 1003 (expected 1001, 1002 or 2001) at offset 12"
        ),
        // A record header cut short after 10 bytes.
        (
            HandmadeBTSnoop.header() + Array(HandmadeBTSnoop.record([0x01], flags: 2).prefix(10)),
            "truncated record header (10 byte(s) left) at offset 16"
        ),
        // The second record's data cut short.
        (
            HandmadeBTSnoop.header() + HandmadeBTSnoop.record(Vectors.resetCommand.bytes, flags: 2)
                + HandmadeBTSnoop.record(Vectors.resetComplete.bytes, flags: 3).dropLast(2),
            "record of 7 byte(s) is truncated at offset 44"
        ),
    ]

    @Test(arguments: badFiles)
    func badFileNamesFileAndOffset(bytes: [UInt8], why: String) throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/bad.btsnoop"
        try writeWholeFile(path, bytes)
        let error = transportError { _ = try BTSnoopReplayTransport(path: path, logger: testLogger) }
        #expect(error?.message == "\(path) is not a usable btsnoop capture: \(why)")
    }

    @Test func readsWhatTheRecorderWrote() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/roundtrip.btsnoop"
        let recorder = try BTSnoopFileRecorder(path: path, logger: testLogger)
        recorder.record(Vectors.scanEnableCommand, direction: .sent)
        recorder.record(Vectors.scanEnableDisallowed, direction: .received)
        recorder.record(Vectors.report2, direction: .received)
        recorder.close()
        let transport = try BTSnoopReplayTransport(path: path, logger: testLogger)
        var packets = transport.incoming.makeAsyncIterator()
        try await transport.send(Vectors.scanEnableCommand)
        #expect(try await packets.next() == Vectors.scanEnableDisallowed)
        #expect(try await packets.next() == Vectors.report2)
        #expect(try await packets.next() == nil)
    }
}

@Suite struct ReplayTimeTests {
    /// A replay gives each report its capture time, counted from the scan-parameters command
    /// (where a live scan's clock starts), and the time the recording ended.
    @Test func reportTimesAreCaptureTimesSinceTheScanParameters() {
        // LE Set Scan Parameters (opcode 0x200B, little endian), passive, 10 ms interval/window.
        let parameters = H4Packet(type: .command, body: [0x0B, 0x20, 0x07, 0x00, 0x10, 0x00, 0x10, 0x00, 0x00, 0x00])
        let replay = BTSnoopReplayTransport(
            name: "test",
            records: [
                (Vectors.resetCommand, .sent), (parameters, .sent), (Vectors.scanEnableCommand, .sent),
                (Vectors.report1, .received), (Vectors.report2, .received), (Vectors.scanDisableCommand, .sent),
            ],
            timestamps: [1_000_000, 3_000_000, 3_001_000, 3_250_000, 4_500_000, 13_000_000], logger: testLogger)
        #expect(replay.reportTimes == [0.25, 1.5])
        #expect(replay.endTime == 10)
        // Without timestamps there is no capture time: the live clock is used.
        let untimed = BTSnoopReplayTransport(
            name: "test", records: [(Vectors.report1, .received)], logger: testLogger)
        #expect(untimed.reportTimes.isEmpty && untimed.endTime == nil)
    }
}
