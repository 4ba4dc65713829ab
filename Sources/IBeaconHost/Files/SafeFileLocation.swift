import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A file's place, reached without following untrusted links: its directory, opened once, and
/// its name there. Everything that reads, locks or replaces the file goes through it.
struct Location {
    let directory: FileDescriptor
    let name: String
    /// The path as the user gave it, for messages.
    let path: String
    /// The entry's `lstat` when it was located; nil when it does not exist.
    let status: FileStatus?

    func close() { try? directory.close() }

    /// Whether both name the same directory entry, or the same file.
    func isSameEntry(as other: Location) -> Bool {
        if let a = status, let b = other.status, a.identity == b.identity { return true }
        guard name == other.name, let a = try? Sys.status(directory), let b = try? Sys.status(other.directory) else {
            return false
        }
        return a.identity == b.identity
    }

    /// Refuses anything but a regular file, from its `lstat` (before any open).
    func requireRegular(_ status: FileStatus, replacing: Bool) throws(FileError) {
        guard !status.isRegular else { return }
        if status.isDirectory && !replacing {
            var error = FileError(.notFound, path: path, "is a directory, not a profile file")
            error.cause = .isDirectory
            throw error
        }
        throw FileError(
            replacing ? .cannotWrite : .notFound, path: path,
            "is \(status.typeName), not a regular file; ibeacon \(replacing ? "does not replace" : "does not read") it",
            hint: "give the path of a profile file")
    }

    /// Opens the existing regular file for reading: refused from its `lstat` when it is not
    /// regular, opened `O_NOFOLLOW | O_NONBLOCK`, then checked again with `fstat` (it must
    /// still be the inode that was looked at).
    func openExisting() throws(FileError) -> (FileDescriptor, FileStatus) {
        let seen: FileStatus
        do throws(Errno) {
            seen = try Sys.lstat(at: directory, name)
        } catch {
            throw SafeFile.lookupFailure(error, path: path, at: path, writing: false)
        }
        try requireRegular(seen, replacing: false)
        let fd: FileDescriptor
        do throws(Errno) {
            fd = try Sys.open(at: directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        } catch {
            throw openFailure(error, writing: false)
        }
        guard let status = try? Sys.status(fd), status.isRegular, status.identity == seen.identity else {
            try? fd.close()
            throw FileError(.io, path: path, "was replaced while ibeacon opened it", hint: "run the command again")
        }
        try? Sys.setNonBlocking(fd, false)  // a regular file: the open no longer needs O_NONBLOCK
        return (fd, status)
    }

    /// Reads the whole existing file, refusing one over `maximumSize`.
    func readExisting() throws(FileError) -> (bytes: [UInt8], status: FileStatus) {
        let (fd, status) = try openExisting()
        defer { try? fd.close() }
        return (try readAll(fd, status), status)
    }

    /// Reads an open file to its end, refusing one over `maximumSize`.
    func readAll(_ fd: FileDescriptor, _ status: FileStatus) throws(FileError) -> [UInt8] {
        let tooLarge = FileError(
            .badData, path: path, "is larger than 1 MiB; this is not a profile file",
            hint: "profiles are a few hundred bytes: check the file name")
        if status.size > SafeFile.maximumSize { throw tooLarge }
        let bytes: [UInt8]
        do throws(Errno) {
            bytes = try Sys.readToEnd(fd, limit: SafeFile.maximumSize)
        } catch {
            throw FileError(.io, path: path, "cannot read: \(error)")
        }
        if bytes.count > SafeFile.maximumSize { throw tooLarge }  // grew while reading
        return bytes
    }

    func openFailure(_ e: Errno, writing: Bool) -> FileError {
        var error = openFailureMessage(e, writing: writing)
        error.cause = e
        return error
    }

    private func openFailureMessage(_ e: Errno, writing: Bool) -> FileError {
        switch e {
        case .permissionDenied, .notPermitted, .readOnlyFileSystem:
            if writing {
                return FileError(
                    .cannotWrite, path: path, "cannot create a file in its directory: \(e)",
                    hint: "the directory must be writable to replace the file safely")
            }
            return FileError(.notFound, path: path, "cannot be read: permission denied")
        case .fileExists:
            return FileError(.cannotWrite, path: path, "already exists (it appeared while ibeacon was writing)")
        case .tooManySymbolicLinkLevels:
            return FileError(
                writing ? .cannotWrite : .notFound, path: path,
                "was replaced by a symbolic link while ibeacon opened it; nothing was written")
        case .noSuchFileOrDirectory where writing:
            // Its directory was found: ENOENT on creating is a file system that takes no new
            // files (/proc, /sys), not a missing directory.
            return FileError(
                .cannotWrite, path: path, "cannot be created: its directory takes no new files (\(e))",
                hint: "choose a directory on an ordinary file system, such as /etc/ibeacon")
        default:
            return SafeFile.lookupFailure(e, path: path, at: path, writing: writing)
        }
    }

    /// Checks, without changing anything, that the file (when it exists) is regular and not
    /// read-only, and that its directory accepts a new file (by creating and removing one: the
    /// only test that sees read-only mounts and ACLs).
    func checkReplaceable() throws(FileError) {
        if let status {
            try requireRegular(status, replacing: true)
            if status.mode & 0o222 == 0 {
                throw FileError(
                    .cannotWrite, path: path, "is read-only",
                    hint: "make it writable (chmod u+w \(path)) or use --dry-run")
            }
            if !Sys.isWritable(at: directory, name) {
                throw FileError(
                    .cannotWrite, path: path, "is not writable by this user",
                    hint: "fix its ownership or permissions, or use --dry-run")
            }
        }
        let (fd, temporary) = try createTemporary(like: nil)
        try? fd.close()
        try? Sys.unlink(at: directory, temporary)
    }

    /// Creates `.NAME.tmp-PID-RANDOM` with `O_EXCL | O_NOFOLLOW`; with `like`, gives it that
    /// file's owner, group and permission bits (never set-ID bits).
    func createTemporary(like original: FileStatus?, mode: UInt32 = 0o644) throws(FileError) -> (FileDescriptor, String)
    {
        for _ in 0..<16 {
            let temporary =
                SafeFile.temporaryPrefix(for: name)
                + "\(Sys.processID())-\(UInt32.random(in: 0...UInt32.max))"
            let fd: FileDescriptor
            do throws(Errno) {
                fd = try Sys.open(
                    at: directory, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK,
                    mode: original == nil ? mode : 0o600)
            } catch .fileExists {
                continue  // someone else's name: pick another
            } catch {
                throw openFailure(error, writing: true)
            }
            if let original { takeOwnerAndMode(of: fd, uid: original.uid, gid: original.gid, mode: original.mode) }
            return (fd, temporary)
        }
        throw FileError(.cannotWrite, path: path, "cannot create a temporary file next to it (names keep colliding)")
    }

    /// Writes `bytes` to a new temporary file and flushes it.
    private func writeTemporary(_ bytes: [UInt8], like original: FileStatus?) throws(FileError) -> String {
        let (fd, temporary) = try createTemporary(like: original)
        defer { try? fd.close() }
        do throws(Errno) {
            try Sys.writeAll(fd, bytes)
        } catch {
            try? Sys.unlink(at: directory, temporary)
            throw FileError(.io, path: path, "cannot write the new content: \(error)")
        }
        do throws(Errno) {
            try Sys.fsync(fd)
        } catch {
            try? Sys.unlink(at: directory, temporary)
            throw FileError(.io, path: path, "cannot flush the new content: \(error)")
        }
        return temporary
    }

    /// Renames `temporary` over the name, provided the name still holds `expected`'s inode.
    func commit(_ temporary: String, expecting expected: FileStatus) throws(FileError) {
        guard let now = try? Sys.lstat(at: directory, name), now.isRegular, now.identity == expected.identity else {
            throw FileError(
                .cannotWrite, path: path,
                "was replaced, moved or removed by another program while ibeacon was using it; nothing was written",
                hint: "check the file, then run the command again")
        }
        do throws(Errno) {
            try Sys.rename(at: directory, temporary, name)
        } catch {
            throw FileError(.cannotWrite, path: path, "cannot replace the file: \(error)")
        }
    }

    /// Replaces the file holding `expected`'s inode with `bytes`.
    func replace(with bytes: [UInt8], expecting expected: FileStatus) throws(FileError) {
        // Held open until the rename, so that its inode number cannot be reused by a file
        // made in its place.
        let held: FileDescriptor
        let current: FileStatus
        do throws(FileError) {
            (held, current) = try openExisting()
        } catch {
            throw FileError(
                .cannotWrite, path: path,
                "was replaced, moved or removed by another program since ibeacon read it (now it \(error.message)); nothing was written",
                hint: "check the file, then run the command again")
        }
        defer { try? held.close() }
        guard current.identity == expected.identity else {
            throw FileError(
                .cannotWrite, path: path,
                "was replaced by another program since ibeacon read it; nothing was written",
                hint: "check the file, then run the command again")
        }
        let temporary = try writeTemporary(bytes, like: current)
        do throws(FileError) {
            try commit(temporary, expecting: expected)
        } catch {
            try? Sys.unlink(at: directory, temporary)
            throw error
        }
        syncDirectory()
        SafeFile.removeStaleTemporaryFiles(in: directory, name: name)
    }

    /// Creates the file with `bytes`; fails if the name exists by then (`linkat` never
    /// replaces).
    func createNew(_ bytes: [UInt8]) throws(FileError) {
        let temporary = try writeTemporary(bytes, like: nil)
        defer { try? Sys.unlink(at: directory, temporary) }
        do throws(Errno) {
            try Sys.link(at: directory, temporary, name)
        } catch .fileExists {
            throw FileError(.cannotWrite, path: path, "already exists", hint: "use --force to overwrite it")
        } catch {
            throw FileError(.cannotWrite, path: path, "cannot create the file: \(error)")
        }
        syncDirectory()
    }

    /// Makes a rename durable (`fsync` of the directory; an `O_PATH` descriptor cannot be
    /// flushed, so the directory is opened for reading through it).
    private func syncDirectory() {
        if let fd = try? Sys.open(at: directory, ".", O_RDONLY | O_DIRECTORY) {
            try? Sys.fsync(fd)
            try? fd.close()
        }
    }

    /// Gives a file this process made `uid`/`gid` (root, or the owner: both; anyone else keeps
    /// at least the group when they belong to it) and then `mode`'s permission bits: `fchown`
    /// before `fchmod`, because it clears set-ID bits. Failures leave the safer default.
    func takeOwnerAndMode(of fd: FileDescriptor, uid: UInt32, gid: UInt32, mode: UInt32) {
        do throws(Errno) {
            try Sys.fchown(fd, uid: uid, gid: gid)
        } catch {
            try? Sys.fchown(fd, uid: UInt32.max, gid: gid)
        }
        try? Sys.fchmod(fd, mode)
    }
}
