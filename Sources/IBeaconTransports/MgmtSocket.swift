import IBeaconCore
import IBeaconHost
import Logging
import SystemPackage

let mgmtCapabilityHint =
    "the kernel's management interface needs CAP_NET_ADMIN: run as root, or join the group the package "
    + "grants it to (`sudo adduser $USER ibeacon`, then log in again); a binary installed by hand: "
    + "`sudo setcap cap_net_admin+ep $(command -v ibeacon)` (raw HCI, `--device raw:hciN`, needs CAP_NET_RAW too)"

/// The kernel's Bluetooth management interface: `socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC,
/// BTPROTO_HCI)` bound to `{HCI_DEV_NONE, HCI_CHANNEL_CONTROL}`. Every read returns one whole
/// management packet and every write sends one, so it reuses the raw HCI socket's reader
/// (`DescriptorLink`, one packet per read); the first byte it files as an H4 type is put back.
public final class MgmtSocketTransport: MgmtTransport {
    public let name = "mgmt"
    private let link: DescriptorLink
    public let incoming: AsyncThrowingStream<[UInt8], any Error>
    private let pump: Task<Void, Never>

    public init(logger: Logger) throws(TransportError) {
        let fd: FileDescriptor
        do {
            fd = try Sys.hciSocket()
        } catch .addressFamilyNotSupported {
            throw TransportError(
                .bluetoothUnavailable,
                "this kernel has no Bluetooth support (socket(AF_BLUETOOTH) failed with EAFNOSUPPORT)",
                hint: "load the bluetooth module (modprobe bluetooth); an H4 controller can still be reached "
                    + "with serial:PATH or tcp:HOST:PORT",
                errno: Errno.addressFamilyNotSupported.rawValue)
        } catch {
            throw Self.failure("socket(AF_BLUETOOTH)", error)
        }
        do {
            try Sys.bindHCIControl(fd)
        } catch {
            Sys.close(fd)
            throw Self.failure("bind(HCI_CHANNEL_CONTROL)", error)
        }
        link = try DescriptorLink(
            name: "mgmt", adopting: fd, isSocket: true, framing: .packetPerRead, logger: logger,
            describe: Self.describe,
            sendFailure: { error in
                .systemCall(
                    error, "writing to the management socket failed: \(error)",
                    denied: "the kernel refused a management command (\(error))", hint: mgmtCapabilityHint)
            })
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: [UInt8].self, throwing: (any Error).self)
        incoming = stream
        let packets = link.incoming
        pump = Task {
            do {
                for try await packet in packets { continuation.yield(packet.bytes) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
    }

    /// What the trace log shows of a received packet: code, index and length, never the
    /// parameters (New Link Key and the like reach every socket with CAP_NET_ADMIN).
    @Sendable static func describe(_ packet: H4Packet) -> String {
        (try? MgmtPacket(decoding: packet.bytes)).map { "\($0)" } ?? "\(packet.bytes.count) bytes"
    }

    private static func failure(_ call: String, _ error: Errno) -> TransportError {
        let what = "cannot open the kernel's Bluetooth management interface: \(call)"
        return .systemCall(error, "\(what) failed: \(error)", denied: "\(what): \(error)", hint: mgmtCapabilityHint)
    }

    public func send(_ bytes: [UInt8]) throws { try sendMgmtCommand(bytes) { try link.sendPacket($0) } }

    public func close() {
        link.close()
    }
}

/// Whether this process has CAP_NET_ADMIN in its effective set (`CapEff` in /proc/self/status,
/// bit 12). Without it the kernel marks the management socket untrusted: only read commands are
/// allowed, and a refused command gets a bare Permission Denied status, so the CLI checks first
/// and says what is missing.
public func hasNetAdminCapability() -> Bool {
    guard let status = try? Sys.readFile("/proc/self/status") else { return true }  // cannot tell: try
    for line in String(decoding: status, as: UTF8.self).split(separator: "\n") where line.hasPrefix("CapEff:") {
        let hex = line.dropFirst("CapEff:".count).trimmingPrefix(while: { $0 == " " || $0 == "\t" })
        guard let mask = UInt64(hex, radix: 16) else { return true }
        return mask & (1 << 12) != 0
    }
    return true
}

/// The error for a state-changing management command without CAP_NET_ADMIN.
public func missingNetAdmin(_ what: String) -> TransportError {
    TransportError(
        .permissionDenied,
        "\(what) through the kernel's management interface needs CAP_NET_ADMIN, which this process lacks",
        hint: mgmtCapabilityHint, errno: Errno.notPermitted.rawValue)
}

/// Opens the management socket and starts a client on it.
public func openMgmtClient(logger: Logger, timeout: Duration) async throws -> MgmtClient {
    let client = MgmtClient(transport: try MgmtSocketTransport(logger: logger), logger: logger, defaultTimeout: timeout)
    await client.start()
    return client
}

/// Whether the kernel manages adapter `index` (it is in the management index list), so that
/// `hciN` goes through the management interface; nil when the interface cannot be asked.
public func kernelManages(index: UInt16, client: MgmtClient) async -> Bool {
    guard let list = try? await client.execute(MgmtReadIndexList(), index: .none) else { return false }
    return list.contains(index)
}
