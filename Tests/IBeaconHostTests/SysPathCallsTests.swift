import IBeaconTestSupport
import SystemPackage
import Testing

@testable import IBeaconHost

#if canImport(Glibc)
    import Glibc
#endif

/// The path-based wrappers of `Sys` that runtime records and the guardian call instead of libc:
/// each does the call and throws its errno, typed.
@Suite struct SysPathCallsTests {
    @Test func makeDirectoryCreatesOnceThenSaysTheNameIsTaken() throws {
        let scratch = try makeScratchDirectory("sys-mkdir")
        defer { removeScratchDirectory(scratch) }
        try Sys.makeDirectory("\(scratch)/run", mode: 0o700)
        #expect(Sys.isWritable("\(scratch)/run"))
        #expect(throws: Errno.fileExists) { try Sys.makeDirectory("\(scratch)/run", mode: 0o700) }
        #expect(throws: Errno.noSuchFileOrDirectory) { try Sys.makeDirectory("\(scratch)/no/run", mode: 0o700) }
    }

    @Test func unlinkRemovesAFileAndThrowsWhenItIsGone() throws {
        let scratch = try makeScratchDirectory("sys-unlink")
        defer { removeScratchDirectory(scratch) }
        let directory = try FileDescriptor.open(FilePath(scratch), .readOnly, options: [.directory])
        defer { try? directory.close() }
        let fd = try Sys.open(at: directory, "record", O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
        try fd.close()
        try Sys.unlink("\(scratch)/record")
        #expect(throws: Errno.noSuchFileOrDirectory) { try Sys.lstat(at: directory, "record") }
        #expect(throws: Errno.noSuchFileOrDirectory) { try Sys.unlink("\(scratch)/record") }
        #expect(!Sys.isWritable("\(scratch)/record"))
    }

    @Test func readLinkGivesALinksTextAndRefusesAFile() throws {
        #expect(try Sys.readLink("/proc/self/exe").hasPrefix("/"))
        let scratch = try makeScratchDirectory("sys-readlink")
        defer { removeScratchDirectory(scratch) }
        #expect(throws: Errno.invalidArgument) { try Sys.readLink(scratch) }
        #expect(throws: Errno.noSuchFileOrDirectory) { try Sys.readLink("\(scratch)/none") }
    }
}
