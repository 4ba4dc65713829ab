import Foundation
import IBeaconTestSupport
import Testing

/// The `ibeacon` binary under test: $IBEACON_BIN, else the debug build next to this package.
/// `make unit` builds it before running the tests; a missing binary fails, never skips.
let ibeaconBinary: URL = {
    if let path = ProcessInfo.processInfo.environment["IBEACON_BIN"], !path.isEmpty {
        return URL(fileURLWithPath: path)
    }
    return packageRoot.appendingPathComponent(".build/debug/ibeacon")
}()

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

struct RunResult {
    var status: Int32
    var stdout: String
    var stderr: String
    /// Killed by a signal (a crash): never acceptable.
    var crashed: Bool
}

/// Runs the binary with a fixed terminal width, no stdin, and a bounded time. Awaits its exit
/// without holding a thread: a test blocked on a child process would hold one of the shared
/// pool's threads (as many as the machine has cores) away from every other suite's tasks.
func ibeacon(
    _ arguments: [String], environment extra: [String: String] = [:], timeout: Double = 20
) async throws -> RunResult {
    let process = Process()
    process.executableURL = ibeaconBinary
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    env["COLUMNS"] = "80"
    env["IBEACON_DEVICE"] = nil
    for (k, v) in extra { env[k] = v }
    process.environment = env
    // Output goes to files, so a chatty child can never block on a full pipe.
    let dir = FileManager.default.temporaryDirectory
    let outURL = dir.appendingPathComponent("ibeacon-out-\(UUID().uuidString)")
    let errURL = dir.appendingPathComponent("ibeacon-err-\(UUID().uuidString)")
    FileManager.default.createFile(atPath: outURL.path, contents: nil)
    FileManager.default.createFile(atPath: errURL.path, contents: nil)
    defer {
        try? FileManager.default.removeItem(at: outURL)
        try? FileManager.default.removeItem(at: errURL)
    }
    let out = try FileHandle(forWritingTo: outURL)
    let err = try FileHandle(forWritingTo: errURL)
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    let exited = Latch()
    process.terminationHandler = { _ in exited.open() }
    try process.run()
    if await within(timeout, { await exited.wait() }) == nil {
        process.terminate()
        Issue.record("ibeacon \(arguments) did not finish within \(timeout) s")
    }
    await exited.wait()
    try out.close()
    try err.close()
    let stdoutData = try Data(contentsOf: outURL)
    let stderrData = try Data(contentsOf: errURL)
    return RunResult(
        status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
        stderr: String(decoding: stderrData, as: UTF8.self),
        crashed: process.terminationReason == .uncaughtSignal)
}

/// A fresh temporary directory, removed by the caller.
func temporaryDirectory() throws -> URL {
    URL(fileURLWithPath: try makeScratchDirectory("ibeacon-cli"))
}
