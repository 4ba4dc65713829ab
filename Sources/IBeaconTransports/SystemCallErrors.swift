import IBeaconHost
import SystemPackage

// How a failed system call reads to the user, written once for every transport: the errno is
// kept on the error (`TransportError.errno`), the kind picks the exit code (README table).

extension TransportError {
    /// A failed call on a socket or descriptor: EPERM and EACCES are `.permissionDenied`
    /// (`denied`, or else `message`, with `hint`), anything else `.io` with `message`.
    static func systemCall(
        _ error: Errno, _ message: String, denied: String? = nil, hint: String? = nil
    ) -> TransportError {
        guard error == .notPermitted || error == .permissionDenied else {
            return TransportError(.io, message, errno: error.rawValue)
        }
        return TransportError(.permissionDenied, denied ?? message, hint: hint, errno: error.rawValue)
    }

    /// Opening the file or device at `path` failed: ENOENT is `.notFound` ("no `what` PATH",
    /// with `missingHint`), EACCES `.permissionDenied` ("no permission to `verb` PATH", with
    /// `deniedHint`), anything else `.io` ("cannot `verb` PATH: error").
    static func opening(
        _ path: String, what: String, verb: String, _ error: Errno, missingHint: String? = nil,
        deniedHint: String? = nil
    ) -> TransportError {
        switch error {
        case .noSuchFileOrDirectory:
            TransportError(.notFound, "no \(what) \(path)", hint: missingHint, errno: error.rawValue)
        case .permissionDenied:
            TransportError(
                .permissionDenied, "no permission to \(verb) \(path)", hint: deniedHint, errno: error.rawValue)
        default:
            TransportError(.io, "cannot \(verb) \(path): \(error)", errno: error.rawValue)
        }
    }
}
