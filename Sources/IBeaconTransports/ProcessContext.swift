import IBeaconHost

/// What a command may ask of the process it runs in — its environment and the wall clock —
/// read here, so that the command-line target makes no system calls of its own.
public enum ProcessContext {
    /// This process's environment, `NAME` → value (as received, whatever the privileges: for
    /// `COLUMNS` and `NOTIFY_SOCKET`; `IBEACON_*` variables go through `ProcessEnvironment.value`).
    public static var environment: [String: String] { ProcessEnvironment.current.variables }

    /// The value of an environment variable, nil when unset or empty.
    public static func variable(_ name: String) -> String? {
        environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Unix time now, in seconds (`clock_gettime(CLOCK_REALTIME)`, microseconds).
    public static var unixTime: Double { Double(Sys.realtimeMicroseconds()) / 1e6 }

    /// This machine's host name (`gethostname(2)`), `localhost` when it has none.
    public static var hostName: String { Sys.hostName() ?? "localhost" }

    /// This process's id (`getpid(2)`).
    public static var processID: Int32 { Sys.processID() }
}

extension SystemdNotifier {
    /// Tells systemd `state` when the process runs under it (`$NOTIFY_SOCKET`).
    public static func notify(_ state: String) {
        notify(state, environment: ProcessContext.environment)
    }
}
