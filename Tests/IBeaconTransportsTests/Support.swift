import Glibc
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging
import Testing

// Test peers built directly on libc, independent of the code under test.

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

private func check(_ rc: Int32, _ what: String) throws -> Int32 {
    if rc < 0 { throw TestFailure("\(what) failed: errno \(errno) (\(String(cString: strerror(errno))))") }
    return rc
}

/// Packets used across the tests; bytes produced by Bumble 0.0.236 (`bytes(HCI_…)`).
enum Vectors {
    /// HCI_Reset: H4 command 01, opcode 0x0C03 LE (03 0C), no parameters.
    static let resetCommand = H4Packet(type: .command, body: [0x03, 0x0C, 0x00])
    /// LE Set Scan Enable: opcode 0x200C (0C 20), length 2, LE_Scan_Enable 1, Filter_Duplicates 0.
    static let scanEnableCommand = H4Packet(type: .command, body: [0x0C, 0x20, 0x02, 0x01, 0x00])
    /// LE Set Scan Enable with LE_Scan_Enable 0.
    static let scanDisableCommand = H4Packet(type: .command, body: [0x0C, 0x20, 0x02, 0x00, 0x00])
    /// LE Set Extended Scan Enable: opcode 0x2042 (42 20), length 6, Enable 1, Filter_Duplicates 0,
    /// Duration 0x0000, Period 0x0000.
    static let extendedScanEnableCommand = H4Packet(
        type: .command, body: [0x42, 0x20, 0x06, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00])
    /// Command Complete (0E), length 4, Num_HCI_Command_Packets 1, opcode 0x0C03, Status 0.
    static let resetComplete = H4Packet(type: .event, body: [0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00])
    /// Command Complete for 0x200C, Status 0.
    static let scanEnableComplete = H4Packet(type: .event, body: [0x0E, 0x04, 0x01, 0x0C, 0x20, 0x00])
    /// Command Complete for 0x200C, Status 0x0C Command Disallowed (a second, different reply).
    static let scanEnableDisallowed = H4Packet(type: .event, body: [0x0E, 0x04, 0x01, 0x0C, 0x20, 0x0C])
    /// Command Status (0F), length 4, Status 0x0C, Num_HCI_Command_Packets 1, opcode 0x200B.
    static let scanParametersStatus = H4Packet(type: .event, body: [0x0F, 0x04, 0x0C, 0x01, 0x0B, 0x20])
    /// LE Meta (3E), length 0x2A, subevent 02 Advertising Report, Num_Reports 1, Event_Type 03
    /// (ADV_NONCONN_IND), Address_Type 0, address C0:FF:EE:12:34:56 (LE), Data_Length 0x1E,
    /// iBeacon AD (UUID E2C56DB5-…, major 0x0102, minor 0x0304, measured power 0xC5 = -59),
    /// RSSI 0xC3 = -61.
    static let report1 = H4Packet(
        type: .event,
        body: [UInt8](
            hex: "3e2a02010300563412eeffc01e0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e001020304c5c3")!)
    /// The same advertisement from D1:02:03:04:05:06 (random address, type 1), RSSI 0xBA = -70.
    static let report2 = H4Packet(
        type: .event,
        body: [UInt8](
            hex: "3e2a020103010605040302d11e0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e001020304c5ba")!)
}

/// One end of a test connection (a TCP peer or a pseudo-terminal master).
final class Peer: @unchecked Sendable {
    let fd: Int32
    init(fd: Int32) { self.fd = fd }

    /// Writes all of `bytes`. To a socket with `MSG_NOSIGNAL`: a transport that closed its end
    /// makes this throw (a test failure) instead of ending the whole test process with SIGPIPE,
    /// which nothing ignores here.
    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buffer in
                let sent = send(fd, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                return sent < 0 && errno == ENOTSOCK
                    ? Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset) : sent
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw TestFailure("peer write failed: errno \(errno)") }
            offset += n
        }
    }

    /// Reads exactly `count` bytes, failing after `timeout` seconds without a byte (a bound for a
    /// broken transport, not a speed requirement: generous, as the suite runs tests in parallel).
    func read(_ count: Int, timeout: Int32 = 30) throws -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while out.count < count {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = try check(poll(&p, 1, timeout * 1000), "poll")
            if ready == 0 { throw TestFailure("peer read timed out with \(out.count) of \(count) bytes") }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, min($0.count, count - out.count)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { throw TestFailure("peer read ended after \(out.count) of \(count) bytes (errno \(errno))") }
            out += buffer[0..<n]
        }
        return out
    }

    func close() { _ = Glibc.close(fd) }
}

/// A listening TCP socket on 127.0.0.1 with a port the kernel picked.
final class LoopbackListener: @unchecked Sendable {
    let fd: Int32
    let port: UInt16

    init() throws {
        let fd = try check(socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0), "socket")
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                _ = try check(bind(fd, sa, length), "bind")
                _ = try check(listen(fd, 4), "listen")
                return try check(getsockname(fd, sa, &length), "getsockname")
            }
        }
        port = UInt16(bigEndian: address.sin_port)
    }

    func accept(timeout: Int32 = 5) throws -> Peer {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard try check(poll(&p, 1, timeout * 1000), "poll") > 0 else { throw TestFailure("accept timed out") }
        return Peer(fd: try check(Glibc.accept(fd, nil, nil), "accept"))
    }

    func close() { _ = Glibc.close(fd) }
}

/// A pseudo-terminal: `master` plays the controller, `slavePath` is what the transport opens.
struct PseudoTerminal {
    let master: Peer
    let slavePath: String

    init() throws {
        var master: Int32 = -1
        var slave: Int32 = -1
        var name = [CChar](repeating: 0, count: 4096)
        _ = try check(openpty(&master, &slave, &name, nil, nil), "openpty")
        // Only the transport under test keeps the slave side open.
        _ = Glibc.close(slave)
        self.master = Peer(fd: master)
        slavePath = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Closes `transport` after `seconds` unless cancelled first, so a test waiting on its stream
/// ends (and fails) instead of hanging. Generous: with the whole suite in parallel on a loaded
/// machine an exchange took over 10 s, the watchdog closed the transport mid-test and the
/// test failed with "is closed" (issue 29).
func watchdog(_ transport: any HCITransport, seconds: Int = 120) -> Task<Void, Never> {
    Task {
        try? await Task.sleep(for: .seconds(seconds))
        if !Task.isCancelled { transport.close() }
    }
}

func readWholeFile(_ path: String) throws -> [UInt8] {
    guard let file = fopen(path, "rb") else { throw TestFailure("cannot open \(path)") }
    defer { fclose(file) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = fread(&buffer, 1, buffer.count, file)
        if n == 0 { return out }
        out += buffer[0..<n]
    }
}

func writeWholeFile(_ path: String, _ bytes: [UInt8]) throws {
    guard let file = fopen(path, "wb") else { throw TestFailure("cannot create \(path)") }
    defer { fclose(file) }
    guard fwrite(bytes, 1, bytes.count, file) == bytes.count else { throw TestFailure("short write to \(path)") }
}

/// Big-endian btsnoop bytes written by hand, independent of the module's writer.
enum HandmadeBTSnoop {
    static func header(datalink: UInt32 = 1002) -> [UInt8] {
        Array("btsnoop".utf8) + [0] + be32(1) + be32(datalink)
    }

    static func record(_ data: [UInt8], flags: UInt32, timestamp: UInt64 = 0x00E2_0000_0000_0000) -> [UInt8] {
        be32(UInt32(data.count)) + be32(UInt32(data.count)) + be32(flags) + be32(0) + be64(timestamp) + data
    }

    static func be32(_ v: UInt32) -> [UInt8] { (0..<4).reversed().map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    static func be64(_ v: UInt64) -> [UInt8] { (0..<8).reversed().map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
}

/// Runs `body` and returns the `TransportError` it throws; records an issue if it throws
/// something else or nothing.
func transportError(_ body: () throws -> Void) -> TransportError? {
    do {
        try body()
        Issue.record("expected a TransportError, got success")
        return nil
    } catch let error as TransportError {
        return error
    } catch {
        Issue.record("expected a TransportError, got \(error)")
        return nil
    }
}
