/// The command line as the parser is to see it.
public enum CommandLineArguments {
    /// `--option -1` written as `--option=-1`: the parser takes a word starting with `-` for an
    /// option, so a negative number after an option was "Missing value" instead of the option's
    /// own message (`--forget-after must be … within 1…3600, got -1`). Only a word that is a
    /// number whole (`-1`, `-0.5`, `-1e3`), after an option without `=`, before any `--`.
    public static func joiningNegativeValues(_ arguments: [String]) -> [String] {
        var out: [String] = []
        var rest = arguments[...]
        while let word = rest.popFirst() {
            if word == "--" {
                out.append(word)
                out.append(contentsOf: rest)
                break
            }
            if let value = rest.first, word.hasPrefix("--"), !word.contains("="), isNegativeNumber(value) {
                out.append(word + "=" + value)
                rest = rest.dropFirst()
            } else {
                out.append(word)
            }
        }
        return out
    }

    /// `-` then a decimal number: digits, an optional fraction, an optional exponent.
    static func isNegativeNumber(_ word: String) -> Bool {
        guard word.hasPrefix("-") else { return false }
        let body = Array(word.utf8.dropFirst())
        var i = 0
        var digits = 0
        func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
        while i < body.count, isDigit(body[i]) { (i, digits) = (i + 1, digits + 1) }
        if i < body.count, body[i] == UInt8(ascii: ".") {
            i += 1
            while i < body.count, isDigit(body[i]) { (i, digits) = (i + 1, digits + 1) }
        }
        guard digits > 0 else { return false }
        if i < body.count, body[i] == UInt8(ascii: "e") || body[i] == UInt8(ascii: "E") {
            i += 1
            if i < body.count, body[i] == UInt8(ascii: "+") || body[i] == UInt8(ascii: "-") { i += 1 }
            let start = i
            while i < body.count, isDigit(body[i]) { i += 1 }
            if i == start { return false }
        }
        return i == body.count
    }
}
