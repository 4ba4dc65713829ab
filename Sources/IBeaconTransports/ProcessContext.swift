import IBeaconHost

/// What a command may ask of the process it runs in — its environment and the wall clock —
/// read here, so that the command-line target makes no system calls of its own.
public enum ProcessContext {
    /// This process's environment (`environ`), `NAME` → value.
    public static var environment: [String: String] {
        var out: [String: String] = [:]
        for entry in Sys.environment() {
            guard let eq = entry.firstIndex(of: "=") else { continue }
            out[String(entry[..<eq])] = String(entry[entry.index(after: eq)...])
        }
        return out
    }

    /// The value of an environment variable, nil when unset or empty.
    public static func variable(_ name: String) -> String? {
        environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Unix time now, in seconds (`clock_gettime(CLOCK_REALTIME)`, microseconds).
    public static var unixTime: Double { Double(Sys.realtimeMicroseconds()) / 1e6 }
}

extension SystemdNotifier {
    /// Tells systemd `state` when the process runs under it (`$NOTIFY_SOCKET`).
    public static func notify(_ state: String) {
        notify(state, environment: ProcessContext.environment)
    }
}
