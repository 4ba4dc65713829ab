import IBeaconCore
import IBeaconHost
import Logging
import SystemPackage

/// The bus an adapter hangs off, from `hci_dev_info.type` bits 0-3 (`HCI_VIRTUAL`, `HCI_USB`, …
/// in BlueZ's `lib/hci.h`).
public struct HCIBusType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let virtual = HCIBusType(rawValue: 0)
    public static let usb = HCIBusType(rawValue: 1)
    public static let pcCard = HCIBusType(rawValue: 2)
    public static let uart = HCIBusType(rawValue: 3)
    public static let rs232 = HCIBusType(rawValue: 4)
    public static let pci = HCIBusType(rawValue: 5)
    public static let sdio = HCIBusType(rawValue: 6)
    public static let spi = HCIBusType(rawValue: 7)
    public static let i2c = HCIBusType(rawValue: 8)
    public static let smd = HCIBusType(rawValue: 9)
    public static let virtio = HCIBusType(rawValue: 10)

    public var description: String {
        switch self {
        case .virtual: "Virtual"
        case .usb: "USB"
        case .pcCard: "PC Card"
        case .uart: "UART"
        case .rs232: "RS-232"
        case .pci: "PCI"
        case .sdio: "SDIO"
        case .spi: "SPI"
        case .i2c: "I2C"
        case .smd: "SMD"
        case .virtio: "VirtIO"
        default: "unknown bus (\(rawValue))"
        }
    }
}

/// The controller type, from `hci_dev_info.type` bits 4-5 (`HCI_PRIMARY`, `HCI_AMP`).
public struct HCIControllerType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// BR/EDR and/or LE.
    public static let primary = HCIControllerType(rawValue: 0)
    /// Alternate MAC/PHY.
    public static let amp = HCIControllerType(rawValue: 1)

    public var description: String {
        switch self {
        case .primary: "Primary"
        case .amp: "AMP"
        default: "unknown type (\(rawValue))"
        }
    }
}

/// One adapter the kernel knows about.
public struct AdapterInfo: Hashable, Sendable {
    /// The N of `hciN`.
    public var index: UInt16
    /// `hci0`.
    public var name: String
    public var address: BDAddress
    public var isUp: Bool
    public var bus: HCIBusType
    public var controllerType: HCIControllerType

    /// `devices --json`: one object, with the path `devices` shows for it (`ControllerPaths`).
    public func json(path: ControllerPath) -> String {
        jsonLine([
            "name": name, "address": address.description, "up": isUp, "bus": "\(bus)", "path": path.rawValue,
        ])
    }

    /// `devices`: name, address, up or down, bus and path, tab-separated.
    public func line(path: ControllerPath) -> String {
        "\(name.escapedForTerminal)\t\(address)\t\(isUp ? "up" : "down")\t\(bus)\t\(path.rawValue)"
    }
}

/// Raw HCI is the path without bluetoothd (or `raw:hciN`); `make install` grants
/// cap_net_admin only by default, for the kernel path.
private let capabilityHint =
    "needs CAP_NET_RAW and CAP_NET_ADMIN (raw HCI): run as root, or grant both: "
    + "`sudo setcap cap_net_raw,cap_net_admin+ep $(command -v ibeacon)` "
    + "(`make install CAPS=cap_net_raw,cap_net_admin`); an adapter bluetoothd manages goes through "
    + "the kernel with CAP_NET_ADMIN alone (`--device hciN`)"

private func bluetoothUnavailable() -> TransportError {
    TransportError(
        .bluetoothUnavailable,
        "this kernel has no Bluetooth support (socket(AF_BLUETOOTH) failed with EAFNOSUPPORT)",
        hint: "load the bluetooth module (modprobe bluetooth) or use a machine that has Bluetooth; "
            + "an H4 controller can still be reached with serial:PATH or tcp:HOST:PORT",
        errno: Errno.addressFamilyNotSupported.rawValue)
}

/// Opens an HCI socket, turning the errors of `socket(2)` into what a user can act on.
private func openHCISocket(for what: String) throws(TransportError) -> FileDescriptor {
    do {
        return try Sys.hciSocket()
    } catch .addressFamilyNotSupported {
        throw bluetoothUnavailable()
    } catch {
        throw .systemCall(
            error, "cannot open \(what): socket(AF_BLUETOOTH) failed: \(error)",
            denied: "cannot open \(what): \(error)",
            hint: capabilityHint)
    }
}

/// Whether this host opened its LE link to `address` on adapter `index` (the kernel's
/// `hci_conn->out`, from HCIGETCONNLIST, which needs no capability); nil when it cannot tell
/// (no HCI socket, the ioctl failed, no such LE link any more).
public func leLinkOpenedHere(index: UInt16, address: BDAddress) -> Bool? {
    guard let fd = try? Sys.hciSocket() else { return nil }
    defer { Sys.close(fd) }
    guard let links = try? Sys.hciConnectionList(fd, index: index) else { return nil }
    // LE_LINK (0x80) in the kernel's hci_core.h; libbluetooth's header lacks it.
    let le: UInt8 = 0x80
    return links.first { $0.type == le && (try? BDAddress(littleEndian: $0.address)) == address }?.out
}

/// Every adapter the kernel has registered, up or down, by index. Throws
/// `.bluetoothUnavailable` on a kernel without Bluetooth.
public func listAdapters() throws(TransportError) -> [AdapterInfo] {
    let fd = try openHCISocket(for: "the adapter list")
    defer { Sys.close(fd) }
    let indices: [UInt16]
    do {
        indices = try Sys.hciDeviceList(fd)
    } catch {
        throw TransportError(
            .io, "cannot list Bluetooth adapters: HCIGETDEVLIST failed: \(error)", errno: error.rawValue)
    }
    var adapters: [AdapterInfo] = []
    for index in indices.sorted() {
        // An adapter unplugged between the two calls is simply left out.
        guard let info = try? Sys.hciDeviceInfo(index: index),
            let address = try? BDAddress(littleEndian: info.address)
        else { continue }
        adapters.append(
            AdapterInfo(
                index: index, name: info.name.isEmpty ? "hci\(index)" : info.name, address: address,
                isUp: info.isUp, bus: HCIBusType(rawValue: info.type & 0x0F),
                controllerType: HCIControllerType(rawValue: (info.type >> 4) & 0x03)))
    }
    return adapters
}

/// A BlueZ adapter through a raw HCI socket (`HCI_CHANNEL_RAW`, shared with the kernel and
/// bluetoothd). Each read returns one packet, H4 type byte first; each write sends one.
public final class BlueZHCITransport: HCITransport {
    public let name: String
    public let index: UInt16
    private let link: DescriptorLink

    /// Opens `hci<index>`: sets the event filter, brings the adapter up if it is down, binds.
    public init(index: UInt16, logger: Logger) throws(TransportError) {
        let name = "hci\(index)"
        self.name = name
        self.index = index
        let fd = try openHCISocket(for: name)
        do {
            try Self.prepare(fd, index: index, name: name, logger: logger)
        } catch {
            Sys.close(fd)
            throw error
        }
        self.link = try DescriptorLink(
            name: name, adopting: fd, isSocket: true, framing: .packetPerRead, logger: logger,
            inspect: { packet in Self.deviceGone(packet, index: index) },
            sendFailure: streamSendFailure(
                name: name,
                permissionHint: "sending commands on a raw HCI socket " + capabilityHint.dropFirst("needs ".count)))
    }

    public var incoming: AsyncThrowingStream<H4Packet, any Error> { link.incoming }

    public func send(_ packet: H4Packet) async throws {
        try link.send(packet.bytes)
    }

    public func close() { link.close() }

    public func setPacketFilter(_ filter: (@Sendable (H4Packet) -> Bool)?) { link.setPacketFilter(filter) }

    private static func prepare(_ fd: FileDescriptor, index: UInt16, name: String, logger: Logger)
        throws(TransportError)
    {
        // FIELD.md: the filter must be in place before the first command, or its events are lost.
        do {
            try Sys.setHCIEventFilter(fd)
        } catch {
            throw TransportError(.io, "\(name): cannot set the HCI event filter: \(error)", errno: error.rawValue)
        }
        let info: Sys.HCIDeviceInfo
        do {
            info = try Sys.hciDeviceInfo(index: index)
        } catch .operationNotSupportedByDevice {
            throw noSuchAdapter(name)
        } catch {
            throw TransportError(.io, "\(name): HCIGETDEVINFO failed: \(error)", errno: error.rawValue)
        }
        if !info.isUp {
            if let refusal = bringUpRefusal(name, elevated: Sys.isElevated()) { throw refusal }
            logger.info("adapter is down; bringing it up", metadata: ["device": "\(name)"])
            do {
                try Sys.hciDeviceUp(fd, index: index)
            } catch .alreadyInProcess {
                // EALREADY: someone else brought it up meanwhile.
            } catch let error where error == Sys.rfkilled {
                throw TransportError(
                    .rfkilled, "\(name) is blocked by rfkill", hint: "run `rfkill unblock bluetooth`",
                    errno: error.rawValue)
            } catch {
                throw .systemCall(
                    error, "\(name): cannot bring the adapter up: \(error)",
                    denied: "\(name) is down and bringing it up was refused (\(error))", hint: capabilityHint)
            }
        }
        do {
            try Sys.bindHCIRaw(fd, index: index)
        } catch .operationNotSupportedByDevice {
            throw noSuchAdapter(name)
        } catch .resourceBusy {
            throw TransportError(
                .busy, "\(name) is in use by another program (HCI user channel)",
                hint: "stop the program that holds it exclusively", errno: Errno.resourceBusy.rawValue)
        } catch {
            throw .systemCall(error, "cannot bind to \(name): \(error)", hint: capabilityHint)
        }
    }

    /// Issue 40, hole 4: a user running the installed binary (file capabilities: `AT_SECURE`)
    /// does not get an adapter an administrator powered off powered on; root still does.
    static func bringUpRefusal(_ name: String, elevated: Bool) -> TransportError? {
        guard elevated else { return nil }
        return TransportError(
            .permissionDenied,
            "\(name) is powered off, and ibeacon does not power on an adapter for a user who runs it through its "
                + "file capabilities (an administrator may have powered it off)",
            hint: "an administrator powers it on: `sudo bluetoothctl power on` or `sudo hciconfig \(name) up`",
            errno: Errno.networkDown.rawValue)
    }

    static func noSuchAdapter(_ name: String) -> TransportError {
        let available = ((try? listAdapters()) ?? []).map(\.name)
        let message =
            available.isEmpty
            ? "no adapter \(name); no Bluetooth adapters found"
            : "no adapter \(name); adapters: " + available.joined(separator: ", ")
        return TransportError(
            .noSuchAdapter(available: available), message, hint: "list them with `ibeacon devices`",
            errno: Errno.operationNotSupportedByDevice.rawValue)
    }

    /// A stack internal event (0xFD) saying that this adapter went down or was removed
    /// (`StackInternalDeviceEvent`: HCI_DEV_DOWN, HCI_DEV_UNREG).
    static func deviceGone(_ packet: H4Packet, index: UInt16) -> TransportError? {
        guard packet.type == .event, packet.body.first == HCIEventCode.stackInternal.rawValue,
            let event = try? HCIEvent.decode(packet.body), let device = StackInternalDeviceEvent(event),
            device.deviceID == index
        else { return nil }
        switch device.kind {
        case .down: return TransportError(.disconnected, "hci\(index) went down")
        case .unregistered: return TransportError(.disconnected, "hci\(index) was removed")
        default: return nil
        }
    }
}
