import Foundation
import IBeaconHost
import IBeaconTestSupport
import IBeaconTransports
import Testing

/// `--btsnoop FILE` run as root next to files it must not touch (issue 11, item 3).
@Suite struct RecordingSafetyTests {
    @Test func anExistingFileIsRefusedAndUnchangedUnlessOverwriting() throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/keep.btsnoop"
        try Data("precious".utf8).write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: FileError.self) {
            _ = try BTSnoopFileRecorder(path: path, logger: quietLogger)
        }
        #expect(error?.kind == .cannotWrite)
        #expect(error?.description.contains("--overwrite-btsnoop") == true)
        #expect(try readWholeFile(path) == Array("precious".utf8))

        let recorder = try BTSnoopFileRecorder(path: path, overwrite: true, logger: quietLogger)
        recorder.close()
        #expect(try readWholeFile(path).count == 16)  // the header only
    }

    @Test func overwritingReplacesTheNameAndNeverWritesThroughAHardLink() throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let victim = dir + "/victim.txt"
        try Data("thesis".utf8).write(to: URL(fileURLWithPath: victim))
        let capture = dir + "/capture.btsnoop"
        #expect(link(victim, capture) == 0)
        let recorder = try BTSnoopFileRecorder(path: capture, overwrite: true, logger: quietLogger)
        recorder.close()
        #expect(try readWholeFile(victim) == Array("thesis".utf8))
        #expect(try readWholeFile(capture).count == 16)
    }

    @Test func aSymbolicLinkOfAnotherUserIsNeverFollowed() throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let victim = dir + "/victim.txt"
        try Data("thesis".utf8).write(to: URL(fileURLWithPath: victim))
        let capture = dir + "/capture.btsnoop"
        #expect(symlink(victim, capture) == 0)
        // Planted by someone else: uid 65534 (nobody). Root may re-own a link; others skip.
        #expect(lchown(capture, 65534, 65534) == 0 || geteuid() != 0)
        for overwrite in [false, true] {
            let error = #expect(throws: FileError.self) {
                _ = try BTSnoopFileRecorder(path: capture, overwrite: overwrite, logger: quietLogger)
            }
            #expect(error?.kind == .cannotWrite)
        }
        #expect(try readWholeFile(victim) == Array("thesis".utf8))
    }

    @Test func theCaptureIsNeverTheProfileBeingWritten() throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let profile = dir + "/p.json"
        try Data("{}\n".utf8).write(to: URL(fileURLWithPath: profile))
        #expect(symlink("p.json", dir + "/alias.json") == 0)
        for path in [profile, dir + "/alias.json", dir + "/./p.json"] {
            let error = #expect(throws: FileError.self) {
                _ = try BTSnoopFileRecorder(
                    path: path, overwrite: true, avoiding: [.written(profile)], logger: quietLogger)
            }
            #expect(error?.description.contains("is the profile") == true)
        }
        #expect(try readWholeFile(profile) == Array("{}\n".utf8))
        // A profile about to be created (--write NEW) is protected by its name too.
        let fresh = dir + "/new.json"
        #expect(throws: FileError.self) {
            _ = try BTSnoopFileRecorder(path: fresh, avoiding: [.written(fresh)], logger: quietLogger)
        }
    }

    /// Issue 23: a capture holds the addresses of people's phones. It was created 0644.
    @Test func aNewCaptureIsReadableByItsOwnerOnly() throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let previous = umask(0o022)
        defer { umask(previous) }
        let path = dir + "/new.btsnoop"
        try BTSnoopFileRecorder(path: path, logger: quietLogger).close()
        let replaced = dir + "/old.btsnoop"
        try Data("an earlier capture".utf8).write(to: URL(fileURLWithPath: replaced))
        #expect(chmod(replaced, 0o644) == 0)
        try BTSnoopFileRecorder(path: replaced, overwrite: true, logger: quietLogger).close()
        for p in [path, replaced] {
            var st = stat()
            #expect(lstat(p, &st) == 0)
            #expect(st.st_mode & 0o777 == 0o600, "\(p): \(String(st.st_mode & 0o777, radix: 8))")
        }
    }

    @Test func aFIFOIsRefusedWithoutBlocking() throws {
        let dir = try makeScratchDirectory("ibeacon-transports")
        defer { removeScratchDirectory(dir) }
        let fifo = dir + "/pipe"
        #expect(mkfifo(fifo, 0o644) == 0)
        let error = #expect(throws: FileError.self) {
            _ = try BTSnoopFileRecorder(path: fifo, overwrite: true, logger: quietLogger)
        }
        #expect(error?.description.contains("FIFO") == true)
    }
}
