import IBeaconTestSupport
import Testing

@testable import IBeaconCore

@Suite("H4 framing")
struct H4FramerTests {
    /// Packets as they appear on an H4 wire (type byte first). Command and events from Bumble's
    /// encoder (see HCICommandTests / HCIEventTests); ACL, SCO and ISO written from Core 5.4
    /// Vol 4 Part E §5.4.2–§5.4.5 with lopsided lengths.
    static let wire: [[UInt8]] = [
        [UInt8](hex: "010a200101")!,  // command: LE Set Advertising Enable, 1 parameter
        [UInt8](hex: "040e04010a200c")!,  // event: Command Complete, status Command Disallowed
        [UInt8](hex: "01030c00")!,  // command with no parameters
        // ACL: handle 0x0102 (flags in the top bits), 2-octet length 0x0003, payload
        [UInt8](hex: "0202010300aabbcc")!,
        // SCO: handle 0x0001, 1-octet length 2
        [UInt8](hex: "030100020102")!,
        // ISO: handle 0x0005, length 0x4003 with the top two bits as flags → 3 bytes
        [UInt8](hex: "0505000340010203")!,
        // LE Advertising Report with three reports (46 parameter bytes)
        [UInt8](
            hex: "043e2e020303010605040302c1090201061aff4c000215c50000f6e5d4c3b2a1007f04016655443322110505094142439c")!,
        // event with zero-length parameters (BlueZ stack internal, for the empty case)
        [UInt8](hex: "04fd00")!,
    ]

    static var expected: [H4Packet] {
        wire.map { H4Packet(type: H4PacketType(rawValue: $0[0]), body: Array($0.dropFirst())) }
    }

    static var stream: [UInt8] { wire.flatMap { $0 } }

    @Test func wholeStream() throws {
        var framer = H4Framer()
        #expect(try framer.push(Self.stream) == Self.expected)
        #expect(framer.pendingByteCount == 0)
    }

    @Test func byteByByte() throws {
        var framer = H4Framer()
        var out: [H4Packet] = []
        for byte in Self.stream { out += try framer.push([byte]) }
        #expect(out == Self.expected)
        #expect(framer.pendingByteCount == 0)
    }

    @Test(arguments: [1, 2, 3, 42, 0xC0FFEE] as [UInt64])
    func randomChunks(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        let stream = Array(repeating: Self.stream, count: 5).flatMap { $0 }
        var framer = H4Framer()
        var out: [H4Packet] = []
        var index = 0
        while index < stream.count {
            let n = Int.random(in: 0...17, using: &rng)
            let end = min(stream.count, index + n)
            out += try framer.push(stream[index..<end])
            index = end
        }
        #expect(out == Array(repeating: Self.expected, count: 5).flatMap { $0 })
        #expect(framer.pendingByteCount == 0)
    }

    @Test func partialPacketIsHeld() throws {
        var framer = H4Framer()
        #expect(try framer.push([0x04, 0x0E, 0x04, 0x01]).isEmpty)
        #expect(framer.pendingByteCount == 4)
        #expect(
            try framer.push([0x0A, 0x20, 0x0C]) == [H4Packet(type: .event, body: [0x0E, 0x04, 0x01, 0x0A, 0x20, 0x0C])])
    }

    @Test func garbageTypeByteThrowsAndStaysFailed() throws {
        var framer = H4Framer()
        // One good command, then 0xFF where a packet must start.
        do {
            _ = try framer.push([0x01, 0x03, 0x0C, 0x00, 0xFF, 0x01])
            Issue.record("no error")
        } catch {
            #expect(error == .unknownPacketType(0xFF, offset: 4))
        }
        #expect(throws: H4FramingError.self) { try framer.push([0x04, 0x10, 0x01, 0x00]) }

        var fresh = H4Framer()
        #expect(throws: H4FramingError.unknownPacketType(0x00, offset: 0)) { try fresh.push([0x00]) }
    }

    @Test func packetBytesRoundTrip() {
        for (wire, packet) in zip(Self.wire, Self.expected) { #expect(packet.bytes == wire) }
    }
}
