import Logging

/// The environment variables ibeacon reads, with `secure_getenv(3)` semantics: when the process
/// runs with privileges its caller may not have (the installed binary with file capabilities,
/// set-user-ID, set-group-ID: `AT_SECURE`), none of them is honoured, because whoever started it
/// chose them. Every read of `IBEACON_*` goes through here.
///
/// `NOTIFY_SOCKET` is the one exception, read whatever the privileges, as libsystemd's
/// `sd_notify` reads it: the systemd units run the installed binary (file capabilities, so
/// `AT_SECURE`) and wait for its readiness message, and sending a datagram to a socket grants
/// nothing (the send is checked against the socket file's permissions as the calling user;
/// `CAP_NET_ADMIN` does not bypass them).
public struct ProcessEnvironment: Sendable {
    /// The variables, as the process received them.
    public var variables: [String: String]
    /// Whether the process is elevated (see the type's comment): then `value(_:)` is nil.
    public var elevated: Bool

    public init(variables: [String: String], elevated: Bool) {
        self.variables = variables
        self.elevated = elevated
    }

    /// This process's environment and privileges.
    public static var current: ProcessEnvironment {
        var variables: [String: String] = [:]
        for entry in Sys.environment() {
            guard let eq = entry.firstIndex(of: "=") else { continue }
            variables[String(entry[..<eq])] = String(entry[entry.index(after: eq)...])
        }
        return ProcessEnvironment(variables: variables, elevated: Sys.isElevated())
    }

    /// The variable's value when it is set, not empty, and the process is not elevated.
    public func value(_ name: String) -> String? {
        guard !elevated, let value = variables[name], !value.isEmpty else { return nil }
        return value
    }

    /// `$NOTIFY_SOCKET`, honoured even when elevated (see the type's comment).
    public var notifySocket: String? {
        guard let value = variables["NOTIFY_SOCKET"], !value.isEmpty else { return nil }
        return value
    }

    /// `$IBEACON_MQTT_PASSWORD`, honoured even when elevated, like `NOTIFY_SOCKET`: it only picks
    /// the password sent to the broker that the same caller names on the command line (`--mqtt`,
    /// `--mqtt-password-file` could name any file the caller can read), which grants nothing the
    /// caller could not do without ibeacon; and the systemd units, which run the installed binary
    /// (file capabilities), take it from /etc/default/ibeacon (root's, 0600), the one place for a
    /// service's secret that its dynamic user need not be able to read.
    public var mqttPassword: String? {
        guard let value = variables["IBEACON_MQTT_PASSWORD"], !value.isEmpty else { return nil }
        return value
    }

    /// A note for the log when an `IBEACON_*` variable is set but ignored, nil otherwise.
    public func ignoredNote(_ name: String) -> String? {
        guard elevated, let value = variables[name], !value.isEmpty else { return nil }
        return
            "\(name) is ignored: ibeacon runs with more privileges than its caller (file capabilities or "
            + "set-user-ID), so it reads no environment variable (give the value as an option instead)"
    }
}

extension ProcessEnvironment {
    /// The log level a request gets: `trace` (`-vv`, every packet) is downgraded to `debug` when
    /// the process is elevated (file capabilities: `AT_SECURE`), with the note saying so. The
    /// packets of a management or raw socket opened with those capabilities are other programs'
    /// too, pairings included; whoever started the process did not have the privilege to read them.
    public func logLevel(requested: Logger.Level) -> (level: Logger.Level, note: String?) {
        guard elevated, requested == .trace else { return (requested, nil) }
        return (
            .debug,
            "-vv (every packet) is refused: ibeacon runs with privileges its caller lacks (file capabilities, "
                + "AT_SECURE), and its sockets carry other programs' packets; logging at -v (debug) instead. "
                + "For a packet trace run it as root (sudo ibeacon … -vv)"
        )
    }
}
