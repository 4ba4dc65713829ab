import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Reads and rewrites profile files so that they are never damaged and never used to damage
/// another file, even as root in a directory other users can write (`/tmp`):
///
/// - A path is walked one component at a time (`openat` with `O_NOFOLLOW`). A symbolic link is
///   followed only when it belongs to the user running ibeacon or to root: a link someone else
///   planted (in `/tmp`, or in their home for root to follow) is refused, whatever the kernel's
///   `fs.protected_symlinks` says. A symlinked profile that is followed means "the file it
///   names": that file is read and replaced, the link is kept.
/// - The directory is opened once; the file is read, checked and replaced relative to that
///   descriptor. The new content goes to a temporary file there, gets the old file's owner,
///   group and permission bits (never set-user-ID, set-group-ID or sticky bits), is flushed,
///   and is renamed over the old name only while that name still holds the inode that was
///   read (`renameat` replaces a directory entry: a link swapped in at the last moment is
///   itself replaced, its target never written).
/// - Only regular files are read or replaced: a FIFO or device is refused from its `lstat`
///   before any open, and every open is `O_NONBLOCK`, so neither can block the tool.
/// - Writers of one profile exclude each other with a lock file `.NAME.lock` next to it, there
///   while the lock is held, whose permission bits are the profile's write bits only: a user
///   who may only read the profile cannot open it, so cannot hold the lock to block root's
///   calibration (a `flock` on the profile itself can be taken by any reader). The lock file's
///   inode does not change when an editor replaces the profile by rename, so such an edit does
///   not defeat the lock either.
public enum ProfileStore {
    /// Profiles are a few hundred bytes; anything over this is refused as not a profile.
    public static let maximumSize = 1 << 20

    /// Reads a whole profile file.
    public static func read(_ path: String) throws(FileError) -> [UInt8] {
        let location = try locate(path, writing: false)
        defer { location.close() }
        return try location.readExisting().bytes
    }

    /// Reads a file that holds a secret (the MQTT password) by the rules of a profile read, with
    /// what ssh would say of a private key in its place (`secretFileWarnings`).
    public static func readSecret(_ path: String) throws(FileError) -> (bytes: [UInt8], warnings: [String]) {
        let location = try locate(path, writing: false)
        defer { location.close() }
        let (bytes, status) = try location.readExisting()
        let warnings = secretFileWarnings(
            path: path, mode: status.mode, owner: status.uid, user: Sys.effectiveUserID())
        return (bytes, warnings)
    }

    /// What is wrong with a secret's file, as ssh warns of a private key's: other users may read
    /// or change it (its mode gives others any access, or its group write access), or it belongs
    /// to someone other than root and `user`, who runs ibeacon (that owner can read it and change
    /// it at will). Each warning names the file, what is wrong and the command that fixes it.
    public static func secretFileWarnings(path: String, mode: UInt32, owner: UInt32, user: UInt32) -> [String] {
        var out: [String] = []
        let bits = mode & 0o777
        let octal = "0" + String(bits, radix: 8)
        if bits & 0o006 != 0 || bits & 0o020 != 0 {
            let who = bits & 0o004 != 0 ? "readable by every user" : "writable by users other than its owner"
            out.append(
                "\(path) holds a password but is \(who) (mode \(octal)); fix it: chmod 600 \(path) "
                    + "(or 640 with a group of its own)")
        }
        if owner != 0 && owner != user {
            let fix = user == 0 ? "chown root \(path)" : "chown \(user) \(path) (as root)"
            out.append(
                "\(path) holds a password but belongs to uid \(owner), neither root nor uid \(user) running ibeacon: "
                    + "that user can read it and change it; fix it: \(fix)")
        }
        return out
    }

    /// Opens an existing file for reading by the rules of a profile read, without its size
    /// limit (a capture file): the path walked without following other users' links, anything
    /// but a regular file refused from its `lstat` before any open (a FIFO cannot block), the
    /// open `O_NOFOLLOW | O_NONBLOCK` and checked with `fstat` to be the inode looked at.
    public static func openForReading(_ path: String) throws(FileError) -> FileDescriptor {
        let location = try locate(path, writing: false)
        defer { location.close() }
        guard location.status != nil else {
            var error = FileError(.notFound, path: path, "does not exist")
            error.cause = .noSuchFileOrDirectory
            throw error
        }
        return try location.openExisting().0
    }

    /// Whether `path` names an existing file (through links ibeacon may follow); `writing`
    /// classifies a refusal as "cannot write" rather than "cannot read".
    public static func exists(_ path: String, writing: Bool = false) throws(FileError) -> Bool {
        let location = try locate(path, writing: writing)
        defer { location.close() }
        return location.status != nil
    }

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
        let location = try locate(path, writing: true)
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

    /// Checks that `path` may be replaced (or, when it does not exist, created), without
    /// changing anything: the file is regular and not read-only, and its directory accepts a
    /// new file.
    public static func checkWritable(_ path: String, mayCreate: Bool = false) throws(FileError) {
        let location = try locate(path, writing: true)
        defer { location.close() }
        if location.status == nil && !mayCreate {
            throw FileError(.notFound, path: path, "does not exist (it may have been moved or deleted)")
        }
        try location.checkReplaceable()
    }

    /// Replaces the file at `path` with `bytes` atomically: a reader (or a crash at any
    /// moment) sees either the old or the new content, never a mix. Keeps the original's
    /// owner, group and permission bits (without set-ID bits).
    public static func writeAtomically(_ path: String, _ bytes: [UInt8]) throws(FileError) {
        let location = try locate(path, writing: true)
        defer { location.close() }
        guard let existing = location.status else {
            try location.createNew(bytes)
            return
        }
        try location.requireRegular(existing, replacing: true)
        try location.replace(with: bytes, expecting: existing)
    }

    /// Creates a new file with `bytes`; refuses to replace one unless `overwrite` is set, and
    /// never replaces anything but a regular file (not a directory, FIFO or device).
    public static func create(_ path: String, _ bytes: [UInt8], overwrite: Bool) throws(FileError) {
        let location = try locate(path, writing: true)
        defer { location.close() }
        guard let existing = location.status else {
            try location.createNew(bytes)
            return
        }
        guard overwrite else {
            throw FileError(.cannotWrite, path: path, "already exists", hint: "use --force to overwrite it")
        }
        try location.requireRegular(existing, replacing: true)
        try location.checkReplaceable()
        try location.replace(with: bytes, expecting: existing)
    }

    /// The permission bits of a new recording: a capture holds the addresses of people's
    /// phones, so only its owner may read it (`chmod` it to share it).
    public static let recordingMode: UInt32 = 0o600

    /// Opens `path` for a new recording (a btsnoop capture), mode `recordingMode`: a new file is created with
    /// `O_EXCL`; an existing one is refused unless `overwrite`, and then replaced by a new
    /// inode (renamed over it), never truncated, so a hard or symbolic link to another file is
    /// never written through. Refuses the file `avoiding` names (the profile being written).
    public static func createForRecording(
        _ path: String, overwrite: Bool, avoiding other: String? = nil, option: String = "--overwrite-btsnoop"
    ) throws(FileError) -> FileDescriptor {
        let location = try locate(path, writing: true)
        defer { location.close() }
        if let other, let otherLocation = try? locate(other, writing: false) {
            defer { otherLocation.close() }
            if location.isSameEntry(as: otherLocation) {
                throw FileError(
                    .cannotWrite, path: path, "is the profile this command writes; a capture would destroy it",
                    hint: "give the capture another file name")
            }
        }
        guard let existing = location.status else {
            do throws(Errno) {
                return try Sys.open(
                    at: location.directory, location.name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK,
                    mode: recordingMode)
            } catch {
                throw location.openFailure(error, writing: true)
            }
        }
        guard overwrite else {
            throw FileError(
                .cannotWrite, path: path, "already exists; ibeacon does not overwrite it",
                hint: "remove it, choose another name, or add \(option)")
        }
        try location.requireRegular(existing, replacing: true)
        let (fd, temporary) = try location.createTemporary(like: nil, mode: recordingMode)
        do throws(FileError) {
            try location.commit(temporary, expecting: existing)
        } catch {
            try? fd.close()
            try? Sys.unlink(at: location.directory, temporary)
            throw error
        }
        return fd
    }

    /// Temporary files are named `.NAME.tmp-PID-RANDOM`, next to the profile they replace.
    static func temporaryPrefix(for name: String) -> String { ".\(name).tmp-" }

    /// The lock file of profile `name`, next to it.
    static func lockName(for name: String) -> String { ".\(name).lock" }

    /// A writer killed between creating its temporary file and renaming it (SIGKILL, power
    /// loss) leaves `.NAME.tmp-PID-RANDOM` behind. After a successful write, remove those whose
    /// process no longer exists; a live writer's file is never touched.
    static func removeStaleTemporaryFiles(in directory: FileDescriptor, name: String) {
        let prefix = temporaryPrefix(for: name)
        for entry in (try? Sys.directoryEntries(at: directory)) ?? [] where entry.hasPrefix(prefix) {
            let rest = entry.dropFirst(prefix.count)
            guard let dash = rest.firstIndex(of: "-"), let pid = Int32(rest[..<dash]),
                UInt32(rest[rest.index(after: dash)...]) != nil
            else { continue }  // not a name this store makes
            if !Sys.processExists(pid) {
                try? Sys.unlink(at: directory, entry)
            }
        }
    }

    /// Links followed per path, like the kernel's MAXSYMLINKS.
    static let maximumLinks = 40

    /// Whether a symbolic link owned by `owner` may be followed by a process whose effective
    /// user is `user`: only its own links and root's. The kernel's `fs.protected_symlinks`
    /// (off on some systems) refuses links in sticky world-writable directories only; this
    /// also refuses, for root, a link a user made in a directory of their own.
    static func mayFollow(linkOwner owner: UInt32, user: UInt32) -> Bool { owner == user || owner == 0 }

    /// Walks `path` one component at a time without letting the kernel follow any link, and
    /// returns its directory, opened (`O_PATH`), and the last name with its `lstat`.
    static func locate(_ path: String, writing: Bool) throws(FileError) -> Location {
        guard !path.isEmpty else { throw FileError(.notFound, path: path, "an empty file name") }
        var walk = try PathWalk(path, writing: writing)
        while true {
            guard let component = walk.pending.popLast() else {
                try? walk.current.close()
                throw FileError(.notFound, path: path, "is a directory, not a profile file")
            }
            if component == "." { continue }
            if component == ".." {
                try walk.enter("..", shown: walk.shown + "/..")
                continue
            }
            let here = walk.shown + "/" + component
            guard let status = try walk.lstat(component, here: here) else {
                return Location(directory: walk.current, name: component, path: path, status: nil)
            }
            if status.isSymbolicLink {
                try walk.follow(component, status: status, here: here)
                continue
            }
            if walk.pending.isEmpty {
                return Location(directory: walk.current, name: component, path: path, status: status)
            }
            guard status.isDirectory else {
                try? walk.current.close()
                throw FileError(walk.kind, path: path, "\(here) is \(status.typeName), not a directory")
            }
            try walk.enter(component, shown: here)
        }
    }

    /// Where `locate` is in its walk: the directory it holds open, the components still to
    /// look at (last first), the path shown in messages, and the links followed so far.
    private struct PathWalk {
        let path: String
        let writing: Bool
        let kind: FileError.Kind
        let user: UInt32
        var pending: [String]
        var shown: String
        var current: FileDescriptor
        var links = 0

        init(_ path: String, writing: Bool) throws(FileError) {
            self.path = path
            self.writing = writing
            kind = writing ? .cannotWrite : .notFound
            user = Sys.effectiveUserID()
            pending = Array(path.split(separator: "/", omittingEmptySubsequences: true).map(String.init).reversed())
            shown = path.hasPrefix("/") ? "" : "."
            current = try openDirectory(at: nil, path.hasPrefix("/") ? "/" : ".", shown: path, writing: writing)
        }

        /// Opens directory `name` below the current one and makes it current.
        mutating func enter(_ name: String, shown: String) throws(FileError) {
            let next: FileDescriptor
            do throws(FileError) {
                next = try openDirectory(at: current, name, shown: shown, writing: writing)
            } catch {
                try? current.close()
                throw error
            }
            try? current.close()
            current = next
            self.shown = shown
        }

        /// The `lstat` of `component`; nil when it is the last one and does not exist.
        func lstat(_ component: String, here: String) throws(FileError) -> FileStatus? {
            do throws(Errno) {
                return try Sys.lstat(at: current, component)
            } catch let e {
                if pending.isEmpty && e == .noSuchFileOrDirectory { return nil }
                try? current.close()
                throw lookupFailure(e, path: path, at: here, writing: writing)
            }
        }

        /// Puts the target of link `component` in front of the components still to walk, after
        /// checking who owns it; an absolute target restarts at `/`.
        mutating func follow(_ component: String, status: FileStatus, here: String) throws(FileError) {
            guard mayFollow(linkOwner: status.uid, user: user) else {
                try? current.close()
                throw FileError(
                    kind, path: path,
                    (pending.isEmpty && links == 0 ? "is" : "goes through \(here), which is")
                        + " a symbolic link owned by uid \(status.uid); ibeacon (uid \(user)) follows only its own user's and root's links, so that a link planted in a shared directory cannot redirect it",
                    hint: "give the real file's path (readlink -f) or remove the link")
            }
            links += 1
            let text: String
            do throws(Errno) {
                text = try Sys.readLink(at: current, component)
                if links > maximumLinks { throw .tooManySymbolicLinkLevels }
            } catch {
                try? current.close()
                throw FileError(kind, path: path, "cannot follow the symbolic link \(here): \(error)")
            }
            pending.append(contentsOf: text.split(separator: "/").map(String.init).reversed())
            if text.hasPrefix("/") {
                try? current.close()
                current = try openDirectory(at: nil, "/", shown: text, writing: writing)
                shown = ""
            }
        }
    }

    private static func openDirectory(
        at directory: FileDescriptor?, _ name: String, shown: String, writing: Bool
    ) throws(FileError) -> FileDescriptor {
        do throws(Errno) {
            return try Sys.open(at: directory, name, Sys.openPathOnly | O_DIRECTORY | O_NOFOLLOW)
        } catch {
            throw lookupFailure(error, path: shown, at: shown, writing: writing)
        }
    }

    /// A failed `lstat`/`open` on the way to a file. EACCES is "cannot be looked up", never
    /// "does not exist".
    fileprivate static func lookupFailure(_ e: Errno, path: String, at here: String, writing: Bool) -> FileError {
        var error = lookupFailureMessage(e, path: path, at: here, writing: writing)
        error.cause = e
        return error
    }

    private static func lookupFailureMessage(_ e: Errno, path: String, at here: String, writing: Bool) -> FileError {
        let kind: FileError.Kind = writing ? .cannotWrite : .notFound
        let place = here.hasPrefix("./") ? String(here.dropFirst(2)) : here
        switch e {
        case .noSuchFileOrDirectory:
            if writing {
                return FileError(.cannotWrite, path: path, "directory \(place) does not exist")
            }
            return FileError(
                .notFound, path: path, "no such file (\(place) does not exist)",
                hint: "check the path, or create one with `ibeacon profile new`")
        case .permissionDenied, .notPermitted:
            return FileError(
                kind, path: path, "\(place) cannot be looked up: permission denied",
                hint: "run as a user who may read that directory")
        case .notDirectory:
            return FileError(kind, path: path, "\(place) is not a directory")
        case .tooManySymbolicLinkLevels:
            return FileError(kind, path: path, "\(place) was replaced by a symbolic link while ibeacon opened it")
        default:
            return FileError(writing ? .cannotWrite : .io, path: path, "\(place): \(e)")
        }
    }
}

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
            throw ProfileStore.lookupFailure(error, path: path, at: path, writing: false)
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
        if status.size > ProfileStore.maximumSize { throw tooLarge }
        let bytes: [UInt8]
        do throws(Errno) {
            bytes = try Sys.readToEnd(fd, limit: ProfileStore.maximumSize)
        } catch {
            throw FileError(.io, path: path, "cannot read: \(error)")
        }
        if bytes.count > ProfileStore.maximumSize { throw tooLarge }  // grew while reading
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
        default:
            return ProfileStore.lookupFailure(e, path: path, at: path, writing: writing)
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
                ProfileStore.temporaryPrefix(for: name)
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
        ProfileStore.removeStaleTemporaryFiles(in: directory, name: name)
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

    /// Gives a file this process made `uid`/`gid` (root, or the owner: both; anyone else keeps
    /// at least the group when they belong to it) and then `mode`'s permission bits: `fchown`
    /// before `fchmod`, because it clears set-ID bits. Failures leave the safer default.
    private func takeOwnerAndMode(of fd: FileDescriptor, uid: UInt32, gid: UInt32, mode: UInt32) {
        do throws(Errno) {
            try Sys.fchown(fd, uid: uid, gid: gid)
        } catch {
            try? Sys.fchown(fd, uid: UInt32.max, gid: gid)
        }
        try? Sys.fchmod(fd, mode)
    }
}
