import Foundation
import IBeaconTestSupport
import Synchronization
import Testing

@testable import IBeaconHost

/// A fresh directory like /tmp (mode 1777), removed by `cleanUp()`.
private struct SharedScratch {
    let directory: String

    init() throws {
        directory = try makeScratchDirectory("ibeacon-security")
        chmod(directory, 0o1777)
    }

    func path(_ name: String) -> String { directory + "/" + name }

    @discardableResult
    func write(_ name: String, _ text: String, mode: mode_t = 0o644) throws -> String {
        let p = path(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: p))
        chmod(p, mode)
        return p
    }

    func contents(_ p: String) -> String? {
        (try? Data(contentsOf: URL(fileURLWithPath: p))).map { String(decoding: $0, as: UTF8.self) }
    }

    func lstat(_ p: String) -> Glibc.stat? {
        var st = Glibc.stat()
        return Glibc.lstat(p, &st) == 0 ? st : nil
    }

    /// A symbolic link `name` → `target` owned by `nobody`, as another user would plant it.
    func plantLink(_ name: String, to target: String) throws -> String {
        try #require(geteuid() == 0, "planting another user's link needs root (CI runs as root)")
        let p = path(name)
        try #require(symlink(target, p) == 0)
        try #require(lchown(p, 65534, 65534) == 0)
        return p
    }

    func cleanUp() { removeScratchDirectory(directory) }
}

private final class Messages: Sendable {
    let list = Mutex<[String]>([])
}

/// Runs `body` on a thread and fails instead of hanging when it does not return in time
/// (a FIFO opened for reading blocks until a writer comes).
private func finishes(within seconds: Double, _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        body()
        done.signal()
    }
    return done.wait(timeout: .now() + seconds) == .success
}

/// Issue 11, the file half: everything a user sharing a directory with root can try.
@Suite(.serialized) struct ProfileStoreSecurityTests {
    static let victimText = "thesis, chapter 1\n"

    // MARK: item 1, planted symbolic link

    @Test func aPlantedLinkIsNeverFollowedByNewForceWriteLockOrRead() throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        let victim = try s.write("thesis.txt", Self.victimText, mode: 0o600)
        let link = try s.plantLink("store12.json", to: victim)
        let profile = Array("{\"major\": 12}\n".utf8)
        for overwrite in [false, true] {
            let e = #expect(throws: FileError.self) { try SafeFile.create(link, profile, overwrite: overwrite) }
            #expect(e?.kind == .cannotWrite)
            #expect(e?.description.contains("symbolic link owned by uid 65534") == true)
        }
        #expect(throws: FileError.self) { try SafeFile.writeAtomically(link, profile) }
        #expect(throws: FileError.self) { try ProfileStore.lock(link) }
        #expect(throws: FileError.self) { try SafeFile.read(link) }
        #expect(throws: FileError.self) { try SafeFile.checkWritable(link) }
        #expect(s.contents(victim) == Self.victimText)
        #expect(s.lstat(link).map { $0.st_mode & S_IFMT } == S_IFLNK)
    }

    @Test func aPlantedLinkToADirectoryIsNotFollowedEither() throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        try FileManager.default.createDirectory(atPath: s.path("etc"), withIntermediateDirectories: false)
        let victim = try s.write("etc/passwd", Self.victimText)
        _ = try s.plantLink("dir", to: s.path("etc"))
        let e = #expect(throws: FileError.self) {
            try SafeFile.create(s.path("dir/passwd"), Array("{}\n".utf8), overwrite: true)
        }
        #expect(e?.description.contains("goes through") == true)
        #expect(s.contents(victim) == Self.victimText)
    }

    /// A link of one's own (or root's) is followed: the file it names is replaced, the link kept.
    @Test func ownLinkIsFollowedAndKept() throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        let shared = try s.write("shared.json", "{\"v\": 1}\n")
        let link = s.path("spot.json")
        #expect(symlink("shared.json", link) == 0)
        try SafeFile.create(link, Array("{\"v\": 2}\n".utf8), overwrite: true)
        #expect(s.contents(shared) == "{\"v\": 2}\n")
        #expect(s.lstat(link).map { $0.st_mode & S_IFMT } == S_IFLNK)
    }

    // MARK: item 2, a link swapped in after the read

    @Test func aLinkSwappedInAfterTheReadIsReplacedNotWrittenThrough() throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        let victim = try s.write("passwd", Self.victimText)
        let p = try s.write("store12.json", "{\"v\": 1}\n")
        let lock = try ProfileStore.lock(p)
        defer { lock.unlock() }
        _ = try lock.read()
        // The attacker replaces the profile by a link to the victim while root measures.
        #expect(unlink(p) == 0)
        #expect(symlink(victim, p) == 0)
        let e = #expect(throws: FileError.self) { try lock.replace(with: Array("{\"v\": 2}\n".utf8)) }
        #expect(e?.kind == .cannotWrite)
        #expect(e?.description.contains("nothing was written") == true)
        #expect(s.contents(victim) == Self.victimText)
    }

    /// An attacker thread swaps the profile for a link to the victim and back as fast as it
    /// can while the store replaces the profile again and again: the victim never changes.
    @Test func aRacingSwapperNeverGetsTheVictimWritten() throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        try #require(geteuid() == 0, "an attacker of another uid needs root to fake (CI runs as root)")
        let victim = try s.write("victim.txt", Self.victimText)
        let p = try s.write("store12.json", "{\"v\": 0}\n")
        let stop = Atomic<Bool>(false)
        let swaps = Atomic<Int>(0)
        let attacker = DispatchSemaphore(value: 0)
        let evil = s.path("evil")
        let stash = s.path("stash")
        Thread.detachNewThread {
            defer { attacker.signal() }
            while !stop.load(ordering: .relaxed) {
                _ = unlink(evil)
                _ = symlink(victim, evil)
                _ = lchown(evil, 65534, 65534)  // the attacker is another user
                _ = rename(p, stash)  // keep the real profile aside
                _ = rename(evil, p)  // the profile is now a link to the victim
                _ = rename(stash, p)  // and back
                swaps.add(1, ordering: .relaxed)
            }
        }
        var writes = 0
        let deadline = ContinuousClock.now + .seconds(2)
        for i in 0..<100_000 where ContinuousClock.now < deadline {
            if (try? SafeFile.create(p, Array("{\"v\": \(i)}\n".utf8), overwrite: true)) != nil { writes += 1 }
            if let lock = try? ProfileStore.lock(p) {
                if (try? lock.read()) != nil, (try? lock.replace(with: Array("{\"w\": \(i)}\n".utf8))) != nil {
                    writes += 1
                }
                lock.unlock()
            }
        }
        stop.store(true, ordering: .relaxed)
        attacker.wait()
        #expect(s.contents(victim) == Self.victimText)
        #expect(swaps.load(ordering: .relaxed) > 100)
        #expect(writes > 0)
    }

    // MARK: item 5, owner, group and mode

    @Test func ownerGroupAndModeAreKeptWithoutSetIDBits() throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        try #require(geteuid() == 0, "changing owners needs root (CI runs as root)")
        let p = try s.write("store12.json", "{}\n")
        #expect(chown(p, 65534, 65534) == 0)
        #expect(chmod(p, 0o6750) == 0)  // set-user-ID and set-group-ID: never copied
        try SafeFile.writeAtomically(p, Array("{\"v\": 2}\n".utf8))
        let st = try #require(s.lstat(p))
        #expect(st.st_uid == 65534)
        #expect(st.st_gid == 65534)
        #expect(st.st_mode & 0o7777 == 0o750)
        #expect(s.contents(p) == "{\"v\": 2}\n")
    }

    // MARK: item 7 and --force: FIFOs, devices, directories

    @Test func aFIFOIsRefusedWithoutBlocking() throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        let fifo = s.path("store12.json")
        #expect(mkfifo(fifo, 0o666) == 0)
        let refusals = Messages()
        let finished = finishes(within: 5) {
            let attempts: [() throws -> Void] = [
                { _ = try SafeFile.read(fifo) },
                { try ProfileStore.lock(fifo).unlock() },
                { try SafeFile.create(fifo, Array("{}\n".utf8), overwrite: true) },
            ]
            for attempt in attempts {
                do {
                    try attempt()
                } catch {
                    refusals.list.withLock { $0.append("\(error)") }
                }
            }
        }
        // A blocked open leaves its thread behind; the test fails instead of hanging.
        #expect(finished, "opening a FIFO blocked")
        let messages = refusals.list.withLock { $0 }
        #expect(messages.count == 3)
        #expect(messages.allSatisfy { $0.contains("FIFO") }, "\(messages)")
        #expect(s.lstat(fifo).map { $0.st_mode & S_IFMT } == S_IFIFO)
    }

    @Test func forceNeverReplacesADeviceOrADirectory() throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        let device = s.path("null.json")
        #expect(symlink("/dev/null", device) == 0)  // own link: followed, to a character device
        let e = #expect(throws: FileError.self) { try SafeFile.create(device, Array("{}\n".utf8), overwrite: true) }
        #expect(e?.description.contains("character device") == true)
        #expect(s.lstat("/dev/null").map { $0.st_mode & S_IFMT } == S_IFCHR)
        let dir = s.path("dir.json")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        let d = #expect(throws: FileError.self) { try SafeFile.create(dir, Array("{}\n".utf8), overwrite: true) }
        #expect(d?.kind == .cannotWrite)
        #expect(s.lstat(dir).map { $0.st_mode & S_IFMT } == S_IFDIR)
    }

    // MARK: item 12, the lock

    /// flock needs no write permission: a lock on the profile itself could be held by any
    /// reader. The lock file is open to the profile's writers only.
    @Test func aReaderHoldingAFlockOnTheProfileDoesNotBlockTheLock() throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        let p = try s.write("store12.json", "{}\n", mode: 0o644)
        let reader = open(p, O_RDONLY)
        defer { close(reader) }
        #expect(flock(reader, LOCK_EX | LOCK_NB) == 0)
        let lock = try ProfileStore.lock(p)
        let st = try #require(s.lstat(s.path(".store12.json.lock")))
        #expect(st.st_mode & 0o7777 == 0o200, "only the profile's writers may open the lock file")
        #expect(st.st_mode & S_IFMT == S_IFREG)
        lock.unlock()
        #expect(s.lstat(s.path(".store12.json.lock")) == nil, "the lock file is removed on unlock")
    }

    @Test func aRenameStyleEditDoesNotDefeatTheLock() throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        let p = try s.write("store12.json", "{\"v\": 1}\n")
        let first = try ProfileStore.lock(p)
        // An editor saves by writing a new file and renaming it over the profile.
        try s.write("edit.tmp", "{\"v\": 2}\n")
        #expect(rename(s.path("edit.tmp"), p) == 0)
        let e = #expect(throws: FileError.self) { try ProfileStore.lock(p) }
        #expect(e?.kind == .locked)
        first.unlock()
        let again = try ProfileStore.lock(p)
        again.unlock()
    }

    @Test func aPlantedLockFileIsReplaced() throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        try #require(geteuid() == 0, "planting another user's file needs root (CI runs as root)")
        let p = try s.write("store12.json", "{}\n")
        let planted = try s.write(".store12.json.lock", "", mode: 0o666)
        #expect(chown(planted, 65534, 65534) == 0)
        let holder = open(planted, O_RDONLY)
        defer { close(holder) }
        #expect(flock(holder, LOCK_EX | LOCK_NB) == 0)  // the planter holds its lock
        let lock = try ProfileStore.lock(p)
        let st = try #require(s.lstat(planted))
        #expect(st.st_uid == 0)
        #expect(st.st_mode & 0o7777 == 0o200)
        lock.unlock()
    }

    /// Issue 23 item 4: a FIFO, socket or directory (empty or not) another user put at the
    /// lock file's name is removed (a directory with something in it is renamed aside) without
    /// being opened, and the lock is taken; none made root's calibration fail.
    @Test(arguments: ["fifo", "socket", "empty directory", "full directory"])
    func aPlantedSpecialFileAtTheLockNameIsRemovedNotOpened(kind: String) throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        try #require(geteuid() == 0, "planting another user's file needs root (CI runs as root)")
        let p = try s.write("store12.json", "{}\n")
        let planted = s.path(".store12.json.lock")
        switch kind {
        case "fifo":
            try #require(mkfifo(planted, 0o666) == 0)
        case "socket":
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &addr.sun_path) { raw in
                for (i, b) in planted.utf8.enumerated() { raw[i] = b }
            }
            let bound = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            try #require(bound == 0)
        default:
            try #require(mkdir(planted, 0o777) == 0)
            if kind == "full directory" {
                try s.write(".store12.json.lock/keep", "the planter's\n")
                #expect(chown(planted + "/keep", 65534, 65534) == 0)
            }
        }
        #expect(lchown(planted, 65534, 65534) == 0)
        let messages = Messages()
        let finished = finishes(within: 5) {
            do {
                let lock = try ProfileStore.lock(p)
                lock.unlock()
                messages.list.withLock { $0.append("locked") }
            } catch {
                messages.list.withLock { $0.append("\(error)") }
            }
        }
        #expect(finished, "taking the lock blocked")
        #expect(messages.list.withLock { $0 } == ["locked"])
        #expect(s.lstat(planted) == nil, "the planted entry is gone, and the lock file removed on unlock")
        let aside = try FileManager.default.contentsOfDirectory(atPath: s.directory).filter { $0.contains(".planted-") }
        #expect(aside.count == (kind == "full directory" ? 1 : 0))
    }

    @Test func aProfileOverOneMebibyteIsBadData() throws {
        let s = try SharedScratch()
        defer { s.cleanUp() }
        let p = try s.write("big.json", String(repeating: " ", count: (1 << 20) + 1))
        let e = #expect(throws: FileError.self) { try SafeFile.read(p) }
        #expect(e?.kind == .badData)
    }
}
