import Glibc
import IBeaconCore
import IBeaconHost

/// What the process does before it parses its command line.
public enum CommandLineStart {
    /// Ignores SIGPIPE from the start: help or a usage error piped into `head` ends with its
    /// own exit status (0, 64), not 141; a write to a closed pipe fails with EPIPE instead
    /// (commands ignore it while they run anyway, and hooks start with the default again).
    /// Returns the arguments to parse (`CommandLineArguments.joiningNegativeValues`).
    public static func prepare(_ arguments: [String]) -> [String] {
        Sys.ignoreSignal(SIGPIPE)
        return CommandLineArguments.joiningNegativeValues(arguments)
    }
}
