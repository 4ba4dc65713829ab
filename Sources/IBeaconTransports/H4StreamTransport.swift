import IBeaconCore
import IBeaconHost
import Logging
import SystemPackage

/// H4 over a byte stream: a serial line or a TCP socket. Packets are framed by `H4Framer`;
/// a dedicated thread blocks in `poll(2)` until bytes arrive, so an idle transport uses no CPU.
public final class H4StreamTransport: HCITransport {
    public let name: String
    private let link: DescriptorLink

    /// Takes ownership of `descriptor` (a connected stream socket when `isSocket`, otherwise a
    /// tty or pipe) and starts reading it. `close()` closes it.
    public init(name: String, adopting descriptor: FileDescriptor, isSocket: Bool, logger: Logger)
        throws(TransportError)
    {
        self.name = name
        self.link = try DescriptorLink(
            name: name, adopting: descriptor, isSocket: isSocket, framing: .h4Stream, logger: logger,
            sendFailure: streamSendFailure(name: name))
    }

    public var incoming: AsyncThrowingStream<H4Packet, any Error> { link.incoming }

    public func send(_ packet: H4Packet) async throws {
        try link.send(packet.bytes)
    }

    public func close() { link.close() }

    public func setPacketFilter(_ filter: (@Sendable (H4Packet) -> Bool)?) { link.setPacketFilter(filter) }

    /// Connects to an H4 controller listening on TCP (`tcp:HOST:PORT`), trying every address
    /// the host resolves to, each for at most `connectTimeout` seconds; sets `TCP_NODELAY`.
    public static func connectTCP(
        host: String, port: UInt16, connectTimeout: Double = 3, logger: Logger
    ) throws(TransportError) -> H4StreamTransport {
        let spec = DeviceSpec.tcp(host: host, port: port)
        let shown = spec.description.dropFirst("tcp:".count)
        let addresses: [Sys.ResolvedAddress]
        do throws(Sys.ResolveFailure) {
            addresses = try Sys.resolveTCP(host: host, port: port)
        } catch {
            throw TransportError(
                .connectionRefused, "cannot resolve host '\(host)': \(error.message)",
                hint: "check the host name in --device tcp:HOST:PORT")
        }
        if addresses.isEmpty {
            throw TransportError(.connectionRefused, "cannot resolve host '\(host)': no addresses")
        }
        var lastError = TransportError(.connectionRefused, "cannot connect to \(shown)")
        for address in addresses {
            let where_ = address.numericHost == host ? "\(shown)" : "\(shown) (\(address.numericHost))"
            do {
                let fd = try connect(address, timeout: connectTimeout, shownAs: where_)
                logger.debug("connected", metadata: ["device": "\(spec)", "address": "\(address.numericHost)"])
                return try H4StreamTransport(name: spec.description, adopting: fd, isSocket: true, logger: logger)
            } catch {
                logger.debug("connect failed", metadata: ["device": "\(spec)", "error": "\(error)"])
                lastError = error
            }
        }
        throw lastError
    }

    private static func connect(
        _ address: Sys.ResolvedAddress, timeout: Double, shownAs where_: String
    ) throws(TransportError) -> FileDescriptor {
        func failure(_ error: Errno) -> TransportError {
            switch error {
            case .connectionRefused:
                TransportError(
                    .connectionRefused, "nothing is listening on \(where_)",
                    hint: "start the controller (e.g. the Bumble emulator) first, or check the port",
                    errno: error.rawValue)
            case .timedOut:
                TransportError(
                    .connectionRefused, "connecting to \(where_) timed out", hint: "check the host and any firewall",
                    errno: error.rawValue)
            case .networkUnreachable, .noRouteToHost, .networkDown:
                TransportError(.connectionRefused, "cannot reach \(where_): \(error)", errno: error.rawValue)
            default:
                TransportError(.io, "cannot connect to \(where_): \(error)", errno: error.rawValue)
            }
        }
        let fd: FileDescriptor
        do {
            fd = try Sys.socket(
                domain: address.family, type: address.socketType, protocol: address.socketProtocol,
                nonBlocking: true)
        } catch {
            throw TransportError(.io, "cannot create a socket for \(where_): \(error)", errno: error.rawValue)
        }
        do {
            if try !Sys.startConnect(fd, to: address) {
                let milliseconds = Int32(max(1, min(timeout * 1000, Double(Int32.max))))
                let events = try Sys.poll([(fd, Sys.pollOut)], timeoutMilliseconds: milliseconds)
                guard events[0] != 0 else {
                    Sys.close(fd)
                    throw TransportError(
                        .connectionRefused, "connecting to \(where_) timed out after \(timeout) s",
                        hint: "check the host and port, and any firewall")
                }
                if let error = try Sys.pendingSocketError(fd) { throw error }
            }
            try Sys.setNonBlocking(fd, false)
            try Sys.setTCPNoDelay(fd)
            return fd
        } catch let error as TransportError {
            throw error
        } catch let error as Errno {
            Sys.close(fd)
            throw failure(error)
        } catch {
            Sys.close(fd)
            throw TransportError(.io, "cannot connect to \(where_): \(error)")
        }
    }

    /// Opens an H4 controller on a serial line (`serial:PATH,BAUD[,rtscts]`): raw 8N1 at
    /// `baudRate`, optional RTS/CTS flow control.
    public static func openSerial(
        path: String, baudRate: Int = DeviceSpec.defaultBaudRate, flowControl: SerialFlowControl = .none,
        logger: Logger
    ) throws(TransportError) -> H4StreamTransport {
        let spec = DeviceSpec.serial(path: path, baudRate: baudRate, flowControl: flowControl)
        guard let speed = Sys.speed(forBaudRate: baudRate) else {
            throw TransportError(
                .badSpecification, "unsupported baud rate \(baudRate)",
                hint: "use one of " + DeviceSpec.supportedBaudRates.map(String.init).joined(separator: ", "))
        }
        let fd: FileDescriptor
        do {
            fd = try Sys.openSerial(path)
        } catch .resourceBusy {
            throw TransportError(
                .busy, "\(path) is in use by another program", errno: Errno.resourceBusy.rawValue)
        } catch {
            throw .opening(
                path, what: "serial device", verb: "open", error,
                missingHint: "check that the controller is plugged in (ls /dev/tty*)",
                deniedHint: "add your user to the dialout group (sudo usermod -aG dialout $USER) and log in again")
        }
        do {
            try Sys.configureRawSerial(fd, speed: speed, rtscts: flowControl == .rtsCts)
            try Sys.setNonBlocking(fd, false)
        } catch .inappropriateIOCTLForDevice {
            Sys.close(fd)
            throw TransportError(
                .badSpecification, "\(path) is not a serial device (not a terminal)",
                hint: "name a tty such as /dev/ttyACM0; a capture is read with btsnoop:FILE",
                errno: Errno.inappropriateIOCTLForDevice.rawValue)
        } catch {
            Sys.close(fd)
            throw TransportError(.io, "cannot configure \(path): \(error)", errno: error.rawValue)
        }
        logger.debug("opened", metadata: ["device": "\(spec)"])
        return try H4StreamTransport(name: spec.description, adopting: fd, isSocket: false, logger: logger)
    }
}
