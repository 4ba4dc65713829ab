import SystemPackage

/// Reads and rewrites profile files so that they are never damaged: the new content goes to a
/// temporary file in the same directory, is flushed, and is renamed over the original; an
/// exclusive lock keeps two writers (two calibrations) from interleaving.
public enum ProfileStore {
    /// Reads a whole file.
    public static func read(_ path: String) throws(FileError) -> [UInt8] {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(FilePath(path), .readOnly, options: [.closeOnExec])
        } catch {
            throw classifyOpen(error, path: path, writing: false)
        }
        defer { try? fd.close() }
        if let st = Sys.fstat(fd), st.mode & 0o170000 == 0o040000 {
            throw FileError(.notFound, path: path, "is a directory, not a profile file")
        }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n: Int
            do {
                n = try chunk.withUnsafeMutableBytes { try fd.read(into: $0, retryOnInterrupt: true) }
            } catch {
                throw FileError(.io, path: path, "cannot read: \(error)")
            }
            if n == 0 { break }
            out += chunk[0..<n]
            // Profiles are a few hundred bytes; refuse anything absurd instead of filling memory.
            if out.count > 1 << 20 {
                throw FileError(.io, path: path, "is larger than 1 MiB; this is not a profile file")
            }
        }
        return out
    }

    /// A held exclusive lock on a profile file. Release it with `unlock()`.
    public final class Lock: @unchecked Sendable {
        private var fd: FileDescriptor?
        fileprivate init(fd: FileDescriptor) { self.fd = fd }
        public func unlock() {
            try? fd?.close()  // closing the descriptor releases the flock
            fd = nil
        }
        deinit { unlock() }
    }

    /// Takes an exclusive, non-blocking lock on `path`. The lock is on the file's inode;
    /// because writers replace the inode by renaming, the lock is re-taken until it is held on
    /// the inode that `path` names.
    public static func lock(_ path: String) throws(FileError) -> Lock {
        for _ in 0..<8 {
            let fd: FileDescriptor
            do {
                fd = try FileDescriptor.open(FilePath(path), .readOnly, options: [.closeOnExec])
            } catch {
                throw classifyOpen(error, path: path, writing: false)
            }
            if let e = Sys.tryLockExclusive(fd) {
                try? fd.close()
                if e == .wouldBlock || e == .resourceTemporarilyUnavailable {
                    throw FileError(
                        .locked, path: path, "is being written by another ibeacon process",
                        hint: "wait for the other calibration to finish")
                }
                throw FileError(.io, path: path, "cannot lock: \(e)")
            }
            if let a = Sys.fstat(fd), let b = Sys.stat(path), a.inode == b.inode, a.device == b.device {
                return Lock(fd: fd)
            }
            try? fd.close()  // replaced while we waited: lock the new file instead
        }
        throw FileError(.io, path: path, "keeps being replaced while locking")
    }

    /// Checks that `path` may be replaced, without changing anything.
    public static func checkWritable(_ path: String) throws(FileError) {
        guard let st = Sys.stat(path) else {
            throw FileError(.notFound, path: path, "does not exist (it may have been moved or deleted)")
        }
        if st.mode & 0o222 == 0 {
            throw FileError(
                .cannotWrite, path: path, "is read-only",
                hint: "make it writable (chmod u+w \(path)) or use --dry-run")
        }
        if !Sys.isWritable(path) {
            throw FileError(
                .cannotWrite, path: path, "is not writable by this user",
                hint: "fix its ownership or permissions, or use --dry-run")
        }
    }

    /// Replaces `path` with `bytes` atomically: a reader (or a crash at any moment) sees either
    /// the old or the new content, never a mix. Keeps the original's permission bits.
    public static func writeAtomically(_ path: String, _ bytes: [UInt8]) throws(FileError) {
        // A profile may be a symbolic link to a shared file: replace the file, keep the link.
        let target = Sys.realPath(path) ?? path
        let existing = Sys.stat(target)
        let file = FilePath(target)
        let directory = file.removingLastComponent()
        let name = file.lastComponent?.string ?? "profile"
        let tempPath = directory.appending(
            temporaryPrefix(for: name) + "\(Sys.processID())-\(UInt32.random(in: 0...UInt32.max))")
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(
                tempPath, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec],
                permissions: [.ownerReadWrite, .groupRead, .otherRead])
        } catch {
            throw classifyOpen(error, path: path, writing: true, directory: directory.string)
        }
        var committed = false
        defer {
            try? fd.close()
            if !committed { Sys.unlink(tempPath.string) }
        }
        if let existing { Sys.fchmod(fd, existing.mode) }
        do {
            _ = try fd.writeAll(bytes)
        } catch {
            throw FileError(.io, path: path, "cannot write the new content: \(error)")
        }
        if let e = Sys.fsync(fd) {
            throw FileError(.io, path: path, "cannot flush the new content: \(e)")
        }
        if let e = Sys.rename(tempPath.string, target) {
            throw FileError(.cannotWrite, path: path, "cannot replace the file: \(e)")
        }
        committed = true
        // Make the rename itself durable.
        if let dirFD = try? FileDescriptor.open(directory.isEmpty ? "." : directory, .readOnly) {
            _ = Sys.fsync(dirFD)
            try? dirFD.close()
        }
        removeStaleTemporaryFiles(directory: directory.isEmpty ? "." : directory.string, name: name)
    }

    /// Temporary files are named `.NAME.tmp-PID-RANDOM`, next to the profile they replace.
    static func temporaryPrefix(for name: String) -> String { ".\(name).tmp-" }

    /// A writer killed between creating its temporary file and renaming it (SIGKILL, power
    /// loss) leaves `.NAME.tmp-PID-RANDOM` behind. After a successful write, remove those whose
    /// process no longer exists; a live writer's file is never touched.
    static func removeStaleTemporaryFiles(directory: String, name: String) {
        let prefix = temporaryPrefix(for: name)
        for entry in Sys.directoryEntries(directory) where entry.hasPrefix(prefix) {
            let rest = entry.dropFirst(prefix.count)
            guard let dash = rest.firstIndex(of: "-"), let pid = Int32(rest[..<dash]),
                UInt32(rest[rest.index(after: dash)...]) != nil
            else { continue }  // not a name this store makes
            if !Sys.processExists(pid) {
                Sys.unlink(directory + "/" + entry)
            }
        }
    }

    /// Creates a new file with `bytes`; refuses to replace one unless `overwrite` is set.
    public static func create(_ path: String, _ bytes: [UInt8], overwrite: Bool) throws(FileError) {
        if !overwrite, Sys.stat(path) != nil {
            throw FileError(.cannotWrite, path: path, "already exists", hint: "use --force to overwrite it")
        }
        if overwrite, Sys.stat(path) != nil { try checkWritable(path) }
        try writeAtomically(path, bytes)
    }

    private static func classifyOpen(
        _ error: any Error, path: String, writing: Bool, directory: String? = nil
    ) -> FileError {
        guard let e = error as? Errno else { return FileError(.io, path: path, "\(error)") }
        switch e {
        case .noSuchFileOrDirectory:
            if writing {
                return FileError(.cannotWrite, path: path, "directory \(directory ?? ".") does not exist")
            }
            return FileError(
                .notFound, path: path, "no such file", hint: "check the path, or create one with `ibeacon profile new`")
        case .permissionDenied, .notPermitted, .readOnlyFileSystem:
            if writing {
                return FileError(
                    .cannotWrite, path: path, "cannot create a file in \(directory ?? "."): \(e)",
                    hint: "the directory must be writable to replace the profile safely")
            }
            return FileError(.notFound, path: path, "cannot be read: permission denied")
        case .isDirectory:
            return FileError(.notFound, path: path, "is a directory, not a profile file")
        default:
            return FileError(writing ? .cannotWrite : .io, path: path, "\(e)")
        }
    }
}

/// `sd_notify` for `Type=notify` units, without libsystemd.
public enum SystemdNotifier {
    /// Sends `state` (e.g. `READY=1\nSTATUS=advertising`) to `$NOTIFY_SOCKET` when set.
    /// Returns false when there is no socket or the send failed.
    @discardableResult
    public static func notify(_ state: String, environment: [String: String]) -> Bool {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return false }
        return Sys.sendUnixDatagram(path: path, message: Array(state.utf8)) == nil
    }
}
