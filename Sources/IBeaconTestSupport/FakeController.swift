import IBeaconCore
import IBeaconHost

/// A behavioural fake controller: it answers commands the way a real LE controller does
/// (Core 5.4 Vol 4 Part E), keeps the advertising and scanning state they set, enforces the
/// rules hosts trip over (no parameter changes while advertising; no mixing of legacy and
/// extended advertising commands between resets, §3.1.1), and lets a test inject failures,
/// silence, unsolicited events and a dropped link.
public final class FakeController: HCITransport, @unchecked Sendable {
    public let name: String
    public let incoming: AsyncThrowingStream<H4Packet, any Error>
    private let sink: AsyncThrowingStream<H4Packet, any Error>.Continuation
    private let lock = Lock()

    /// What a test asks the fake to do instead of answering normally.
    public enum Fault: Sendable, Equatable {
        case status(HCIStatus)
        case noAnswer
    }

    public struct AdvertisingSet: Sendable, Equatable {
        public var properties: UInt16 = 0
        public var intervalSlots: UInt32 = 0
        public var ownAddressType: UInt8 = 0
        public var requestedTxPower: Int8 = 127
        public var randomAddress: BDAddress?
        public var data: [UInt8] = []
        public var enabled = false
    }

    // Controller identity.
    public var address: BDAddress
    public var supportsExtended: Bool
    public var numberOfSets: UInt8 = 4
    public var txPowerRange: ClosedRange<Int8> = -20...10

    // State set by commands; readable by tests.
    public private(set) var commands: [H4Packet] = []
    public private(set) var eventMask: UInt64 = 0x0000_1FFF_FFFF_FFFF
    public private(set) var leEventMask: UInt64 = 0x1F
    public private(set) var legacyAdvertising = AdvertisingSet()
    public private(set) var legacyRandomAddress: BDAddress?
    public private(set) var sets: [UInt8: AdvertisingSet] = [:]
    public private(set) var scanning = false
    public private(set) var scanFilterDuplicates = false
    private var commandSet: LECommandSet?
    public var faults: [HCIOpcode: Fault] = [:]
    /// Num_HCI_Command_Packets in every answer: 0 plays a controller that, once it has answered,
    /// accepts no further command (issue 11).
    public var grantedCredits: UInt8 {
        get { lock.withLock { credits } }
        set { lock.withLock { credits = newValue } }
    }
    private var credits: UInt8 = 1
    /// Sends that fail before reaching the controller, each used once: as a BlueZ socket
    /// answers ENETDOWN while the kernel is still bringing the adapter up.
    public var sendFailures: [TransportError] {
        get { lock.withLock { pendingSendFailures } }
        set { lock.withLock { pendingSendFailures = newValue } }
    }
    private var pendingSendFailures: [TransportError] = []

    public init(
        name: String = "fake", address: BDAddress = BDAddress("F0:F1:F2:F3:F4:F5")!, supportsExtended: Bool = true
    ) {
        self.name = name
        self.address = address
        self.supportsExtended = supportsExtended
        (incoming, sink) = AsyncThrowingStream.makeStream(of: H4Packet.self)
    }

    /// Opcodes received so far, in order.
    public var opcodes: [HCIOpcode] {
        lock.withLock { commands.map(Self.opcode(of:)) }
    }

    /// True when the controller would be transmitting advertisements.
    public var isAdvertising: Bool {
        lock.withLock { legacyAdvertising.enabled || sets.values.contains { $0.enabled } }
    }

    public var advertisingSets: [UInt8: AdvertisingSet] { lock.withLock { sets } }
    public var legacy: AdvertisingSet { lock.withLock { legacyAdvertising } }

    public func send(_ packet: H4Packet) async throws {
        if let failure = lock.withLock({ pendingSendFailures.isEmpty ? nil : pendingSendFailures.removeFirst() }) {
            throw failure
        }
        guard packet.type == .command, packet.body.count >= 3 else { return }
        let reply: H4Packet? = lock.withLock {
            commands.append(packet)
            return handle(packet)
        }
        if let reply { sink.yield(reply) }
    }

    public func close() { sink.finish() }

    /// Sends an event the host did not ask for.
    public func inject(_ packet: H4Packet) { sink.yield(packet) }

    /// Drops the link, as a TCP peer closing or a USB adapter unplugged.
    public func dropLink(_ error: TransportError = TransportError(.disconnected, "fake link dropped")) {
        sink.finish(throwing: error)
    }

    /// Loses all state as after a Reset, without any event (a silent power loss).
    public func loseState() { lock.withLock { resetState() } }

    /// Another host resets the controller: state lost, and the Command Complete for Reset is
    /// seen by this host too (as on a shared BlueZ raw socket).
    public func resetByAnotherHost() {
        lock.withLock { resetState() }
        inject(Self.commandComplete(.reset, [HCIStatus.success.rawValue]))
    }

    private func resetState() {
        eventMask = 0x0000_1FFF_FFFF_FFFF
        leEventMask = 0x1F
        legacyAdvertising = AdvertisingSet()
        legacyRandomAddress = nil
        sets = [:]
        scanning = false
        commandSet = nil
    }

    public static func commandComplete(_ opcode: HCIOpcode, _ returnParameters: [UInt8], credits: UInt8 = 1) -> H4Packet
    {
        var body: [UInt8] = [HCIEventCode.commandComplete.rawValue, UInt8(3 + returnParameters.count), credits]
        body += [UInt8(opcode.rawValue & 0xFF), UInt8(opcode.rawValue >> 8)]
        body += returnParameters
        return H4Packet(type: .event, body: body)
    }

    /// The legacy advertising and scanning commands of §3.1.1 that this host sends.
    static let legacyOpcodes: Set<HCIOpcode> = [
        .leSetAdvertisingParameters, .leReadAdvertisingPhysicalChannelTxPower, .leSetAdvertisingData,
        .leSetScanResponseData, .leSetAdvertisingEnable, .leSetScanParameters, .leSetScanEnable,
    ]
    /// The extended advertising and scanning commands of §3.1.1 that this host sends (the periodic
    /// advertising commands 0x203E…0x2040 are neither sent nor answered).
    static let extendedOpcodes: Set<HCIOpcode> = [
        .leSetAdvertisingSetRandomAddress, .leSetExtendedAdvertisingParameters, .leSetExtendedAdvertisingData,
        .leSetExtendedScanResponseData, .leSetExtendedAdvertisingEnable, .leReadMaximumAdvertisingDataLength,
        .leReadNumberOfSupportedAdvertisingSets, .leRemoveAdvertisingSet, .leClearAdvertisingSets,
        .leSetExtendedScanParameters, .leSetExtendedScanEnable, .leReadTransmitPower,
    ]

    /// A command packet's Opcode: its first two octets, little-endian (`send` has checked there are three).
    private static func opcode(of command: H4Packet) -> HCIOpcode {
        HCIOpcode(rawValue: UInt16(command.body[0]) | UInt16(command.body[1]) << 8)
    }

    private func handle(_ packet: H4Packet) -> H4Packet? {
        let opcode = Self.opcode(of: packet)
        let p = Array(packet.body.dropFirst(3))
        func ok(_ rest: [UInt8] = []) -> H4Packet { Self.commandComplete(opcode, [0] + rest, credits: credits) }
        func fail(_ s: HCIStatus) -> H4Packet { Self.commandComplete(opcode, [s.rawValue], credits: credits) }

        switch faults[opcode] {
        case .noAnswer: return nil
        case .status(let s): return fail(s)
        case nil: break
        }

        // §3.1.1: after one kind of advertising command, the other kind is disallowed until reset.
        if Self.legacyOpcodes.contains(opcode) {
            if commandSet == .extended { return fail(.commandDisallowed) }
            commandSet = .legacy
        } else if Self.extendedOpcodes.contains(opcode) {
            guard supportsExtended else { return fail(.unknownHCICommand) }
            if commandSet == .legacy { return fail(.commandDisallowed) }
            commandSet = .extended
        }

        let reply =
            controllerCommand(opcode, p) ?? legacyAdvertisingCommand(opcode, p) ?? scanningCommand(opcode, p)
            ?? extendedAdvertisingCommand(opcode, p) ?? .fail(.unknownHCICommand)
        switch reply {
        case .ok(let rest): return ok(rest)
        case .fail(let status): return fail(status)
        }
    }

    /// What a command handler answers: success with return parameters after the status, or a
    /// failure status.
    private enum Reply {
        case ok([UInt8] = [])
        case fail(HCIStatus)
    }

    /// Controller and baseband, informational and LE controller commands; nil for any other opcode.
    private func controllerCommand(_ opcode: HCIOpcode, _ p: [UInt8]) -> Reply? {
        switch opcode {
        case .reset:
            resetState()
            return .ok()
        case .setEventMask:
            guard p.count == 8 else { return .fail(.invalidHCICommandParameters) }
            eventMask = le64(p)
            return .ok()
        case .leSetEventMask:
            guard p.count == 8 else { return .fail(.invalidHCICommandParameters) }
            leEventMask = le64(p)
            return .ok()
        case .readLocalVersionInformation:  // 5.4, revision, LMP 5.4, company 0x05F1, subversion
            return .ok([0x0D, 0x00, 0x01, 0x0D, 0xF1, 0x05, 0x00, 0x02])
        case .readBDAddr:
            return .ok(address.bytes)
        case .leReadLocalSupportedFeatures:
            let features: UInt64 = supportsExtended ? (1 << 12) | (1 << 8) | (1 << 11) : 0
            return .ok((0..<8).map { UInt8((features >> (8 * UInt64($0))) & 0xFF) })
        default:
            return nil
        }
    }

    /// Legacy advertising commands (and LE Set Random Address); nil for any other opcode.
    private func legacyAdvertisingCommand(_ opcode: HCIOpcode, _ p: [UInt8]) -> Reply? {
        switch opcode {
        case .leSetRandomAddress:
            guard p.count == 6 else { return .fail(.invalidHCICommandParameters) }
            if legacyAdvertising.enabled { return .fail(.commandDisallowed) }
            legacyRandomAddress = try? BDAddress(littleEndian: p)
            return .ok()
        case .leSetAdvertisingParameters:
            guard p.count == 15 else { return .fail(.invalidHCICommandParameters) }
            if legacyAdvertising.enabled { return .fail(.commandDisallowed) }
            let min = UInt32(p[0]) | UInt32(p[1]) << 8
            let max = UInt32(p[2]) | UInt32(p[3]) << 8
            guard (0x20...0x4000).contains(min), (0x20...0x4000).contains(max), min <= max, p[4] <= 4,
                p[13] & 0x07 != 0
            else { return .fail(.invalidHCICommandParameters) }
            legacyAdvertising.intervalSlots = min
            legacyAdvertising.properties = UInt16(p[4])
            legacyAdvertising.ownAddressType = p[5]
            return .ok()
        case .leReadAdvertisingPhysicalChannelTxPower:
            return .ok([0x00])
        case .leSetAdvertisingData:  // length + 31 octets
            guard p.count == 32, p[0] <= 31 else { return .fail(.invalidHCICommandParameters) }
            legacyAdvertising.data = Array(p[1..<1 + Int(p[0])])
            return .ok()
        case .leSetScanResponseData:  // length + 31 octets
            guard p.count == 32, p[0] <= 31 else { return .fail(.invalidHCICommandParameters) }
            return .ok()
        case .leSetAdvertisingEnable:
            guard p.count == 1, p[0] <= 1 else { return .fail(.invalidHCICommandParameters) }
            if p[0] == 1, legacyAdvertising.ownAddressType == 1, legacyRandomAddress == nil {
                return .fail(.invalidHCICommandParameters)
            }
            legacyAdvertising.enabled = p[0] == 1
            return .ok()
        default:
            return nil
        }
    }

    /// Legacy and extended scanning commands; nil for any other opcode.
    private func scanningCommand(_ opcode: HCIOpcode, _ p: [UInt8]) -> Reply? {
        switch opcode {
        case .leSetScanParameters:
            guard p.count == 7 else { return .fail(.invalidHCICommandParameters) }
            if scanning { return .fail(.commandDisallowed) }
            return .ok()
        case .leSetScanEnable:
            guard p.count == 2 else { return .fail(.invalidHCICommandParameters) }
            scanning = p[0] == 1
            scanFilterDuplicates = p[1] == 1
            return .ok()
        case .leSetExtendedScanParameters:
            if scanning { return .fail(.commandDisallowed) }
            return .ok()
        case .leSetExtendedScanEnable:
            guard p.count == 6 else { return .fail(.invalidHCICommandParameters) }
            scanning = p[0] == 1
            scanFilterDuplicates = p[1] != 0
            return .ok()
        default:
            return nil
        }
    }

    /// Extended advertising commands (advertising sets) and LE Read Transmit Power; nil for any other opcode.
    private func extendedAdvertisingCommand(_ opcode: HCIOpcode, _ p: [UInt8]) -> Reply? {
        switch opcode {
        case .leSetAdvertisingSetRandomAddress:
            guard p.count == 7 else { return .fail(.invalidHCICommandParameters) }
            guard sets[p[0]] != nil else { return .fail(.unknownAdvertisingIdentifier) }
            sets[p[0]]?.randomAddress = try? BDAddress(littleEndian: Array(p[1...6]))
            return .ok()
        case .leSetExtendedAdvertisingParameters:
            guard p.count == 25 else { return .fail(.invalidHCICommandParameters) }
            let handle = p[0]
            if sets[handle]?.enabled == true { return .fail(.commandDisallowed) }
            if sets[handle] == nil && sets.count >= Int(numberOfSets) { return .fail(.memoryCapacityExceeded) }
            var set = sets[handle] ?? AdvertisingSet()
            set.properties = UInt16(p[1]) | UInt16(p[2]) << 8
            set.intervalSlots = UInt32(p[3]) | UInt32(p[4]) << 8 | UInt32(p[5]) << 16
            set.ownAddressType = p[10]
            set.requestedTxPower = Int8(bitPattern: p[19])
            sets[handle] = set
            let requested = set.requestedTxPower
            let selected =
                requested == 127 ? 0 : Swift.min(Swift.max(requested, txPowerRange.lowerBound), txPowerRange.upperBound)
            return .ok([UInt8(bitPattern: selected)])
        case .leSetExtendedAdvertisingData:
            guard p.count >= 4, p.count == 4 + Int(p[3]) else { return .fail(.invalidHCICommandParameters) }
            guard sets[p[0]] != nil else { return .fail(.unknownAdvertisingIdentifier) }
            sets[p[0]]?.data = Array(p[4...])
            return .ok()
        case .leSetExtendedAdvertisingEnable:
            guard p.count >= 2, p.count == 2 + 4 * Int(p[1]) else { return .fail(.invalidHCICommandParameters) }
            let enable = p[0] == 1
            let count = Int(p[1])
            if count == 0 {
                guard !enable else { return .fail(.invalidHCICommandParameters) }
                for h in sets.keys { sets[h]?.enabled = false }
                return .ok()
            }
            let handles = (0..<count).map { p[2 + 4 * $0] }
            guard handles.allSatisfy({ sets[$0] != nil }) else { return .fail(.unknownAdvertisingIdentifier) }
            for h in handles { sets[h]?.enabled = enable }
            return .ok()
        case .leReadMaximumAdvertisingDataLength:
            return .ok([0xFB, 0x00])
        case .leReadNumberOfSupportedAdvertisingSets:
            return .ok([numberOfSets])
        case .leRemoveAdvertisingSet:
            guard p.count == 1 else { return .fail(.invalidHCICommandParameters) }
            guard let set = sets[p[0]] else { return .fail(.unknownAdvertisingIdentifier) }
            if set.enabled { return .fail(.commandDisallowed) }
            sets[p[0]] = nil
            return .ok()
        case .leClearAdvertisingSets:
            if sets.values.contains(where: { $0.enabled }) { return .fail(.commandDisallowed) }
            sets = [:]
            return .ok()
        case .leReadTransmitPower:
            return .ok([UInt8(bitPattern: txPowerRange.lowerBound), UInt8(bitPattern: txPowerRange.upperBound)])
        default:
            return nil
        }
    }

    private func le64(_ p: [UInt8]) -> UInt64 {
        p.prefix(8).enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
    }
}
