import Glibc
import IBeaconCore
import IBeaconHost
import IBeaconTestSupport
import IBeaconTransports
import Synchronization
import Testing

/// User + system CPU time of this process, from getrusage(RUSAGE_SELF), in microseconds.
func processCPUMicroseconds() -> Int64 {
    var usage = rusage()
    _ = getrusage(RUSAGE_SELF.rawValue, &usage)
    func micros(_ t: timeval) -> Int64 { Int64(t.tv_sec) * 1_000_000 + Int64(t.tv_usec) }
    return micros(usage.ru_utime) + micros(usage.ru_stime)
}

/// Writes `line` to standard error at once (the exit test's parent reads it).
func report(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

@Suite struct IdleCPUTests {
    /// An open transport waiting for a silent peer must sleep in poll(2), not spin. Measured in
    /// a child process of its own (an exit test) so that other tests running in parallel do not
    /// count; the child reports what it used on standard error.
    @Test func idleTCPTransportUsesNoCPU() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            let listener = try LoopbackListener()
            let transport = try H4StreamTransport.connectTCP(
                host: "127.0.0.1", port: listener.port, logger: quietLogger)
            let peer = try listener.accept()
            // A consumer waiting for packets, as the host's client does.
            let received = Mutex(0)
            let consumer = Task {
                for try await _ in transport.incoming { received.withLock { $0 += 1 } }
            }
            // The reader is live: one packet gets through before the idle period.
            try peer.write(Vectors.resetComplete.bytes)
            // Waits for the packet itself (up to 30 s: a loaded machine may take a while), not 2 s.
            for _ in 0..<3000 where received.withLock({ $0 }) == 0 {
                try await Task.sleep(for: .milliseconds(10))
            }
            guard received.withLock({ $0 }) == 1 else {
                report("the packet never arrived")
                exit(2)
            }
            let before = processCPUMicroseconds()
            try await Task.sleep(for: .seconds(1))
            let used = processCPUMicroseconds() - before
            report("idle CPU: \(used)")
            transport.close()
            _ = try? await consumer.value
            peer.close()
            listener.close()
            exit(0)
        }
        let output = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        let line = output.split(separator: "\n").first { $0.hasPrefix("idle CPU: ") }
        let used = try #require(line.flatMap { Int($0.dropFirst("idle CPU: ".count)) }, "child output: \(output)")
        // Less than 50 ms of CPU in one second of waiting.
        #expect(used < 50_000, "the idle transport used \(used) µs of CPU in 1 s")
    }
}
