/// One command shape for both ways this package talks to a controller: an HCI command
/// (`HCICommand`, Core 5.4 Vol 4 Part E §5.4.1) and a kernel management command (`MgmtCommand`,
/// BlueZ doc/mgmt-api.txt). Each command type holds its row of the table, writes its parameters
/// into a `ByteWriter`, and reads the return parameters of a successful Command Complete (the
/// bytes after the status) from a `ByteReader`; `decodeReturn` does the rest the same way for
/// both: the row's length check, then the fields, then no byte left over.
public protocol WireCommand: Sendable {
    associatedtype Row: CommandRow
    associatedtype ReturnParameters: Sendable
    /// The command's row: opcode, name and what else its table knows.
    static var spec: Row { get }
    /// Appends the command parameters (not the header) in the order the specification lists them.
    func encodeParameters(into writer: inout ByteWriter)
    /// Reads the fields of the return parameters of a successful Command Complete, after the
    /// status, whose length `decodeReturn` has checked against the row.
    static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> ReturnParameters
}

/// What a command is apart from its parameters: a row of `HCICommandSpec.commands` or
/// `MgmtCommandSpec.commands`.
public protocol CommandRow: Sendable {
    /// How messages name the command: `LE Set Advertising Enable (0x200A)`, `Add Advertising`.
    var title: String { get }
    /// Refuses a successful reply's return parameters whose length the row does not admit,
    /// before any field is read. (HCI's rows hold no lengths: their fields' reads are the check.)
    func checkReturnLength(_ count: Int, _ what: String) throws(DecodingError)
}

/// Return parameters that read themselves (`init(decoding:)`): a command whose
/// `ReturnParameters` is such a type needs no `readReturn` of its own.
public protocol ReturnParametersDecodable: Sendable {
    init(decoding reader: inout ByteReader) throws(DecodingError)
}

extension WireCommand {
    /// The parameters alone.
    public var parameters: [UInt8] {
        var w = ByteWriter()
        encodeParameters(into: &w)
        return w.bytes
    }

    /// Reads the return parameters of a successful Command Complete: a length the row does not
    /// admit, a field running past the end or a byte left over is an error naming the command.
    public static func decodeReturn(_ bytes: [UInt8]) throws(DecodingError) -> ReturnParameters {
        try spec.checkReturnLength(bytes.count, returnParametersName)
        var r = ByteReader(bytes)
        let value = try readReturn(&r)
        try r.expectEnd(returnParametersName)
        return value
    }

    /// What decoding errors call the reply: `Add Advertising return parameters`.
    static var returnParametersName: String { "\(spec.title) return parameters" }
}

extension WireCommand where ReturnParameters: ReturnParametersDecodable {
    public static func readReturn(_ r: inout ByteReader) throws(DecodingError) -> ReturnParameters {
        try ReturnParameters(decoding: &r)
    }
}
