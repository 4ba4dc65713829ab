import IBeaconCore
import Logging

/// A log handler that passes every message and metadata value through Core's one escaping
/// rule (`escapedForTerminal`) before `base` writes it: one log entry is one line, whatever
/// names, paths or radio-derived strings it quotes (a newline in a profile's name cannot forge
/// an entry, ESC cannot reach the terminal or the journal).
public struct EscapingLogHandler: LogHandler {
    var base: StreamLogHandler

    public init(_ base: StreamLogHandler) { self.base = base }

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
        base.log(event: event)
    }
}
