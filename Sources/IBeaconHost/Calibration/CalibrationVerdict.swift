import IBeaconCore

/// Why a calibration result is not written without `--force`, with what to do about it: the
/// policy of `calibrate`, here where it is unit-tested.
public struct CalibrationRefusal: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// The level moved during the run (exit 81).
        case drift
        /// The precision was not reached by the end of the run (exit 80).
        case precision
    }

    public var kind: Kind
    /// Why nothing is written, and what to do about it (the error without `--force`).
    public var message: String
    /// What happened, without the advice: the warning when `--force` writes anyway.
    public var cause: String

    public init(kind: Kind, message: String, cause: String) {
        self.kind = kind
        self.message = message
        self.cause = cause
    }

    /// The warning `calibrate --force` logs before it writes `measuredPower` anyway (or, in a
    /// dry run, takes it without `writing`).
    public func forcedWarning(measuredPower: Int, writing: Bool = true) -> String {
        "--force: \(writing ? "writing" : "taking") \(measuredPower) dBm although \(cause)"
    }
}

extension CalibrationResult {
    /// Why this result is not written (nil: it is); `precision` and `duration` are the run's
    /// `--precision` and `--duration`. `capture`: the reports were read from a file (a dry run),
    /// where running longer cannot help and nothing is written.
    public func refusal(precision: Double, duration: Double, capture: Bool = false) -> CalibrationRefusal? {
        let anyway =
            capture
            ? "or --force to take \(measuredPower) dBm anyway" : "or --force to write \(measuredPower) dBm anyway"
        let again =
            capture
            ? "record the capture again, the phone held still, away from people, "
            : "hold still, move away from people and calibrate again, "
        if driftIsLarge, let d = apple?.drift {
            let cause =
                "the level moved \(d.difference.signedFixed(1)) dB between the first and second half of the run "
                + "(z = \(d.z.fixed(1)))"
            return CalibrationRefusal(
                kind: .drift,
                message: cause + ": something changed during the measurement (a person, a door, the "
                    + "receiver moved); " + again + anyway, cause: cause)
        }
        if !precisionReached, let a = apple, a.transientOngoing, let t = a.transients.last {
            let cause =
                "the level moved \(t.shift.signedFixed(1)) dB "
                + "\(formatSeconds(seconds.rounded(.down) - Double(t.start))) before the end of the run and "
                + "had not come back"
            return CalibrationRefusal(
                kind: .drift,
                message: cause + " (a person in the way, a door, the receiver moved); " + again + anyway,
                cause: cause)
        }
        if precisionReached { return nil }
        let cause = "precision not reached: \(unmetPrecision(precision, capture: capture))"
        let advice = capture ? captureAdvice(precision, ended: seconds < duration) : precisionAdvice(precision)
        return CalibrationRefusal(
            kind: .precision, message: cause + "; nothing written — \(advice); " + anyway, cause: cause)
    }

    /// What was not met: the minimum duration, the interval itself, or (the interval within the
    /// precision) the margin the stopping rule keeps once slow variation was seen.
    func unmetPrecision(_ precision: Double, capture: Bool = false) -> String {
        if seconds < 10 {
            return "the \(capture ? "capture" : "run") ended after \(formatSeconds(seconds)), before the 10 s minimum"
        }
        let interval = "the 95 % interval is ±\(halfWidth95.fixed(2)) dB after \(formatSeconds(seconds))"
        if let margin = stoppingMargin, margin > 0, halfWidth95 <= precision, let a = apple {
            let widened = halfWidth95 * (1 + margin * a.halfWidthRelativeError)
            return interval + ", within --precision \(precision.clean) dB but not by the margin kept once slow "
                + "variation was seen (±\(widened.fixed(2)) dB with it)"
        }
        return interval + ", wider than --precision \(precision.clean) dB"
    }

    /// How a capture could reach the precision: read more of it when `--duration` cut it short;
    /// once it `ended`, reading it again cannot help, a longer recording can.
    func captureAdvice(_ precision: Double, ended: Bool) -> String {
        var needed: Double?
        if halfWidth95.isFinite, halfWidth95 > 0, seconds >= 1 {
            needed = max(10, seconds * (halfWidth95 / precision) * (halfWidth95 / precision) * 1.2).rounded(.up)
        }
        guard ended else {
            return "read more of the capture (\(needed.map { "about --duration \(Int($0))" } ?? "a longer --duration"))"
        }
        return "the capture holds \(formatSeconds(seconds)) of the beacon's reports: record a longer one"
            + (needed.map { " (about \(formatSeconds($0)))" } ?? "")
            + ", the phone held still 1 m from the beacon, away from people"
    }

    /// How to reach the precision: hold still, and run longer (how much longer when it can tell).
    func precisionAdvice(_ precision: Double) -> String {
        var advice = "hold the receiver still, move away from people"
        // The half-width shrinks as 1/√time: how long the same spread would need.
        let noisy = CalibrationSettings()
        if let fast = apple?.withinSecondSpread, fast >= noisy.noisySpread, seconds < noisy.noisyMinimumDuration {
            advice +=
                ", or run longer (--duration \(noisy.noisyMinimumDuration.clean) at least: the reports "
                + "spread \(fast.fixed(1)) dB within each second: under fading that strong slow variation takes a minute "
                + "to show)"
        } else if halfWidth95.isFinite, halfWidth95 > 0, seconds >= 1 {
            let needed = seconds * (halfWidth95 / precision) * (halfWidth95 / precision) * 1.2
            advice +=
                needed > 300
                ? ", or run much longer (--duration 300 or more)"
                : ", or run longer (about --duration \(Int(max(10, needed).rounded(.up))))"
        } else {
            advice += ", or run longer (--duration 10 at least)"
        }
        return advice
    }
}

extension CalibrationSettings {
    /// What is wrong with `--precision` (nil: nothing): more than 0 dB, at most 20 dB.
    public static func precisionProblem(_ value: Double) -> String? {
        if value > 0, value <= 20 { return nil }
        return "--precision must be more than 0 and at most 20 dB (the default is 1), got \(value.clean)"
    }
}
