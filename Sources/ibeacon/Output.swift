import IBeaconCore
import IBeaconTransports

/// Writes to stdout without buffering surprises (status lines must appear under systemd).
/// Writes a text to stdout, every line escaped by Core's one rule (`linesEscapedForTerminal`):
/// whatever names, paths or radio-derived strings it holds cannot act on the terminal. The only
/// control sequences ibeacon sends on purpose go through `printTerminalControl`.
func printOut(_ s: String, terminator: String = "\n") {
    StandardStream.output.write(s.linesEscapedForTerminal + terminator)
}

/// `control` (cursor movement, clearing: the live table and progress line) sent as it is,
/// then `text` escaped as `printOut` does.
func printTerminalControl(_ control: String, _ text: String, terminator: String = "\n") {
    StandardStream.output.write(control + text.linesEscapedForTerminal + terminator)
}

/// Writes a message to stderr, escaped as `printOut` does.
func printError(_ s: String) { StandardStream.error.write(s.linesEscapedForTerminal + "\n") }

/// `text` with every character that acts on a terminal escaped (Core's `escapedForTerminal`).
func terminalSafe(_ text: String) -> String { text.escapedForTerminal }

/// True when stdout is a terminal (live tables, progress) rather than a pipe or file.
var stdoutIsTerminal: Bool { StandardStream.output.isTerminal }

/// Columns of the terminal stdout is drawn in: its size now (a resized window is followed),
/// else `$COLUMNS`, else 80.
func terminalWidth() -> Int { StandardStream.output.columns }

extension JSONLineBuffer {
    /// Writes what is waiting to standard output.
    mutating func flush() { drain { StandardStream.output.write($0) } }
}
