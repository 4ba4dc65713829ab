import IBeaconCore
import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The profile-specific part of the file layer (`SafeFile` does the reading and replacing):
/// the lock that keeps writers of one profile apart.
///
/// Writers of one profile exclude each other with a lock file `.NAME.lock` next to it, there
/// while the lock is held, whose permission bits are the profile's write bits only: a user
/// who may only read the profile cannot open it, so cannot hold the lock to block root's
/// calibration (a `flock` on the profile itself can be taken by any reader). The lock file's
/// inode does not change when an editor replaces the profile by rename, so such an edit does
/// not defeat the lock either.
public enum ProfileStore {
    /// A held exclusive lock on a profile file, with its directory kept open: `read()` and
    /// `replace(with:)` act on the file that was locked, whatever happens to the path.
    /// Release it with `unlock()`.
    public final class Lock: @unchecked Sendable {
        private var location: Location?
        private var lockFile: FileDescriptor?
        /// The inode and status of the file as last read through `read()`, and that file kept
        /// open: an inode number is unique only while the inode exists.
        private var lastRead: FileStatus?
        private var lastReadFile: FileDescriptor?

        fileprivate init(location: Location, lockFile: FileDescriptor) {
            self.location = location
            self.lockFile = lockFile
        }

        /// The profile's bytes, read under the lock; `replace(with:)` replaces this inode only.
        public func read() throws(FileError) -> [UInt8] {
            guard let location else { throw FileError(.io, path: "", "the profile lock was released") }
            let fd: FileDescriptor
            let status: FileStatus
            do throws(FileError) {
                (fd, status) = try location.openExisting()
            } catch {
                // A re-read under the lock starts a write: say that nothing was written.
                guard lastRead != nil else { throw error }
                throw FileError(
                    .cannotWrite, path: location.path,
                    "was replaced, moved or removed by another program since ibeacon read it (now it \(error.message)); nothing was written",
                    hint: "check the file, then run the command again")
            }
            let bytes: [UInt8]
            do throws(FileError) {
                bytes = try location.readAll(fd, status)
            } catch {
                try? fd.close()
                throw error
            }
            if let lastReadFile { try? lastReadFile.close() }
            lastRead = status
            lastReadFile = fd
            return bytes
        }

        /// Checks, without changing anything, that the profile can be replaced: the file is
        /// not read-only and its directory accepts a new file.
        public func checkWritable() throws(FileError) {
            guard let location else { throw FileError(.io, path: "", "the profile lock was released") }
            try location.checkReplaceable()
        }

        /// Replaces the file last returned by `read()` with `bytes`, atomically.
        public func replace(with bytes: [UInt8]) throws(FileError) {
            guard let location, let lastRead else {
                throw FileError(.io, path: location?.path ?? "", "replace(with:) before read()")
            }
            try location.replace(with: bytes, expecting: lastRead)
        }

        /// Removes the lock file (while still holding it: a taker that opened it before checks,
        /// once it holds the lock, that the name still names that inode, and starts again) and
        /// releases the lock.
        public func unlock() {
            if let lockFile, let location {
                let lockName = ProfileStore.lockName(for: location.name)
                if let held = try? Sys.status(lockFile), let named = try? Sys.lstat(at: location.directory, lockName),
                    held.identity == named.identity
                {
                    try? Sys.unlink(at: location.directory, lockName)
                }
            }
            if let lockFile { try? lockFile.close() }  // closing the descriptor releases the flock
            lockFile = nil
            if let lastReadFile { try? lastReadFile.close() }
            lastReadFile = nil
            location?.close()
            location = nil
        }
        deinit { unlock() }
    }

    /// Takes the exclusive, non-blocking lock of the profile at `path` (see the type's
    /// comment for why it is a separate lock file).
    public static func lock(_ path: String) throws(FileError) -> Lock {
        let location = try SafeFile.locate(path, writing: true)
        do throws(FileError) {
            guard let profile = location.status else {
                throw FileError(.notFound, path: path, "does not exist (it may have been moved or deleted)")
            }
            try location.requireRegular(profile, replacing: true)
            let lockFile = try location.takeLock(profile: profile)
            return Lock(location: location, lockFile: lockFile)
        } catch {
            location.close()
            throw error
        }
    }

    /// The lock file of profile `name`, next to it.
    static func lockName(for name: String) -> String { ".\(name).lock" }

    /// The files of `profile check FILE…`, whose words the parser leaves as they are: the first
    /// `--` ends the options and is dropped; every word after it is a file, whatever it starts with.
    public static func fileArguments(_ words: [String]) -> [String] {
        guard let end = words.firstIndex(of: "--") else { return words }
        return Array(words[..<end] + words[(end + 1)...])
    }

    /// What is wrong with the words of `profile check FILE…` (nil: nothing): none is a file, or
    /// a word before `--` starts with - and is no file (an unknown option, `--jsn`).
    public static func fileArgumentsProblem(_ words: [String]) -> String? {
        if fileArguments(words).isEmpty { return "Missing expected argument '<file> ...'" }
        let options = words.prefix { $0 != "--" }
        for word in options where word.hasPrefix("-") && (try? SafeFile.exists(word)) != true {
            return "unknown option '\(word)' (and no file of that name); a file whose name starts with - can "
                + "also be given as ./\(word) or after --"
        }
        return nil
    }
}

extension Profile {
    /// The profile at `path`: read through the safe-file layer (`SafeFile.read`: bounded, no
    /// FIFO or device opened) and parsed (`load(bytes:file:)`).
    public static func load(path: String) throws -> Profile { try load(bytes: SafeFile.read(path), file: path) }
}

extension Location {
    /// Opens (creating it if needed) and locks `.NAME.lock`. Its permission bits are the
    /// profile's write bits, its owner and group the profile's (when root makes it), so only
    /// someone who may write the profile can open it. A lock file that does not look like
    /// that (planted by another user, or a link) is removed and made again.
    func takeLock(profile: FileStatus) throws(FileError) -> FileDescriptor {
        let lockName = ProfileStore.lockName(for: name)
        let lockPath = path.contains("/") ? String(path[...path.lastIndex(of: "/")!]) + lockName : lockName
        let bits = (profile.mode & 0o222) | 0o200
        let user = Sys.effectiveUserID()
        for _ in 0..<8 {
            // Looked at before any open: a FIFO, socket, device, directory or link someone
            // planted is never opened (a FIFO's open could block, or wake its reader), only
            // removed like any lock file ibeacon did not make.
            if let planted = try? Sys.lstat(at: directory, lockName), !planted.isRegular {
                let link = planted.isSymbolicLink
                try removeUntrusted(
                    lockName, identity: link ? nil : planted.identity, shown: lockPath,
                    why: link
                        ? "is a symbolic link"
                        : "is \(planted.typeName) of uid \(planted.uid), which ibeacon did not make")
                continue
            }
            guard let (fd, created) = try openLockFile(lockName, shown: lockPath) else { continue }
            if created { takeOwnerAndMode(of: fd, uid: profile.uid, gid: profile.gid, mode: bits) }
            guard
                let status = try trustedLockStatus(
                    fd, lockName, shown: lockPath, profile: profile, bits: bits, user: user)
            else { continue }
            try lock(fd, shown: lockPath)
            // The name must still hold the inode locked: one removed (by a run that found it
            // untrusted) and made again in between would not exclude anyone.
            if let now = try? Sys.lstat(at: directory, lockName), now.identity == status.identity {
                return fd
            }
            try? fd.close()
        }
        throw FileError(
            .io, path: path, "its lock file \(lockPath) keeps being replaced; is another program removing it?")
    }

    /// Opens the lock file, creating it (write-only for its owner) when there is none; nil when
    /// it changed under us (removed, or swapped for a FIFO, directory, socket or link): look again.
    private func openLockFile(_ lockName: String, shown lockPath: String) throws(FileError) -> (FileDescriptor, Bool)? {
        do throws(Errno) {
            do throws(Errno) {
                let fd = try Sys.open(
                    at: directory, lockName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK, mode: 0o200)
                return (fd, true)
            } catch .fileExists {
                return (try Sys.open(at: directory, lockName, O_WRONLY | O_NOFOLLOW | O_NONBLOCK), false)
            }
        } catch {
            // Removed meanwhile, or swapped for a FIFO (ENXIO: no reader), directory or
            // socket after the lstat above: look again.
            if [.noSuchFileOrDirectory, .noSuchAddressOrDevice, .isDirectory].contains(error) { return nil }
            if error == .tooManySymbolicLinkLevels {
                try removeUntrusted(lockName, identity: nil, shown: lockPath, why: "is a symbolic link")
                return nil
            }
            if error == .permissionDenied {
                throw FileError(
                    .cannotWrite, path: path, "cannot open its lock file \(lockPath): permission denied",
                    hint: "only users who may write the profile may calibrate it")
            }
            throw FileError(.cannotWrite, path: path, "cannot open its lock file \(lockPath): \(error)")
        }
    }

    /// The open lock file's status when it looks like one ibeacon made (a regular file with one
    /// link, a trusted owner, no more than the profile's write bits); otherwise closes it,
    /// removes an untrusted one and returns nil: look again.
    private func trustedLockStatus(
        _ fd: FileDescriptor, _ lockName: String, shown lockPath: String, profile: FileStatus, bits: UInt32,
        user: UInt32
    ) throws(FileError) -> FileStatus? {
        guard let status = try? Sys.status(fd) else {
            try? fd.close()
            throw FileError(.io, path: path, "cannot inspect its lock file \(lockPath)")
        }
        if status.links == 0 {  // removed by its holder's unlock since we opened it
            try? fd.close()
            return nil
        }
        let ownerTrusted =
            status.uid == user || status.uid == 0 || status.uid == profile.uid
            || (status.gid == profile.gid && profile.mode & 0o020 != 0)
        let modeTrusted = status.mode & 0o7777 & ~bits == 0
        guard status.isRegular, status.links == 1, ownerTrusted, modeTrusted else {
            try? fd.close()
            try removeUntrusted(
                lockName, identity: status.identity, shown: lockPath,
                why:
                    "belongs to uid \(status.uid) with mode \(String(status.mode & 0o7777, radix: 8)), which ibeacon did not make"
            )
            return nil
        }
        return status
    }

    /// Takes the lock without waiting; closes `fd` when another process holds it.
    private func lock(_ fd: FileDescriptor, shown lockPath: String) throws(FileError) {
        do throws(Errno) {
            try Sys.tryLockExclusive(fd)
        } catch {
            try? fd.close()
            if error == .wouldBlock || error == .resourceTemporarilyUnavailable {
                throw FileError(
                    .locked, path: path, "is being written by another ibeacon process (it holds \(lockPath))",
                    hint: "wait for the other calibration to finish")
            }
            throw FileError(.io, path: path, "cannot lock \(lockPath): \(error)")
        }
    }

    /// Removes a lock file ibeacon did not make, provided the name still holds the inode
    /// inspected (`identity`; nil for a symbolic link, which no ibeacon makes).
    private func removeUntrusted(
        _ lockName: String, identity: FileIdentity?, shown: String, why: String
    ) throws(FileError) {
        let now = try? Sys.lstat(at: directory, lockName)
        if let identity, now?.identity != identity { return }  // replaced meanwhile: look again
        if identity == nil, now?.isSymbolicLink != true { return }
        do throws(Errno) {
            if now?.isDirectory == true {
                try removePlantedDirectory(lockName)
            } else {
                try Sys.unlink(at: directory, lockName)
            }
        } catch  where error != .noSuchFileOrDirectory {
            throw FileError(
                .cannotWrite, path: path, "its lock file \(shown) \(why), and cannot be removed: \(error)",
                hint: "remove it (rm \(shown)) and run the command again")
        } catch {}
    }

    /// Removes a directory planted at a lock file's name: `rmdir` when it is empty, else it is
    /// renamed out of the way (`.NAME.lock.planted-PID-RANDOM`, in the same directory; nothing
    /// in it is opened, followed or deleted) and the rename is logged by the caller's message.
    private func removePlantedDirectory(_ lockName: String) throws(Errno) {
        do throws(Errno) {
            try Sys.removeDirectory(at: directory, lockName)
        } catch  where error == .directoryNotEmpty || error == .fileExists {
            let aside = "\(lockName).planted-\(Sys.processID())-\(UInt32.random(in: 0...UInt32.max))"
            try Sys.rename(at: directory, lockName, aside)
        }
    }
}
