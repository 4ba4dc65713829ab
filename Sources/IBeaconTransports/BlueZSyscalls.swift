import CBlueZ
import Glibc
import IBeaconHost
import SystemPackage

// The calls that need libbluetooth's headers (`sockaddr_hci`, `hci_filter`, the HCI ioctls),
// as an extension of Host's one system-call layer (`Sys`, `IBeaconHost/Syscalls.swift`), with
// its error convention: EINTR retried, failures thrown as `Errno`. Only this module imports
// `CBlueZ`, so Core and Host build without libbluetooth.

extension Sys {
    /// `socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC, BTPROTO_HCI)`.
    static func hciSocket() throws(Errno) -> FileDescriptor {
        try socket(domain: AF_BLUETOOTH, type: Int32(SOCK_RAW.rawValue), protocol: BTPROTO_HCI)
    }

    /// `setsockopt(SOL_HCI, HCI_FILTER)` letting every event through (including 0xFD, stack
    /// internal) and nothing else, with libbluetooth's `hci_filter_*` helpers. Without it a raw
    /// socket receives no events at all.
    static func setHCIEventFilter(_ fd: FileDescriptor) throws(Errno) {
        var filter = hci_filter()
        hci_filter_clear(&filter)
        hci_filter_set_ptype(HCI_EVENT_PKT, &filter)
        hci_filter_all_events(&filter)
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

    static let hciEventPacket = UInt8(HCI_EVENT_PKT)
    static let stackInternalEvent = UInt8(EVT_STACK_INTERNAL)
    static let stackInternalDevice = UInt16(EVT_SI_DEVICE)
    static let deviceDown = UInt16(HCI_DEV_DOWN)
    static let deviceUnregistered = UInt16(HCI_DEV_UNREG)
    /// ERFKILL, which swift-system does not name.
    static let rfkilled = Errno(rawValue: ERFKILL)
}
