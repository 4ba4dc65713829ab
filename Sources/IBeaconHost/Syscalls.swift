import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// The project's one system-call layer. Every libc call of the Host and Transports modules is
// here, behind small wrappers that retry EINTR and throw the failure as swift-system's
// `Errno`; opens by path, reads, writes, closes, pipes and `stat` go through swift-system's
// `FileDescriptor`/`FilePath`/`Stat`, and what it lacks (`openat` and the other `*at` calls,
// sockets, poll, termios, threads, spawn) is written here once. The calls that need
// libbluetooth's headers extend `Sys` in `IBeaconTransports/BlueZSyscalls.swift`.

/// The system calls, as `package` statics for Host and Transports.
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
    private static var lastErrno: Errno { Errno(rawValue: Glibc.errno) }

    // MARK: - Descriptors

    /// `pipe2(2)` with `O_CLOEXEC`.
    package static func pipe() throws(Errno) -> (readEnd: FileDescriptor, writeEnd: FileDescriptor) {
        try FileDescriptor.pipe(options: .closeOnExec)
    }

    /// Opens a serial device with `O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC`: `O_NONBLOCK` so
    /// that the open does not wait for carrier detect; `setNonBlocking(_:false)` undoes it once
    /// CLOCAL is set.
    package static func openSerial(_ path: String) throws(Errno) -> FileDescriptor {
        try typed {
            try FileDescriptor.open(
                FilePath(path), .readWrite,
                options: [.closeOnExec, .nonBlocking, FileDescriptor.OpenOptions(rawValue: O_NOCTTY)],
                retryOnInterrupt: true)
        }
    }

    /// `open(2)` for writing a new file (`O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC`, mode 0644).
    package static func createFile(_ path: String) throws(Errno) -> FileDescriptor {
        try typed {
            try FileDescriptor.open(
                FilePath(path), .writeOnly, options: [.create, .truncate, .closeOnExec],
                permissions: [.ownerReadWrite, .groupRead, .otherRead], retryOnInterrupt: true)
        }
    }

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

    /// `send(2)` with `MSG_NOSIGNAL` (a closed peer gives EPIPE instead of killing the process
    /// with SIGPIPE), continued until every byte is sent.
    package static func sendAll(_ fd: FileDescriptor, _ bytes: [UInt8]) throws(Errno) {
        var offset = 0
        while offset < bytes.count {
            let n = try retryingOnInterrupt {
                bytes.withUnsafeBytes { buffer in
                    Glibc.send(fd.rawValue, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                }
            }
            offset += n
        }
    }

    /// `close(2)`; errors are ignored because the descriptor is released either way on Linux.
    package static func close(_ fd: FileDescriptor) {
        try? fd.close()
    }

    /// `poll(2)` on `descriptors` (descriptor, requested events); `timeoutMilliseconds` of -1 waits
    /// forever. Returns the returned events in the same order.
    package static func poll(_ descriptors: [(FileDescriptor, Int16)], timeoutMilliseconds: Int32) throws(Errno)
        -> [Int16]
    {
        var fds = descriptors.map { pollfd(fd: $0.0.rawValue, events: $0.1, revents: 0) }
        _ = try retryingOnInterrupt { Glibc.poll(&fds, nfds_t(fds.count), timeoutMilliseconds) }
        return fds.map(\.revents)
    }

    package static let pollIn = Int16(POLLIN)
    package static let pollOut = Int16(POLLOUT)
    package static let pollHangUp = Int16(POLLHUP)
    package static let pollError = Int16(POLLERR)
    package static let pollInvalid = Int16(POLLNVAL)

    /// `fcntl(F_GETFL / F_SETFL)` to clear or set `O_NONBLOCK`.
    package static func setNonBlocking(_ fd: FileDescriptor, _ nonBlocking: Bool) throws(Errno) {
        let flags = try retryingOnInterrupt { fcntl(fd.rawValue, F_GETFL) }
        let updated = nonBlocking ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
        _ = try retryingOnInterrupt { fcntl(fd.rawValue, F_SETFL, updated) }
    }

    /// `fsync(2)`.
    package static func fsync(_ fd: FileDescriptor) throws(Errno) {
        _ = try retryingOnInterrupt { Glibc.fsync(fd.rawValue) }
    }

    /// `fstat(2)` of an open descriptor (works on `O_PATH` descriptors too), through
    /// swift-system's `FileDescriptor.stat()`.
    package static func status(_ fd: FileDescriptor) throws(Errno) -> FileStatus {
        FileStatus(try fd.stat())
    }

    // MARK: - Files relative to a directory (the profile store's path walk)

    /// `O_PATH` (Linux, every architecture: 010000000): a descriptor that names a directory
    /// for the `*at` calls without the right to read it. Glibc declares it only under
    /// `_GNU_SOURCE`, which the Swift module does not set.
    package static let openPathOnly: Int32 = 0o10_000_000

    /// `openat(2)`; `directory` nil means relative to the working directory (`AT_FDCWD`).
    /// `O_CLOEXEC` is always added. (swift-system has no `openat`.)
    package static func open(
        at directory: FileDescriptor?, _ name: String, _ flags: Int32, mode: UInt32 = 0
    ) throws(Errno) -> FileDescriptor {
        let fd = try retryingOnInterrupt {
            openat(directory?.rawValue ?? AT_FDCWD, name, flags | O_CLOEXEC, mode_t(mode))
        }
        return FileDescriptor(rawValue: fd)
    }

    /// `fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW)` through swift-system's `FilePath.stat`: the
    /// entry itself, never what a link names. `name` is one path component.
    package static func lstat(at directory: FileDescriptor, _ name: String) throws(Errno) -> FileStatus {
        FileStatus(try FilePath(name).stat(relativeTo: directory, flags: .symlinkNoFollow))
    }

    /// `readlinkat(2)`: the text of a symbolic link.
    package static func readLink(at directory: FileDescriptor, _ name: String) throws(Errno) -> String {
        var buffer = [UInt8](repeating: 0, count: 4097)
        let n = try retryingOnInterrupt {
            buffer.withUnsafeMutableBufferPointer { readlinkat(directory.rawValue, name, $0.baseAddress!, 4096) }
        }
        guard n < 4096 else { throw .fileNameTooLong }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    /// `renameat(2)` within one directory: replaces the entry `to` (a symbolic link there is
    /// replaced, never followed).
    package static func rename(at directory: FileDescriptor, _ from: String, _ to: String) throws(Errno) {
        _ = try retryingOnInterrupt { renameat(directory.rawValue, from, directory.rawValue, to) }
    }

    /// `linkat(2)` within one directory: fails with EEXIST when `to` exists (an atomic
    /// "create, never replace").
    package static func link(at directory: FileDescriptor, _ from: String, _ to: String) throws(Errno) {
        _ = try retryingOnInterrupt { linkat(directory.rawValue, from, directory.rawValue, to, 0) }
    }

    /// `unlinkat(2)` of a file.
    package static func unlink(at directory: FileDescriptor, _ name: String) throws(Errno) {
        _ = try retryingOnInterrupt { unlinkat(directory.rawValue, name, 0) }
    }

    /// `fchown(2)`; `UInt32.max` (-1) leaves that ID unchanged.
    package static func fchown(_ fd: FileDescriptor, uid: UInt32, gid: UInt32) throws(Errno) {
        _ = try retryingOnInterrupt { Glibc.fchown(fd.rawValue, uid_t(uid), gid_t(gid)) }
    }

    /// `fchmod(2)` with the permission bits only: set-user-ID, set-group-ID and sticky bits
    /// are never copied onto a file this process writes.
    package static func fchmod(_ fd: FileDescriptor, _ mode: UInt32) throws(Errno) {
        _ = try retryingOnInterrupt { Glibc.fchmod(fd.rawValue, mode_t(mode & 0o777)) }
    }

    /// `faccessat(dirfd, name, W_OK, AT_EACCESS)`: may this process write the entry?
    package static func isWritable(at directory: FileDescriptor, _ name: String) -> Bool {
        faccessat(directory.rawValue, name, W_OK, AT_EACCESS) == 0
    }

    /// `flock(fd, LOCK_EX | LOCK_NB)`; EWOULDBLOCK when another process holds it.
    package static func tryLockExclusive(_ fd: FileDescriptor) throws(Errno) {
        _ = try retryingOnInterrupt { flock(fd.rawValue, LOCK_EX | LOCK_NB) }
    }

    /// The names in a directory opened with `O_PATH` or for reading (without `.` and `..`),
    /// through `openat(".")`, `fdopendir(3)` and `readdir(3)`.
    package static func directoryEntries(at directory: FileDescriptor) throws(Errno) -> [String] {
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

    /// `geteuid(2)`: the user whose rights the process uses for files.
    package static func effectiveUserID() -> UInt32 { UInt32(geteuid()) }

    /// `getpid(2)`.
    package static func processID() -> Int32 { getpid() }

    /// Whether a process with this ID exists (`kill(pid, 0)`; EPERM means it exists).
    package static func processExists(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
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

    /// `shutdown(2)` of both directions; wakes a thread blocked in `send` on this socket.
    package static func shutdown(_ fd: FileDescriptor) {
        _ = Glibc.shutdown(fd.rawValue, Int32(SHUT_RDWR))
    }

    /// `setsockopt(2)` with a value of type `T`.
    package static func setOption<T: BitwiseCopyable>(_ fd: FileDescriptor, level: Int32, name: Int32, _ value: T)
        throws(Errno)
    {
        var value = value
        _ = try retryingOnInterrupt {
            setsockopt(fd.rawValue, level, name, &value, socklen_t(MemoryLayout<T>.size))
        }
    }

    /// Sets `TCP_NODELAY`: HCI commands are small and must not wait for Nagle's algorithm.
    package static func setTCPNoDelay(_ fd: FileDescriptor) throws(Errno) {
        try setOption(fd, level: Int32(IPPROTO_TCP), name: TCP_NODELAY, Int32(1))
    }

    /// `getsockopt(SO_ERROR)`: the outcome of a non-blocking `connect`.
    package static func pendingSocketError(_ fd: FileDescriptor) throws(Errno) -> Errno? {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try retryingOnInterrupt { getsockopt(fd.rawValue, SOL_SOCKET, SO_ERROR, &value, &length) }
        return value == 0 ? nil : Errno(rawValue: value)
    }

    /// Sends one datagram to a Unix socket (`socket(AF_UNIX, SOCK_DGRAM)` + `sendto(2)`:
    /// `sd_notify` without libsystemd). A path that starts with `@` names the abstract namespace.
    package static func sendUnixDatagram(path: String, message: [UInt8]) throws(Errno) {
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

    /// One address `getaddrinfo` returned.
    package struct ResolvedAddress: @unchecked Sendable {
        package var family: Int32
        package var socketType: Int32
        package var socketProtocol: Int32
        package var storage: sockaddr_storage
        package var length: socklen_t
        /// The address in numeric form (`127.0.0.1`, `::1`), from `getnameinfo(3)`.
        package var numericHost: String
    }

    /// `getaddrinfo(3)` for a TCP stream to `host`:`port`. Its failures are not errnos: they
    /// throw the `EAI_*` code with the `gai_strerror(3)` text.
    package static func resolveTCP(host: String, port: UInt16) throws(ResolveFailure) -> [ResolvedAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        var rc: Int32
        repeat {
            rc = getaddrinfo(host, String(port), &hints, &list)
        } while rc == EAI_SYSTEM && Glibc.errno == EINTR
        guard rc == 0 else {
            throw ResolveFailure(code: rc, message: String(cString: gai_strerror(rc)))
        }
        defer { freeaddrinfo(list) }
        var out: [ResolvedAddress] = []
        var cursor = list
        while let info = cursor {
            defer { cursor = info.pointee.ai_next }
            guard let address = info.pointee.ai_addr,
                Int(info.pointee.ai_addrlen) <= MemoryLayout<sockaddr_storage>.size
            else { continue }
            var storage = sockaddr_storage()
            withUnsafeMutableBytes(of: &storage) { raw in
                raw.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(info.pointee.ai_addrlen)))
            }
            var hostBuffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            let named = getnameinfo(
                address, info.pointee.ai_addrlen, &hostBuffer, socklen_t(hostBuffer.count), nil, 0, NI_NUMERICHOST)
            let numeric =
                named == 0
                ? String(decoding: hostBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : host
            out.append(
                ResolvedAddress(
                    family: info.pointee.ai_family, socketType: info.pointee.ai_socktype,
                    socketProtocol: info.pointee.ai_protocol, storage: storage, length: info.pointee.ai_addrlen,
                    numericHost: numeric))
        }
        return out
    }

    package struct ResolveFailure: Error {
        package var code: Int32
        package var message: String
    }

    /// `connect(2)` on a non-blocking socket. Returns true when connected at once, false when
    /// the connection is in progress (EINPROGRESS; EINTR means the same for connect).
    package static func startConnect(_ fd: FileDescriptor, to address: ResolvedAddress) throws(Errno) -> Bool {
        var storage = address.storage
        let rc = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd.rawValue, $0, address.length) }
        }
        if rc == 0 { return true }
        let error = lastErrno
        if error == .nowInProgress || error == .interrupted { return false }
        throw error
    }

    // MARK: - Serial lines

    /// The termios speed constant for `baudRate`, or nil when the kernel has none.
    package static func speed(forBaudRate baudRate: Int) -> speed_t? {
        switch baudRate {
        case 9600: speed_t(B9600)
        case 19200: speed_t(B19200)
        case 38400: speed_t(B38400)
        case 57600: speed_t(B57600)
        case 115200: speed_t(B115200)
        case 230400: speed_t(B230400)
        case 460800: speed_t(B460800)
        case 500000: speed_t(B500000)
        case 921600: speed_t(B921600)
        case 1_000_000: speed_t(B1000000)
        case 1_500_000: speed_t(B1500000)
        case 2_000_000: speed_t(B2000000)
        case 3_000_000: speed_t(B3000000)
        case 4_000_000: speed_t(B4000000)
        default: nil
        }
    }

    /// `tcgetattr`/`cfmakeraw`/`cfsetispeed`/`cfsetospeed`/`tcsetattr`/`tcflush`: 8N1 raw mode at
    /// `speed`, receiver on, modem lines ignored (CLOCAL), RTS/CTS as asked, reads return as soon
    /// as one byte is there (VMIN 1, VTIME 0); bytes received before now are discarded.
    /// Throws ENOTTY when `fd` is not a terminal.
    package static func configureRawSerial(_ fd: FileDescriptor, speed: speed_t, rtscts: Bool) throws(Errno) {
        var tio = termios()
        _ = try retryingOnInterrupt { tcgetattr(fd.rawValue, &tio) }
        cfmakeraw(&tio)
        _ = try retryingOnInterrupt { cfsetispeed(&tio, speed) }
        _ = try retryingOnInterrupt { cfsetospeed(&tio, speed) }
        tio.c_cflag |= tcflag_t(CLOCAL | CREAD)
        if rtscts {
            tio.c_cflag |= tcflag_t(CRTSCTS)
        } else {
            tio.c_cflag &= ~tcflag_t(CRTSCTS)
        }
        withUnsafeMutableBytes(of: &tio.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        _ = try retryingOnInterrupt { tcsetattr(fd.rawValue, TCSANOW, &tio) }
        _ = try retryingOnInterrupt { tcflush(fd.rawValue, TCIOFLUSH) }
    }

    // MARK: - Threads

    /// A joinable POSIX thread.
    package final class Thread: @unchecked Sendable {
        // Written once in `spawnThread`, then only read.
        fileprivate var handle = pthread_t()

        /// `pthread_join(3)`. Call exactly once, never from the thread itself.
        package func join() { _ = pthread_join(handle, nil) }

        /// `pthread_equal(pthread_self(), …)`.
        package var isCurrent: Bool { pthread_equal(pthread_self(), handle) != 0 }
    }

    private final class ThreadBody {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// `pthread_create(3)` running `body`.
    package static func spawnThread(_ body: @escaping @Sendable () -> Void) throws(Errno) -> Thread {
        let thread = Thread()
        let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        let rc = pthread_create(
            &thread.handle, nil,
            { argument in
                guard let argument else { return nil }
                Unmanaged<ThreadBody>.fromOpaque(argument).takeRetainedValue().body()
                return nil
            }, context)
        guard rc == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(context).release()
            throw Errno(rawValue: rc)
        }
        return thread
    }

    // MARK: - Time

    /// `nanosleep(2)`: blocks the calling thread (for a cancelled task, whose `Task.sleep`
    /// returns at once). An interrupted sleep just ends early.
    package static func sleepBlocking(nanoseconds: Int) {
        var ts = timespec(tv_sec: nanoseconds / 1_000_000_000, tv_nsec: nanoseconds % 1_000_000_000)
        _ = nanosleep(&ts, nil)
    }

    /// `clock_gettime(CLOCK_REALTIME)` in microseconds since the Unix epoch.
    package static func realtimeMicroseconds() -> Int64 {
        var ts = timespec()
        _ = clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
    }
}

// MARK: - Processes (event hooks)

/// How a child process ended (`waitpid(2)` status).
public enum ProcessTermination: Sendable, Equatable, CustomStringConvertible {
    case exited(Int32)
    case signalled(Int32)

    public var description: String {
        switch self {
        case .exited(let code): "exited with status \(code)"
        case .signalled(let signal): "was killed by signal \(signal)"
        }
    }
}

extension Sys {
    /// `posix_spawnp(3)` of `arguments` (PATH searched for the program) with exactly
    /// `environment` (`NAME=value` strings). The child gets its own process group (so a timeout
    /// can end it and whatever it started), the default disposition of every standard signal
    /// (this process ignores SIGINT, SIGTERM, SIGPIPE and others while it handles them, and
    /// ignored dispositions survive exec), an empty signal mask,
    /// stdin from /dev/null, and stdout joined to stderr (the hook must not write into the JSON
    /// on stdout). Every descriptor this module opens is close-on-exec, so the child gets no other.
    package static func spawn(_ arguments: [String], environment: [String]) throws(Errno) -> pid_t {
        guard let program = arguments.first else { throw .invalidArgument }
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawnattr_init(&attributes)
        defer {
            posix_spawn_file_actions_destroy(&actions)
            posix_spawnattr_destroy(&attributes)
        }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal: Int32 in 1...31 where signal != SIGKILL && signal != SIGSTOP { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        var pid = pid_t()
        let rc = posix_spawnp(&pid, program, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw Errno(rawValue: rc) }
        return pid
    }

    /// `waitpid(pid, WNOHANG)`: nil while the child runs.
    package static func reap(_ pid: pid_t) throws(Errno) -> ProcessTermination? {
        var status: Int32 = 0
        let rc = try retryingOnInterrupt { waitpid(pid, &status, WNOHANG) }
        if rc == 0 { return nil }
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift does not import.
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
    }

    /// `kill(-pid, signal)`: the whole process group a spawned child leads.
    package static func signalProcessGroup(_ pid: pid_t, _ signal: Int32) {
        _ = kill(-pid, signal)
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

    /// Where `posix_spawnp` will find `program`: itself when it names a path, else the first
    /// executable file of that name in `$PATH` (`access(2)` with `X_OK`); nil when there is none.
    package static func findExecutable(_ program: String, path: String?) -> String? {
        if program.contains("/") { return access(program, X_OK) == 0 ? program : nil }
        for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(
            separator: ":", omittingEmptySubsequences: false)
        {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + program
            var info = stat()
            if stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG, access(candidate, X_OK) == 0 {
                return candidate
            }
        }
        return nil
    }
}
