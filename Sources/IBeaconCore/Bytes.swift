/// Why a byte sequence could not be decoded. Every decoder in this package throws this;
/// none of them traps on hostile input.
public enum DecodingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// `what` needed `needed` more bytes but only `available` were left.
    case truncated(what: String, needed: Int, available: Int)
    /// A field held a value its specification does not allow.
    case invalidValue(what: String, value: Int, allowed: String)
    /// A structure was complete but `count` bytes followed it.
    case trailingBytes(what: String, count: Int)

    public var description: String {
        switch self {
        case .truncated(let what, let needed, let available):
            return "\(what) is truncated: needs \(needed) more byte(s), \(available) left"
        case .invalidValue(let what, let value, let allowed):
            return "\(what) has invalid value \(value) (allowed: \(allowed))"
        case .trailingBytes(let what, let count):
            return "\(what) is followed by \(count) unexpected byte(s)"
        }
    }
}

/// A cursor over bytes that checks the length before every read.
public struct ByteReader: Sendable {
    public let bytes: [UInt8]
    public private(set) var offset: Int = 0

    public init(_ bytes: some Sequence<UInt8>) { self.bytes = Array(bytes) }

    public var remaining: Int { bytes.count - offset }
    public var isAtEnd: Bool { offset >= bytes.count }

    private mutating func take(_ n: Int, _ what: @autoclosure () -> String) throws(DecodingError) -> ArraySlice<UInt8> {
        guard n >= 0, remaining >= n else {
            throw .truncated(what: what(), needed: n, available: max(0, remaining))
        }
        defer { offset += n }
        return bytes[offset..<offset + n]
    }

    public mutating func readUInt8(_ what: @autoclosure () -> String = "byte") throws(DecodingError) -> UInt8 {
        let s = try take(1, what())
        return s[s.startIndex]
    }

    public mutating func readInt8(_ what: @autoclosure () -> String = "byte") throws(DecodingError) -> Int8 {
        Int8(bitPattern: try readUInt8(what()))
    }

    public mutating func readUInt16LE(_ what: @autoclosure () -> String = "uint16") throws(DecodingError) -> UInt16 {
        let s = try take(2, what())
        return UInt16(s[s.startIndex]) | UInt16(s[s.startIndex + 1]) << 8
    }

    public mutating func readUInt16BE(_ what: @autoclosure () -> String = "uint16") throws(DecodingError) -> UInt16 {
        let s = try take(2, what())
        return UInt16(s[s.startIndex]) << 8 | UInt16(s[s.startIndex + 1])
    }

    public mutating func readUInt24LE(_ what: @autoclosure () -> String = "uint24") throws(DecodingError) -> UInt32 {
        let s = try take(3, what())
        return UInt32(s[s.startIndex]) | UInt32(s[s.startIndex + 1]) << 8 | UInt32(s[s.startIndex + 2]) << 16
    }

    /// Six octets, least significant first (a BD_ADDR).
    public mutating func readUInt48LE(_ what: @autoclosure () -> String = "uint48") throws(DecodingError) -> UInt64 {
        let s = try take(6, what())
        var v: UInt64 = 0
        for (i, b) in s.enumerated() { v |= UInt64(b) << (8 * UInt64(i)) }
        return v
    }

    public mutating func readUInt32LE(_ what: @autoclosure () -> String = "uint32") throws(DecodingError) -> UInt32 {
        let s = try take(4, what())
        var v: UInt32 = 0
        for (i, b) in s.enumerated() { v |= UInt32(b) << (8 * UInt32(i)) }
        return v
    }

    public mutating func readUInt64LE(_ what: @autoclosure () -> String = "uint64") throws(DecodingError) -> UInt64 {
        let s = try take(8, what())
        var v: UInt64 = 0
        for (i, b) in s.enumerated() { v |= UInt64(b) << (8 * UInt64(i)) }
        return v
    }

    public mutating func readBytes(_ n: Int, _ what: @autoclosure () -> String = "bytes") throws(DecodingError)
        -> [UInt8]
    {
        Array(try take(n, what()))
    }

    /// Skips `n` bytes and returns where they lie in `bytes`, for a field read in place.
    public mutating func readRange(_ n: Int, _ what: @autoclosure () -> String = "bytes") throws(DecodingError)
        -> Range<Int>
    {
        guard n >= 0, remaining >= n else {
            throw .truncated(what: what(), needed: n, available: max(0, remaining))
        }
        defer { offset += n }
        return offset..<offset + n
    }

    public mutating func readRest() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[min(offset, bytes.count)...])
    }

    /// Throws `.trailingBytes` unless every byte was consumed.
    public func expectEnd(_ what: @autoclosure () -> String) throws(DecodingError) {
        if remaining > 0 { throw .trailingBytes(what: what(), count: remaining) }
    }
}

/// Appends fields in an explicit byte order.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8] = []
    public init() {}

    public mutating func uint8(_ v: UInt8) { bytes.append(v) }
    public mutating func int8(_ v: Int8) { bytes.append(UInt8(bitPattern: v)) }
    public mutating func uint16LE(_ v: UInt16) { bytes += [UInt8(v & 0xFF), UInt8(v >> 8)] }
    public mutating func uint16BE(_ v: UInt16) { bytes += [UInt8(v >> 8), UInt8(v & 0xFF)] }
    public mutating func uint24LE(_ v: UInt32) {
        bytes += [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF)]
    }
    public mutating func uint32LE(_ v: UInt32) { for i in 0..<4 { bytes.append(UInt8((v >> (8 * UInt32(i))) & 0xFF)) } }
    public mutating func uint32BE(_ v: UInt32) {
        for i in (0..<4).reversed() { bytes.append(UInt8((v >> (8 * UInt32(i))) & 0xFF)) }
    }
    public mutating func uint64LE(_ v: UInt64) { for i in 0..<8 { bytes.append(UInt8((v >> (8 * UInt64(i))) & 0xFF)) } }
    public mutating func uint64BE(_ v: UInt64) {
        for i in (0..<8).reversed() { bytes.append(UInt8((v >> (8 * UInt64(i))) & 0xFF)) }
    }
    public mutating func append(_ v: some Sequence<UInt8>) { bytes.append(contentsOf: v) }
}

extension Array where Element == UInt8 {
    /// Parses hex such as `"02 01 06"`, `"020106"`, `"0x02,0x01"`, `"02:01:06"`. Returns nil on any
    /// character that is not a hex digit or separator, or on an odd digit count.
    public init?(hex: String) {
        var digits: [UInt8] = []
        var s = Substring(hex)
        var out: [UInt8] = []
        while let c = s.first {
            s = s.dropFirst()
            if c == "0", let n = s.first, n == "x" || n == "X" {
                s = s.dropFirst()
                if !digits.isEmpty { return nil }
                continue
            }
            if c == " " || c == ":" || c == "," || c == "-" || c == "\n" || c == "\t" || c == "\r" {
                if !digits.isEmpty { return nil }  // separators only between whole bytes
                continue
            }
            guard let d = c.hexDigitValue else { return nil }
            digits.append(UInt8(d))
            if digits.count == 2 {
                out.append(digits[0] << 4 | digits[1])
                digits.removeAll(keepingCapacity: true)
            }
        }
        guard digits.isEmpty else { return nil }
        self = out
    }

    /// Lower-case hex with no separators.
    public var hexString: String { hexString(separator: "") }

    public func hexString(separator: String) -> String {
        let table = Swift.Array("0123456789abcdef".utf8)
        let sep = Swift.Array(separator.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count * (2 + sep.count))
        for (i, b) in enumerated() {
            if i > 0 { out += sep }
            out.append(table[Int(b >> 4)])
            out.append(table[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// A Bluetooth device address (BD_ADDR). Stored in the on-air/HCI order (least significant
/// byte first); printed most significant byte first, as `AA:BB:CC:DD:EE:FF`.
///
/// Six octets held in one integer, not an array: every advertising report carries one (two in
/// an extended report), and a heap allocation per address was a tenth of reading a capture.
public struct BDAddress: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The 48-bit address: octet `i` of the HCI (little-endian) order is bits `8i…8i+7`, so
    /// `AA:BB:CC:DD:EE:FF` is `0xAABB_CCDD_EEFF`. The upper 16 bits are always zero.
    public let uint48: UInt64

    /// The address `uint48` (`AA:BB:CC:DD:EE:FF` is `0xAABB_CCDD_EEFF`); nil when it needs more
    /// than 48 bits.
    public init?(uint48: UInt64) {
        guard uint48 >> 48 == 0 else { return nil }
        self.uint48 = uint48
    }

    /// `value` masked to 48 bits, for values that fit by construction.
    init(truncating value: UInt64) { uint48 = value & 0xFFFF_FFFF_FFFF }

    /// Little-endian, as carried in HCI packets.
    public var bytes: [UInt8] { (0..<6).map { UInt8(truncatingIfNeeded: uint48 >> (8 * UInt64($0))) } }

    public init(littleEndian bytes: [UInt8]) throws(DecodingError) {
        guard bytes.count == 6 else {
            throw .invalidValue(what: "BD_ADDR length", value: bytes.count, allowed: "6")
        }
        var value: UInt64 = 0
        for (i, b) in bytes.enumerated() { value |= UInt64(b) << (8 * UInt64(i)) }
        uint48 = value
    }

    /// Parses `AA:BB:CC:DD:EE:FF` (any case; `-` also accepted as separator).
    public init?(_ text: String) {
        let parts = text.split(whereSeparator: { $0 == ":" || $0 == "-" })
        guard parts.count == 6 else { return nil }
        var value: UInt64 = 0
        for p in parts {
            guard p.count == 2, let v = UInt8(p, radix: 16) else { return nil }
            value = value << 8 | UInt64(v)
        }
        uint48 = value
    }

    public static let zero = BDAddress(truncating: 0)

    public var description: String {
        var text: [UInt8] = []
        text.reserveCapacity(17)
        for k in 0..<6 {
            if k > 0 { text.append(UInt8(ascii: ":")) }
            let b = UInt8(truncatingIfNeeded: uint48 >> (8 * UInt64(5 - k)))
            text.append(hexDigitUpper(b >> 4))
            text.append(hexDigitUpper(b & 0xF))
        }
        return String(decoding: text, as: UTF8.self)
    }

    public static func < (a: BDAddress, b: BDAddress) -> Bool {
        // Most significant octet first, like the printed form.
        a.uint48 < b.uint48
    }

    public static func read(from r: inout ByteReader, _ what: @autoclosure () -> String = "address")
        throws(DecodingError) -> BDAddress
    {
        BDAddress(truncating: try r.readUInt48LE(what()))
    }
}

/// The upper-case hex digit of `v` (0…15), without a branch (a branch on random data is
/// mispredicted half the time).
@inline(__always) func hexDigitUpper(_ v: UInt8) -> UInt8 {
    let letter = (UInt8(9) &- v) >> 7  // 1 for 10…15, else 0
    return UInt8(ascii: "0") &+ v &+ letter &* 7
}

/// FNV-1a, 64 bit: stable across runs and platforms (Swift's Hasher is seeded per process).
/// Not a cryptographic hash: for names that must stay apart and stay put, not for secrets.
func fnv1a64(_ bytes: [UInt8]) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in bytes {
        hash ^= UInt64(b)
        hash &*= 0x0000_0100_0000_01B3
    }
    return hash
}

extension BDAddress {
    /// A static random device address derived stably from `seed` (the same seed always gives
    /// the same address), so a beacon keeps one address across restarts.
    ///
    /// Core 5.4 Vol 6 Part B §1.3.2.1: the two most significant bits are 0b11, and the random
    /// part shall not be all zeros nor all ones.
    public static func staticRandom(derivedFrom seed: [UInt8]) -> BDAddress {
        let hash = fnv1a64(seed)
        var bytes = (0..<6).map { UInt8(truncatingIfNeeded: hash >> (8 * UInt64($0))) }
        bytes[5] |= 0xC0
        let random = bytes[0..<5].allSatisfy { $0 == 0 } && bytes[5] & 0x3F == 0
        let allOnes = bytes[0..<5].allSatisfy { $0 == 0xFF } && bytes[5] & 0x3F == 0x3F
        if random || allOnes { bytes[0] ^= 0x01 }
        // Six bytes by construction.
        return (try? BDAddress(littleEndian: bytes)) ?? .zero
    }
}

extension BDAddress {
    /// The top two bits (Core 5.4 Vol 6 Part B §1.3.2): 0b11 static, 0b00 non-resolvable private.
    var subType: UInt64 { uint48 >> 46 }
    /// The 46 random bits below them.
    var randomPart: UInt64 { uint48 & 0x3FFF_FFFF_FFFF }

    /// Whether this can be a static random device address: "The two most significant bits of
    /// the address shall be equal to 1. At least one bit of the random part of the address
    /// shall be 0. At least one bit of the random part of the address shall be 1."
    /// (Core 5.4 Vol 6 Part B §1.3.2.1).
    public var isStaticRandom: Bool {
        subType == 0b11 && randomPart != 0 && randomPart != 0x3FFF_FFFF_FFFF
    }

    /// Whether this can be a non-resolvable private address: the two most significant bits 0,
    /// the random part neither all 0 nor all 1 (§1.3.2.2).
    public var isNonResolvablePrivate: Bool {
        subType == 0b00 && randomPart != 0 && randomPart != 0x3FFF_FFFF_FFFF
    }

    /// The static random address of a beacon: derived from its proximity UUID, major and minor
    /// only, so recalibrating (a new measured power) or another interval keeps the address, and
    /// two beacons that differ in their identity get different ones.
    public static func staticRandom(for beacon: IBeacon) -> BDAddress {
        var w = ByteWriter()
        w.append(beacon.proximityUUID.bytes)
        w.uint16BE(beacon.major)
        w.uint16BE(beacon.minor)
        return staticRandom(derivedFrom: w.bytes)
    }

    /// A fresh non-resolvable private address from `generator`, never `avoiding` (the public
    /// address: "shall not be equal to the public address", §1.3.2.2).
    public static func nonResolvable(using generator: inout some RandomNumberGenerator, avoiding: BDAddress? = nil)
        -> BDAddress
    {
        while true {
            let candidate = BDAddress(truncating: generator.next() & 0x3FFF_FFFF_FFFF)
            if candidate.isNonResolvablePrivate && candidate != avoiding { return candidate }
        }
    }
}
