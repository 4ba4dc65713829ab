import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// The project's one system-call layer, `Sys`: small wrappers that retry EINTR and throw the
// failure as swift-system's `Errno`. Reads, writes, closes and `stat` go through swift-system's
// `FileDescriptor`/`FilePath`/`Stat`; what it lacks (`openat` and the other `*at` calls the
// profile store walks paths with, `flock`, `fsync`, a Unix datagram for systemd) is written
// here. This file holds what Host needs and what both modules share; the calls only
// Transports makes (serial, TCP, poll, threads, spawn, libbluetooth) extend `Sys` in
// `IBeaconTransports/Syscalls.swift`, so each is compiled where it is used.

/// The system calls: `package` for those Transports calls too, internal for the profile
/// store's and systemd's.
package enum Sys {
    /// Calls `body` again while it fails (returns -1) with EINTR; returns its result or throws
    /// the errno.
    package static func retryingOnInterrupt<T: SignedInteger>(_ body: () -> T) throws(Errno) -> T {
        while true {
            let result = body()
            if result != -1 { return result }
            let error = Errno(rawValue: Glibc.errno)
            if error != .interrupted { throw error }
        }
    }

    /// Runs a swift-system call, whose signature throws untyped errors although it only throws
    /// `Errno`, with a typed `throws(Errno)`.
    package static func typed<T>(_ body: () throws -> T) throws(Errno) -> T {
        do {
            return try body()
        } catch let error as Errno {
            throw error
        } catch {
            throw .ioError  // not reached: swift-system throws Errno only
        }
    }

    /// The errno left by the last failed call.
    package static var lastErrno: Errno { Errno(rawValue: Glibc.errno) }

    // MARK: - Descriptors

    /// Reads a whole file with `open(2)`/`read(2)` (`readToEnd`).
    package static func readFile(_ path: String) throws(Errno) -> [UInt8] {
        let fd = try typed {
            try FileDescriptor.open(FilePath(path), .readOnly, options: [.closeOnExec], retryOnInterrupt: true)
        }
        defer { try? fd.close() }
        return try readToEnd(fd)
    }

    /// `read(2)` in 64 KiB chunks until the end of the file, or until more than `limit` bytes
    /// have been read (the caller then sees `count > limit` and refuses the file).
    package static func readToEnd(_ fd: FileDescriptor, limit: Int = .max) throws(Errno) -> [UInt8] {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while out.count <= limit {
            let n = try read(fd, into: &chunk)
            if n == 0 { break }
            out += chunk[0..<n]
        }
        return out
    }

    /// `read(2)` into `buffer`; returns the byte count (0 at end of file).
    package static func read(_ fd: FileDescriptor, into buffer: inout [UInt8]) throws(Errno) -> Int {
        try typed { try buffer.withUnsafeMutableBytes { try fd.read(into: $0, retryOnInterrupt: true) } }
    }

    /// `write(2)` until every byte is written (a short write is continued, not reported).
    package static func writeAll(_ fd: FileDescriptor, _ bytes: [UInt8]) throws(Errno) {
        _ = try typed { try fd.writeAll(bytes) }
    }

    /// `close(2)`; errors are ignored because the descriptor is released either way on Linux.
    package static func close(_ fd: FileDescriptor) {
        try? fd.close()
    }

    /// `fcntl(F_GETFL / F_SETFL)` to clear or set `O_NONBLOCK`.
    package static func setNonBlocking(_ fd: FileDescriptor, _ nonBlocking: Bool) throws(Errno) {
        let flags = try retryingOnInterrupt { fcntl(fd.rawValue, F_GETFL) }
        let updated = nonBlocking ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
        _ = try retryingOnInterrupt { fcntl(fd.rawValue, F_SETFL, updated) }
    }

    /// `fsync(2)`.
    static func fsync(_ fd: FileDescriptor) throws(Errno) {
        _ = try retryingOnInterrupt { Glibc.fsync(fd.rawValue) }
    }

    /// `fstat(2)` of an open descriptor (works on `O_PATH` descriptors too), through
    /// swift-system's `FileDescriptor.stat()`.
    static func status(_ fd: FileDescriptor) throws(Errno) -> FileStatus {
        FileStatus(try fd.stat())
    }

    // MARK: - Files relative to a directory (the profile store's path walk)

    /// `O_PATH` (Linux, every architecture: 010000000): a descriptor that names a directory
    /// for the `*at` calls without the right to read it. Glibc declares it only under
    /// `_GNU_SOURCE`, which the Swift module does not set.
    static let openPathOnly: Int32 = 0o10_000_000

    /// `openat(2)`; `directory` nil means relative to the working directory (`AT_FDCWD`).
    /// `O_CLOEXEC` is always added. (swift-system has no `openat`.)
    static func open(
        at directory: FileDescriptor?, _ name: String, _ flags: Int32, mode: UInt32 = 0
    ) throws(Errno) -> FileDescriptor {
        let fd = try retryingOnInterrupt {
            openat(directory?.rawValue ?? AT_FDCWD, name, flags | O_CLOEXEC, mode_t(mode))
        }
        return FileDescriptor(rawValue: fd)
    }

    /// `fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW)` through swift-system's `Stat`: the entry
    /// itself, never what a link names. `name` is one path component, passed as it is (no
    /// `FilePath` normalisation).
    @inline(never)
    static func lstat(at directory: FileDescriptor, _ name: String) throws(Errno) -> FileStatus {
        FileStatus(try Stat(name, relativeTo: directory, flags: .symlinkNoFollow))
    }

    /// `readlinkat(2)`: the text of a symbolic link.
    static func readLink(at directory: FileDescriptor, _ name: String) throws(Errno) -> String {
        try readLink(at: directory.rawValue, name)
    }

    /// `readlink(2)`: the text of the symbolic link `path` (`/proc/self/exe`).
    package static func readLink(_ path: String) throws(Errno) -> String {
        try readLink(at: AT_FDCWD, path)
    }

    private static func readLink(at directory: Int32, _ name: String) throws(Errno) -> String {
        var buffer = [UInt8](repeating: 0, count: 4097)
        let n = try retryingOnInterrupt {
            buffer.withUnsafeMutableBufferPointer { readlinkat(directory, name, $0.baseAddress!, 4096) }
        }
        guard n < 4096 else { throw .fileNameTooLong }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    /// `mkdir(2)`: a directory `path` with the permission bits `mode` (less the umask); EEXIST
    /// when the name is taken.
    static func makeDirectory(_ path: String, mode: UInt32) throws(Errno) {
        _ = try retryingOnInterrupt { mkdir(path, mode_t(mode)) }
    }

    /// `unlink(2)` of a file by its path.
    static func unlink(_ path: String) throws(Errno) {
        _ = try retryingOnInterrupt { Glibc.unlink(path) }
    }

    /// `renameat(2)` within one directory: replaces the entry `to` (a symbolic link there is
    /// replaced, never followed).
    static func rename(at directory: FileDescriptor, _ from: String, _ to: String) throws(Errno) {
        _ = try retryingOnInterrupt { renameat(directory.rawValue, from, directory.rawValue, to) }
    }

    /// `linkat(2)` within one directory: fails with EEXIST when `to` exists (an atomic
    /// "create, never replace").
    static func link(at directory: FileDescriptor, _ from: String, _ to: String) throws(Errno) {
        _ = try retryingOnInterrupt { linkat(directory.rawValue, from, directory.rawValue, to, 0) }
    }

    /// `unlinkat(2)` of a file.
    static func unlink(at directory: FileDescriptor, _ name: String) throws(Errno) {
        _ = try retryingOnInterrupt { unlinkat(directory.rawValue, name, 0) }
    }

    /// `unlinkat(2)` with `AT_REMOVEDIR`: removes an empty directory.
    static func removeDirectory(at directory: FileDescriptor, _ name: String) throws(Errno) {
        _ = try retryingOnInterrupt { unlinkat(directory.rawValue, name, AT_REMOVEDIR) }
    }

    /// `fchown(2)`; `UInt32.max` (-1) leaves that ID unchanged.
    static func fchown(_ fd: FileDescriptor, uid: UInt32, gid: UInt32) throws(Errno) {
        _ = try retryingOnInterrupt { Glibc.fchown(fd.rawValue, uid_t(uid), gid_t(gid)) }
    }

    /// `fchmod(2)` with the permission bits only: set-user-ID, set-group-ID and sticky bits
    /// are never copied onto a file this process writes.
    static func fchmod(_ fd: FileDescriptor, _ mode: UInt32) throws(Errno) {
        _ = try retryingOnInterrupt { Glibc.fchmod(fd.rawValue, mode_t(mode & 0o777)) }
    }

    /// `faccessat(dirfd, name, W_OK, AT_EACCESS)`: may this process write the entry?
    static func isWritable(at directory: FileDescriptor, _ name: String) -> Bool {
        faccessat(directory.rawValue, name, W_OK, AT_EACCESS) == 0
    }

    /// `faccessat(AT_FDCWD, path, W_OK, AT_EACCESS)`: may this process write `path`?
    static func isWritable(_ path: String) -> Bool {
        faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0
    }

    /// `flock(fd, LOCK_EX | LOCK_NB)`; EWOULDBLOCK when another process holds it.
    static func tryLockExclusive(_ fd: FileDescriptor) throws(Errno) {
        _ = try retryingOnInterrupt { flock(fd.rawValue, LOCK_EX | LOCK_NB) }
    }

    /// The names in a directory opened with `O_PATH` or for reading (without `.` and `..`),
    /// through `openat(".")`, `fdopendir(3)` and `readdir(3)`.
    static func directoryEntries(at directory: FileDescriptor) throws(Errno) -> [String] {
        let fd = try open(at: directory, ".", O_RDONLY | O_DIRECTORY)
        guard let dir = fdopendir(fd.rawValue) else {
            let error = lastErrno
            close(fd)
            throw error
        }
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

    // MARK: - Users and processes

    /// `getauxval(AT_SECURE)`, looked up with `dlsym` (the Swift Glibc module does not declare
    /// it): non-zero when the kernel started this program with more privileges than its caller
    /// had (set-user-ID, set-group-ID, file capabilities), which is when glibc's
    /// `secure_getenv(3)` returns nothing. Nil when the function cannot be found.
    static func auxiliarySecureFlag() -> UInt? {
        typealias GetAuxVal = @convention(c) (UInt) -> UInt
        guard let handle = dlopen(nil, RTLD_NOW) else { return nil }
        defer { dlclose(handle) }
        guard let symbol = dlsym(handle, "getauxval") else { return nil }
        return unsafeBitCast(symbol, to: GetAuxVal.self)(UInt(AT_SECURE))
    }

    /// Whether this process runs with privileges its caller may not have: `AT_SECURE` set, or
    /// real and effective user or group IDs that differ (glibc's `__libc_enable_secure`).
    /// When `getauxval` cannot be found, the ID comparison alone decides.
    package static func isElevated() -> Bool {
        if getuid() != geteuid() || getgid() != getegid() { return true }
        return (auxiliarySecureFlag() ?? 0) != 0
    }

    /// This process's environment (`environ`), as `NAME=value` strings.
    package static func environment() -> [String] {
        var out: [String] = []
        var p = environ
        while let entry = p.pointee {
            out.append(String(cString: entry))
            p += 1
        }
        return out
    }

    /// `getuid(2)`: the user who started this process (not changed by file capabilities).
    static func realUserID() -> UInt32 { UInt32(getuid()) }

    /// `geteuid(2)`: the user whose rights the process uses for files.
    static func effectiveUserID() -> UInt32 { UInt32(geteuid()) }

    /// `getpid(2)`.
    package static func processID() -> Int32 { getpid() }

    /// Whether a process with this ID exists (`kill(pid, 0)`; EPERM means it exists).
    package static func processExists(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    /// The width in columns of the terminal `fd` is (`ioctl(fd, TIOCGWINSZ)`); nil when `fd` is
    /// not a terminal or the terminal does not know its size (0 columns).
    package static func terminalColumns(_ fd: Int32) -> Int? {
        var size = winsize()
        let result = try? retryingOnInterrupt { ioctl(fd, UInt(TIOCGWINSZ), &size) }
        guard result != nil, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }

    // MARK: - Sockets

    /// `socket(2)`; `type` is combined with `SOCK_CLOEXEC` (and `SOCK_NONBLOCK` if asked).
    package static func socket(domain: Int32, type: Int32, protocol proto: Int32, nonBlocking: Bool = false)
        throws(Errno)
        -> FileDescriptor
    {
        let flags = Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        let fd = try retryingOnInterrupt { Glibc.socket(domain, type | flags, proto) }
        return FileDescriptor(rawValue: fd)
    }

    /// Sends one datagram to a Unix socket (`socket(AF_UNIX, SOCK_DGRAM)` + `sendto(2)`:
    /// `sd_notify` without libsystemd). A path that starts with `@` names the abstract namespace.
    static func sendUnixDatagram(path: String, message: [UInt8]) throws(Errno) {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(path.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }
        guard pathBytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { throw .fileNameTooLong }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in pathBytes.enumerated() { raw[i] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count)
        let fd = try socket(domain: AF_UNIX, type: Int32(SOCK_DGRAM.rawValue), protocol: 0)
        defer { close(fd) }
        _ = try retryingOnInterrupt {
            withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                    message.withUnsafeBytes { buf in
                        sendto(fd.rawValue, buf.baseAddress, buf.count, Int32(MSG_NOSIGNAL), sa, length)
                    }
                }
            }
        }
    }

}
