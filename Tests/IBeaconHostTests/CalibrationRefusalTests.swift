import Testing

@testable import IBeaconCore
@testable import IBeaconHost

/// `calibrate`'s refusal to write a result: which exit (drift or precision) and what the
/// message says was not met.
@Suite struct CalibrationRefusalTests {
    static func result(
        halfWidth: Double, degreesOfFreedom: Double = 8, slow: Bool, margin: Double?, seconds: Double = 180.4,
        reached: Bool = false, drift: CalibrationDrift? = nil
    ) -> CalibrationResult {
        let apple = PhoneCalibrationEstimate(
            value: -59.2, halfWidth95: halfWidth, degreesOfFreedom: degreesOfFreedom, batchSeconds: 1,
            seconds: Int(seconds), secondSpread: 1.5, withinSecondSpread: 3.0, transients: [], drift: drift,
            slowVariation: slow, transientOngoing: false)
        return CalibrationResult(
            estimate: -59.2, halfWidth95: halfWidth, spread: 3.2, method: PhoneCalibrationEstimator.methodName,
            histogram: Histogram(Array(repeating: -59, count: 1800)), precisionReached: reached,
            address: BDAddress("D0:00:00:00:00:01")!, seconds: seconds, offset: 0, apple: apple, robust: nil,
            stoppingMargin: margin)
    }

    /// The interval (±0.81 dB) is within --precision 1 dB: what was not met is the margin the
    /// stopping rule keeps once slow variation was seen (3 relative standard errors of 0.25:
    /// ±1.42 dB). Saying "wider than --precision" was wrong.
    @Test func anIntervalWithinThePrecisionButNotItsMarginSaysTheMargin() throws {
        let refusal = try #require(
            Self.result(halfWidth: 0.81, slow: true, margin: 3).refusal(precision: 1, duration: 180))
        #expect(refusal.kind == .precision)
        #expect(
            refusal.message.contains(
                "the 95 % interval is ±0.81 dB after 180.4 s, within --precision 1 dB but not by the margin kept "
                    + "once slow variation was seen (±1.42 dB with it)"), "\(refusal.message)")
        #expect(!refusal.message.contains("wider than"))
    }

    @Test func anIntervalWiderThanThePrecisionSaysSo() throws {
        let refusal = try #require(
            Self.result(halfWidth: 1.3, slow: false, margin: 0).refusal(precision: 1, duration: 180))
        #expect(refusal.kind == .precision)
        #expect(refusal.message.contains("the 95 % interval is ±1.30 dB after 180.4 s, wider than --precision 1 dB"))
    }

    @Test func aLevelThatMovedIsADriftRefusalAndAReachedPrecisionNone() throws {
        let drift = CalibrationDrift(difference: -2.4, z: 5.1, isLarge: true)
        let moved = try #require(
            Self.result(halfWidth: 0.5, slow: false, margin: 0, reached: true, drift: drift)
                .refusal(precision: 1, duration: 180))
        #expect(moved.kind == .drift)
        #expect(moved.message.hasPrefix("the level moved -2.4 dB between the first and second half"))
        #expect(
            Self.result(halfWidth: 0.5, slow: true, margin: 3, reached: true).refusal(precision: 1, duration: 180)
                == nil)
    }

    /// Issue 41, defect 5: `calibrate --force` logged "nothing written … or --force to write",
    /// then wrote. Forced, the warning says what happened and that it is written.
    @Test func theForcedWarningSaysItWritesAndGivesNoAdvice() throws {
        let drift = CalibrationDrift(difference: -2.4, z: 5.1, isLarge: true)
        for result in [
            Self.result(halfWidth: 1.3, slow: false, margin: 0),
            Self.result(halfWidth: 0.5, slow: false, margin: 0, reached: true, drift: drift),
        ] {
            let refusal = try #require(result.refusal(precision: 1, duration: 180))
            let warning = refusal.forcedWarning(measuredPower: -59)
            #expect(warning.hasPrefix("--force: writing -59 dBm although "), "\(warning)")
            for advice in ["nothing written", "or --force", "calibrate again", "run longer"] {
                #expect(!warning.contains(advice), "\(warning)")
            }
        }
    }

    @Test func precisionZeroSaysMoreThanZero() {
        #expect(CalibrationSettings.precisionProblem(1) == nil)
        #expect(CalibrationSettings.precisionProblem(20) == nil)
        for bad in [0.0, -1, 20.5, .nan] {
            let problem = CalibrationSettings.precisionProblem(bad)
            #expect(problem?.hasPrefix("--precision must be more than 0 and at most 20 dB") == true, "\(bad)")
        }
    }
}
