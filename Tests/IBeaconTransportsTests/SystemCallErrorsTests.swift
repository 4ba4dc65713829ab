import IBeaconHost
import SystemPackage
import Testing

@testable import IBeaconTransports

/// The one errno → `TransportError` mapping of the transports: which errnos deny permission,
/// which message and hint each case carries, and that the errno is kept.
@Suite struct SystemCallErrorsTests {
    @Test(arguments: [Errno.notPermitted, .permissionDenied])
    func permissionIsDeniedByEPERMAndEACCES(error: Errno) {
        let e = TransportError.systemCall(error, "cannot bind to hci0: \(error)", denied: "refused", hint: "setcap")
        #expect(e.kind == .permissionDenied)
        #expect(e.message == "refused")
        #expect(e.hint == "setcap")
        #expect(e.errno == error.rawValue)
        // Without its own wording the denial keeps the message.
        #expect(TransportError.systemCall(error, "cannot bind", hint: "setcap").message == "cannot bind")
    }

    @Test(arguments: [Errno.ioError, .resourceBusy, .noSuchFileOrDirectory, .badFileDescriptor])
    func anythingElseIsIO(error: Errno) {
        let e = TransportError.systemCall(error, "write failed: \(error)", denied: "refused", hint: "setcap")
        #expect(e.kind == .io)
        #expect(e.message == "write failed: \(error)")
        #expect(e.hint == nil)
        #expect(e.errno == error.rawValue)
    }

    @Test func openingAPath() {
        func open(_ error: Errno) -> TransportError {
            .opening("/dev/ttyX", what: "serial device", verb: "open", error, missingHint: "plug", deniedHint: "group")
        }
        let missing = open(.noSuchFileOrDirectory)
        #expect((missing.kind, missing.message, missing.hint) == (.notFound, "no serial device /dev/ttyX", "plug"))
        let denied = open(.permissionDenied)
        #expect(
            (denied.kind, denied.message, denied.hint) == (
                .permissionDenied, "no permission to open /dev/ttyX", "group"
            ))
        // EPERM on open(2) is not a file permission (O_NOATIME, a sealed file): an I/O error.
        for error in [Errno.notPermitted, .isDirectory, .ioError] {
            let other = open(error)
            #expect((other.kind, other.message, other.hint) == (.io, "cannot open /dev/ttyX: \(error)", nil))
            #expect(other.errno == error.rawValue)
        }
    }

    /// Capture files: the directory case is their own, the rest the shared wording with "read".
    @Test func captureFiles() {
        let directory = CaptureFileReader.openError("/tmp/d", .isDirectory)
        #expect((directory.kind, directory.message) == (.notFound, "/tmp/d is a directory, not a capture file"))
        #expect(CaptureFileReader.openError("/tmp/x", .noSuchFileOrDirectory).message == "no capture file /tmp/x")
        #expect(CaptureFileReader.openError("/tmp/x", .permissionDenied).message == "no permission to read /tmp/x")
        #expect(CaptureFileReader.openError("/tmp/x", .ioError).message == "cannot read /tmp/x: \(Errno.ioError)")
    }

    @Test func sendingOnAStream() {
        let failure = streamSendFailure(name: "hci0", permissionHint: "needs CAP_NET_RAW")
        #expect(failure(.brokenPipe).kind == .disconnected)
        let denied = failure(.notPermitted)
        #expect(
            (denied.kind, denied.message, denied.hint) == (
                .permissionDenied, "hci0: not allowed to send (\(Errno.notPermitted))", "needs CAP_NET_RAW"
            ))
        let other = failure(.noBufferSpace)
        #expect((other.kind, other.message) == (.io, "hci0: write failed: \(Errno.noBufferSpace)"))
    }
}
