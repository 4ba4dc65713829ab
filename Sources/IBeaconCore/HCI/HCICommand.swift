/// An HCI command opcode: OGF (6 bits) << 10 | OCF (10 bits). Core 5.4 Vol 4 Part E §5.4.1.
/// An open value set: unknown opcodes survive decoding and print as hex.
public struct HCIOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(ogf: UInt8, ocf: UInt16) { rawValue = UInt16(ogf & 0x3F) << 10 | (ocf & 0x3FF) }

    public var ogf: UInt8 { UInt8(rawValue >> 10) }
    public var ocf: UInt16 { rawValue & 0x3FF }

    /// `0x200A` style.
    public var hex: String {
        "0x" + paddedHex(UInt32(rawValue), 4)
    }

    /// `LE Set Advertising Enable (0x200A)`, or `unknown command (0xFC01)`.
    public var description: String { "\(name ?? "unknown command") (\(hex))" }
}

/// For commands whose Command Complete carries nothing but the status.
public struct HCINoReturnParameters: ReturnParametersDecodable, Equatable {
    public init() {}
    public init(decoding reader: inout ByteReader) throws(DecodingError) {}
}

/// One HCI command, in the shape every command has (`WireCommand`): its row (opcode, name,
/// Supported_Commands bit), parameter encoding and return type together, so a single generic
/// `execute` returns the right type. A new command is also listed in `HCICommandSpec.commands`
/// (docs/ARCHITECTURE.md, "How to add an HCI command").
public protocol HCICommand: WireCommand where Row == HCICommandSpec {
    associatedtype ReturnParameters: Sendable = HCINoReturnParameters
}

extension HCICommand {
    /// `spec.opcode`.
    public static var opcode: HCIOpcode { spec.opcode }

    /// The complete command packet: opcode (LE), parameter length, parameters.
    /// Core 5.4 Vol 4 Part E §5.4.1.
    public var packet: H4Packet {
        let p = parameters
        var w = ByteWriter()
        w.uint16LE(Self.opcode.rawValue)
        w.uint8(UInt8(truncatingIfNeeded: p.count))  // every command here encodes ≤ 255 bytes
        w.append(p)
        return H4Packet(type: .command, body: w.bytes)
    }
}
