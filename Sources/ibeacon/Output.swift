import Foundation
import IBeaconCore

/// Writes to stdout without buffering surprises (status lines must appear under systemd).
/// A reader that went away (EPIPE: SIGPIPE is ignored, see `runUntilSignalled`) or a full disk
/// loses the output, never the process: advertising must still be turned off on the way out.
func printOut(_ s: String) {
    try? FileHandle.standardOutput.write(contentsOf: Data((s + "\n").utf8))
}

func printError(_ s: String) {
    try? FileHandle.standardError.write(contentsOf: Data((s + "\n").utf8))
}

/// True when stdout is a terminal (live tables, progress) rather than a pipe or file.
var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) != 0 }

/// Renders a JSON object from ordered pairs, so scripts see stable key order.
func jsonLine(_ pairs: KeyValuePairs<String, Any?>) -> String {
    jsonLine(pairs.map { ($0.key, $0.value) })
}

func jsonLine(_ pairs: [(String, Any?)]) -> String {
    "{" + pairs.map { "\(jsonString($0.0)):\(jsonValue($0.1))" }.joined(separator: ",") + "}"
}

func jsonValue(_ v: Any?) -> String {
    switch v {
    case nil: return "null"
    case let s as String: return jsonString(s)
    case let b as Bool: return b ? "true" : "false"
    case let i as Int: return String(i)
    case let i as Int8: return String(i)
    case let i as UInt8: return String(i)
    case let i as UInt16: return String(i)
    case let i as Int32: return String(i)
    case let i as UInt32: return String(i)
    case let i as UInt64: return String(i)
    case let d as Double: return d.isFinite ? String(format: "%.2f", d) : "null"
    // Objects before arrays: an array of pairs would also match `[Any?]`.
    case let o as [(String, Any?)]: return jsonLine(o)
    case let o as KeyValuePairs<String, Any?>: return jsonLine(o)
    case let a as [Any?]: return "[" + a.map(jsonValue).joined(separator: ",") + "]"
    case let raw as RawJSON: return raw.text
    default: return jsonString("\(v!)")
    }
}

/// Text already serialized as JSON.
struct RawJSON { var text: String }

/// A JSON string literal (the profile writer's escaping, so both agree).
func jsonString(_ s: String) -> String { JSONWriter.quoted(s) }
