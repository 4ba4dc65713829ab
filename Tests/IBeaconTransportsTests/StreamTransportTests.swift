import IBeaconCore
import IBeaconHost
import IBeaconTestSupport
import IBeaconTransports
import Testing

/// Three packets written split and merged across writes arrive whole and in order; commands
/// reach the peer byte for byte, and concurrent sends never interleave.
private func exchangePackets(_ transport: any HCITransport, peer: Peer) async throws {
    let dog = watchdog(transport)
    defer { dog.cancel() }
    var packets = transport.incoming.makeAsyncIterator()
    let wire = Vectors.resetComplete.bytes + Vectors.scanEnableComplete.bytes + Vectors.report1.bytes
    // Split inside the first header; then the rest of packet 1, all of packet 2 and the start
    // of packet 3 in one write; then packet 3's remainder a byte at a time, then all the rest.
    try peer.write(Array(wire[0..<2]))
    try await Task.sleep(for: .milliseconds(20))
    try peer.write(Array(wire[2..<20]))
    try await Task.sleep(for: .milliseconds(20))
    for i in 20..<24 {
        try peer.write([wire[i]])
        try await Task.sleep(for: .milliseconds(5))
    }
    try peer.write(Array(wire[24...]))
    #expect(try await packets.next() == Vectors.resetComplete)
    #expect(try await packets.next() == Vectors.scanEnableComplete)
    #expect(try await packets.next() == Vectors.report1)

    try await transport.send(Vectors.resetCommand)
    #expect(try peer.read(4) == [0x01, 0x03, 0x0C, 0x00])  // H4 command, opcode 0x0C03, length 0

    let count = 40
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<count {
            group.addTask { try await transport.send(Vectors.scanEnableCommand) }
        }
        try await group.waitForAll()
    }
    var framer = H4Framer()
    let received = try framer.push(try peer.read(count * Vectors.scanEnableCommand.bytes.count))
    #expect(received == Array(repeating: Vectors.scanEnableCommand, count: count))
    #expect(framer.pendingByteCount == 0)

    // The peer going away finishes the stream with .disconnected.
    peer.close()
    do {
        while let packet = try await packets.next() { Issue.record("unexpected packet \(packet)") }
        Issue.record("the stream finished without an error after the peer closed")
    } catch let error as TransportError {
        #expect(error.kind == .disconnected, "\(error)")
    }
    transport.close()
    transport.close()  // idempotent
}

/// Bytes that are not H4 finish the stream with the framer's message.
private func rejectGarbage(_ transport: any HCITransport, peer: Peer) async throws {
    let dog = watchdog(transport)
    defer { dog.cancel() }
    var packets = transport.incoming.makeAsyncIterator()
    // Received in a read of its own: H4Framer.push drops the packets of a chunk that
    // also holds garbage, so the good packet goes first.
    try peer.write(Vectors.resetComplete.bytes)
    #expect(try await packets.next() == Vectors.resetComplete)
    try peer.write([0xFF, 0x00])
    do {
        _ = try await packets.next()
        Issue.record("garbage did not fail the stream")
    } catch let error as TransportError {
        #expect(error.kind == .io)
        #expect(error.message.contains("H4 stream out of sync: byte 0xff at offset 7"), "\(error)")
    }
    transport.close()
}

/// `close()` finishes the stream normally and later sends fail.
private func closeEndsCleanly(_ transport: any HCITransport) async throws {
    let dog = watchdog(transport)
    defer { dog.cancel() }
    var packets = transport.incoming.makeAsyncIterator()
    transport.close()
    #expect(try await packets.next() == nil)
    do {
        try await transport.send(Vectors.resetCommand)
        Issue.record("send after close succeeded")
    } catch let error as TransportError {
        #expect(error.kind == .disconnected)
    }
}

@Suite struct TCPTransportTests {
    @Test func exchangesPacketsWithALoopbackPeer() async throws {
        let listener = try LoopbackListener()
        defer { listener.close() }
        let transport = try openTransport(DeviceSpec(parsing: "tcp:127.0.0.1:\(listener.port)"), logger: quietLogger)
        #expect(transport.name == "tcp:127.0.0.1:\(listener.port)")
        let peer = try listener.accept()
        try await exchangePackets(transport, peer: peer)
    }

    @Test func garbageFailsTheStream() async throws {
        let listener = try LoopbackListener()
        defer { listener.close() }
        let transport = try H4StreamTransport.connectTCP(host: "127.0.0.1", port: listener.port, logger: quietLogger)
        let peer = try listener.accept()
        defer { peer.close() }
        try await rejectGarbage(transport, peer: peer)
    }

    @Test func closeFinishesTheStream() async throws {
        let listener = try LoopbackListener()
        defer { listener.close() }
        let transport = try H4StreamTransport.connectTCP(host: "localhost", port: listener.port, logger: quietLogger)
        let peer = try listener.accept()
        defer { peer.close() }
        try await closeEndsCleanly(transport)
        // The peer sees the connection end.
        #expect(throws: TestFailure.self) { try peer.read(1, timeout: 2) }
    }

    @Test func refusedConnectionNamesThePort() throws {
        // A port that was just listening and is now closed.
        let listener = try LoopbackListener()
        let port = listener.port
        listener.close()
        let error = transportError {
            _ = try H4StreamTransport.connectTCP(host: "127.0.0.1", port: port, logger: quietLogger)
        }
        #expect(error?.kind == .connectionRefused)
        #expect(error?.message == "nothing is listening on 127.0.0.1:\(port)")
        #expect(error?.hint != nil)
    }

    @Test func unresolvableHost() throws {
        // .invalid never resolves (RFC 6761 §6.4).
        let error = transportError {
            _ = try H4StreamTransport.connectTCP(host: "no-such-host.invalid", port: 7000, logger: quietLogger)
        }
        #expect(error?.kind == .connectionRefused)
        #expect(
            error?.message.hasPrefix("cannot resolve host 'no-such-host.invalid'") == true,
            "\(String(describing: error))")
    }

    @Test func connectTimesOut() throws {
        // 192.0.2.0/24 is TEST-NET-1 (RFC 5737): nothing answers, so the connect either times
        // out or the network is unreachable; either way it must end within the bound.
        let started = ContinuousClock.now
        let error = transportError {
            _ = try H4StreamTransport.connectTCP(
                host: "192.0.2.1", port: 7000, connectTimeout: 0.3, logger: quietLogger)
        }
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(error?.kind == .connectionRefused, "\(String(describing: error))")
    }
}

@Suite struct SerialTransportTests {
    @Test func exchangesPacketsOverAPseudoTerminal() async throws {
        let pty = try PseudoTerminal()
        let transport = try openTransport(DeviceSpec(parsing: "serial:\(pty.slavePath),921600"), logger: quietLogger)
        #expect(transport.name == "serial:\(pty.slavePath),921600")
        try await exchangePackets(transport, peer: pty.master)
    }

    @Test func garbageFailsTheStream() async throws {
        let pty = try PseudoTerminal()
        defer { pty.master.close() }
        let transport = try H4StreamTransport.openSerial(path: pty.slavePath, flowControl: .rtsCts, logger: quietLogger)
        try await rejectGarbage(transport, peer: pty.master)
    }

    @Test func closeFinishesTheStream() async throws {
        let pty = try PseudoTerminal()
        defer { pty.master.close() }
        try await closeEndsCleanly(try H4StreamTransport.openSerial(path: pty.slavePath, logger: quietLogger))
    }

    @Test func missingDevice() {
        let error = transportError {
            _ = try openTransport(DeviceSpec(parsing: "serial:/dev/ttyIBEACON9"), logger: quietLogger)
        }
        #expect(error?.kind == .notFound)
        #expect(error?.message == "no serial device /dev/ttyIBEACON9")
    }

    @Test func notATerminal() {
        let error = transportError { _ = try H4StreamTransport.openSerial(path: "/dev/null", logger: quietLogger) }
        #expect(error?.kind == .badSpecification)
        #expect(error?.message == "/dev/null is not a serial device (not a terminal)")
    }
}
