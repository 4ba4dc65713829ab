import IBeaconCore
import IBeaconHost

/// A behavioural fake of the kernel's management interface for one adapter (index 0): it keeps
/// advertising instances the way net/bluetooth/mgmt.c does, answers as mgmt-api.txt says
/// (Rejected when not powered, Invalid Parameters for an unknown instance, Advertising
/// Added/Removed sent only to *other* sockets, so never to the client under test), and lets a
/// test act as another program or power-cycle the adapter.
public final class FakeMgmtKernel: MgmtTransport, @unchecked Sendable {
    public let name = "fake-mgmt"
    public var incoming: AsyncThrowingStream<[UInt8], any Error> { lock.withLock { _socket.stream } }
    private var sink: AsyncThrowingStream<[UInt8], any Error>.Continuation { lock.withLock { _socket.continuation } }
    private var _socket:
        (
            stream: AsyncThrowingStream<[UInt8], any Error>,
            continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation
        )
    private let lock = Lock()

    public struct Instance: Sendable, Equatable {
        public var flags: MgmtAdvertisingFlags
        public var minInterval: UInt32?
        public var txPower: Int8?
        public var data: [UInt8]
        /// Who registered it: "test" for the client under test, else the other program's name.
        public var owner: String
        /// The address it goes out from, by the kernel's rule (`hci_get_random_address` called
        /// with `require_privacy = !connectable`, net/bluetooth/hci_sync.c): the identity address
        /// when connectable (the flag, or the adapter's Connectable setting), else a
        /// non-resolvable private address made anew each time the instance is programmed.
        public var address = BDAddress.zero
    }

    /// The adapter's identity (public) address, as Read Controller Info reports it.
    public static let identityAddress = BDAddress("00:AA:01:00:00:00")!

    public var maxInstances: UInt8 = 5
    /// False: Add Extended Advertising Parameters answers Unknown Command (kernel < 5.12).
    public var supportsExtendedParameters = true
    /// True: the controller has no LE extended advertising, so the kernel programs it with the
    /// legacy commands and answers Add Extended Advertising Parameters with the TX power
    /// `MgmtAddExtendedAdvertisingParameters.unknownTxPower` (127, HCI_TX_POWER_INVALID).
    public var legacyOnlyController = false
    /// Commands the kernel takes and never answers (its command queue stuck behind a controller
    /// that does not reply); the client's timeout is what ends them.
    public var unansweredOpcodes: Set<MgmtOpcode> = []
    private var _powered: Bool
    private var _instances: [UInt8: Instance] = [:]
    private var _opcodes: [MgmtOpcode] = []
    private var _monitors: [UInt16: [MgmtAdvPattern]] = [:]
    private var _nextMonitor: UInt16 = 1
    private var _otherDiscovering = false
    private var _systemConfiguration: [UInt16: UInt16] = [
        MgmtSystemParameter.leScanIntervalAdvMonitor: 0x0060, MgmtSystemParameter.leScanWindowAdvMonitor: 0x0030,
        0x000D: 0x0060, 0x000E: 0x0030,
    ]
    private var _monitorScan: MonitorScanParameters?
    private var _refusals: [MgmtStatus] = []
    private var _connectable = false
    /// Where the kernel's non-resolvable addresses come from (its get_random_bytes).
    private var _random = SplitMix64(seed: 0x1B)

    public init(powered: Bool = true) {
        _powered = powered
        _socket = AsyncThrowingStream.makeStream(of: [UInt8].self, throwing: (any Error).self)
    }

    public var instances: [UInt8: Instance] { lock.withLock { _instances } }
    /// The adapter's own Connectable setting (bluetoothd turns it on for BR/EDR page scan).
    public var connectable: Bool { lock.withLock { _connectable } }

    /// Another program (bluetoothd, `btmgmt connectable on`) changes the adapter's Connectable
    /// setting; the client sees New Settings.
    public func setConnectable(_ on: Bool) {
        let powered = lock.withLock {
            _connectable = on
            return _powered
        }
        emit(.newSettings, settingsBytes(powered: powered))
    }

    /// The address the kernel would advertise an instance with `flags` from (lock held).
    private func onAirAddress(_ flags: MgmtAdvertisingFlags) -> BDAddress {
        if flags.contains(.connectable) || _connectable { return Self.identityAddress }
        return BDAddress.nonResolvable(using: &_random, avoiding: Self.identityAddress)
    }
    public var powered: Bool { lock.withLock { _powered } }
    /// The advertisement monitors registered, by handle.
    public var monitors: [UInt16: [MgmtAdvPattern]] { lock.withLock { _monitors } }
    /// False: Add Advertisement Patterns Monitor answers Unknown Command (kernel < 5.10).
    public var supportsAdvMonitor = true
    /// False: Read/Set Default System Configuration answer Unknown Command (kernel < 5.8).
    public var supportsSystemConfiguration = true
    /// False: Set Default System Configuration answers with this status instead of success.
    public var setSystemConfigurationStatus = MgmtStatus.success
    /// The Default System Configuration values (16-bit each), by type.
    public var systemConfiguration: [UInt16: UInt16] { lock.withLock { _systemConfiguration } }
    /// The advertisement-monitor scan parameters the kernel's passive scan was last (re)started
    /// with: like hci_update_passive_scan, when a monitor is added or removed; nil when none
    /// was ever started or the last monitor went.
    public var monitorScan: MonitorScanParameters? { lock.withLock { _monitorScan } }

    /// Another program (an administrator's `btmgmt set-sysconfig`, bluetoothd's main.conf) sets
    /// a default.
    public func otherProgramSetsSystemConfiguration(_ type: UInt16, _ value: UInt16) {
        lock.withLock { _systemConfiguration[type] = value }
    }

    private func restartPassiveScan() {
        _monitorScan =
            _monitors.isEmpty
            ? nil
            : MonitorScanParameters(
                interval: _systemConfiguration[MgmtSystemParameter.leScanIntervalAdvMonitor] ?? 0,
                window: _systemConfiguration[MgmtSystemParameter.leScanWindowAdvMonitor] ?? 0)
    }
    /// Every command the client sent, in order.
    public var opcodes: [MgmtOpcode] { lock.withLock { _opcodes } }

    // MARK: - other programs and the adapter

    /// Another program adds an instance (e.g. `btmgmt add-adv`); the client sees Advertising Added.
    public func otherProgramAdds(_ instance: UInt8, data: [UInt8] = [0x03, 0xFF, 0xCA, 0xFE], owner: String = "btmgmt")
    {
        lock.withLock { _instances[instance] = Instance(flags: [], data: data, owner: owner) }
        emit(.advertisingAdded, [instance])
    }

    /// Another program removes an instance; the client sees Advertising Removed.
    public func otherProgramRemoves(_ instance: UInt8) {
        let existed = lock.withLock { _instances.removeValue(forKey: instance) != nil }
        if existed { emit(.advertisingRemoved, [instance]) }
    }

    /// Another program starts or stops discovery (bluetoothd `scan on`, `btmgmt find -l`).
    public func otherProgramDiscovers(_ on: Bool) { lock.withLock { _otherDiscovering = on } }

    /// An advertisement the controller reported, forwarded as net/bluetooth/mgmt.c does without
    /// controller offload: as Device Found while some program runs discovery, else as Adv Monitor
    /// Device Found with handle 0 while any monitor is registered (matched or not), else not at all.
    /// Also nothing while powered off. Returns whether an event was sent.
    @discardableResult
    public func advertisementHeard(_ report: MgmtDeviceFound) -> Bool {
        let (discovering, monitoring, powered) = lock.withLock { (_otherDiscovering, !_monitors.isEmpty, _powered) }
        guard powered else { return false }
        if discovering {
            emit(.deviceFound, report.bytes)
        } else if monitoring {
            emit(.advMonitorDeviceFound, [0, 0] + report.bytes)
        } else {
            return false
        }
        return true
    }

    /// Another program registers a monitor (bluetoothd for a D-Bus AdvertisementMonitor1 client).
    @discardableResult
    public func otherProgramAddsMonitor(_ patterns: [MgmtAdvPattern] = [.iBeacon]) -> UInt16 {
        lock.withLock {
            let handle = _nextMonitor
            _nextMonitor += 1
            _monitors[handle] = patterns
            return handle
        }
    }

    /// The adapter goes away (unplugged): Index Removed.
    public func removeIndex() { emit(.indexRemoved, []) }

    /// Powers the adapter off (New Settings); like the kernel, instances without a timeout stay.
    public func powerOff() {
        lock.withLock { _powered = false }
        emit(.newSettings, settingsBytes(powered: false))
    }

    /// The next `times` Add Extended Advertising Parameters / Add Advertising answer `status`
    /// (Failed: what the kernel answers while the controller is still being reset after a power
    /// on), then they work again.
    public func refuseAddingAdvertising(times: Int, with status: MgmtStatus = .failed) {
        lock.withLock { _refusals += Array(repeating: status, count: times) }
    }

    /// Powers the adapter on; like the kernel, programs the instances again (a non-connectable
    /// one gets a new non-resolvable address).
    public func powerOn() {
        lock.withLock {
            _powered = true
            for (number, instance) in _instances { _instances[number]?.address = onAirAddress(instance.flags) }
        }
        emit(.newSettings, settingsBytes(powered: true))
    }

    private func settingsBytes(powered: Bool) -> [UInt8] {
        var w = ByteWriter()
        w.uint32LE(currentSettings(powered: powered).rawValue)
        return w.bytes
    }

    private func currentSettings(powered: Bool) -> MgmtSettings {
        var settings: MgmtSettings = [.lowEnergy]
        if powered { settings.insert(.powered) }
        if lock.withLock({ _connectable }) { settings.insert(.connectable) }
        return settings
    }

    private func emit(_ code: MgmtEventCode, _ parameters: [UInt8], index: MgmtIndex = MgmtIndex(0)) {
        sink.yield(MgmtPacket(code: code.rawValue, index: index, parameters: parameters).bytes)
    }

    // MARK: - MgmtTransport

    public func send(_ bytes: [UInt8]) throws {
        let packet = try MgmtPacket(decoding: bytes)
        let opcode = MgmtOpcode(rawValue: packet.code)
        lock.withLock { _opcodes.append(opcode) }
        if unansweredOpcodes.contains(opcode) { return }
        let (status, reply) = answer(opcode, packet)
        if status.isSuccess {
            var w = ByteWriter()
            w.uint16LE(opcode.rawValue)
            w.uint8(status.rawValue)
            w.append(reply)
            emit(.commandComplete, w.bytes, index: packet.index)
        } else {
            var w = ByteWriter()
            w.uint16LE(opcode.rawValue)
            w.uint8(status.rawValue)
            emit(.commandStatus, w.bytes, index: packet.index)
        }
    }

    public func close() { sink.finish() }

    /// A new management socket on the same kernel, after `close`: the program was restarted, and
    /// the kernel kept its state (instances, settings, its random number generator).
    public func reopen() {
        lock.withLock { _socket = AsyncThrowingStream.makeStream(of: [UInt8].self, throwing: (any Error).self) }
    }

    private func answer(_ opcode: MgmtOpcode, _ packet: MgmtPacket) -> (MgmtStatus, [UInt8]) {
        lock.withLock {
            var r = ByteReader(packet.parameters)
            switch opcode {
            case .readIndexList:
                return (.success, [1, 0, 0, 0])
            case .readControllerInfo:
                var w = ByteWriter()
                w.append(Self.identityAddress.bytes)
                w.uint8(9)
                w.uint16LE(1521)
                w.uint32LE(0x0001_FFFF)
                var settings: MgmtSettings = [.lowEnergy]
                if _powered { settings.insert(.powered) }
                if _connectable { settings.insert(.connectable) }
                w.uint32LE(settings.rawValue)
                w.uint24LE(0)
                w.append([UInt8](repeating: 0, count: 249 + 11))
                return (.success, w.bytes)
            case .readAdvertisingFeatures:
                var w = ByteWriter()
                w.uint32LE(0x0000_FFFF)
                w.uint8(31)
                w.uint8(31)
                w.uint8(maxInstances)
                let numbers = _instances.keys.sorted()
                w.uint8(UInt8(numbers.count))
                w.append(numbers)
                return (.success, w.bytes)
            case .addExtendedAdvertisingParameters:
                guard supportsExtendedParameters else { return (.unknownCommand, []) }
                guard _powered else { return (.rejected, []) }
                if !_refusals.isEmpty { return (_refusals.removeFirst(), []) }
                guard let instance = try? r.readUInt8(), instance >= 1, instance <= maxInstances,
                    let flags = try? r.readUInt32LE(), (try? r.readBytes(4)) != nil,
                    let minInterval = try? r.readUInt32LE(), (try? r.readUInt32LE()) != nil,
                    let tx = try? r.readInt8()
                else { return (.invalidParameters, []) }
                let f = MgmtAdvertisingFlags(rawValue: flags)
                _instances[instance] = Instance(
                    flags: f, minInterval: f.contains(.useIntervals) ? minInterval : nil,
                    txPower: f.contains(.useTxPower) ? tx : nil, data: [], owner: "test", address: onAirAddress(f))
                let selected = legacyOnlyController ? 127 : f.contains(.useTxPower) ? tx : 0
                return (.success, [instance, UInt8(bitPattern: selected), 31, 31])
            case .addExtendedAdvertisingData:
                guard let instance = try? r.readUInt8(), _instances[instance] != nil,
                    let length = try? r.readUInt8(), (try? r.readUInt8()) != nil,
                    let data = try? r.readBytes(Int(length))
                else { return (.invalidParameters, []) }
                _instances[instance]?.data = data
                return (.success, [instance])
            case .addAdvertising:
                if !_refusals.isEmpty { return (_refusals.removeFirst(), []) }
                guard let instance = try? r.readUInt8(), instance >= 1, instance <= maxInstances,
                    let flags = try? r.readUInt32LE(), (try? r.readBytes(4)) != nil,
                    let length = try? r.readUInt8(), (try? r.readUInt8()) != nil,
                    let data = try? r.readBytes(Int(length))
                else { return (.invalidParameters, []) }
                let f = MgmtAdvertisingFlags(rawValue: flags)
                _instances[instance] = Instance(flags: f, data: data, owner: "test", address: onAirAddress(f))
                return (.success, [instance])
            case .removeAdvertising:
                guard let instance = try? r.readUInt8() else { return (.invalidParameters, []) }
                if instance == 0 {
                    _instances.removeAll()
                    return (.success, [0])
                }
                guard _instances.removeValue(forKey: instance) != nil else { return (.invalidParameters, []) }
                return (.success, [instance])
            case .addAdvPatternsMonitor:
                guard supportsAdvMonitor else { return (.unknownCommand, []) }
                guard let count = try? r.readUInt8(), count > 0, packet.parameters.count == 1 + 34 * Int(count)
                else { return (.invalidParameters, []) }
                var patterns: [MgmtAdvPattern] = []
                for _ in 0..<count {
                    guard let type = try? r.readUInt8(), let offset = try? r.readUInt8(),
                        let length = try? r.readUInt8(), let value = try? r.readBytes(31),
                        let pattern = try? MgmtAdvPattern(
                            adType: type, offset: offset, value: Array(value.prefix(Int(length))))
                    else { return (.invalidParameters, []) }
                    patterns.append(pattern)
                }
                let handle = _nextMonitor
                _nextMonitor += 1
                _monitors[handle] = patterns
                restartPassiveScan()
                return (.success, [UInt8(handle & 0xFF), UInt8(handle >> 8)])
            case .removeAdvMonitor:
                guard let handle = try? r.readUInt16LE() else { return (.invalidParameters, []) }
                if handle == 0 {
                    _monitors.removeAll()
                } else if _monitors.removeValue(forKey: handle) == nil {
                    return (.invalidIndex, [])
                }
                restartPassiveScan()
                return (.success, [UInt8(handle & 0xFF), UInt8(handle >> 8)])
            case .readDefaultSystemConfiguration:
                guard supportsSystemConfiguration else { return (.unknownCommand, []) }
                var w = ByteWriter()
                for (type, value) in _systemConfiguration.sorted(by: { $0.key < $1.key }) {
                    w.uint16LE(type)
                    w.uint8(2)
                    w.uint16LE(value)
                }
                return (.success, w.bytes)
            case .setDefaultSystemConfiguration:
                guard supportsSystemConfiguration else { return (.unknownCommand, []) }
                guard setSystemConfigurationStatus.isSuccess else { return (setSystemConfigurationStatus, []) }
                // mgmt_config.c: every entry is validated first (16-bit values), then applied.
                var updates: [(UInt16, UInt16)] = []
                while !r.isAtEnd {
                    guard let type = try? r.readUInt16LE(), let length = try? r.readUInt8(), length == 2,
                        let value = try? r.readUInt16LE()
                    else { return (.invalidParameters, []) }
                    updates.append((type, value))
                }
                guard !updates.isEmpty else { return (.invalidParameters, []) }
                for (type, value) in updates { _systemConfiguration[type] = value }
                return (.success, [])
            default:
                return (.unknownCommand, [])
            }
        }
    }
}
