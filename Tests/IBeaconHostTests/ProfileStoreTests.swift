import Foundation
import IBeaconTestSupport
import Synchronization
import Testing

@testable import IBeaconHost

/// A fresh directory under the system temporary directory, removed by `cleanUp()`.
private struct Scratch {
    let directory: String

    init() throws {
        directory = try makeScratchDirectory("ibeacon-profilestore")
        chmod(directory, 0o755)
    }

    func path(_ name: String) -> String { directory + "/" + name }

    func write(_ name: String, _ text: String, mode: Int = 0o644) throws -> String {
        let p = path(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: p))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: p)
        return p
    }

    func contents(_ p: String) throws -> String {
        String(decoding: try Data(contentsOf: URL(fileURLWithPath: p)), as: UTF8.self)
    }

    func mode(_ p: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: p)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    func inode(_ p: String) throws -> UInt64 {
        (try FileManager.default.attributesOfItem(atPath: p)[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
    }

    func listing() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: directory).sorted() }

    func cleanUp() {
        removeScratchDirectory(directory)
    }
}

private final class Counters: Sendable {
    /// Renames the writer made under the lock.
    let increments = Atomic<Int>(0)
    /// Times `lock` refused the taker (the writer held it).
    let refusals = Atomic<Int>(0)
    /// Times the path changed while the taker held the lock.
    let failures = Atomic<Int>(0)
    /// Times the taker held the lock.
    let entries = Atomic<Int>(0)
    /// Tells a background writer to finish.
    let stop = Atomic<Bool>(false)
}

// Serialized: the lock stress test wants both cores to itself.
@Suite(.serialized) struct ProfileStoreTests {
    @Test func writeAtomicallyReplacesTheContentAndKeepsThePermissionBits() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let p = try s.write("store12.json", "{\"old\": true}\n", mode: 0o640)
        let before = try s.inode(p)
        try SafeFile.writeAtomically(p, Array("{\"new\": 1}\n".utf8))
        #expect(try s.contents(p) == "{\"new\": 1}\n")
        #expect(try s.mode(p) == 0o640)
        // Replaced by rename (a new inode), not rewritten in place: a crash mid-write leaves the old file.
        #expect(try s.inode(p) != before)
        // No temporary file is left behind.
        #expect(try s.listing() == ["store12.json"])
    }

    @Test func aWriteRemovesTemporaryFilesLeftByDeadWritersOnly() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let p = try s.write("store12.json", "{}\n")
        // PIDs never exceed 4,194,304 on Linux: 999999999 is a writer that no longer exists.
        _ = try s.write(".store12.json.tmp-999999999-12345", "{\"half")
        // A live writer (this process) keeps its file, and so do names this store never makes.
        let live = ".store12.json.tmp-\(getpid())-777"
        _ = try s.write(live, "{\"in progress")
        _ = try s.write(".store12.json.tmp-notes", "mine")
        _ = try s.write(".other.json.tmp-999999999-1", "another profile's")
        try SafeFile.writeAtomically(p, Array("{\"new\": 1}\n".utf8))
        #expect(
            try s.listing()
                == [
                    ".other.json.tmp-999999999-1", live, ".store12.json.tmp-notes", "store12.json",
                ].sorted())
        #expect(try s.contents(s.path(live)) == "{\"in progress")
    }

    @Test func writeAtomicallyKeepsUnusualPermissionBitsToo() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let p = try s.write("p.json", "{}\n", mode: 0o600)
        try SafeFile.writeAtomically(p, Array("{\"a\": 1}\n".utf8))
        #expect(try s.mode(p) == 0o600)
        let q = try s.write("q.json", "{}\n", mode: 0o664)
        try SafeFile.writeAtomically(q, Array("{\"a\": 1}\n".utf8))
        #expect(try s.mode(q) == 0o664)
    }

    @Test func writeIntoAMissingDirectoryCannotWrite() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let error = #expect(throws: FileError.self) {
            try SafeFile.writeAtomically(s.path("nope/p.json"), Array("{}\n".utf8))
        }
        #expect(error?.kind == .cannotWrite)
    }

    @Test func readOnlyFileCannotBeWritten() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let p = try s.write("ro.json", "{}\n", mode: 0o444)
        let error = #expect(throws: FileError.self) { try SafeFile.checkWritable(p) }
        #expect(error?.kind == .cannotWrite)
        #expect(error?.description.contains("read-only") == true)
        #expect(try s.contents(p) == "{}\n")
        // A writable one passes.
        let w = try s.write("rw.json", "{}\n", mode: 0o644)
        try SafeFile.checkWritable(w)
    }

    @Test func checkWritableOfAMissingFileIsNotFound() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let error = #expect(throws: FileError.self) { try SafeFile.checkWritable(s.path("gone.json")) }
        #expect(error?.kind == .notFound)
    }

    @Test func secondLockOnTheSameFileIsRefused() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let p = try s.write("p.json", "{}\n")
        let first = try ProfileStore.lock(p)
        let error = #expect(throws: FileError.self) { try ProfileStore.lock(p) }
        #expect(error?.kind == .locked)
        #expect(error?.description.contains("another ibeacon process") == true)
        first.unlock()
        // Released: it can be taken again.
        let again = try ProfileStore.lock(p)
        again.unlock()
    }

    @Test func theLockStillExcludesAfterARenameOver() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let p = try s.write("p.json", "{\"v\": 1}\n")
        let old = try ProfileStore.lock(p)
        // Another program replaces the file by rename: the lock (on .p.json.lock) still holds.
        try SafeFile.writeAtomically(p, Array("{\"v\": 2}\n".utf8))
        let error = #expect(throws: FileError.self) { try ProfileStore.lock(p) }
        #expect(error?.kind == .locked)
        old.unlock()
        let new = try ProfileStore.lock(p)
        new.unlock()
    }

    /// Writers replace the file by rename as fast as they can, each under the lock. A taker's
    /// lock must hold the file the path names: while it is held, the path keeps naming the same
    /// inode. A lock that landed on an inode renamed away between `open` and `flock` would not
    /// stop the writers, and the path would change under it; `lock` re-takes it on the new
    /// inode instead. More threads than cores, so the taker is often preempted inside `lock`
    /// (between its `open` and its `flock`) while writers run.
    @Test func lockIsOnTheInodeThePathNamesWhileWritersRename() async throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let p = try s.write("p.json", "0")
        let counters = Counters()
        let done = DispatchGroup()
        let writers = 3
        for w in 0..<writers {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                var n = 0
                while !counters.stop.load(ordering: .relaxed) {
                    n += 1
                    let spare = s.path("spare-\(w)-\(n)")
                    let fd = open(spare, O_CREAT | O_WRONLY | O_EXCL | O_CLOEXEC, 0o644)
                    guard fd >= 0 else { continue }
                    _ = close(fd)
                    guard let lock = try? ProfileStore.lock(p) else {
                        _ = unlink(spare)
                        continue
                    }
                    if rename(spare, p) == 0 { counters.increments.add(1, ordering: .relaxed) }
                    lock.unlock()
                }
            }
        }
        done.enter()
        Thread.detachNewThread {
            defer { done.leave() }
            let deadline = ContinuousClock.now + .milliseconds(1500)
            while ContinuousClock.now < deadline {
                guard let lock = try? ProfileStore.lock(p) else {
                    counters.refusals.add(1, ordering: .relaxed)
                    continue
                }
                counters.entries.add(1, ordering: .relaxed)
                let first = (try? s.inode(p)) ?? 0
                for _ in 0..<100 { _ = getppid() }  // some microseconds for a writer to act
                if (try? s.inode(p)) ?? 0 != first { counters.failures.add(1, ordering: .relaxed) }
                lock.unlock()
            }
            counters.stop.store(true, ordering: .relaxed)
        }
        // Waited for on a thread of its own: the pool's threads stay free for the other suites.
        #expect(await onOwnThread { done.wait(timeout: .now() + 30) == .success })
        #expect(
            counters.failures.load(ordering: .relaxed) == 0,
            "the path changed while the lock was held (\(counters.entries.load(ordering: .relaxed)) holds)")
        // Writers and taker both made progress and contended (else the test proves nothing).
        #expect(counters.increments.load(ordering: .relaxed) > 100)
        #expect(counters.entries.load(ordering: .relaxed) > 100)
        #expect(counters.refusals.load(ordering: .relaxed) > 0)
    }

    @Test func createRefusesAnExistingFileUnlessOverwriting() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let p = try s.write("p.json", "{\"keep\": true}\n")
        let error = #expect(throws: FileError.self) { try SafeFile.create(p, Array("{}\n".utf8), overwrite: false) }
        #expect(error?.kind == .cannotWrite)
        #expect(error?.description.contains("already exists") == true)
        #expect(try s.contents(p) == "{\"keep\": true}\n")

        try SafeFile.create(p, Array("{\"replaced\": true}\n".utf8), overwrite: true)
        #expect(try s.contents(p) == "{\"replaced\": true}\n")

        let fresh = s.path("fresh.json")
        try SafeFile.create(fresh, Array("{\"new\": true}\n".utf8), overwrite: false)
        #expect(try s.contents(fresh) == "{\"new\": true}\n")
    }

    @Test func createWithOverwriteStillRefusesAReadOnlyFile() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let p = try s.write("ro.json", "{}\n", mode: 0o444)
        let error = #expect(throws: FileError.self) {
            try SafeFile.create(p, Array("{\"x\": 1}\n".utf8), overwrite: true)
        }
        #expect(error?.kind == .cannotWrite)
        #expect(try s.contents(p) == "{}\n")
    }

    @Test func readReturnsTheBytes() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let p = try s.write("p.json", "{\"a\": \"é\"}\n")
        #expect(try SafeFile.read(p) == Array("{\"a\": \"é\"}\n".utf8))
    }

    @Test func readOfADirectoryOrAMissingFileIsNotFound() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let dir = #expect(throws: FileError.self) { try SafeFile.read(s.directory) }
        #expect(dir?.kind == .notFound)
        #expect(dir?.description.contains("directory") == true)
        let missing = #expect(throws: FileError.self) { try SafeFile.read(s.path("missing.json")) }
        #expect(missing?.kind == .notFound)
        #expect(missing?.description.contains("no such file") == true)
    }

    @Test func readRefusesAFileOverOneMebibyte() throws {
        let s = try Scratch()
        defer { s.cleanUp() }
        let p = try s.write("big.json", String(repeating: " ", count: (1 << 20) + 1))
        let error = #expect(throws: FileError.self) { try SafeFile.read(p) }
        #expect(error?.kind == .badData)
    }
}
