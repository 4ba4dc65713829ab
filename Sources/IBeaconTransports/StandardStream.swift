import IBeaconHost

/// Standard output or standard error, as the command-line target writes them: whole texts
/// with `write(2)`, no buffering (status lines must appear under systemd), and what the
/// terminal is.
public enum StandardStream: Sendable {
    case output
    case error

    var descriptor: Int32 { self == .output ? 1 : 2 }

    /// Writes all of `text`; see `write(_:)` for bytes.
    public func write(_ text: String) { write(Array(text.utf8)[...]) }

    /// `write(2)` until all of `bytes` is out, retrying EINTR; on another error (a closed pipe:
    /// EPIPE, as SIGPIPE is ignored) the rest is dropped, as there is nowhere left to report it;
    /// the process goes on, so advertising is still turned off on the way out.
    public func write(_ bytes: ArraySlice<UInt8>) { Sys.writeDroppingErrors(descriptor, bytes) }

    /// True when the stream is a terminal (`isatty(3)`: live tables, progress) rather than a
    /// pipe or file.
    public var isTerminal: Bool { Sys.isTerminal(descriptor) }

    /// Columns of the terminal the stream is drawn in: its size now (`TIOCGWINSZ`, so a resized
    /// window is followed), else `$COLUMNS`, else 80.
    public var columns: Int {
        if let columns = Sys.terminalColumns(descriptor) { return columns }
        if let text = ProcessContext.variable("COLUMNS"), let columns = Int(text), columns > 0 { return columns }
        return 80
    }
}
