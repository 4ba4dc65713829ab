import ArgumentParser
import IBeaconCore
import IBeaconHost

struct DecodeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode advertising data, or a whole HCI event packet (LE Advertising Report).",
        discussion: """
            HEX may use spaces, colons or 0x prefixes. An HCI event is recognised by its first \
            bytes: 04 3E … (H4, with the packet type) or 3E … (event code first); anything else \
            is read as advertising data. Every AD structure is shown, with the iBeacon fields \
            when present. Malformed input is reported with the offset, never guessed at.
            """)

    @Argument(help: ArgumentHelp("Bytes in hex.", valueName: "hex"))
    var hex: [String]

    @Option(help: ArgumentHelp("Read HEX as: auto, ad (advertising data) or event (HCI event).", valueName: "kind"))
    var `as`: AdvertisingDecoder.InputKind = .auto

    @Flag(help: "Print one JSON object.")
    var json = false

    func run() async throws {
        try await reporting {
            do {
                printOut(try AdvertisingDecoder.decode(try inputBytes(), as: `as`, json: json))
            } catch let failure as AdvertisingDecoder.DecodeFailure {
                throw CLIError(failure.description, code: Exit.dataError)
            }
        }
    }

    /// The HEX arguments as bytes; at least one.
    private func inputBytes() throws -> [UInt8] {
        let text = hex.joined(separator: " ")
        guard let bytes = [UInt8](hex: text) else {
            throw CLIError(
                "decode: '\(text.prefix(80))' is not hex (expected pairs of hex digits, optionally separated by spaces or colons)",
                code: Exit.dataError)
        }
        guard !bytes.isEmpty else { throw CLIError("decode: no bytes given", code: Exit.dataError) }
        return bytes
    }
}

extension AdvertisingDecoder.InputKind: ExpressibleByArgument {}
