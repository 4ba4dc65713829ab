import IBeaconCore

/// What kind of failure an error is, whatever the controller path that raised it: the CLI maps
/// each kind to one exit code, so the errors of a new path need no new mapping there.
public enum FailureKind: Sendable, Equatable {
    /// Malformed input or parameters (exit 65).
    case badData
    /// The adapter or a feature is not there (exit 69).
    case unavailable
    /// Permission denied (exit 77).
    case permission
    /// Busy or no answer in time: try again later (exit 75).
    case tempFail
    /// The controller or the kernel refused a command, or answered it malformed (exit 76).
    case rejected
    /// The link ended, or a file could not be read (exit 74).
    case io
    /// A file is not there or cannot be read (exit 66).
    case notFound
    /// A file cannot be written: read-only, permissions, directory missing (exit 73).
    case cannotWrite
    /// Nothing to measure: the beacon was not heard, or too seldom (exit 68).
    case notHeard
    /// A capture file ends in a damaged record, after the complete ones were read (exit 79).
    case damagedCapture
    /// As the transport's failure of this kind.
    case transport(TransportError.Kind)
}

/// An error that says what kind of failure it is.
public protocol ClassifiedError: Error, CustomStringConvertible {
    var failureKind: FailureKind { get }
}

extension MgmtError: ClassifiedError {
    public var failureKind: FailureKind {
        switch self {
        case .commandFailed(_, _, let status):
            switch status {
            case .permissionDenied: .permission
            case .invalidIndex, .rfkilled, .notSupported: .unavailable
            case .busy: .tempFail
            default: .rejected
            }
        case .badReply: .rejected
        case .timeout: .tempFail
        case .transport(let t): .transport(t.kind)
        case .closed: .io
        }
    }
}

extension MgmtParameterError: ClassifiedError {
    public var failureKind: FailureKind { .badData }
}

/// The controller's errors, classified as the kernel's (`MgmtError`) are: one rule for both.
extension ControllerError: ClassifiedError {
    public var failureKind: FailureKind {
        switch self {
        case .commandFailed, .badReply: .rejected
        case .timeout, .noCredits: .tempFail
        case .transport(let t): .transport(t.kind)
        case .closed: .io
        }
    }
}

extension TransportError: ClassifiedError {
    public var failureKind: FailureKind { .transport(kind) }
}

extension AdvertisingError: ClassifiedError {
    public var failureKind: FailureKind { .unavailable }
}

extension ProfileError: ClassifiedError {
    public var failureKind: FailureKind { .badData }
}

extension DecodingError: ClassifiedError {
    public var failureKind: FailureKind { .badData }
}

extension ParameterError: ClassifiedError {
    public var failureKind: FailureKind { .badData }
}

extension FileError: ClassifiedError {
    public var failureKind: FailureKind {
        switch kind {
        case .notFound: .notFound
        case .cannotWrite: .cannotWrite
        case .locked: .tempFail
        case .badData: .badData
        case .io: .io
        }
    }
}

extension CalibrationError: ClassifiedError {
    public var failureKind: FailureKind {
        switch self {
        case .notHeard, .tooFewSamples: .notHeard
        case .rssiNotAvailable: .unavailable
        case .ambiguous: .badData
        }
    }
}
