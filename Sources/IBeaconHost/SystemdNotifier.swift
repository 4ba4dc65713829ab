import SystemPackage

/// `sd_notify` for `Type=notify` units, without libsystemd: one datagram to the Unix socket
/// systemd names in `$NOTIFY_SOCKET` (`@NAME` is the abstract namespace).
public enum SystemdNotifier {
    /// Sends `state` (e.g. `READY=1\nSTATUS=advertising`) to `$NOTIFY_SOCKET` when set.
    /// Returns false when there is no socket or the send failed.
    @discardableResult
    public static func notify(_ state: String, environment: [String: String]) -> Bool {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return false }
        do throws(Errno) {
            try Sys.sendUnixDatagram(path: path, message: Array(state.utf8))
            return true
        } catch {
            return false
        }
    }
}
