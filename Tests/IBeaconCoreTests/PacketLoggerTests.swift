import Testing

@testable import IBeaconCore

@Suite("PacketLogger codec")
struct PacketLoggerTests {
    /// Four records of a real big-endian file written by BTstack (tests/e2e/data/pklg,
    /// Matheus-Garbelini+esp32_bluetooth_classic_sniffer__hci_dump.pklg, records 7, 8, 10, 12),
    /// with what tshark 4.0.17 shows for them (`-T fields -e frame.time_epoch -e packetlogger.type`).
    static let btstackRecords =
        "0000000c612e16360007b64201600101"  // event 60 01 01 at 1630410294.505410
        + "0000000c612e16360007b64e00030c00"  // command 03 0c 00 (Reset) at .505422
        + "0000000b612e16360007b663016e00"  // event 6e 00 at .505443
        + "0000000f612e16360007cb6d010e0405030c00"  // Command Complete (Reset) at .510829
    static let btstackMicros: [Int64] = [
        1_630_410_294_505_410, 1_630_410_294_505_422, 1_630_410_294_505_443, 1_630_410_294_510_829,
    ]

    /// Two notes of an iPhone's own little-endian trace (…tests_bt2.pklg, records 4 and 5):
    /// "Transport: PCIe" and "Address: 80:96:98:42:54:B0" (the phone's).
    static let iphoneNotes =
        "18000000169a636ae8eb0300fc5472616e73706f72743a2050434965"
        + "23000000169a636ae8eb0300fc416464726573733a2038303a39363a39383a34323a35343a4230"

    static func decodeAll(_ bytes: [UInt8], chunk: Int = .max) -> ([BTSnoopRecord], BTSnoopError?) {
        var decoder = PacketLoggerDecoder()
        var records: [BTSnoopRecord] = []
        var i = 0
        do {
            repeat {
                let end = min(bytes.count, i + min(chunk, bytes.count))
                decoder.append(bytes[i..<end])
                i = end
                while let record = try decoder.next() { records.append(record) }
            } while i < bytes.count
            try decoder.finish()
            return (records, nil)
        } catch {
            return (records, error)
        }
    }

    @Test func readsBTstackRecordsAsTsharkShows() throws {
        let bytes = try #require([UInt8](hex: Self.btstackRecords))
        let (records, error) = Self.decodeAll(bytes)
        #expect(error == nil)
        #expect(records.map(\.unixMicroseconds) == Self.btstackMicros)
        #expect(records.map { $0.packet?.type } == [.event, .command, .event, .event])
        #expect(records.map(\.direction) == [.received, .sent, .received, .received])
        #expect(records[1].packet?.body == [0x03, 0x0C, 0x00])
        #expect(try HCIEvent.decode(try #require(records[3].packet).body).status == .success)
        #expect(PacketLogger.recognize(bytes) == .yes(bigEndian: true))
    }

    @Test func iphoneNotesAreSkippedAndItsByteOrderIsLittle() throws {
        let event = H4Packet(type: .event, body: [0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00])
        let bytes =
            try #require([UInt8](hex: Self.iphoneNotes))
            + (PacketLogger.encodeRecord(
                packet: event, direction: .received, unixMicroseconds: 1_784_912_406_257_001, bigEndian: false) ?? [])
        #expect(PacketLogger.recognize(bytes) == .yes(bigEndian: false))
        var decoder = PacketLoggerDecoder()
        decoder.append(bytes)
        var records: [BTSnoopRecord] = []
        while let record = try decoder.next() { records.append(record) }
        try decoder.finish()
        #expect(decoder.bigEndian == false)
        #expect(records.count == 3 && decoder.otherRecords == 2)
        #expect(records[0].packet == nil && records[1].packet == nil)
        // 0x6a639a16 s and 0x0003ebe8 µs, little-endian: 2026-07-24, as tshark shows.
        #expect(records[0].unixMicroseconds == 1_784_912_406_257_000)
        #expect(records[2].packet == event && records[2].unixMicroseconds == 1_784_912_406_257_001)
    }

    @Test(arguments: [true, false])
    func encodedRecordsReadBack(bigEndian: Bool) throws {
        let packets: [(H4Packet, PacketDirection)] = [
            (H4Packet(type: .command, body: [0x0C, 0x20, 0x02, 0x01, 0x00]), .sent),
            (H4Packet(type: .event, body: [0x3E, 0x03, 0x02, 0x01, 0x00]), .received),
            (H4Packet(type: .acl, body: [0x01, 0x20, 0x00, 0x00]), .sent),
            (H4Packet(type: .acl, body: [0x01, 0x20, 0x01, 0x00, 0x09]), .received),
            (H4Packet(type: .sco, body: [0x01, 0x00, 0x00]), .sent),
            (H4Packet(type: .sco, body: [0x01, 0x00, 0x00]), .received),
        ]
        var bytes: [UInt8] = []
        for (k, (packet, direction)) in packets.enumerated() {
            bytes += try #require(
                PacketLogger.encodeRecord(
                    packet: packet, direction: direction, unixMicroseconds: 1_700_000_000_999_999 + Int64(k),
                    bigEndian: bigEndian))
        }
        bytes += PacketLogger.encodeRecord(
            type: .note, data: Array("hello".utf8), unixMicroseconds: 0, bigEndian: bigEndian)
        let (records, error) = Self.decodeAll(bytes)
        #expect(error == nil)
        #expect(records.prefix(6).map { $0.packet } == packets.map { $0.0 })
        #expect(records.prefix(6).map(\.direction) == packets.map { $0.1 })
        #expect(records[1].unixMicroseconds == 1_700_000_001_000_000)
        #expect(records.count == 7 && records[6].packet == nil)
        #expect(
            PacketLogger.encodeRecord(packet: H4Packet(type: .iso, body: []), direction: .sent, unixMicroseconds: 0)
                == nil)
    }

    @Test func recognitionFollowsWireshark() {
        let be = PacketLogger.encodeRecord(type: .hciEvent, data: [0x0E], unixMicroseconds: 5, bigEndian: true)
        let le = PacketLogger.encodeRecord(type: .hciEvent, data: [0x0E], unixMicroseconds: 5, bigEndian: false)
        #expect(PacketLogger.recognize(be) == .yes(bigEndian: true))
        #expect(PacketLogger.recognize(le) == .yes(bigEndian: false))
        #expect(PacketLogger.recognize(be.prefix(12)) == .needMore)
        #expect(PacketLogger.recognize(BTSnoop.fileHeader()) == .no)
        // An unknown type, microseconds of a million, a length of 7 or 65536: not PacketLogger.
        #expect(PacketLogger.recognize([0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 1, 0x42, 0]) == .no)
        #expect(PacketLogger.recognize([0, 0, 0, 9, 0, 0, 0, 1, 0, 0x0F, 0x42, 0x40, 0x01]) == .no)
        #expect(PacketLogger.recognize([0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 1, 0x01]) == .no)
        #expect(PacketLogger.recognize([0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0x01]) == .no)
        // A record of nothing but its time stamp (length 8) is one.
        #expect(PacketLogger.recognize([0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 1]) == .yes(bigEndian: true))
    }

    @Test func inconsistentLengthsThrowNamingTheRecord() throws {
        let good = PacketLogger.encodeRecord(type: .hciEvent, data: [0x0E, 0x00], unixMicroseconds: 1)
        for (length, words) in [(UInt32(7), "less than the 8 bytes"), (0xFFFF_FFF0, "more than the largest")] {
            var w = ByteWriter()
            w.uint32BE(length)
            w.uint64LE(0)
            let (records, error) = Self.decodeAll(good + w.bytes + [0x01])
            #expect(records.count == 1)
            guard case .invalidRecord(let index, let offset, let reason) = error else {
                Issue.record("expected invalidRecord, got \(String(describing: error))")
                continue
            }
            #expect(index == 1 && offset == good.count && reason.contains(words))
            #expect(error?.isDamagedTail == true)
        }
    }

    /// Every cut of the BTstack records: the complete records before it, then `truncatedRecord`
    /// at the offset of the cut one; never a trap, and the same in chunks of any size.
    @Test func everyCutAndEveryChunkingAgree() throws {
        let bytes = try #require([UInt8](hex: Self.btstackRecords))
        let whole = Self.decodeAll(bytes)
        let ends = [16, 32, 47, 66]
        for cut in 0..<bytes.count {
            let (records, error) = Self.decodeAll(Array(bytes[..<cut]))
            let complete = ends.filter { $0 <= cut }
            #expect(records == Array(whole.0.prefix(complete.count)), "cut \(cut)")
            if complete.last == cut || cut == 0 {
                #expect(error == nil, "cut \(cut)")
            } else {
                #expect(error?.offset == (complete.last ?? 0), "cut \(cut)")
                #expect(error?.isDamagedTail == true, "cut \(cut)")
            }
            for chunk in 1...13 {
                let chunked = Self.decodeAll(Array(bytes[..<cut]), chunk: chunk)
                #expect(chunked.0 == records && chunked.1 == error, "cut \(cut) chunk \(chunk)")
            }
        }
    }

    @Test func captureDecoderTellsTheFormatsApart() throws {
        let pklg = try #require([UInt8](hex: Self.btstackRecords))
        let snoop = try #require([UInt8](hex: BTSnoopTests.bumbleFile))
        func read(_ bytes: [UInt8], chunk: Int) -> (CaptureFormat?, Int, BTSnoopError?) {
            var decoder = CaptureDecoder()
            var count = 0
            var i = 0
            do {
                while i < bytes.count {
                    decoder.append(bytes[i..<min(bytes.count, i + chunk)])
                    i += chunk
                    while try decoder.next() != nil { count += 1 }
                }
                try decoder.finish()
                return (decoder.format, count, nil)
            } catch {
                return (decoder.format, count, error)
            }
        }
        for chunk in [1, 3, 7, 1000] {
            #expect(read(pklg, chunk: chunk) == (.packetLogger(bigEndian: true), 4, nil))
            #expect(read(snoop, chunk: chunk) == (.btsnoop(.h4), 3, nil))
            let junk = read(Array("PK\u{3}\u{4} a zip file".utf8), chunk: chunk)
            #expect(junk.0 == nil && junk.1 == 0)
            // The same error however the bytes arrive (the fuzzer's first find: "bts" then junk).
            for bytes in [
                Array("PK\u{3}\u{4} a zip file".utf8), Array("bts".utf8) + [UInt8](repeating: 0xEC, count: 40),
            ] {
                #expect(read(bytes, chunk: chunk) == read(bytes, chunk: bytes.count))
            }
            guard case .unknownFormat = junk.2 else {
                Issue.record("junk: \(String(describing: junk.2))")
                continue
            }
        }
        #expect(read([], chunk: 1).2 == .truncatedHeader(available: 0))
        #expect(read(Array(snoop.prefix(9)), chunk: 1).2 == .truncatedHeader(available: 9))
        #expect(read(Array(pklg.prefix(3)), chunk: 1).2?.isDamagedTail == true)
        #expect(CaptureFormat.packetLogger(bigEndian: false).receiverKind == "iphone-packetlogger")
        #expect(CaptureFormat.btsnoop(.h4).receiverKind == "android-btsnoop")
        #expect(CaptureFormat.btsnoop(.linuxMonitor).receiverKind == "btmon")
    }
}
