import IBeaconHost
import Logging

/// How `--device` names a capture file. All three read btsnoop (Android, Wireshark, `btmon -w`)
/// and PacketLogger (`.pklg`, an iPhone's sysdiagnose) alike: the content decides.
public enum CapturePrefix: String, Sendable, Hashable, CaseIterable {
    case btsnoop
    case pklg
    case capture
}

/// Whether a serial line uses hardware flow control.
public enum SerialFlowControl: Sendable, Hashable {
    case none
    /// RTS/CTS (`CRTSCTS`).
    case rtsCts
}

/// Which controller to talk to, as the user wrote it with `--device`.
///
/// Accepted forms: `hciN` (or plain `N`), `raw:hciN`, `serial:PATH[,BAUD][,rtscts]`,
/// `tcp:HOST:PORT` (`tcp:[::1]:PORT` for IPv6), `btsnoop:FILE`, `pklg:FILE` or `capture:FILE` (a
/// capture, read as a receiver: btsnoop, btmon or PacketLogger, told apart by the file's content).
public enum DeviceSpec: Sendable, Hashable, CustomStringConvertible {
    /// A BlueZ adapter. `advertise`, `stop`, `info` reach it through the kernel's management
    /// interface when the kernel manages it; `raw` (spelled `raw:hciN`) forces the raw HCI socket.
    case hci(index: UInt16, raw: Bool = false)
    /// An H4 controller on a serial line.
    case serial(path: String, baudRate: Int, flowControl: SerialFlowControl)
    /// An H4 controller behind a TCP socket (e.g. Bumble's `tcp-server:` transport).
    case tcp(host: String, port: UInt16)
    /// A capture, read as a receiver (`CaptureSightingSource`); it cannot be programmed. Whichever
    /// `prefix` named it, the file's content says whether it is btsnoop or PacketLogger.
    case capture(path: String, prefix: CapturePrefix)

    /// `btsnoop:FILE`.
    public static func btsnoop(path: String) -> DeviceSpec { .capture(path: path, prefix: .btsnoop) }

    /// The serial speed when none is given.
    public static let defaultBaudRate = 115_200

    /// The serial speeds `serial:` accepts (each has a termios constant on Linux).
    public static let supportedBaudRates = [
        9600, 19200, 38400, 57600, 115_200, 230_400, 460_800, 500_000, 921_600,
        1_000_000, 1_500_000, 2_000_000, 3_000_000, 4_000_000,
    ]

    /// What every error message lists.
    public static let acceptedForms =
        "hciN (e.g. hci0), raw:hciN, serial:/dev/ttyACM0[,BAUD][,rtscts], tcp:HOST:PORT, or a capture: "
        + "btsnoop:FILE, pklg:FILE or capture:FILE"

    /// Parses a device specification. Throws `TransportError(.badSpecification, …)` naming the
    /// accepted forms.
    public init(parsing text: String) throws(TransportError) {
        func bad(_ why: String) -> TransportError {
            TransportError(
                .badSpecification, "invalid device '\(text)': \(why)", hint: "expected \(Self.acceptedForms)")
        }
        if let rest = text.strippingPrefix("serial:") {
            let parts = rest.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard let path = parts.first, !path.isEmpty else { throw bad("the serial device path is missing") }
            var baudRate: Int?
            var flowControl: SerialFlowControl?
            for option in parts.dropFirst() {
                if option == "rtscts" {
                    guard flowControl == nil else { throw bad("'rtscts' is given twice") }
                    flowControl = .rtsCts
                } else if !option.isEmpty, option.allSatisfy(\.isASCIIDigit), let rate = Int(option) {
                    guard baudRate == nil else { throw bad("the baud rate is given twice") }
                    guard Self.supportedBaudRates.contains(rate) else {
                        throw bad(
                            "unsupported baud rate \(option) (supported: "
                                + Self.supportedBaudRates.map(String.init).joined(separator: ", ") + ")")
                    }
                    baudRate = rate
                } else {
                    throw bad("unknown serial option '\(option)' (expected a baud rate or 'rtscts')")
                }
            }
            self = .serial(path: path, baudRate: baudRate ?? Self.defaultBaudRate, flowControl: flowControl ?? .none)
        } else if let rest = text.strippingPrefix("tcp:") {
            let host: Substring
            let portText: Substring
            if rest.hasPrefix("[") {
                guard let close = rest.firstIndex(of: "]") else { throw bad("unterminated '[' in the IPv6 address") }
                host = rest[rest.index(after: rest.startIndex)..<close]
                let after = rest[rest.index(after: close)...]
                guard after.hasPrefix(":") else { throw bad("expected ':PORT' after ']'") }
                portText = after.dropFirst()
            } else {
                guard let colon = rest.lastIndex(of: ":") else { throw bad("the port is missing (tcp:HOST:PORT)") }
                host = rest[..<colon]
                portText = rest[rest.index(after: colon)...]
                guard !host.contains(":") else { throw bad("write an IPv6 address in brackets: tcp:[::1]:PORT") }
            }
            guard !host.isEmpty else { throw bad("the host is missing (tcp:HOST:PORT)") }
            guard !portText.isEmpty, portText.allSatisfy(\.isASCIIDigit), portText.count <= 5,
                let port = Int(portText), (1...65535).contains(port)
            else { throw bad("the port must be a number from 1 to 65535") }
            self = .tcp(host: String(host), port: UInt16(port))
        } else if let prefix = CapturePrefix.allCases.first(where: { text.hasPrefix("\($0.rawValue):") }) {
            let rest = text.dropFirst(prefix.rawValue.count + 1)
            guard !rest.isEmpty else { throw bad("the capture file name is missing") }
            self = .capture(path: String(rest), prefix: prefix)
        } else {
            let raw = text.hasPrefix("raw:")
            let name = text.strippingPrefix("raw:").map(String.init) ?? text
            let digits = name.strippingPrefix("hci") ?? Substring(name)
            guard !digits.isEmpty, digits.allSatisfy(\.isASCIIDigit), digits.count <= 5,
                let index = Int(digits), index < 0xFFFF  // 0xFFFF is HCI_DEV_NONE
            else { throw bad("unrecognised device") }
            self = .hci(index: UInt16(index), raw: raw)
        }
    }

    /// The canonical spelling; parsing it gives back the same value.
    public var description: String {
        switch self {
        case .hci(let index, let raw):
            return (raw ? "raw:" : "") + "hci\(index)"
        case .serial(let path, let baudRate, let flowControl):
            return "serial:\(path),\(baudRate)" + (flowControl == .rtsCts ? ",rtscts" : "")
        case .tcp(let host, let port):
            return host.contains(":") ? "tcp:[\(host)]:\(port)" : "tcp:\(host):\(port)"
        case .capture(let path, let prefix):
            return "\(prefix.rawValue):\(path)"
        }
    }
}

extension String {
    fileprivate func strippingPrefix(_ prefix: String) -> Substring? {
        hasPrefix(prefix) ? self.dropFirst(prefix.count) : nil
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

/// Opens the transport `spec` names: a controller this host talks HCI to. A capture is not a
/// controller: `btsnoop:` specifications are read by `CaptureSightingSource`.
public func openTransport(_ spec: DeviceSpec, logger: Logger) throws(TransportError) -> any HCITransport {
    switch spec {
    case .hci(let index, _):
        return try BlueZHCITransport(index: index, logger: logger)
    case .serial(let path, let baudRate, let flowControl):
        return try H4StreamTransport.openSerial(
            path: path, baudRate: baudRate, flowControl: flowControl, logger: logger)
    case .tcp(let host, let port):
        return try H4StreamTransport.connectTCP(host: host, port: port, logger: logger)
    case .capture:
        throw TransportError(
            .badSpecification, "\(spec) is a capture, not a controller: it can be scanned, not programmed",
            hint: "use it with scan, monitor or calibrate --dry-run, or give a controller (hciN, serial:, tcp:)")
    }
}
