import IBeaconCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes to stdout without buffering surprises (status lines must appear under systemd).
func printOut(_ s: String, terminator: String = "\n") { writeAll(STDOUT_FILENO, s + terminator) }

func printError(_ s: String) { writeAll(STDERR_FILENO, s + "\n") }

/// `write(2)` until all of `s` is out, retrying EINTR; on another error (a closed pipe) the
/// rest is dropped, as there is nowhere left to report it.
func writeAll(_ fd: Int32, _ s: String) {
    let bytes = Array(s.utf8)
    var done = 0
    while done < bytes.count {
        let n = bytes[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if n > 0 {
            done += n
        } else if n < 0 && errno == EINTR {
            continue
        } else {
            return
        }
    }
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
    case let d as Double: return d.isFinite ? d.fixed(2) : "null"
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
