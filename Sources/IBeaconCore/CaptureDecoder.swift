/// What kind of capture a file is, told from its content, and so which receiver recorded it.
public enum CaptureFormat: Sendable, Hashable, CustomStringConvertible {
    case btsnoop(BTSnoopDatalink)
    case packetLogger(bigEndian: Bool)

    /// The receiver's kind as a calibration record names it: `android-btsnoop` (datalinks 1001
    /// and 1002: Android's HCI snoop log, Wireshark, `ibeacon --btsnoop`), `btmon` (2001, a
    /// Linux box's `btmon -w`) or `iphone-packetlogger` (an iPhone's sysdiagnose, PacketLogger).
    public var receiverKind: String {
        switch self {
        case .btsnoop(let link): link == .linuxMonitor ? "btmon" : "android-btsnoop"
        case .packetLogger: "iphone-packetlogger"
        }
    }

    public var description: String {
        switch self {
        case .btsnoop(let link): "btsnoop, \(link)"
        case .packetLogger(let big): "PacketLogger (\(big ? "big" : "little")-endian)"
        }
    }
}

/// Reads a btsnoop or a PacketLogger capture, whichever the first bytes say it is (`btsnoop\0`,
/// or a record Wireshark would take for PacketLogger's: `PacketLogger.recognize`), with the
/// decoders' one interface: `append`, `readHeader`, `next`, `finish`. A file that is neither
/// throws `BTSnoopError.unknownFormat`.
public struct CaptureDecoder: Sendable {
    private var btsnoop = BTSnoopDecoder()
    private var packetLogger = PacketLoggerDecoder()
    /// Bytes held until the format is known.
    private var pending: [UInt8] = []
    public private(set) var format: CaptureFormat?
    private var failure: BTSnoopError?

    public init() {}

    public var recordsRead: Int {
        switch format {
        case .packetLogger: packetLogger.recordsRead
        default: btsnoop.recordsRead
        }
    }

    /// The btsnoop datalink, when the file is btsnoop and its header has been read.
    public var datalink: BTSnoopDatalink? { btsnoop.datalink }

    public mutating func append(_ bytes: some Collection<UInt8>) {
        switch format {
        case .packetLogger: packetLogger.append(bytes)
        case .btsnoop: btsnoop.append(bytes)
        case nil: pending.append(contentsOf: bytes)
        }
    }

    /// Decides the format once enough bytes are there (true once decided and, for btsnoop, the
    /// file header read). Throws when the bytes so far cannot start either.
    public mutating func readHeader() throws(BTSnoopError) -> Bool {
        if let failure { throw failure }
        if case .btsnoop = format { return true }
        if format != nil { return true }
        let magic = min(pending.count, BTSnoop.magic.count)
        if magic > 0, pending[..<magic].elementsEqual(BTSnoop.magic[..<magic]) {
            guard pending.count >= BTSnoop.fileHeaderLength else { return false }
            btsnoop.append(pending)
            pending = []
            do {
                guard try btsnoop.readHeader(), let link = btsnoop.datalink else { return false }
                format = .btsnoop(link)
                return true
            } catch {
                failure = error
                throw error
            }
        }
        switch PacketLogger.recognize(pending) {
        case .needMore: return false
        case .yes(let big):
            format = .packetLogger(bigEndian: big)
            packetLogger.append(pending)
            pending = []
            return true
        case .no:
            // The 12 bytes the decision needed at least: the same however the file arrives.
            let error = BTSnoopError.unknownFormat(Array(pending.prefix(PacketLogger.recordHeaderLength)))
            failure = error
            throw error
        }
    }

    /// The next complete record (`packet` nil for one that carries no HCI packet), or nil when
    /// more bytes are needed.
    public mutating func next() throws(BTSnoopError) -> BTSnoopRecord? {
        if let failure { throw failure }
        guard try readHeader() else { return nil }
        switch format {
        case .packetLogger: return try packetLogger.next()
        default: return try btsnoop.next()
        }
    }

    /// At the end of the input: a file too short to tell (or a cut btsnoop header) is truncated;
    /// bytes left after the last record are a truncated record.
    public mutating func finish() throws(BTSnoopError) {
        if let failure { throw failure }
        switch format {
        case .packetLogger: try packetLogger.finish()
        case .btsnoop: try btsnoop.finish()
        case nil:
            let magic = min(pending.count, BTSnoop.magic.count)
            if pending.isEmpty || pending[..<magic].elementsEqual(BTSnoop.magic[..<magic]) {
                throw .truncatedHeader(available: pending.count)
            }
            guard pending.count >= 4 else {
                throw .truncatedRecord(
                    index: 0, offset: 0, needed: PacketLogger.recordHeaderLength, available: pending.count)
            }
            // A PacketLogger record's start, cut before its header ended, if its length can be one.
            let big = PacketLogger.isBigEndian(firstLength: pending)
            let length = Int(PacketLogger.uint32(pending, at: 0, bigEndian: big))
            guard (8..<65536).contains(length) else { throw .unknownFormat(Array(pending.prefix(16))) }
            throw .truncatedRecord(
                index: 0, offset: 0, needed: max(PacketLogger.recordHeaderLength, 4 + length),
                available: pending.count)
        }
    }
}
