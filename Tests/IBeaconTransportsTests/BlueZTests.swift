import IBeaconCore
import IBeaconHost
import IBeaconTestSupport
import Testing

@testable import IBeaconTransports

/// This machine's kernel has no Bluetooth: socket(AF_BLUETOOTH) really fails with EAFNOSUPPORT.
@Suite struct BlueZTests {
    @Test func openingAnAdapterSaysBluetoothIsUnavailable() {
        let error = transportError { _ = try openTransport(DeviceSpec(parsing: "hci0"), logger: quietLogger) }
        #expect(error?.kind == .bluetoothUnavailable)
        #expect(
            error?.message == "this kernel has no Bluetooth support (socket(AF_BLUETOOTH) failed with EAFNOSUPPORT)")
        #expect(error?.hint?.contains("bluetooth module") == true)
        #expect(error?.errno == 97)  // EAFNOSUPPORT on Linux
    }

    @Test func listingAdaptersSaysBluetoothIsUnavailable() {
        let error = transportError { _ = try listAdapters() }
        #expect(error?.kind == .bluetoothUnavailable)
    }

    @Test func adapterDescriptionsUseBlueZNames() {
        // Values of HCI_USB, HCI_UART, HCI_VIRTUAL in BlueZ lib/hci.h.
        #expect(HCIBusType(rawValue: 1).description == "USB")
        #expect(HCIBusType(rawValue: 3).description == "UART")
        #expect(HCIBusType(rawValue: 0).description == "Virtual")
        #expect(HCIBusType(rawValue: 0x0E).description == "unknown bus (14)")
        #expect(HCIControllerType(rawValue: 0).description == "Primary")
    }

    @Test func stackInternalDeviceDownEndsTheLink() {
        // Event 0xFD, length 6: hci_ev_stack_internal type 0x0001 (EVT_SI_DEVICE), then
        // evt_si_device event 0x0004 (HCI_DEV_DOWN), dev_id 0x0002 — little-endian.
        let down = H4Packet(type: .event, body: [0xFD, 0x06, 0x01, 0x00, 0x04, 0x00, 0x02, 0x00])
        #expect(BlueZHCITransport.deviceGone(down, index: 2)?.kind == .disconnected)
        #expect(BlueZHCITransport.deviceGone(down, index: 2)?.message == "hci2 went down")
        // Another adapter going down is not ours.
        #expect(BlueZHCITransport.deviceGone(down, index: 1) == nil)
        // HCI_DEV_UP (3) is no reason to stop.
        let up = H4Packet(type: .event, body: [0xFD, 0x06, 0x01, 0x00, 0x03, 0x00, 0x02, 0x00])
        #expect(BlueZHCITransport.deviceGone(up, index: 2) == nil)
        // HCI_DEV_UNREG (2).
        let removed = H4Packet(type: .event, body: [0xFD, 0x06, 0x01, 0x00, 0x02, 0x00, 0x02, 0x00])
        #expect(BlueZHCITransport.deviceGone(removed, index: 2)?.message == "hci2 was removed")
        // Truncated stack-internal events are passed on, not trapped on.
        #expect(BlueZHCITransport.deviceGone(H4Packet(type: .event, body: [0xFD, 0x01, 0x01]), index: 0) == nil)
        #expect(BlueZHCITransport.deviceGone(Vectors.resetComplete, index: 0) == nil)
    }
}

@Suite struct BlueZMessageTests {
    @Test func noSuchAdapterPointsAtTheDevicesCommand() {
        let error = BlueZHCITransport.noSuchAdapter("hci7")
        #expect(error.message.hasPrefix("no adapter hci7"))
        #expect(error.hint == "list them with `ibeacon devices`")
    }
}

/// Issue 40, hole 1: what the management socket's reader logs of a received packet.
@Suite struct MgmtSocketLoggingTests {
    @Test func aNewLinkKeyIsDescribedByCodeAndLengthOnly() throws {
        let key: [UInt8] = [
            0x5E, 0xC4, 0xE7, 0x4B, 0x1D, 0x9A, 0x37, 0xC2, 0x88, 0x61, 0xF0, 0x0D, 0xB3, 0x2A, 0x7E, 0x95,
        ]
        let bytes = MgmtPacket(
            code: 0x0009, index: MgmtIndex(0), parameters: [1, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0, 4] + key + [0]
        ).bytes
        // As DescriptorLink files a management packet: first byte as the H4 type.
        let described = MgmtSocketTransport.describe(
            H4Packet(type: H4PacketType(rawValue: bytes[0]), body: Array(bytes[1...])))
        #expect(described == "mgmt 0x0009 hci0, 26 parameter bytes")
        #expect(!described.contains("5e c4") && !described.lowercased().contains("5ec4"))
    }
}

/// Issue 40, hole 4: a user running the installed binary (AT_SECURE) does not power on an
/// adapter an administrator powered off; root (not elevated) still brings it up.
@Suite struct BringUpRefusalTests {
    @Test func anElevatedProcessIsRefusedWithAClearMessage() throws {
        let refusal = try #require(BlueZHCITransport.bringUpRefusal("hci0", elevated: true))
        #expect(refusal.kind == .permissionDenied)
        #expect(refusal.message.hasPrefix("hci0 is powered off, and ibeacon does not power on an adapter"))
        #expect(refusal.hint?.contains("sudo hciconfig hci0 up") == true)
        #expect(BlueZHCITransport.bringUpRefusal("hci0", elevated: false) == nil)
    }
}
