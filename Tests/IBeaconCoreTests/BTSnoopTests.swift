import IBeaconTestSupport
import Testing

@testable import IBeaconCore

@Suite("btsnoop codec")
struct BTSnoopTests {
    /// Written by Bumble 0.0.236's `bumble.snoop.BtSnooper` into a BytesIO, with
    /// `datetime.now` patched to return 2024-05-06 07:08:09.123456, 07:08:09.130001 and
    /// 07:08:10.000005 UTC, for three packets:
    ///   snoop(01 0a20 01 01, HOST_TO_CONTROLLER)       LE Set Advertising Enable
    ///   snoop(04 0e 04 01 0a20 0c, CONTROLLER_TO_HOST) Command Complete, Command Disallowed
    ///   snoop(02 0120 0500 0102030405, CONTROLLER_TO_HOST) ACL, handle 0x0001, PB 2
    static let bumbleFile =
        "6274736e6f6f7000" + "00000001" + "000003ea"  // "btsnoop\0", version 1, datalink 1002
        // original 5, included 5, flags 2 (sent, command), drops 0, timestamp, packet
        + "00000005" + "00000005" + "00000002" + "00000000" + "00e2f576ca82ca80" + "010a200101"
        // original 7, included 7, flags 3 (received, event)
        + "00000007" + "00000007" + "00000003" + "00000000" + "00e2f576ca82e411" + "040e04010a200c"
        // original 10, included 10, flags 1 (received, data)
        + "0000000a" + "0000000a" + "00000001" + "00000000" + "00e2f576ca902a85" + "02012005000102030405"

    /// The same instants as Unix microseconds, computed by Python's datetime arithmetic.
    static let unixMicros: [Int64] = [1_714_979_289_123_456, 1_714_979_289_130_001, 1_714_979_290_000_005]

    @Test func readsBumbleFile() throws {
        var reader = try BTSnoopReader(bytes: try #require([UInt8](hex: Self.bumbleFile)))
        #expect(reader.datalink == .h4)
        let records = try reader.records()
        #expect(records.count == 3)
        #expect(records.map(\.unixMicroseconds) == Self.unixMicros)
        #expect(records[0].packet == H4Packet(type: .command, body: [0x0A, 0x20, 0x01, 0x01]))
        #expect(records[0].direction == .sent)
        #expect(records[1].packet == H4Packet(type: .event, body: [0x0E, 0x04, 0x01, 0x0A, 0x20, 0x0C]))
        #expect(records[1].direction == .received)
        #expect(records[2].packet?.type == .acl)
        #expect(records[2].direction == .received)
        #expect(records[2].originalLength == 10)
        #expect(try HCIEvent.decode(try #require(records[1].packet).body).status == .commandDisallowed)
    }

    @Test func writesWhatBumbleWrites() throws {
        let packets: [(H4Packet, PacketDirection)] = [
            (H4Packet(type: .command, body: [0x0A, 0x20, 0x01, 0x01]), .sent),
            (H4Packet(type: .event, body: [0x0E, 0x04, 0x01, 0x0A, 0x20, 0x0C]), .received),
            (H4Packet(type: .acl, body: [0x01, 0x20, 0x05, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05]), .received),
        ]
        var file = BTSnoop.fileHeader()
        for ((packet, direction), micros) in zip(packets, Self.unixMicros) {
            file += BTSnoop.encodeRecord(
                packet: packet, direction: direction, timestampMicros: BTSnoop.timestamp(unixMicroseconds: micros))
        }
        #expect(file.hexString == Self.bumbleFile)
    }

    @Test func epochOffsetAgreesWithBumblesAnchor() {
        // Bumble counts from 2000-01-01 with delta 0x00E03AB44A676000; 2000-01-01 is Unix 946684800 s.
        #expect(BTSnoop.timestamp(unixMicroseconds: 946_684_800_000_000) == 0x00E0_3AB4_4A67_6000)
    }

    @Test func roundTrip() throws {
        let records = [
            BTSnoopRecord(
                packet: H4Packet(type: .command, body: [0x03, 0x0C, 0x00]), direction: .sent,
                timestampMicros: 0x0102_0304_0506_0708),
            BTSnoopRecord(
                packet: H4Packet(type: .event, body: [0x10, 0x01, 0x2A]), direction: .received, timestampMicros: 1),
            BTSnoopRecord(packet: H4Packet(type: .acl, body: []), direction: .sent, timestampMicros: -1),
        ]
        var file = BTSnoop.fileHeader()
        for r in records { file += BTSnoop.encodeRecord(r) }
        var reader = try BTSnoopReader(bytes: file)
        #expect(try reader.records() == records)
    }

    @Test func headerErrors() {
        #expect(throws: BTSnoopError.truncatedHeader(available: 3)) { try BTSnoopReader(bytes: [0x62, 0x74, 0x73]) }
        var bad = BTSnoop.fileHeader()
        bad[0] = 0x42
        #expect(throws: BTSnoopError.self) { try BTSnoopReader(bytes: bad) }
        var version = BTSnoop.fileHeader()
        version[11] = 2
        #expect(throws: BTSnoopError.unsupportedVersion(2)) { try BTSnoopReader(bytes: version) }
        #expect(throws: BTSnoopError.unsupportedDatalink(1003)) {
            try BTSnoopReader(bytes: BTSnoop.fileHeader(datalink: .bcsp))
        }
        #expect(throws: Never.self) { try BTSnoopReader(bytes: BTSnoop.fileHeader(datalink: .linuxMonitor)) }
        // Cut inside the header: truncated, whatever field the cut falls in (not "version").
        for cut in 0..<16 {
            #expect(throws: BTSnoopError.truncatedHeader(available: cut)) {
                try BTSnoopReader(bytes: Array(BTSnoop.fileHeader().prefix(cut)))
            }
        }
        // Not btsnoop, seen as soon as a byte differs, even in a short file.
        #expect(throws: BTSnoopError.badMagic(Array("P".utf8))) { try BTSnoopReader(bytes: Array("PK".utf8)) }
        #expect(throws: Never.self) { try BTSnoopReader(bytes: BTSnoop.fileHeader(datalink: .h1)) }
    }

    @Test func truncatedRecordsThrowAtEveryCut() throws {
        let file = try #require([UInt8](hex: Self.bumbleFile))
        // Record boundaries: 16, 16+24+5, +24+7, +24+10.
        let boundaries: Set<Int> = [16, 45, 76, 110]
        for cut in 16..<file.count where !boundaries.contains(cut) {
            var reader = try BTSnoopReader(bytes: Array(file.prefix(cut)))
            do {
                _ = try reader.records()
                Issue.record("cut at \(cut) read without error")
            } catch {
                guard case .truncatedRecord = error else {
                    Issue.record("cut at \(cut): \(error)")
                    continue
                }
            }
        }
        for cut in boundaries {
            var reader = try BTSnoopReader(bytes: Array(file.prefix(cut)))
            #expect(try reader.records().count == [16: 0, 45: 1, 76: 2, 110: 3][cut])
        }
    }

    @Test func inconsistentRecordsThrow() throws {
        // included length 6 > original length 5
        var file = BTSnoop.fileHeader()
        file +=
            [0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 2, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 8) + [1, 2, 3, 4, 5, 6]
        var reader = try BTSnoopReader(bytes: file)
        #expect(throws: BTSnoopError.self) { try reader.next() }
        // An included length beyond the largest HCI packet is damage, not a 4 GiB packet to buffer.
        var huge = BTSnoop.fileHeader()
        huge += [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xF0] + [UInt8](repeating: 0, count: 16)
        var hugeReader = try BTSnoopReader(bytes: huge)
        #expect(throws: BTSnoopError.self) { try hugeReader.next() }
        // An empty H4 record (no type byte) is a record without a packet, and reading goes on.
        var empty = BTSnoop.fileHeader()
        empty += [UInt8](repeating: 0, count: 24)
        empty += BTSnoop.encodeRecord(
            packet: H4Packet(type: .event, body: [0x10, 0x01, 0x2A]), direction: .received, timestampMicros: 0)
        var emptyReader = try BTSnoopReader(bytes: empty)
        let records = try emptyReader.records()
        #expect(records.map(\.packet) == [nil, H4Packet(type: .event, body: [0x10, 0x01, 0x2A])])
    }

    @Test func h1RecordsGetTheirTypeFromFlags() throws {
        var file = BTSnoop.fileHeader(datalink: .h1)
        // sent command (flags 2): 03 0c 00
        file +=
            [0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 8) + [0x03, 0x0C, 0x00]
        // received event (flags 3): 10 01 2a
        file +=
            [0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 8) + [0x10, 0x01, 0x2A]
        // received data (flags 1)
        file += [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 8) + [0x99]
        var reader = try BTSnoopReader(bytes: file)
        let types = try reader.records().map(\.packet?.type)
        #expect(types == [.command, .event, .acl])
    }

    /// A Linux monitor (2001) file as `btmon -w` writes it (BlueZ src/shared/btsnoop.c
    /// btsnoop_write_hci: flags = index << 16 | opcode), written by hand here.
    @Test func monitorRecordsCarryIndexAndOpcode() throws {
        func record(_ data: [UInt8], index: UInt32, opcode: UInt32) -> [UInt8] {
            BTSnoop.encodeRecord(data: data, flags: index << 16 | opcode, timestampMicros: 5)
        }
        var file = BTSnoop.fileHeader(datalink: .linuxMonitor)
        file += record([0x00, 0x01, 1, 2, 3, 4, 5, 6] + Array("hci1\0\0\0\0".utf8), index: 1, opcode: 0)  // New Index
        file += record([0x03, 0x0C, 0x00], index: 1, opcode: 2)  // command on hci1
        file += record([0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00], index: 1, opcode: 3)  // event on hci1
        file += record([0x3E, 0x03, 0x02, 0x00, 0x00], index: 0, opcode: 3)  // event on hci0
        file += record(Array("note".utf8), index: 0xFFFF, opcode: 12)  // system note, no controller
        var reader = try BTSnoopReader(bytes: file)
        let records = try reader.records()
        #expect(records.map(\.controllerIndex) == [1, 1, 1, 0, 0xFFFF])
        #expect(records.map(\.monitorOpcode) == [.newIndex, .commandPacket, .eventPacket, .eventPacket, .systemNote])
        #expect(records.map(\.packet?.type) == [nil, .command, .event, .event, nil])
        #expect(records.map(\.direction) == [.sent, .sent, .received, .received, .sent])
        #expect(records[3].packet == H4Packet(type: .event, body: [0x3E, 0x03, 0x02, 0x00, 0x00]))
    }

    /// What the codec writes in each datalink, it reads back the same (packet, direction, time,
    /// and the controller index in 2001).
    @Test(arguments: [BTSnoopDatalink.h1, .h4, .linuxMonitor])
    func roundTripsEachDatalink(datalink: BTSnoopDatalink) throws {
        let packets: [(H4Packet, PacketDirection)] = [
            (H4Packet(type: .command, body: [0x0C, 0x20, 0x02, 0x01, 0x00]), .sent),
            (H4Packet(type: .event, body: [0x0E, 0x04, 0x01, 0x0C, 0x20, 0x00]), .received),
            (H4Packet(type: .event, body: [0x3E, 0x03, 0x02, 0x00, 0x00]), .received),
        ]
        var file = BTSnoop.fileHeader(datalink: datalink)
        for (k, (packet, direction)) in packets.enumerated() {
            file += try #require(
                BTSnoop.encodeRecord(
                    packet: packet, direction: direction, timestampMicros: 1000 + Int64(k), datalink: datalink,
                    controllerIndex: 3))
        }
        var reader = try BTSnoopReader(bytes: file)
        #expect(reader.datalink == datalink)
        let records = try reader.records()
        #expect(records.map(\.packet) == packets.map(\.0))
        #expect(records.map(\.direction) == packets.map(\.1))
        #expect(records.map(\.timestampMicros) == [1000, 1001, 1002])
        #expect(records.map(\.controllerIndex) == Array(repeating: datalink == .linuxMonitor ? 3 : nil, count: 3))
    }

    /// Fed whole, one byte at a time, and in random chunks, the decoder returns the same records,
    /// and it never holds more than one record plus the last chunk.
    @Test func streamingAnyChunkingGivesTheSameRecords() throws {
        let file = try #require([UInt8](hex: Self.bumbleFile))
        var whole = try BTSnoopReader(bytes: file)
        let expected = try whole.records()
        var rng = SplitMix64(seed: 7)
        for chunking in 0..<3 {
            var decoder = BTSnoopDecoder()
            var records: [BTSnoopRecord] = []
            var i = 0
            while i < file.count {
                let n = chunking == 0 ? file.count : chunking == 1 ? 1 : Int(rng.next() % 9) + 1
                decoder.append(file[i..<min(file.count, i + n)])
                i += n
                while let r = try decoder.next() { records.append(r) }
                #expect(decoder.pendingByteCount <= BTSnoop.recordHeaderLength + 10 + n)
            }
            try decoder.finish()
            #expect(records == expected)
        }
    }

    /// Found by the fuzzer: fed one byte at a time, a file that starts like the magic and then
    /// differs failed with fewer "first bytes" than fed whole. The error names the bytes up to
    /// the first that differs, however the bytes arrive.
    @Test func badMagicIsTheSameWholeOrChunked() throws {
        let input = try #require([UInt8](hex: "6201000003ea7000000000010000 03ea"))
        var whole = BTSnoopDecoder()
        whole.append(input)
        #expect(throws: BTSnoopError.badMagic([0x62, 0x01])) { try whole.next() }
        var chunked = BTSnoopDecoder()
        var error: BTSnoopError?
        for b in input where error == nil {
            chunked.append([b])
            do { _ = try chunked.next() } catch let e { error = e }
        }
        #expect(error == .badMagic([0x62, 0x01]))
    }

    /// Cut at every offset: every complete record before the cut is returned, then the error
    /// says truncated and names where the cut record starts.
    @Test func everyCutReadsTheCompleteRecordsThenNamesTheOffset() throws {
        let file = try #require([UInt8](hex: Self.bumbleFile))
        let starts = [16, 45, 76, 110]
        for cut in 0...file.count {
            var decoder = BTSnoopDecoder()
            decoder.append(file.prefix(cut))
            var count = 0
            while try decoder.next() != nil { count += 1 }
            let complete = starts.filter { $0 <= cut }.count - 1
            #expect(count == max(0, complete), "cut at \(cut)")
            do {
                try decoder.finish()
                #expect(starts.contains(cut), "cut at \(cut) finished cleanly")
            } catch {
                #expect(error.isDamagedTail)
                #expect(error.description.hasPrefix("truncated"), "cut at \(cut): \(error)")
                if cut < 16 {
                    #expect(error == .truncatedHeader(available: cut))
                } else {
                    #expect(error.offset == starts[complete], "cut at \(cut): \(error)")
                }
            }
        }
    }
}
