/// Splits a command line into words the way a POSIX shell would quote them, without running a
/// shell: blanks separate words; `'…'` keeps everything literally; `"…"` keeps everything but
/// `\"`, `\\`, `\$` and `` \` ``, which lose their backslash; a backslash outside quotes keeps the
/// next character. No variables, globs, pipes or redirections: what is written is what runs.
public enum CommandWords {
    public struct SplitError: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    public static func split(_ line: String) throws(SplitError) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var chars = line.makeIterator()
        while let c = chars.next() {
            switch c {
            case " ", "\t", "\n":
                if inWord {
                    words.append(current)
                    current = ""
                    inWord = false
                }
            case "'":
                inWord = true
                var closed = false
                while let q = chars.next() {
                    if q == "'" {
                        closed = true
                        break
                    }
                    current.append(q)
                }
                if !closed { throw SplitError(message: "unterminated ' in: \(line)") }
            case "\"":
                inWord = true
                var closed = false
                while let q = chars.next() {
                    if q == "\"" {
                        closed = true
                        break
                    }
                    if q == "\\" {
                        guard let e = chars.next() else { break }
                        if !["\"", "\\", "$", "`"].contains(e) { current.append("\\") }
                        current.append(e)
                        continue
                    }
                    current.append(q)
                }
                if !closed { throw SplitError(message: "unterminated \" in: \(line)") }
            case "\\":
                inWord = true
                guard let e = chars.next() else {
                    throw SplitError(message: "a trailing \\ escapes nothing in: \(line)")
                }
                current.append(e)
            default:
                inWord = true
                current.append(c)
            }
        }
        if inWord { words.append(current) }
        return words
    }
}
