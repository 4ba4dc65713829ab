import IBeaconHost
import SystemPackage

/// Starts `arguments` as a helper process of its own (`Sys.spawn`: its own process group, so
/// the terminal's Ctrl-C or a signal to this process's group does not reach it; stdin from
/// /dev/null, output on stderr; this process's environment) and returns its ID. `advertise`
/// starts `ibeacon stop --after-exit-of PID` this way: a guardian that removes the advertiser's
/// kernel instances as soon as it dies without doing so itself (SIGKILL, a crash).
public func startHelperProcess(_ arguments: [String]) throws(Errno) -> Int32 {
    try Sys.spawn(arguments, environment: Sys.environment())
}

/// This program's executable (`/proc/self/exe`), to start a helper of the same version.
public func ownExecutablePath() -> String {
    guard let path = try? Sys.readLink("/proc/self/exe"), !path.isEmpty else { return "/proc/self/exe" }
    return path
}
