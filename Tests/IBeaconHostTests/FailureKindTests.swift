import IBeaconHost
import Testing

@testable import IBeaconCore

/// The kinds of failure the management path's errors are (the CLI gives each kind one exit code).
@Suite struct FailureKindTests {
    static func failed(_ status: MgmtStatus) -> MgmtError {
        .commandFailed(opcode: .addAdvertising, index: MgmtIndex(0), status: status)
    }

    @Test func aRefusedManagementCommandIsKindedByItsStatus() {
        #expect(Self.failed(.permissionDenied).failureKind == .permission)
        #expect(Self.failed(.invalidIndex).failureKind == .unavailable)
        #expect(Self.failed(.rfkilled).failureKind == .unavailable)
        #expect(Self.failed(.notSupported).failureKind == .unavailable)
        #expect(Self.failed(.busy).failureKind == .tempFail)
        #expect(Self.failed(.rejected).failureKind == .rejected)
    }

    @Test func otherManagementFailures() {
        #expect(MgmtError.timeout(opcode: .readIndexList, index: .none, after: .seconds(2)).failureKind == .tempFail)
        #expect(MgmtError.closed(opcode: .readIndexList).failureKind == .io)
        #expect(
            MgmtError.transport(TransportError(.permissionDenied, "no")).failureKind
                == .transport(.permissionDenied))
        #expect(MgmtParameterError(message: "TX power 30 dBm is outside -127…20 dBm").failureKind == .badData)
    }

    /// Calibration's failures are classified like every other error (the CLI used to switch on
    /// them itself): not heard or too few samples is exit 68, no RSSI 69, two addresses 65.
    @Test func calibrationFailuresHaveTheirKinds() {
        #expect(CalibrationError.notHeard(target: "t", seconds: 10).failureKind == .notHeard)
        #expect(CalibrationError.tooFewSamples(count: 3, needed: 10, seconds: 10).failureKind == .notHeard)
        #expect(CalibrationError.rssiNotAvailable(reports: 5).failureKind == .unavailable)
        #expect(CalibrationError.ambiguous(target: "t", addresses: []).failureKind == .badData)
    }
}
