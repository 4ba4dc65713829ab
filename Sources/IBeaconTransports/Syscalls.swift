import CBlueZ
import Glibc
import IBeaconCore
import IBeaconHost
import Synchronization
import SystemPackage

// The system calls only this module makes — descriptors for serial lines and TCP, poll,
// sockets, termios, threads, spawning hooks, and those that need libbluetooth's headers
// (`sockaddr_hci`, `hci_filter`, the HCI ioctls) — as an extension of Host's system-call layer
// (`Sys`, `IBeaconHost/Syscalls.swift`) with its convention: EINTR retried, failures thrown as
// `Errno`. Only this module imports `CBlueZ`, so Core and Host build without libbluetooth.

extension Sys {
    /// `write(2)` until all of `bytes` is out, retrying EINTR; on another error, or a write of
    /// nothing, the rest is dropped (`StandardStream.write`).
    static func writeDroppingErrors(_ fd: Int32, _ bytes: ArraySlice<UInt8>) {
        var done = bytes.startIndex
        while done < bytes.endIndex {
            let n = bytes[done...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                done += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                return
            }
        }
    }

    /// `isatty(3)`.
    static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) != 0 }

    /// `gethostname(2)`: this machine's host name, nil when it cannot be read or is empty.
    static func hostName() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }

    /// `pipe2(2)` with `O_CLOEXEC`.
    static func pipe() throws(Errno) -> (readEnd: FileDescriptor, writeEnd: FileDescriptor) {
        try FileDescriptor.pipe(options: .closeOnExec)
    }

    /// Opens a serial device with `O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC`: `O_NONBLOCK` so
    /// that the open does not wait for carrier detect; `setNonBlocking(_:false)` undoes it once
    /// CLOCAL is set.
    static func openSerial(_ path: String) throws(Errno) -> FileDescriptor {
        try typed {
            try FileDescriptor.open(
                FilePath(path), .readWrite,
                options: [.closeOnExec, .nonBlocking, FileDescriptor.OpenOptions(rawValue: O_NOCTTY)],
                retryOnInterrupt: true)
        }
    }

    /// `send(2)` with `MSG_NOSIGNAL` (a closed peer gives EPIPE instead of killing the process
    /// with SIGPIPE), continued until every byte is sent.
    static func sendAll(_ fd: FileDescriptor, _ bytes: [UInt8]) throws(Errno) {
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

    /// One `send(2)` of `bytes` (a packet socket's whole packet); returns the count it returned.
    static func sendPacket(_ fd: FileDescriptor, _ bytes: [UInt8]) throws(Errno) -> Int {
        try retryingOnInterrupt {
            bytes.withUnsafeBytes { buffer in
                Glibc.send(fd.rawValue, buffer.baseAddress!, buffer.count, Int32(MSG_NOSIGNAL))
            }
        }
    }

    /// `poll(2)` on `descriptors` (descriptor, requested events); `timeoutMilliseconds` of -1 waits
    /// forever. Returns the returned events in the same order.
    static func poll(_ descriptors: [(FileDescriptor, Int16)], timeoutMilliseconds: Int32) throws(Errno)
        -> [Int16]
    {
        var fds = descriptors.map { pollfd(fd: $0.0.rawValue, events: $0.1, revents: 0) }
        _ = try retryingOnInterrupt { Glibc.poll(&fds, nfds_t(fds.count), timeoutMilliseconds) }
        return fds.map(\.revents)
    }

    static let pollIn = Int16(POLLIN)

    static let pollOut = Int16(POLLOUT)

    static let pollInvalid = Int16(POLLNVAL)

    /// `shutdown(2)` of both directions; wakes a thread blocked in `send` on this socket.
    static func shutdown(_ fd: FileDescriptor) {
        _ = Glibc.shutdown(fd.rawValue, Int32(SHUT_RDWR))
    }

    /// `setsockopt(2)` with a value of type `T`.
    static func setOption<T: BitwiseCopyable>(_ fd: FileDescriptor, level: Int32, name: Int32, _ value: T)
        throws(Errno)
    {
        var value = value
        _ = try retryingOnInterrupt {
            setsockopt(fd.rawValue, level, name, &value, socklen_t(MemoryLayout<T>.size))
        }
    }

    /// Sets `TCP_NODELAY`: HCI commands are small and must not wait for Nagle's algorithm.
    static func setTCPNoDelay(_ fd: FileDescriptor) throws(Errno) {
        try setOption(fd, level: Int32(IPPROTO_TCP), name: TCP_NODELAY, Int32(1))
    }

    /// `getsockopt(SO_ERROR)`: the outcome of a non-blocking `connect`.
    static func pendingSocketError(_ fd: FileDescriptor) throws(Errno) -> Errno? {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try retryingOnInterrupt { getsockopt(fd.rawValue, SOL_SOCKET, SO_ERROR, &value, &length) }
        return value == 0 ? nil : Errno(rawValue: value)
    }

    /// One address `getaddrinfo` returned.
    struct ResolvedAddress: @unchecked Sendable {
        var family: Int32
        var socketType: Int32
        var socketProtocol: Int32
        var storage: sockaddr_storage
        var length: socklen_t
        /// The address in numeric form (`127.0.0.1`, `::1`), from `getnameinfo(3)`.
        var numericHost: String
    }

    /// `getaddrinfo(3)` for a TCP stream to `host`:`port`. Its failures are not errnos: they
    /// throw the `EAI_*` code with the `gai_strerror(3)` text.
    static func resolveTCP(host: String, port: UInt16) throws(ResolveFailure) -> [ResolvedAddress] {
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

    struct ResolveFailure: Error {
        var code: Int32
        var message: String
    }

    /// `connect(2)` on a non-blocking socket. Returns true when connected at once, false when
    /// the connection is in progress (EINPROGRESS; EINTR means the same for connect).
    static func startConnect(_ fd: FileDescriptor, to address: ResolvedAddress) throws(Errno) -> Bool {
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
    static func speed(forBaudRate baudRate: Int) -> speed_t? {
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
    static func configureRawSerial(_ fd: FileDescriptor, speed: speed_t, rtscts: Bool) throws(Errno) {
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
    final class Thread: @unchecked Sendable {
        // Written once in `spawnThread`, then only read.
        fileprivate var handle = pthread_t()

        /// `pthread_join(3)`. Call exactly once, never from the thread itself.
        func join() { _ = pthread_join(handle, nil) }

        /// `pthread_equal(pthread_self(), …)`.
        var isCurrent: Bool { pthread_equal(pthread_self(), handle) != 0 }

        /// `pthread_detach(3)`: the thread's resources go when it ends; never join it then.
        func detach() { _ = pthread_detach(handle) }
    }

    private final class ThreadBody {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// `pthread_create(3)` running `body`.
    static func spawnThread(_ body: @escaping @Sendable () -> Void) throws(Errno) -> Thread {
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
    static func sleepBlocking(nanoseconds: Int) {
        var ts = timespec(tv_sec: nanoseconds / 1_000_000_000, tv_nsec: nanoseconds % 1_000_000_000)
        _ = nanosleep(&ts, nil)
    }

    /// `clock_gettime(CLOCK_MONOTONIC)` in seconds.
    static func monotonicSeconds() -> Double {
        var ts = timespec()
        _ = clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// `clock_gettime(CLOCK_REALTIME)` in microseconds since the Unix epoch.
    static func realtimeMicroseconds() -> Int64 {
        var ts = timespec()
        _ = clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
    }

    // MARK: - BlueZ HCI sockets

    /// `socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC, BTPROTO_HCI)`.
    static func hciSocket() throws(Errno) -> FileDescriptor {
        try socket(domain: AF_BLUETOOTH, type: Int32(SOCK_RAW.rawValue), protocol: BTPROTO_HCI)
    }

    /// `setsockopt(SOL_HCI, HCI_FILTER)` letting through only events, and of them only those this
    /// package decodes (`HCIEvent.socketFilterEventMask`: Command Complete/Status, Hardware
    /// Error, LE Meta, BlueZ's 0xFD), not every program's — a raw socket would otherwise receive
    /// bluetoothd's Link Key Notifications. Without a filter a raw socket receives no events.
    static func setHCIEventFilter(_ fd: FileDescriptor) throws(Errno) {
        var filter = hci_filter()
        hci_filter_clear(&filter)
        hci_filter_set_ptype(HCI_EVENT_PKT, &filter)
        let mask = HCIEvent.socketFilterEventMask
        filter.event_mask = (UInt32(truncatingIfNeeded: mask), UInt32(truncatingIfNeeded: mask >> 32))
        try setOption(fd, level: SOL_HCI, name: HCI_FILTER, filter)
    }

    /// What `HCIGETDEVINFO` tells about one adapter.
    struct HCIDeviceInfo {
        var index: UInt16
        /// `hci0`.
        var name: String
        /// BD_ADDR, least significant byte first.
        var address: [UInt8]
        var isUp: Bool
        /// `hci_dev_info.type`: bus in bits 0-3, controller type in bits 4-5.
        var type: UInt8
    }

    /// libbluetooth's `hci_devinfo` (ioctl `HCIGETDEVINFO` on a socket of its own).
    static func hciDeviceInfo(index: UInt16) throws(Errno) -> HCIDeviceInfo {
        var info = hci_dev_info()
        _ = try retryingOnInterrupt { hci_devinfo(Int32(index), &info) }
        let name = withUnsafeBytes(of: info.name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        let address = withUnsafeBytes(of: info.bdaddr) { Array($0) }
        let isUp = info.flags & (UInt32(1) << UInt32(HCI_UP)) != 0
        return HCIDeviceInfo(index: info.dev_id, name: name, address: address, isUp: isUp, type: info.type)
    }

    /// ioctl `HCIGETDEVLIST`: the index of every registered adapter, up or down. (libbluetooth's
    /// `hci_for_each_dev` only visits adapters with a given flag set, so it cannot list down ones.)
    static func hciDeviceList(_ fd: FileDescriptor) throws(Errno) -> [UInt16] {
        let maximum = 256
        let headerSize = MemoryLayout<hci_dev_list_req>.size
        let entryStride = MemoryLayout<hci_dev_req>.stride
        let buffer = UnsafeMutableRawPointer.allocate(
            byteCount: headerSize + maximum * entryStride, alignment: MemoryLayout<hci_dev_req>.alignment)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0, count: headerSize + maximum * entryStride)
        buffer.storeBytes(of: UInt16(maximum), as: UInt16.self)
        _ = try retryingOnInterrupt { ioctl(fd.rawValue, ibeacon_HCIGETDEVLIST, buffer) }
        let count = min(Int(buffer.load(as: UInt16.self)), maximum)
        return (0..<count).map { i in
            buffer.load(fromByteOffset: headerSize + i * entryStride, as: hci_dev_req.self).dev_id
        }
    }

    /// ioctl `HCIGETCONNLIST` on an unbound HCI socket (no capability needed, as `hcitool con`):
    /// adapter `index`'s links, each with its link type (0x80 LE) and `out`, the kernel's
    /// `hci_conn->out` (this host opened it) that every kernel has, also before 5.14 sent it
    /// in Device Connected.
    static func hciConnectionList(_ fd: FileDescriptor, index: UInt16) throws(Errno)
        -> [(address: [UInt8], type: UInt8, out: Bool)]
    {
        let maximum = 64
        let headerSize = MemoryLayout<hci_conn_list_req>.size
        let entryStride = MemoryLayout<hci_conn_info>.stride
        let buffer = UnsafeMutableRawPointer.allocate(
            byteCount: headerSize + maximum * entryStride, alignment: MemoryLayout<hci_conn_info>.alignment)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0, count: headerSize + maximum * entryStride)
        buffer.storeBytes(of: index, as: UInt16.self)
        buffer.storeBytes(of: UInt16(maximum), toByteOffset: 2, as: UInt16.self)
        _ = try retryingOnInterrupt { ioctl(fd.rawValue, ibeacon_HCIGETCONNLIST, buffer) }
        let count = min(Int(buffer.load(fromByteOffset: 2, as: UInt16.self)), maximum)
        return (0..<count).map { i in
            let info = buffer.load(fromByteOffset: headerSize + i * entryStride, as: hci_conn_info.self)
            let b = info.bdaddr.b
            return ([b.0, b.1, b.2, b.3, b.4, b.5], info.type, info.out != 0)
        }
    }

    /// ioctl `HCIDEVUP`: powers the adapter on (needs CAP_NET_ADMIN).
    static func hciDeviceUp(_ fd: FileDescriptor, index: UInt16) throws(Errno) {
        _ = try retryingOnInterrupt { ioctl(fd.rawValue, ibeacon_HCIDEVUP, Int32(index)) }
    }

    /// `bind(2)` to `{HCI_DEV_NONE, HCI_CHANNEL_CONTROL}`: the kernel's management interface
    /// (BlueZ doc/mgmt-api.txt). Needs CAP_NET_ADMIN for commands that change state.
    static func bindHCIControl(_ fd: FileDescriptor) throws(Errno) {
        try bindHCI(fd, device: UInt16(HCI_DEV_NONE), channel: UInt16(HCI_CHANNEL_CONTROL))
    }

    /// `bind(2)` to adapter `index` on `HCI_CHANNEL_RAW`: shares the controller with the kernel.
    static func bindHCIRaw(_ fd: FileDescriptor, index: UInt16) throws(Errno) {
        try bindHCI(fd, device: index, channel: UInt16(HCI_CHANNEL_RAW))
    }

    /// `bind(2)` of an HCI socket to `sockaddr_hci{AF_BLUETOOTH, device, channel}`.
    private static func bindHCI(_ fd: FileDescriptor, device: UInt16, channel: UInt16) throws(Errno) {
        var address = sockaddr_hci()
        address.hci_family = sa_family_t(AF_BLUETOOTH)
        address.hci_dev = device
        address.hci_channel = channel
        _ = try retryingOnInterrupt {
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd.rawValue, $0, socklen_t(MemoryLayout<sockaddr_hci>.size))
                }
            }
        }
    }

    /// ERFKILL, which swift-system does not name.
    static let rfkilled = Errno(rawValue: ERFKILL)
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
    /// on stdout). Every other descriptor is closed in the child before exec
    /// (`posix_spawn_file_actions_addclosefrom_np(3)`): not only this module's, which are all
    /// close-on-exec, but whatever the invoker left open for ibeacon (a systemd socket, a
    /// terminal, a parent's pipe).
    static func spawn(_ arguments: [String], environment: [String]) throws(Errno) -> pid_t {
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
        posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1)
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

    /// `spawn(arguments, environment:)` from a thread made for it, which first gives up every
    /// capability (`ibeacon_clear_ambient_capabilities`: the ambient set; `ibeacon_drop_thread_
    /// capabilities`: `capset(2)` of its effective, permitted and inheritable sets to nothing).
    /// The child starts with that thread's credentials, so a program without file capabilities
    /// runs with none: not the ambient `CAP_NET_ADMIN` the systemd units give ibeacon. The
    /// process's other threads keep theirs. (A child of root is root: exec gives it root's set.)
    static func spawnWithoutCapabilities(_ arguments: [String], environment: [String]) throws(Errno) -> pid_t {
        let result = Mutex<Result<pid_t, Errno>>(.failure(.invalidArgument))
        let thread = try spawnThread {
            let outcome: Result<pid_t, Errno>
            // EINVAL: a kernel before 4.3 has no ambient set to clear.
            if ibeacon_clear_ambient_capabilities() != 0 && errno != EINVAL {
                outcome = .failure(Errno(rawValue: errno))
            } else if ibeacon_drop_thread_capabilities() != 0 {
                outcome = .failure(Errno(rawValue: errno))
            } else {
                outcome = Result { () throws(Errno) in try spawn(arguments, environment: environment) }
            }
            result.withLock { $0 = outcome }
        }
        thread.join()
        return try result.withLock { $0 }.get()
    }

    /// `waitpid(pid, WNOHANG)`: nil while the child runs.
    static func reap(_ pid: pid_t) throws(Errno) -> ProcessTermination? {
        var status: Int32 = 0
        let rc = try retryingOnInterrupt { waitpid(pid, &status, WNOHANG) }
        if rc == 0 { return nil }
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift does not import.
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
    }

    /// `waitpid(-1, WNOHANG)`: any child that has ended (nil when none has, or there is no
    /// child at all). Only for a process that owns every child it has (`ChildReaper`).
    static func reapAny() -> (pid: pid_t, termination: ProcessTermination)? {
        var status: Int32 = 0
        var rc: pid_t
        repeat { rc = waitpid(-1, &status, WNOHANG) } while rc < 0 && Glibc.errno == EINTR
        guard rc > 0 else { return nil }
        let signal = status & 0x7F
        return (rc, signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal))
    }

    /// `kill(-pid, signal)`: the whole process group a spawned child leads.
    static func signalProcessGroup(_ pid: pid_t, _ signal: Int32) {
        _ = kill(-pid, signal)
    }

    /// `kill(-pid, 0)`: whether any process of that group is left (zombies count).
    static func processGroupExists(_ pid: pid_t) -> Bool {
        kill(-pid, 0) == 0 || Glibc.errno == EPERM
    }

    /// `kill(pid, signal)`.
    static func signalProcess(_ pid: pid_t, _ signal: Int32) {
        _ = kill(pid, signal)
    }

    /// `signal(signo, SIG_IGN)`: the signal is dropped (SIGPIPE). Not for a signal a dispatch
    /// source is to catch: on Linux dispatch installs its own handler only when the source is
    /// registered, and a signal ignored until then is lost (SignalSupervisor).
    static func ignoreSignal(_ signo: Int32) {
        _ = signal(signo, SIG_IGN)
    }

    /// `_exit(2)`: ends the process at once, without running exit handlers or flushing stdio.
    static func exitImmediately(_ status: Int32) -> Never {
        _exit(status)
    }

    /// `prctl(PR_SET_CHILD_SUBREAPER, 1)`: descendants orphaned by their parent are reparented
    /// to this process rather than to init, so it can reap them and end them on the way out.
    static func becomeChildSubreaper() {
        _ = ibeacon_set_child_subreaper()
    }

    /// The processes whose parent is this one (`/proc/PID/stat`, field 4), living or zombie.
    /// Empty when /proc is not this PID namespace's (`unshare --pid` without `--mount-proc`):
    /// its numbers would name other processes here.
    static func childProcesses() -> [pid_t] {
        let me = getpid()
        guard let own = procStat("self"), own.pid == me else { return [] }
        guard let dir = opendir("/proc") else { return [] }
        defer { closedir(dir) }
        var out: [pid_t] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let first = name.utf8.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first),
                let stat = procStat(name), stat.parent == me
            else { continue }
            out.append(stat.pid)
        }
        return out
    }

    /// Process and parent id from `/proc/NAME/stat`: `pid (comm) state ppid …`, the command
    /// name may hold spaces and parentheses, so the fields are read after the last `)`.
    private static func procStat(_ name: String) -> (pid: pid_t, parent: pid_t)? {
        let fd = open("/proc/\(name)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        let text = buffer[..<n]
        guard let open = text.firstIndex(of: UInt8(ascii: " ")), let close = text.lastIndex(of: UInt8(ascii: ")")),
            let pid = pid_t(String(decoding: text[..<open], as: UTF8.self))
        else { return nil }
        let fields = text[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let parent = pid_t(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return (pid, parent)
    }

    /// Where `posix_spawnp` will find `program`: itself when it names a path, else the first
    /// executable file of that name in `$PATH` (`access(2)` with `X_OK`); nil when there is none.
    static func findExecutable(_ program: String, path: String?) -> String? {
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
