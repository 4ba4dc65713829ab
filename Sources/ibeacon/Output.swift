import Foundation
import IBeaconCore

/// Writes to stdout without buffering surprises (status lines must appear under systemd).
func printOut(_ s: String) {
    FileHandle.standardOutput.write(Data((s + "\n").utf8))
}

/// Writes `s` to stdout as it is (no newline added).
func writeOut(_ s: String) {
    guard !s.isEmpty else { return }
    FileHandle.standardOutput.write(Data(s.utf8))
}

func printError(_ s: String) {
    FileHandle.standardError.write(Data((s + "\n").utf8))
}

/// True when stdout is a terminal (live tables, progress) rather than a pipe or file.
var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) != 0 }

/// A value a command's `--json` output can hold; converted to Core's `JSONValue`, so what is
/// printed is what the profile writer would write (an empty list is `[]`, never `{}`).
protocol JSONConvertible {
    var jsonValue: JSONValue { get }
}

extension JSONValue: JSONConvertible {
    var jsonValue: JSONValue { self }
}

extension String: JSONConvertible {
    var jsonValue: JSONValue { .string(self) }
}

extension Bool: JSONConvertible {
    var jsonValue: JSONValue { .bool(self) }
}

extension BinaryInteger where Self: JSONConvertible {
    var jsonValue: JSONValue {
        Int64(exactly: self).map(JSONValue.integer) ?? .number(Double(self), text: String(self))
    }
}

extension Int: JSONConvertible {}
extension Int8: JSONConvertible {}
extension Int16: JSONConvertible {}
extension Int32: JSONConvertible {}
extension Int64: JSONConvertible {}
extension UInt8: JSONConvertible {}
extension UInt16: JSONConvertible {}
extension UInt32: JSONConvertible {}
extension UInt64: JSONConvertible {}

extension Double: JSONConvertible {
    /// Rounded to 4 decimals (finer than any measurement here), written in the shortest form
    /// that reads back the same: `-59.25`, `0.1`, `3.0`. NaN and infinity are `null`.
    var jsonValue: JSONValue {
        guard isFinite else { return .null }
        let rounded = (self * 10_000).rounded() / 10_000
        guard rounded.isFinite else { return .number(self, text: description) }
        return .number(rounded, text: (rounded == 0 ? 0 : rounded).description)
    }
}

extension Optional: JSONConvertible where Wrapped: JSONConvertible {
    var jsonValue: JSONValue { self?.jsonValue ?? .null }
}

extension Array: JSONConvertible where Element: JSONConvertible {
    var jsonValue: JSONValue { .array(map(\.jsonValue)) }
}

/// Ordered members of a JSON object, as the commands write them.
typealias JSONPairs = [(String, (any JSONConvertible)?)]

/// A JSON object from ordered pairs (scripts see a stable key order); nil values are `null`.
func jsonObject(_ pairs: KeyValuePairs<String, (any JSONConvertible)?>) -> JSONValue {
    jsonObject(pairs.map { ($0.key, $0.value) })
}

func jsonObject(_ pairs: JSONPairs) -> JSONValue {
    .object(JSONObject(pairs.map { (key: $0.0, value: $0.1?.jsonValue ?? .null) }))
}

/// One compact JSON object on one line.
func jsonLine(_ pairs: KeyValuePairs<String, (any JSONConvertible)?>) -> String {
    jsonObject(pairs).compactText()
}

func jsonLine(_ pairs: JSONPairs) -> String { jsonObject(pairs).compactText() }

/// A JSON string literal (the profile writer's escaping, so both agree).
func jsonString(_ s: String) -> String { JSONWriter.quoted(s) }
