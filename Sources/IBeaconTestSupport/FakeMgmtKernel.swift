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

    /// The one adapter's index: hci0.
    public static let index = MgmtIndex(0)
    /// The adapter's identity (public) address, as Read Controller Info reports it.
    public static let identityAddress = BDAddress("00:AA:01:00:00:00")!
    /// The kernel's advertisement-monitor scan defaults, 60 ms / 30 ms (hci_core.c
    /// `le_scan_int_adv_monitor`, `le_scan_window_adv_monitor`).
    public static let defaultMonitorScan = MonitorScanParameters(interval: 0x0060, window: 0x0030)
    /// "0x000D LE Scanning Interval for auto connect" and "0x000E … Window …": parameters of
    /// other features, which a scan must leave alone.
    public static let leScanIntervalAutoConnect: UInt16 = 0x000D
    public static let leScanWindowAutoConnect: UInt16 = 0x000E
    /// What another program advertises unless told otherwise: Manufacturer Specific Data
    /// (length 3, type 0xFF) with company 0xFECA.
    public static let otherProgramData: [UInt8] = [0x03, 0xFF, 0xCA, 0xFE]

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
    /// False: the adapter is powered with Low Energy off, as the kernel leaves one that no
    /// bluetoothd set up (`btmgmt le off`).
    public var lowEnergy = true
    private var _powered: Bool
    private var _instances: [UInt8: Instance] = [:]
    private var _opcodes: [MgmtOpcode] = []
    private var _monitors: [UInt16: [MgmtAdvPattern]] = [:]
    private var _nextMonitor: UInt16 = 1
    private var _otherDiscovering = false
    private var _systemConfiguration: [UInt16: UInt16] = [
        MgmtSystemParameter.leScanIntervalAdvMonitor: defaultMonitorScan.interval,
        MgmtSystemParameter.leScanWindowAdvMonitor: defaultMonitorScan.window,
        leScanIntervalAutoConnect: 0x0060, leScanWindowAutoConnect: 0x0030,
    ]
    private var _monitorScan: MonitorScanParameters?
    private var _refusals: [MgmtStatus] = []
    private var _connectable = false
    /// LE links up, by peer: centrals that connected to a connectable instance.
    private var _links: Set<MgmtLink> = []
    /// Instances the kernel stopped advertising because a central connected to them (the
    /// controller ends a connectable advertisement when it is connected; hci_event.c re-enables
    /// it in `hci_disconn_complete_evt`).
    private var _paused: Set<UInt8> = []
    private var _pauses = 0
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
        let settings = lock.withLock {
            _connectable = on
            return currentSettings(powered: _powered)
        }
        emit(.newSettings(index: Self.index, settings))
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
    public func otherProgramAdds(
        _ instance: UInt8, data: [UInt8] = otherProgramData, owner: String = "btmgmt", flags: MgmtAdvertisingFlags = []
    ) {
        lock.withLock { _instances[instance] = Instance(flags: flags, data: data, owner: owner) }
        emit(.advertisingAdded(index: Self.index, instance: instance))
    }

    /// Another program removes an instance; the client sees Advertising Removed.
    public func otherProgramRemoves(_ instance: UInt8) {
        let existed = lock.withLock { _instances.removeValue(forKey: instance) != nil }
        if existed { emit(.advertisingRemoved(index: Self.index, instance: instance)) }
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
            emit(.deviceFound(index: Self.index, report))
        } else if monitoring {
            emit(.advMonitorDeviceFound(index: Self.index, handle: MgmtEvent.unmatchedMonitorHandle, report))
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

    /// LE links to the adapter that are up (centrals connected to it).
    public var links: Set<MgmtLink> { lock.withLock { _links } }
    /// Instances paused because a central is connected to them.
    public var pausedInstances: Set<UInt8> { lock.withLock { _paused } }
    /// How many times a central's connection paused an instance, resumed or not since (a test
    /// that checks `pausedInstances` right after a connection races the session's Disconnect).
    public var pauses: Int { lock.withLock { _pauses } }

    /// A central (a phone) connects to `instance`, which must be advertised connectable (by
    /// its flag or the adapter's Connectable setting): the kernel pauses it and says Device
    /// Connected to every socket (flags without "initiated": the central made the link).
    /// Returns whether it could connect.
    @discardableResult
    public func centralConnects(_ link: MgmtLink, to instance: UInt8) -> Bool {
        let connected = lock.withLock {
            guard _powered, let i = _instances[instance], i.flags.contains(.connectable) || _connectable else {
                return false
            }
            _links.insert(link)
            _paused.insert(instance)
            _pauses += 1
            return true
        }
        if connected { emit(.deviceConnected(index: Self.index, MgmtLink(link.address, link.addressType))) }
        return connected
    }

    /// This host connects to a device (bluetoothd reconnecting a keyboard): Device Connected
    /// with the "initiated" flag (without it when `reportsInitiator` is false: before 5.14).
    public func hostConnects(_ link: MgmtLink) {
        lock.withLock {
            _links.insert(link)
            _opened.insert(link)
        }
        let flags = reportsInitiator ? MgmtLink.initiatedFlag : 0
        emit(.deviceConnected(index: Self.index, MgmtLink(link.address, link.addressType, flags: flags)))
    }

    /// False: Device Connected never carries the "initiated" flag, as before Linux 5.14 (5.10).
    public var reportsInitiator = true
    /// Links this host opened (`hostConnects`).
    private var _opened: Set<MgmtLink> = []

    /// What HCIGETCONNLIST says of `link` (`leLinkOpenedHere`): whether this host opened it,
    /// nil when it is not up.
    public func linkOpenedHere(_ link: MgmtLink) -> Bool? {
        lock.withLock { _links.contains(link) ? _opened.contains(link) : nil }
    }

    /// The central leaves by itself: Device Disconnected, and the kernel resumes advertising.
    public func centralDisconnects(_ link: MgmtLink) {
        let was = lock.withLock { dropLink(link) }
        if was { emit(.deviceDisconnected(index: Self.index, link, reason: 0x13)) }
    }

    /// Ends `link` (lock held): like hci_disconn_complete_evt, advertising resumes once no LE
    /// link holds it (one central per instance here).
    private func dropLink(_ link: MgmtLink) -> Bool {
        guard _links.remove(link) != nil else { return false }
        _opened.remove(link)
        if _links.isEmpty { _paused.removeAll() }
        return true
    }

    /// The adapter goes away (unplugged): Index Removed.
    public func removeIndex() { emit(.indexRemoved(Self.index)) }

    /// Powers the adapter off (New Settings); like the kernel, instances without a timeout stay.
    public func powerOff() {
        let settings = lock.withLock {
            _powered = false
            return currentSettings(powered: false)
        }
        emit(.newSettings(index: Self.index, settings))
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
        let settings = lock.withLock {
            _powered = true
            for (number, instance) in _instances { _instances[number]?.address = onAirAddress(instance.flags) }
            return currentSettings(powered: true)
        }
        emit(.newSettings(index: Self.index, settings))
    }

    /// Current_Settings, for New Settings and Read Controller Information (lock held).
    private func currentSettings(powered: Bool) -> MgmtSettings {
        var settings: MgmtSettings = lowEnergy ? [.lowEnergy] : []
        if powered { settings.insert(.powered) }
        if _connectable { settings.insert(.connectable) }
        return settings
    }

    private func emit(_ event: MgmtEvent) { sink.yield(event.packet.bytes) }

    /// Sends a packet as the kernel would to every socket opened with CAP_NET_ADMIN, whatever
    /// its code (New Link Key after another program's pairing, say).
    public func kernelBroadcasts(_ packet: MgmtPacket) { sink.yield(packet.bytes) }

    // MARK: - MgmtTransport

    /// Through the real socket's write rule (`sendMgmtCommand`) into `sendmsg`.
    public func send(_ bytes: [UInt8]) throws { try sendMgmtCommand(bytes, through: sendmsg) }

    /// `send(2)` on the management socket, as hci_sock.c `hci_mgmt_cmd` returns it: the length
    /// when a handler ran, 0 when the kernel answered with a status before any handler (Unknown
    /// Command, Invalid Parameters for a length the command does not admit), each call a new
    /// command. A program that takes the 0 for a short write and sends again gets a status per
    /// call until, as seen on Linux 5.10, `send` fails with ENOMEM (here after
    /// `resendsUntilOutOfMemory` in a row).
    public func sendmsg(_ bytes: [UInt8]) throws -> Int {
        let packet = try MgmtPacket(decoding: bytes)
        let opcode = MgmtOpcode(rawValue: packet.code)
        let repeated = lock.withLock {
            _repeats = _opcodes.last == opcode && _lastSendReturnedZero ? _repeats + 1 : 0
            _opcodes.append(opcode)
            return _repeats
        }
        if repeated >= Self.resendsUntilOutOfMemory {
            throw TransportError(.io, "send: Cannot allocate memory", errno: 12)
        }
        if unansweredOpcodes.contains(opcode) { return bytes.count }
        let early = opcode.spec.map { !$0.parameters.admits(packet.parameters.count) } ?? true
        let answer = answer(opcode, packet.parameters)
        emit(
            answer.status.isSuccess
                ? .commandComplete(
                    index: packet.index, opcode: opcode, status: answer.status,
                    returnParameters: answer.returnParameters)
                : .commandStatus(index: packet.index, opcode: opcode, status: answer.status))
        // Unknown Command from a handler here stands for a command this kernel version has no
        // row for (`supportsExtendedParameters` false: before 5.12): answered early too.
        let zero = early || answer.status == .unknownCommand
        lock.withLock { _lastSendReturnedZero = zero }
        return zero ? 0 : bytes.count
    }

    /// How many repeats of a command answered early the fake takes before `send` fails with ENOMEM.
    public static let resendsUntilOutOfMemory = 64
    private var _repeats = 0
    private var _lastSendReturnedZero = false

    public func close() { sink.finish() }

    /// A new management socket on the same kernel, after `close`: the program was restarted, and
    /// the kernel kept its state (instances, settings, its random number generator).
    public func reopen() {
        lock.withLock { _socket = AsyncThrowingStream.makeStream(of: [UInt8].self, throwing: (any Error).self) }
    }

    // MARK: - the kernel's command handlers

    /// What the kernel answers a command: a status, and return parameters when it succeeded.
    private struct Answer {
        var status: MgmtStatus
        var returnParameters: [UInt8] = []

        init(_ status: MgmtStatus) { self.status = status }
        init(success returnParameters: [UInt8]) {
            status = .success
            self.returnParameters = returnParameters
        }
    }

    /// As hci_sock.c `hci_mgmt_cmd` checks before any handler runs: Unknown Command for a code
    /// without a row, Invalid Parameters for a length the row does not admit; and as the
    /// handlers do, Invalid Parameters for parameters that do not add up.
    private func answer(_ opcode: MgmtOpcode, _ parameters: [UInt8]) -> Answer {
        guard let spec = opcode.spec else { return Answer(.unknownCommand) }
        guard spec.parameters.admits(parameters.count) else { return Answer(.invalidParameters) }
        var r = ByteReader(parameters)
        return lock.withLock {
            do {
                return try handle(opcode, &r)
            } catch {
                return Answer(.invalidParameters)
            }
        }
    }

    /// The handler of each command this fake knows (lock held); Unknown Command for the others.
    private func handle(_ opcode: MgmtOpcode, _ r: inout ByteReader) throws(DecodingError) -> Answer {
        switch opcode {
        case .readIndexList: readIndexList()
        case .readControllerInfo: readControllerInfo()
        case .readAdvertisingFeatures: readAdvertisingFeatures()
        case .disconnect: try disconnect(&r)
        case .addExtendedAdvertisingParameters: try addExtendedAdvertisingParameters(&r)
        case .addExtendedAdvertisingData: try addExtendedAdvertisingData(&r)
        case .addAdvertising: try addAdvertising(&r)
        case .removeAdvertising: try removeAdvertising(&r)
        case .addAdvPatternsMonitor: try addAdvPatternsMonitor(&r)
        case .removeAdvMonitor: try removeAdvMonitor(&r)
        case .readDefaultSystemConfiguration: readDefaultSystemConfiguration()
        case .setDefaultSystemConfiguration: try setDefaultSystemConfiguration(&r)
        default: Answer(.unknownCommand)
        }
    }

    /// Read Controller Information: Bluetooth 5.0 (version 9), manufacturer 1521 (0x05F1, The
    /// Linux Foundation), every setting of bits 0–16 supported.
    static let bluetoothVersion: UInt8 = 9
    static let manufacturer: UInt16 = 1521
    static let supportedSettings = MgmtSettings(rawValue: 0x0001_FFFF)
    /// The Name (249) and Short_Name (11) fields, both empty.
    static let emptyNames = [UInt8](repeating: 0, count: 249 + 11)
    /// Read Advertising Features: every flag of bits 0–15 supported; legacy advertising data
    /// and scan responses of at most 31 bytes.
    static let supportedFlags = MgmtAdvertisingFlags(rawValue: 0x0000_FFFF)
    static let maxDataLength: UInt8 = 31
    /// Each pattern of Add Advertisement Patterns Monitor: AD_Type, Offset, Length, Value (31).
    static let patternLength = 3 + 31

    private func readIndexList() -> Answer {
        var w = ByteWriter()
        w.uint16LE(1)  // Num_Controllers
        w.uint16LE(Self.index.rawValue)
        return Answer(success: w.bytes)
    }

    private func readControllerInfo() -> Answer {
        var w = ByteWriter()
        w.append(Self.identityAddress.bytes)
        w.uint8(Self.bluetoothVersion)
        w.uint16LE(Self.manufacturer)
        w.uint32LE(Self.supportedSettings.rawValue)
        w.uint32LE(currentSettings(powered: _powered).rawValue)
        w.uint24LE(0)  // Class_Of_Device
        w.append(Self.emptyNames)
        return Answer(success: w.bytes)
    }

    /// Disconnect: answered once the link is down; like the 6.1 kernel (mgmt.c
    /// `mgmt_device_disconnected` skips the socket of the pending Disconnect), the caller gets
    /// no Device Disconnected. Not Connected when there is no such link.
    private func disconnect(_ r: inout ByteReader) throws(DecodingError) -> Answer {
        let address = try BDAddress.read(from: &r, "Address")
        let link = MgmtLink(address, try r.readUInt8("Address_Type"))
        guard dropLink(link) else { return Answer(.notConnected) }
        return Answer(success: address.bytes + [link.addressType])
    }

    private func readAdvertisingFeatures() -> Answer {
        var w = ByteWriter()
        w.uint32LE(Self.supportedFlags.rawValue)
        w.uint8(Self.maxDataLength)  // Max_Adv_Data_Len
        w.uint8(Self.maxDataLength)  // Max_Scan_Rsp_Len
        w.uint8(maxInstances)
        // 6.1 mgmt.c read_adv_features: "Only instances 1-le_num_of_adv_sets are externally
        // visible" — an instance whose number exceeds the count of instances is left out.
        let numbers = _instances.keys.sorted().filter { Int($0) <= _instances.count }
        w.uint8(UInt8(numbers.count))
        w.append(numbers)
        return Answer(success: w.bytes)
    }

    /// Instance (1), Flags (4), Duration (2), Timeout (2): how Add Advertising and Add Extended
    /// Advertising Parameters begin (`ByteWriter.mgmtAdvertisingHeader`).
    private static func readHeader(_ r: inout ByteReader) throws(DecodingError) -> (UInt8, MgmtAdvertisingFlags) {
        let instance = try r.readUInt8("Instance")
        let flags = MgmtAdvertisingFlags(rawValue: try r.readUInt32LE("Flags"))
        _ = try r.readUInt32LE("Duration, Timeout")
        return (instance, flags)
    }

    /// Adv_Data_Len (1), Scan_Rsp_Len (1), Adv_Data (the scan response is not kept): how Add
    /// Advertising and Add Extended Advertising Data end.
    private static func readAdvertisingData(_ r: inout ByteReader) throws(DecodingError) -> [UInt8] {
        let length = try r.readUInt8("Adv_Data_Len")
        _ = try r.readUInt8("Scan_Rsp_Len")
        return try r.readBytes(Int(length), "Adv_Data")
    }

    /// "a value between 1 and the number of supported instances".
    private func isValidInstance(_ instance: UInt8) -> Bool { instance >= 1 && instance <= maxInstances }

    private func addExtendedAdvertisingParameters(_ r: inout ByteReader) throws(DecodingError) -> Answer {
        guard supportsExtendedParameters else { return Answer(.unknownCommand) }
        guard _powered else { return Answer(.rejected) }
        if !_refusals.isEmpty { return Answer(_refusals.removeFirst()) }
        let (instance, flags) = try Self.readHeader(&r)
        let minInterval = try r.readUInt32LE("MinInterval")
        _ = try r.readUInt32LE("MaxInterval")
        let txPower = try r.readInt8("TxPower")
        guard isValidInstance(instance) else { return Answer(.invalidParameters) }
        _instances[instance] = Instance(
            flags: flags, minInterval: flags.contains(.useIntervals) ? minInterval : nil,
            txPower: flags.contains(.useTxPower) ? txPower : nil, data: [], owner: "test",
            address: onAirAddress(flags))
        let selected =
            legacyOnlyController
            ? MgmtAddExtendedAdvertisingParameters.unknownTxPower : flags.contains(.useTxPower) ? txPower : 0
        var w = ByteWriter()
        w.uint8(instance)
        w.int8(selected)
        w.uint8(Self.maxDataLength)  // MaxAdvDataLen
        w.uint8(Self.maxDataLength)  // MaxScanRspLen
        return Answer(success: w.bytes)
    }

    private func addExtendedAdvertisingData(_ r: inout ByteReader) throws(DecodingError) -> Answer {
        let instance = try r.readUInt8("Instance")
        let data = try Self.readAdvertisingData(&r)
        guard _instances[instance] != nil else { return Answer(.invalidParameters) }
        _instances[instance]?.data = data
        return Answer(success: [instance])
    }

    private func addAdvertising(_ r: inout ByteReader) throws(DecodingError) -> Answer {
        if !_refusals.isEmpty { return Answer(_refusals.removeFirst()) }
        let (instance, flags) = try Self.readHeader(&r)
        let data = try Self.readAdvertisingData(&r)
        guard isValidInstance(instance) else { return Answer(.invalidParameters) }
        _instances[instance] = Instance(flags: flags, data: data, owner: "test", address: onAirAddress(flags))
        return Answer(success: [instance])
    }

    /// Instance 0 removes every instance.
    private func removeAdvertising(_ r: inout ByteReader) throws(DecodingError) -> Answer {
        let instance = try r.readUInt8("Instance")
        if instance == 0 {
            _instances.removeAll()
        } else if _instances.removeValue(forKey: instance) == nil {
            return Answer(.invalidParameters)
        }
        return Answer(success: [instance])
    }

    private func addAdvPatternsMonitor(_ r: inout ByteReader) throws(DecodingError) -> Answer {
        guard supportsAdvMonitor else { return Answer(.unknownCommand) }
        let count = Int(try r.readUInt8("Pattern_Count"))
        guard count > 0, r.remaining == Self.patternLength * count else { return Answer(.invalidParameters) }
        var patterns: [MgmtAdvPattern] = []
        for _ in 0..<count {
            let type = try r.readUInt8("AD_Type")
            let offset = try r.readUInt8("Offset")
            let length = Int(try r.readUInt8("Length"))
            let value = try r.readBytes(Self.patternLength - 3, "Value")
            guard let pattern = try? MgmtAdvPattern(adType: type, offset: offset, value: Array(value.prefix(length)))
            else { return Answer(.invalidParameters) }
            patterns.append(pattern)
        }
        let handle = _nextMonitor
        _nextMonitor += 1
        _monitors[handle] = patterns
        restartPassiveScan()
        var w = ByteWriter()
        w.uint16LE(handle)
        return Answer(success: w.bytes)
    }

    /// Handle 0 removes every monitor.
    private func removeAdvMonitor(_ r: inout ByteReader) throws(DecodingError) -> Answer {
        let handle = try r.readUInt16LE("Monitor_Handle")
        if handle == 0 {
            _monitors.removeAll()
        } else if _monitors.removeValue(forKey: handle) == nil {
            return Answer(.invalidIndex)
        }
        restartPassiveScan()
        var w = ByteWriter()
        w.uint16LE(handle)
        return Answer(success: w.bytes)
    }

    private func readDefaultSystemConfiguration() -> Answer {
        guard supportsSystemConfiguration else { return Answer(.unknownCommand) }
        let parameters = _systemConfiguration.sorted { $0.key < $1.key }.map {
            MgmtSystemParameter(type: $0.key, uint16: $0.value)
        }
        return Answer(success: MgmtSystemParameter.encode(parameters))
    }

    /// mgmt_config.c: every entry is validated first (16-bit values), then applied.
    private func setDefaultSystemConfiguration(_ r: inout ByteReader) throws(DecodingError) -> Answer {
        guard supportsSystemConfiguration else { return Answer(.unknownCommand) }
        guard setSystemConfigurationStatus.isSuccess else { return Answer(setSystemConfigurationStatus) }
        var updates: [(UInt16, UInt16)] = []
        while !r.isAtEnd {
            let type = try r.readUInt16LE("Parameter_Type")
            guard try r.readUInt8("Value_Length") == 2 else { return Answer(.invalidParameters) }
            updates.append((type, try r.readUInt16LE("Value")))
        }
        guard !updates.isEmpty else { return Answer(.invalidParameters) }
        for (type, value) in updates { _systemConfiguration[type] = value }
        return Answer(success: [])
    }
}
