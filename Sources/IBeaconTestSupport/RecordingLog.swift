import Logging
import Synchronization

/// Keeps every message logged through its `logger`, for assertions on what a component says.
public final class RecordingLog: Sendable {
    private let entries = Mutex<[(level: Logger.Level, message: String)]>([])
    private let rendered = Mutex<[String]>([])
    /// The lowest level the logger passes on (a flood test keeps trace messages out).
    public let level: Logger.Level

    public init(level: Logger.Level = .trace) {
        self.level = level
    }

    public var logger: Logger {
        var logger = Logger(label: "test") { _ in Handler(log: self, logLevel: self.level) }
        logger.logLevel = level
        return logger
    }

    /// Every message, as `level: message` (`warning: hci0 is powered off …`).
    public var messages: [String] { entries.withLock { $0.map { "\($0.level): \($0.message)" } } }

    /// The messages at `level` or above, without the level.
    public func messages(atLeast level: Logger.Level) -> [String] {
        entries.withLock { $0.filter { $0.level >= level }.map(\.message) }
    }

    /// Whether a message at `level` contains `text`.
    public func contains(_ level: Logger.Level, _ text: String) -> Bool {
        entries.withLock { $0.contains { $0.level == level && $0.message.contains(text) } }
    }

    /// Every message with its metadata (the logger's and the call's), as a log handler would
    /// print it: what must never hold a key.
    public var linesWithMetadata: [String] { rendered.withLock { $0 } }

    /// Every message, one a line, for a failing assertion's comment.
    public var all: String { messages.joined(separator: "\n") }

    struct Handler: LogHandler {
        let log: RecordingLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            log.entries.withLock { $0.append((event.level, event.message.description)) }
            let all = metadata.merging(event.metadata ?? [:]) { $1 }
            let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            log.rendered.withLock { $0.append("\(event.level): \(event.message) \(fields)") }
        }
    }
}
