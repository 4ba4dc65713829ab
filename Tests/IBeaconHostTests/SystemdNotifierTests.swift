import Glibc
import Testing

@testable import IBeaconHost

/// A Unix datagram socket standing in for systemd's notification socket.
private final class NotifySocket {
    let fd: Int32
    /// What `NOTIFY_SOCKET` says: a path, or `@name` for the abstract namespace.
    let address: String
    private let path: String?

    init(abstract: Bool) throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(fd >= 0)
        let name = "ibeacon-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        path = abstract ? nil : "/tmp/\(name).sock"
        address = abstract ? "@\(name)" : path!
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = abstract ? [0] + Array(name.utf8) : Array(path!.utf8)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        try #require(rc == 0, "bind \(address): errno \(errno)")
    }

    /// The next datagram, or nil when none is waiting.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        return n < 0 ? nil : String(decoding: buffer[0..<n], as: UTF8.self)
    }

    deinit {
        close(fd)
        if let path { unlink(path) }
    }
}

@Suite struct SystemdNotifierTests {
    @Test func sendsTheStateAsOneDatagramToAPathSocket() throws {
        let socket = try NotifySocket(abstract: false)
        let sent = SystemdNotifier.notify(
            "READY=1\nSTATUS=advertising", environment: ["NOTIFY_SOCKET": socket.address])
        #expect(sent)
        #expect(socket.receive() == "READY=1\nSTATUS=advertising")
        #expect(socket.receive() == nil)
    }

    @Test func anAtSignNamesTheAbstractNamespace() throws {
        let socket = try NotifySocket(abstract: true)
        #expect(SystemdNotifier.notify("STOPPING=1", environment: ["NOTIFY_SOCKET": socket.address]))
        #expect(socket.receive() == "STOPPING=1")
    }

    @Test func withoutASocketNothingIsSent() {
        #expect(!SystemdNotifier.notify("READY=1", environment: [:]))
        #expect(!SystemdNotifier.notify("READY=1", environment: ["NOTIFY_SOCKET": ""]))
    }

    @Test func aSocketThatIsNotThereOrTooLongIsAFailureNotACrash() {
        let missing = "/tmp/ibeacon-notify-missing-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        #expect(!SystemdNotifier.notify("READY=1", environment: ["NOTIFY_SOCKET": missing]))
        let tooLong = "/tmp/" + String(repeating: "x", count: 200)
        #expect(!SystemdNotifier.notify("READY=1", environment: ["NOTIFY_SOCKET": tooLong]))
    }
}
