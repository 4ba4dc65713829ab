import IBeaconCore

/// The process exit codes, from sysexits(3). The README and `ibeacon --help` list them; this
/// file and the CLI's `classify` are the only places that map errors to them.
public enum Exit {
    public static let ok: Int32 = 0
    /// Command-line usage error (EX_USAGE).
    public static let usage: Int32 = 64
    /// Bad data: a malformed profile, hex input or capture (EX_DATAERR).
    public static let dataError: Int32 = 65
    /// A file that does not exist or cannot be read (EX_NOINPUT).
    public static let noInput: Int32 = 66
    /// The beacon to calibrate was not heard (EX_NOHOST).
    public static let notHeard: Int32 = 68
    /// No such adapter, Bluetooth unavailable, or the receiver cannot measure RSSI (EX_UNAVAILABLE).
    public static let unavailable: Int32 = 69
    /// An internal error: a bug (EX_SOFTWARE).
    public static let software: Int32 = 70
    /// A file cannot be written (EX_CANTCREAT).
    public static let cannotWrite: Int32 = 73
    /// An I/O or transport failure: connection lost, read/write error (EX_IOERR).
    public static let ioError: Int32 = 74
    /// Try again later: the controller did not answer in time, or a file is locked (EX_TEMPFAIL).
    public static let tempFail: Int32 = 75
    /// The controller rejected a command or sent a malformed reply (EX_PROTOCOL).
    public static let controllerError: Int32 = 76
    /// Permission denied: missing capabilities (EX_NOPERM).
    public static let permission: Int32 = 77
    /// A capture's end is cut or damaged: every complete record before it was read and shown.
    public static let damagedCapture: Int32 = 79
    /// calibrate: the precision was not reached by --duration; nothing written (not a sysexits code).
    public static let calibrationImprecise: Int32 = 80
    /// calibrate: the level drifted during the run; nothing written (not a sysexits code).
    public static let calibrationDrift: Int32 = 81
    /// status: something is off (a beacon off the air, a process gone without cleaning up).
    public static let statusOff: Int32 = 82
    /// calibrate --apply-to: no box confirmed the value (not a sysexits code).
    public static let applyUnconfirmed: Int32 = 83
    /// calibrate --apply-to: the box refused the value (not a sysexits code).
    public static let applyRefused: Int32 = 84

    public static let helpText = """
        EXIT CODES
          0   success
          64  usage error (bad option or argument)
          65  bad data: malformed profile, hex input or capture; calibrate: two
              beacons with the same identity (pick one with --address)
          66  file or serial device missing or unreadable
          68  calibrate: the beacon was not heard
          69  Bluetooth unavailable, no such adapter, nothing listening, RSSI not
              available, or a feature the controller lacks (several beacons
              without extended advertising)
          70  internal error (a bug: please report it)
          73  cannot write a file (read-only, permissions, directory missing)
          74  I/O or transport failure (connection lost)
          75  controller did not answer in time, or the file is locked by another
              ibeacon
          76  controller rejected a command (the message names command and status)
          77  permission denied (capability CAP_NET_ADMIN; raw HCI also
              CAP_NET_RAW)
          79  a capture (btsnoop:FILE, pklg:FILE) cut short or damaged: every
              complete record was read, the warning names the byte offset
          80  calibrate: precision not reached by --duration; nothing written
              (hold still, run longer, or --force)
          81  calibrate: the level moved during the run (a person, a door);
              nothing written (calibrate again, or --force)
          82  status: something is off (a beacon off the air, leftovers of a
              process gone); the output says what
          83  calibrate --apply-to: no box confirmed the value in time (or the
              broker refused or was not reached)
          84  calibrate --apply-to: the box refused the value (its reason is shown)
          128+N  stopped by signal N after cleaning up: calibrate interrupted
              (130 SIGINT, 143 SIGTERM; nothing written), advertise or scan ended by
              SIGHUP (129), SIGUSR1 (138), ... (SIGINT/SIGTERM end those with 0)
        """
}

/// An error the CLI reports as is, with its exit code.
/// The exit code of a failure of this kind.
public func exitCode(for kind: FailureKind) -> Int32 {
    switch kind {
    case .badData: Exit.dataError
    case .unavailable: Exit.unavailable
    case .permission: Exit.permission
    case .tempFail: Exit.tempFail
    case .rejected: Exit.controllerError
    case .io: Exit.ioError
    case .notFound: Exit.noInput
    case .cannotWrite: Exit.cannotWrite
    case .notHeard: Exit.notHeard
    case .damagedCapture: Exit.damagedCapture
    case .transport(let t): exitCode(for: t)
    }
}

/// The exit code of a transport failure of this kind.
public func exitCode(for kind: TransportError.Kind) -> Int32 {
    switch kind {
    case .bluetoothUnavailable, .noSuchAdapter, .rfkilled, .busy, .connectionRefused: Exit.unavailable
    case .permissionDenied: Exit.permission
    case .notFound: Exit.noInput
    case .badSpecification: Exit.usage
    case .disconnected, .io: Exit.ioError
    }
}

extension CalibrationRefusal {
    /// calibrate's exit code for this refusal: the level drifted (81), or the precision was not
    /// reached (80).
    public var exitCode: Int32 { kind == .drift ? Exit.calibrationDrift : Exit.calibrationImprecise }

    /// The message, saying that the profile at `path` (nil: none would have been written) is unchanged.
    public func message(leaving path: String?) -> String { message + (path.map { "; \($0) is unchanged" } ?? "") }
}
