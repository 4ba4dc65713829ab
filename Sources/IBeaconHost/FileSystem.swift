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

/// Every libc call the host layer makes, behind small wrappers that retry EINTR.
typealias StatBuffer = Glibc.stat

/// `stat(2)` following links (a profile may be a symlink to a shared file).
private func lstatOrStat(_ path: String, _ st: inout StatBuffer) -> Int32 { stat(path, &st) }

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

    /// `stat(2)`; nil when the path does not exist.
    static func stat(_ path: String) -> (mode: UInt32, inode: UInt64, device: UInt64)? {
        var st = StatBuffer()
        guard lstatOrStat(path, &st) == 0 else { return nil }
        return (UInt32(st.st_mode), UInt64(st.st_ino), UInt64(st.st_dev))
    }

    /// `fstat(2)`.
    static func fstat(_ fd: FileDescriptor) -> (mode: UInt32, inode: UInt64, device: UInt64)? {
        var st = StatBuffer()
        guard Glibc.fstat(fd.rawValue, &st) == 0 else { return nil }
        return (UInt32(st.st_mode), UInt64(st.st_ino), UInt64(st.st_dev))
    }

    /// `realpath(3)`: the file a path names after following every symbolic link; nil when it
    /// does not exist.
    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// `access(path, W_OK)`.
    static func isWritable(_ path: String) -> Bool { access(path, W_OK) == 0 }

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

    /// `fchmod(2)`.
    static func fchmod(_ fd: FileDescriptor, _ mode: UInt32) {
        _ = Glibc.fchmod(fd.rawValue, mode_t(mode & 0o7777))
    }

    /// `rename(2)`.
    static func rename(_ from: String, _ to: String) -> Errno? {
        Glibc.rename(from, to) == 0 ? nil : Errno(rawValue: errno)
    }

    /// `unlink(2)`, errors ignored (used for clean-up only).
    static func unlink(_ path: String) { _ = Glibc.unlink(path) }

    static func processID() -> Int32 { getpid() }

    /// Whether a process with this ID exists (`kill(pid, 0)`; EPERM means it exists).
    static func processExists(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    /// The names in a directory (without `.` and `..`); empty when it cannot be read.
    static func directoryEntries(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
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
