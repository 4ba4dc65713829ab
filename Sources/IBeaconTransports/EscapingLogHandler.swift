import IBeaconCore
import Logging

/// A log handler that passes every message and metadata value through Core's one escaping
/// rule (`escapedForTerminal`) before `base` writes it: one log entry is one line, whatever
/// names, paths or radio-derived strings it quotes (a newline in a profile's name cannot forge
/// an entry, ESC cannot reach the terminal or the journal).
public struct EscapingLogHandler: LogHandler {
    var base: StreamLogHandler

    public init(_ base: StreamLogHandler) { self.base = base }

    /// Writes to stderr, each entry `TIME LEVEL LABEL: MESSAGE`: without the `[IBeaconHost]`
    /// source module swift-log's handler puts in, a name that means nothing to an operator.
    public static func standardError(label: String) -> EscapingLogHandler {
        EscapingLogHandler(StreamLogHandler(label: label, stream: SourcelessStream(), metadataProvider: nil))
    }

    public var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    public var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    public func log(event: LogEvent) {
        var event = event
        event.message = "\(event.message.description.escapedForTerminal)"
        event.metadata = event.metadata?.mapValues { .string($0.description.escapedForTerminal) }
        event.source = SourcelessStream.marker
        base.log(event: event)
    }
}

/// Standard error for `EscapingLogHandler.standardError`: drops the ` [SOURCE]` of each entry,
/// found by its marker (a BEL, which escaped messages and metadata never hold).
struct SourcelessStream: TextOutputStream, Sendable {
    static let marker = "\u{7}"

    mutating func write(_ text: String) {
        StandardStream.error.write(text.replacing(" [\(Self.marker)]", with: ""))
    }
}
