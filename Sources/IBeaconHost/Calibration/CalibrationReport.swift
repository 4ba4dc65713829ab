import IBeaconCore

extension CalibrationResult {
    /// `calibrate --json`: the result as one object, with what was done with it.
    public func json(
        target: CalibrationTarget, refusal: CalibrationRefusal?, forced: Bool, previous: Int8?, written: Bool,
        file: String?
    ) -> String {
        let result = self
        return jsonLine([
            "uuid": target.proximityUUID.uuidString, "major": Int(target.major), "minor": Int(target.minor),
            "address": result.address.description, "measuredPower": result.measuredPower,
            "estimate": result.estimate, "interval95": result.halfWidth95, "spread": result.spread,
            "samples": result.sampleCount, "seconds": result.seconds,
            "precisionReached": result.precisionReached, "method": result.method,
            "apple": result.apple.map { a in
                jsonObject([
                    "estimate": a.value + offset, "interval95": a.halfWidth95, "seconds": a.seconds,
                    "secondSpread": a.secondSpread, "withinSecondSpread": a.withinSecondSpread,
                    "degreesOfFreedom": a.degreesOfFreedom,
                    "slowVariation": a.slowVariation,
                ])
            },
            "robust": result.robust.map { r in
                jsonObject(["estimate": r.value + offset, "interval95": r.halfWidth95, "spread": r.spread])
            },
            "drift": result.apple?.drift.map { d in
                jsonObject(["difference": d.difference, "z": d.z, "large": d.isLarge])
            },
            "transients": (result.apple?.transients ?? []).map {
                jsonObject(["start": $0.start, "seconds": $0.seconds, "shift": $0.shift])
            },
            "refused": refusal?.kind.rawValue, "forced": forced,
            "previousMeasuredPower": previous.map { Int($0) }, "written": written,
            "file": file,
            "histogram": result.histogram.bins.map { jsonObject(["dBm": $0.dBm, "count": $0.count]) },
        ])
    }

    /// The result for a person: the histogram, the estimate, what the estimators saw, and
    /// whether the precision asked for was reached within `maximumDuration` seconds.
    public func textLines(precision: Double, maximumDuration: Double, capture: Bool = false) -> [String] {
        let result = self
        var lines: [String] = []
        func printOut(_ line: String) { lines.append(line) }
        printOut(result.histogram.rendered(width: 40, mark: result.estimate - result.offset))
        printOut(
            "estimate \(result.estimate.fixed(2)) dBm, 95% interval ±\(result.halfWidth95.fixed(2)) dB, "
                + "spread (σ) \(result.spread.fixed(1)) dB, \(result.sampleCount) samples in "
                + "\(result.seconds.fixed(1)) s (\(result.method))")
        if let a = result.apple, let r = result.robust {
            printOut(
                "  apple (1 Hz mean, what phones expect) \((a.value + offset).fixed(2)) dBm ±\(a.halfWidth95.fixed(2)) dB "
                    + "over \(a.seconds) s; robust centre \((r.value + offset).fixed(2)) dBm ±\(r.halfWidth95.fixed(2)) dB"
            )
            if a.slowVariation {
                printOut("  the level wandered over seconds (shadowing, movement): the interval allows for it")
            }
            for t in a.transients {
                printOut(
                    "  left out \(t.seconds) s at \(t.start) s, \(t.shift.signedFixed(1)) dB from the rest (a person passing?)"
                )
            }
            if let d = a.drift, abs(d.z) > PhoneCalibrationEstimator.driftZ {
                printOut(
                    "  the level moved \(d.difference.signedFixed(1)) dB between the first and second half of the run")
            }
        }
        let ended =
            capture && result.seconds < maximumDuration
            ? ": the capture ended after \(formatSeconds(result.seconds))" : " within \(formatSeconds(maximumDuration))"
        printOut(
            result.precisionReached
                ? "precision ±\(precision) dB reached" : "precision ±\(precision) dB NOT reached\(ended)")
        return lines
    }
}

/// What calibrate says as it starts and while it measures.
public enum CalibrationProgress {
    /// The first line: the beacon, the receiver, and what the person holding it does (nothing
    /// for a capture: its receiver was held when it was recorded).
    public static func startLine(_ target: CalibrationTarget, device: String, capture: Bool) -> String {
        capture
            ? "calibrating \(target.identity) from the capture \(device) (recorded 1 m from the beacon)"
            : "calibrating \(target.identity) through \(device); hold the receiver 1 m from the beacon"
    }

    /// The progress line: samples, time, the estimate and its interval (`± …` until there is
    /// one), the precision aimed at and, live, the time left at most.
    public static func line(
        samples: Int, elapsed: Double, estimate: (value: Double, halfWidth95: Double)?, offset: Double,
        precision: Double, maximumDuration: Double, capture: Bool
    ) -> String {
        let interval = estimate.map { $0.halfWidth95.isFinite ? "± \($0.halfWidth95.fixed(1))" : "± …" } ?? ""
        let value = estimate.map { "\(($0.value + offset).fixed(1)) \(interval) dBm" } ?? "…"
        let left = capture ? "" : ", at most \(formatSeconds(max(0, maximumDuration - elapsed).rounded(.up))) left"
        return "  \(samples) samples, \(elapsed.fixed(1)) s: \(value) (target ±\(precision.clean) dB\(left))"
    }
}

extension CalibrationResult {
    /// A warning when the samples spread over 8 dB (reflections, obstacles); nil otherwise.
    public var spreadWarning: String? {
        guard spread > 8 else { return nil }
        return "the RSSI spread is \(spread.fixed(1)) dB (over 8 dB): reflections or obstacles; "
            + "move to a clearer spot and calibrate again"
    }
}

extension CalibrationDestination {
    /// What `calibrate` says once it wrote `measuredPower`.
    public func writtenLine(_ measuredPower: Int) -> String {
        let was = existing.map { " (was \($0.measuredPower) dBm)" } ?? ""
        return "wrote measuredPower \(measuredPower) dBm to \(path ?? "")\(was)"
    }
}
