import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A file-system failure, classified for the CLI's exit codes.
public struct FileError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The file does not exist or cannot be read (EX_NOINPUT).
        case notFound
        /// The file, or its directory, cannot be written (EX_CANTCREAT).
        case cannotWrite
        /// Another process holds the file's lock (EX_TEMPFAIL).
        case locked
        /// The file is too large or of a kind that cannot be a profile (EX_DATAERR).
        case badData
        /// Any other I/O failure (EX_IOERR).
        case io
    }

    public var kind: Kind
    public var path: String
    public var message: String
    public var hint: String?

    public init(_ kind: Kind, path: String, _ message: String, hint: String? = nil) {
        self.kind = kind
        self.path = path
        self.message = message
        self.hint = hint
    }

    public var description: String {
        let base = "\(path): \(message)"
        return hint.map { "\(base) — \($0)" } ?? base
    }
}

/// Which file an open descriptor or a directory entry is: device and inode numbers.
public struct FileIdentity: Sendable, Equatable, Hashable, CustomStringConvertible {
    public var device: UInt64
    public var inode: UInt64
    public var description: String { "device \(device) inode \(inode)" }
}

/// The parts of `struct stat` the store decides on.
struct FileStatus: Sendable, Equatable {
    var mode: UInt32
    var uid: UInt32
    var gid: UInt32
    var links: UInt64
    var size: Int64
    var identity: FileIdentity

    var type: UInt32 { mode & 0o170000 }
    var isRegular: Bool { type == 0o100000 }
    var isDirectory: Bool { type == 0o040000 }
    var isSymbolicLink: Bool { type == 0o120000 }

    /// `a directory`, `a FIFO`, … for messages that refuse a file of the wrong type.
    var typeName: String {
        switch type {
        case 0o100000: "a regular file"
        case 0o040000: "a directory"
        case 0o120000: "a symbolic link"
        case 0o010000: "a FIFO (named pipe)"
        case 0o020000: "a character device"
        case 0o060000: "a block device"
        case 0o140000: "a socket"
        default: "a special file"
        }
    }

    init(_ st: StatBuffer) {
        mode = UInt32(st.st_mode)
        uid = UInt32(st.st_uid)
        gid = UInt32(st.st_gid)
        links = UInt64(st.st_nlink)
        size = Int64(st.st_size)
        identity = FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }
}

/// Every libc call the host layer makes, behind small wrappers that retry EINTR.
typealias StatBuffer = Glibc.stat

enum Sys {
    static func retrying<T>(_ body: () -> T, failed: (T) -> Bool) -> (T, Errno?) {
        while true {
            let r = body()
            if failed(r) {
                let e = Errno(rawValue: errno)
                if e == .interrupted { continue }
                return (r, e)
            }
            return (r, nil)
        }
    }

    /// `fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW)`: the entry itself, never what a link names.
    static func lstat(at directory: FileDescriptor, _ name: String) -> (FileStatus?, Errno?) {
        var st = StatBuffer()
        let (_, e) = retrying(
            { fstatat(directory.rawValue, name, &st, AT_SYMLINK_NOFOLLOW) }, failed: { $0 != 0 })
        return e == nil ? (FileStatus(st), nil) : (nil, e)
    }

    /// `fstat(2)` of an open descriptor (works on `O_PATH` descriptors too).
    static func status(_ fd: FileDescriptor) -> FileStatus? {
        var st = StatBuffer()
        guard Glibc.fstat(fd.rawValue, &st) == 0 else { return nil }
        return FileStatus(st)
    }

    /// `openat(2)`; `directory` nil means relative to the working directory (`AT_FDCWD`).
    /// `O_CLOEXEC` is always added.
    static func open(
        at directory: FileDescriptor?, _ name: String, _ flags: Int32, mode: UInt32 = 0
    ) -> (FileDescriptor?, Errno?) {
        let (fd, e) = retrying(
            { openat(directory?.rawValue ?? AT_FDCWD, name, flags | O_CLOEXEC, mode_t(mode)) },
            failed: { $0 < 0 })
        return e == nil ? (FileDescriptor(rawValue: fd), nil) : (nil, e)
    }

    /// `readlinkat(2)`: the text of a symbolic link.
    static func readLink(at directory: FileDescriptor, _ name: String) -> (String?, Errno?) {
        var buffer = [UInt8](repeating: 0, count: 4097)
        let (n, e) = retrying(
            { buffer.withUnsafeMutableBufferPointer { readlinkat(directory.rawValue, name, $0.baseAddress!, 4096) } },
            failed: { $0 < 0 })
        guard e == nil else { return (nil, e) }
        guard n < 4096 else { return (nil, .fileNameTooLong) }
        return (String(decoding: buffer[0..<n], as: UTF8.self), nil)
    }

    /// `renameat(2)` within one directory: replaces the entry `to` (a symbolic link there is
    /// replaced, never followed).
    static func rename(at directory: FileDescriptor, _ from: String, _ to: String) -> Errno? {
        retrying({ renameat(directory.rawValue, from, directory.rawValue, to) }, failed: { $0 != 0 }).1
    }

    /// `linkat(2)` within one directory: fails with EEXIST when `to` exists (an atomic
    /// "create, never replace").
    static func link(at directory: FileDescriptor, _ from: String, _ to: String) -> Errno? {
        retrying({ linkat(directory.rawValue, from, directory.rawValue, to, 0) }, failed: { $0 != 0 }).1
    }

    /// `unlinkat(2)` of a file; errors are returned for the caller to ignore or report.
    @discardableResult
    static func unlink(at directory: FileDescriptor, _ name: String) -> Errno? {
        retrying({ unlinkat(directory.rawValue, name, 0) }, failed: { $0 != 0 }).1
    }

    /// `fchown(2)`.
    static func fchown(_ fd: FileDescriptor, uid: UInt32, gid: UInt32) -> Errno? {
        retrying({ Glibc.fchown(fd.rawValue, uid_t(uid), gid_t(gid)) }, failed: { $0 != 0 }).1
    }

    /// `ftruncate(2)`.
    static func truncate(_ fd: FileDescriptor, size: Int64 = 0) -> Errno? {
        retrying({ ftruncate(fd.rawValue, off_t(size)) }, failed: { $0 != 0 }).1
    }

    /// `fcntl(F_GETFL / F_SETFL)` clearing `O_NONBLOCK`, once a descriptor is known to be a
    /// regular file (opened non-blocking so that a FIFO could not hang the open).
    static func setBlocking(_ fd: FileDescriptor) {
        let flags = fcntl(fd.rawValue, F_GETFL)
        if flags >= 0 { _ = fcntl(fd.rawValue, F_SETFL, flags & ~O_NONBLOCK) }
    }

    /// `O_PATH` (Linux, every architecture: 010000000): a descriptor that names a directory
    /// for the `*at` calls without the right to read it. Glibc declares it only under
    /// `_GNU_SOURCE`, which the Swift module does not set.
    static let openPathOnly: Int32 = 0o10_000_000

    /// `geteuid(2)`: the user whose rights the process uses for files.
    static func effectiveUserID() -> UInt32 { UInt32(geteuid()) }

    /// `faccessat(dirfd, name, W_OK, AT_EACCESS)`: may this process write the entry?
    static func isWritable(at directory: FileDescriptor, _ name: String) -> Bool {
        faccessat(directory.rawValue, name, W_OK, AT_EACCESS) == 0
    }

    /// `flock(fd, LOCK_EX | LOCK_NB)`; false when another process holds it.
    static func tryLockExclusive(_ fd: FileDescriptor) -> Errno? {
        let (_, e) = retrying({ flock(fd.rawValue, LOCK_EX | LOCK_NB) }, failed: { $0 != 0 })
        return e
    }

    /// `fsync(2)`.
    static func fsync(_ fd: FileDescriptor) -> Errno? {
        let (_, e) = retrying({ Glibc.fsync(fd.rawValue) }, failed: { $0 != 0 })
        return e
    }

    /// `fchmod(2)` with the permission bits only: set-user-ID, set-group-ID and sticky bits
    /// are never copied onto a file this process writes.
    static func fchmod(_ fd: FileDescriptor, _ mode: UInt32) -> Errno? {
        retrying({ Glibc.fchmod(fd.rawValue, mode_t(mode & 0o777)) }, failed: { $0 != 0 }).1
    }

    static func processID() -> Int32 { getpid() }

    /// Whether a process with this ID exists (`kill(pid, 0)`; EPERM means it exists).
    static func processExists(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    /// The names in a directory opened with `O_PATH` or for reading (without `.` and `..`);
    /// empty when it cannot be read.
    static func directoryEntries(at directory: FileDescriptor) -> [String] {
        let (fd, e) = open(at: directory, ".", O_RDONLY | O_DIRECTORY)
        guard e == nil, let fd, let dir = fdopendir(fd.rawValue) else { return [] }
        defer { closedir(dir) }  // closes fd as well
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Sends one datagram to a Unix socket (`sd_notify` without libsystemd). A path that
    /// starts with `@` names the abstract namespace.
    static func sendUnixDatagram(path: String, message: [UInt8]) -> Errno? {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return Errno(rawValue: errno) }
        defer { _ = close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(path.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard pathBytes.count < capacity else { return Errno.fileNameTooLong }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in pathBytes.enumerated() { raw[i] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count)
        let sent = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                message.withUnsafeBytes { buf in
                    sendto(fd, buf.baseAddress, buf.count, Int32(MSG_NOSIGNAL), sa, length)
                }
            }
        }
        return sent < 0 ? Errno(rawValue: errno) : nil
    }
}
