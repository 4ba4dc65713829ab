import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Reads and rewrites files (profiles, the MQTT password file, captures, runtime records) so
/// that they are never damaged and never used to damage another file, even as root in a
/// directory other users can write (`/tmp`):
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
///
/// Profile writers also exclude each other with a lock file: `ProfileStore.lock`.
public enum SafeFile {
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
    public static func readSecret(_ path: String, option: String? = nil) throws(FileError) -> (
        bytes: [UInt8], warnings: [String]
    ) {
        do throws(FileError) {
            let location = try locate(path, writing: false)
            defer { location.close() }
            let (bytes, status) = try location.readExisting()
            let warnings = secretFileWarnings(
                path: path, mode: status.mode, owner: status.uid, user: Sys.effectiveUserID())
            return (bytes, warnings)
        } catch {
            throw option.map { error.naming(option: $0) } ?? error
        }
    }

    /// Reads each file an option names (`("--mqtt-ca", path)`; nil paths are skipped), to refuse
    /// an unreadable one before anything starts; the error's advice names the option.
    public static func readOptionFiles(_ files: [(option: String, path: String?)]) throws(FileError) {
        for case (let option, let path?) in files {
            do throws(FileError) {
                _ = try read(path)
            } catch {
                throw error.naming(option: option)
            }
        }
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
    /// never written through. Refuses the files `avoiding` names (the profile being written,
    /// the profiles and the capture the command reads), whatever name they are given by.
    public static func createForRecording(
        _ path: String, overwrite: Bool, avoiding others: [ProtectedFile] = [], option: String = "--overwrite-btsnoop"
    ) throws(FileError) -> FileDescriptor {
        let location = try locate(path, writing: true)
        defer { location.close() }
        for other in others {
            guard let otherLocation = try? locate(other.path, writing: false) else { continue }
            defer { otherLocation.close() }
            if location.isSameEntry(as: otherLocation) {
                throw FileError(
                    .cannotWrite, path: path, "is \(other.role); a capture would destroy it",
                    hint: "give the capture (--btsnoop) another file name")
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

    /// A file a recording must never replace, and what it is to the command (for the message).
    public struct ProtectedFile: Sendable, Equatable {
        public var path: String
        /// "the profile this command writes", "a profile this command reads (--profile X)", ...
        public var role: String
        public init(_ path: String, role: String) {
            self.path = path
            self.role = role
        }
        /// The profile a command writes (calibrate).
        public static func written(_ path: String) -> ProtectedFile {
            ProtectedFile(path, role: "the profile this command writes")
        }
        /// A profile a command reads (advertise, monitor: `--profile`).
        public static func read(_ path: String) -> ProtectedFile {
            ProtectedFile(path, role: "a profile this command reads (--profile \(path))")
        }
        /// The profiles a command reads, then the one it writes.
        public static func profiles(_ reading: [String], _ writing: String?) -> [ProtectedFile] {
            reading.map(read) + (writing.map { [written($0)] } ?? [])
        }
    }

    /// Temporary files are named `.NAME.tmp-PID-RANDOM`, next to the profile they replace.
    static func temporaryPrefix(for name: String) -> String { ".\(name).tmp-" }

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
}
