/// The result of estimating measured power (RSSI at 1 m) from RSSI samples.
public struct MeasuredPowerEstimate: Sendable, Equatable, CustomStringConvertible {
    /// Estimated RSSI at 1 m, dBm.
    public var value: Double
    /// Half-width of the 95 % confidence interval of `value`, dB (`.infinity` when too few
    /// samples to say).
    public var halfWidth95: Double
    /// Robust standard deviation of the un-faded samples, dB.
    public var spread: Double
    public var count: Int
    public var method: String
    /// Relative standard error of `halfWidth95` itself (delta method on Σψ²), e.g. 0.08: the
    /// half-width is an estimate too, and `StoppingRule` allows for that.
    public var halfWidthRelativeError: Double = 0

    /// `value` rounded to whole dBm, the iBeacon measured power field.
    public var measuredPower: Int { Int(value.rounded()) }

    public var interval95: ClosedRange<Double> { (value - halfWidth95)...(value + halfWidth95) }

    public var description: String {
        let v = JSONValue.decimal(value, fractionDigits: 2)
        let h = halfWidth95.isFinite ? JSONValue.decimal(halfWidth95, fractionDigits: 2).description : "∞"
        return
            "\(v) dBm ± \(h) dB (95 %), spread \(JSONValue.decimal(spread, fractionDigits: 2)) dB, \(count) samples, \(method)"
    }
}

/// Robust estimate of the RSSI a receiver sees at 1 m, from integer RSSI samples.
///
/// What the data looks like: a roughly Gaussian spread (σ ≈ 4–6 dB indoors), a per-advertising-
/// channel offset of a few dB, and deep fades — 10–20 % of packets 10–20 dB *below* the rest.
/// The target is the centre of the un-faded distribution (the mean over channels). Fades are
/// one-sided, so every symmetric summary is dragged down: with 15 % of samples 15 dB low the
/// mean is 2.2 dB low, a 10 %-trimmed mean (AirLocate) about 1.5 dB low, and even a Tukey
/// biweight with the usual c = 4.685 and MAD scale 1.0 dB low, because the MAD is inflated by
/// the fades and the window then admits them (numbers from a 400-run simulation, n = 150).
///
/// Method: a Tukey-biweight M-estimator of location, ψ(u) = u(1−u²)² for |u| < 1, u = (x−m)/(c·s),
/// with c = 3 and a scale `s` taken from the *upper* half only: the RMS deviation of the samples
/// within 3 s above the current centre (ties at the centre count half), corrected for the
/// truncation at 3 σ. Fades never reach the upper half, so `s` estimates σ of the un-faded
/// distribution, and c = 3 puts the rejection point at 3 σ (12 dB at σ = 4), where a fade 15 dB
/// down is mostly out and carries little weight when in. Centre and scale are iterated from the
/// median to a fixed point. The window never narrows below ±c·1 dB, the quantisation step of
/// RSSI, so a tight spread of whole dBm values is not cut apart. Simulated (σ = 4, n = 150):
/// no fades bias 0.0 dB; 15 % fades 15 dB down bias −0.1 dB; 20 % fades only 10 dB down
/// (2.5 σ, indistinguishable from the tail) bias −0.9 dB — there no method can separate them.
///
/// The 95 % half-width is the M-estimator's asymptotic (sandwich) standard error,
/// (c·s)·√Σψ² / Σψ′ · √(n/(n−1)), times the Student-t 97.5 % quantile with n−1 degrees of freedom.
/// Its coverage in simulation at a fixed n of 60–100 is 92–93 % (CalibrationTests), a little
/// under 95 % because the sandwich ignores the noise of the one-sided scale; `StoppingRule`
/// makes up for that with its `assurance` margin.
public struct MeasuredPowerEstimator: Sendable {
    /// Biweight tuning constant c, in units of the scale.
    public var tuning: Double
    /// Smallest scale used for the window, dB (the RSSI quantisation step).
    public var minimumWindowScale: Double

    public static let methodName = "biweight-c3-upper-scale"

    public init(tuning: Double = 3.0, minimumWindowScale: Double = 1.0) {
        self.tuning = tuning
        self.minimumWindowScale = minimumWindowScale
    }

    public var method: String {
        tuning == 3.0 && minimumWindowScale == 1.0
            ? Self.methodName : "biweight-c\(tuning)-upper-scale-min\(minimumWindowScale)"
    }

    /// nil for no samples.
    public func estimate(_ samples: [Int]) -> MeasuredPowerEstimate? { estimate(Histogram(samples)) }

    /// nil for no samples. The samples are read from their counts per dBm, in ascending order
    /// and each as many times as it was received, so every sum is added up in exactly the order
    /// the sorted list of samples would give (the same result to the last bit), while memory
    /// stays one count per dBm however many samples there are.
    public func estimate(_ histogram: Histogram) -> MeasuredPowerEstimate? {
        let x = SortedSamples(histogram)
        guard x.count > 0 else { return nil }
        let n = x.count
        var m = x.median
        if x.runs.count == 1 {
            return MeasuredPowerEstimate(
                value: x.runs[0].value, halfWidth95: n > 1 ? 0 : .infinity, spread: 0, count: n, method: method,
                halfWidthRelativeError: 0)
        }
        var s = upperMedianScale(x, m)
        for _ in 0..<100 {
            s = upperRMSScale(x, m, window: 3 * max(s, minimumWindowScale))
            let w = tuning * max(s, minimumWindowScale)
            var sw = 0.0
            var swx = 0.0
            for (v, count) in x.runs {
                let u = (v - m) / w
                guard abs(u) < 1 else { continue }
                let k = (1 - u * u) * (1 - u * u)
                for _ in 0..<count {
                    sw += k
                    swx += k * v
                }
            }
            guard sw > 0 else { break }
            let next = swx / sw
            if abs(next - m) < 1e-7 {
                m = next
                break
            }
            m = next
        }
        let w = tuning * max(s, minimumWindowScale)
        var sumPsi2 = 0.0
        var sumPsi4 = 0.0
        var sumDPsi = 0.0
        for (v, count) in x.runs {
            let u = (v - m) / w
            guard abs(u) < 1 else { continue }
            let a = 1 - u * u
            let psi = u * a * a
            let dpsi = a * (1 - 5 * u * u)
            for _ in 0..<count {
                sumPsi2 += psi * psi
                sumPsi4 += psi * psi * psi * psi
                sumDPsi += dpsi
            }
        }
        var half = Double.infinity
        var relativeError = Double.infinity
        if n > 1, sumDPsi > 0, sumPsi2 > 0 {
            let se = w * sumPsi2.squareRoot() / sumDPsi * (Double(n) / Double(n - 1)).squareRoot()
            half = studentT975(degreesOfFreedom: n - 1) * se
            // √Σψ² has relative error √(n·Var(ψ²)) / (2·Σψ²).
            let meanPsi2 = sumPsi2 / Double(n)
            let varPsi2 = max(0, sumPsi4 / Double(n) - meanPsi2 * meanPsi2)
            relativeError = (Double(n) * varPsi2).squareRoot() / (2 * sumPsi2)
        }
        return MeasuredPowerEstimate(
            value: m, halfWidth95: half, spread: s, count: n, method: method, halfWidthRelativeError: relativeError)
    }

    /// 1.4826 × median of the deviations above `m` (ties at `m` count half, as zeros): a
    /// starting scale immune to fades below.
    private func upperMedianScale(_ x: SortedSamples, _ m: Double) -> Double {
        let ties = x.runs.first { $0.value == m }?.count ?? 0
        // Sorted: the zeros for the ties, then the deviations of the values above, ascending.
        let d = SortedSamples(runs: [(0, ties / 2)] + x.runs.filter { $0.value > m }.map { ($0.value - m, $0.count) })
        guard d.count > 0 else { return 0 }
        return 1.4826 * d.median
    }

    /// √(mean of squared deviations in (m, m + window]) / √0.97334: the σ of a normal whose
    /// upper half, truncated at 3 σ, has that mean square. Ties at `m` count half.
    private func upperRMSScale(_ x: SortedSamples, _ m: Double, window: Double) -> Double {
        var sum = 0.0
        var count = 0.0
        for (v, k) in x.runs {
            if v > m, v - m <= window {
                for _ in 0..<k {
                    sum += (v - m) * (v - m)
                    count += 1
                }
            } else if v == m {
                for _ in 0..<k { count += 0.5 }
            }
        }
        guard count > 0 else { return 0 }
        // Var of N(0,1) truncated to |u| ≤ 3: 1 − 2·3·φ(3)/(2Φ(3) − 1) = 0.97334.
        return (sum / count / 0.97334).squareRoot()
    }
}

/// A sorted list of samples kept as runs of equal values (ascending, each with its count).
struct SortedSamples {
    var runs: [(value: Double, count: Int)]
    var count: Int

    init(_ histogram: Histogram) {
        self.init(runs: histogram.counts.sorted { $0.key < $1.key }.map { (Double($0.key), $0.value) })
    }

    init(runs: [(value: Double, count: Int)]) {
        self.runs = runs.filter { $0.count > 0 }
        count = self.runs.reduce(0) { $0 + $1.count }
    }

    /// The element at `index` of the expanded list.
    func element(at index: Int) -> Double {
        var left = index
        for run in runs {
            if left < run.count { return run.value }
            left -= run.count
        }
        return runs[runs.count - 1].value
    }

    /// As `median` of the expanded list: the middle element, or the mean of the two middle ones.
    var median: Double {
        count % 2 == 1 ? element(at: count / 2) : (element(at: count / 2 - 1) + element(at: count / 2)) / 2
    }
}

/// The 97.5 % quantile of Student's t with `df` degrees of freedom: exact table to 10, then
/// the Cornish–Fisher expansion around z = 1.959964 (error < 1e-4 for df ≥ 10).
func studentT975(degreesOfFreedom df: Int) -> Double {
    let table: [Double] = [.infinity, 12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281]
    if df < table.count { return table[max(0, df)] }
    let z = 1.959964
    let v = Double(df)
    let z3 = z * z * z
    let z5 = z3 * z * z
    let z7 = z5 * z * z
    return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v)
        + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v)
}

/// Decides when a calibration has enough samples.
///
/// Stops once at least `minimumSamples` were taken and, for `confirmations` consecutive updates
/// (10 = 1 s of reports at 100 ms), the 95 % half-width still fits within `precision` after
/// being enlarged by `assurance` of its own standard errors
/// (`halfWidth95 · (1 + assurance · halfWidthRelativeError) ≤ precision`); or at `maximumSamples`.
///
/// Why not simply "stop the first time the half-width is ≤ precision": the half-width is itself
/// an estimate, and a rule that stops on its first dip stops preferentially on samples whose
/// spread happens to look small. In simulation (σ = 4 dB, precision 1 dB) that first-crossing
/// rule stopped at 72 samples on average but covered the truth only 88 % of the time, so the
/// 95th-percentile error was 1.1 dB. With 10 confirmations and assurance 2 the coverage is
/// 95–99 % and the 95th-percentile error 0.8–0.9 dB, for about 106 samples on average at σ = 4
/// (p95 141) and 135 with 15 % deep fades (see CalibrationTests for the recorded numbers).
public struct StoppingRule: Sendable {
    public var precision: Double
    public var minimumSamples: Int
    public var confirmations: Int
    public var maximumSamples: Int?
    /// How many of its own standard errors the half-width must clear `precision` by.
    public var assurance: Double
    /// Consecutive updates so far with the half-width within `precision`.
    public private(set) var streak = 0

    public enum Decision: Equatable, Sendable {
        case keepSampling
        /// The interval is within `precision`.
        case precisionReached
        /// `maximumSamples` reached without the precision.
        case sampleLimitReached
    }

    public init(
        precision: Double = 1.0, minimumSamples: Int = 30, confirmations: Int = 10, maximumSamples: Int? = nil,
        assurance: Double = 2
    ) {
        self.precision = precision
        self.assurance = assurance
        self.minimumSamples = minimumSamples
        self.confirmations = max(1, confirmations)
        self.maximumSamples = maximumSamples
    }

    /// Call once per new sample with the estimate over all samples so far.
    public mutating func update(with estimate: MeasuredPowerEstimate) -> Decision {
        if estimate.count >= minimumSamples,
            estimate.halfWidth95 * (1 + assurance * estimate.halfWidthRelativeError) <= precision
        {
            streak += 1
        } else {
            streak = 0
        }
        if streak >= confirmations { return .precisionReached }
        if let maximumSamples, estimate.count >= maximumSamples { return .sampleLimitReached }
        return .keepSampling
    }

    /// Samples a calibration at a given spread is likely to need, for a progress display:
    /// (1.96·spread/precision)² divided by the estimator's efficiency at the normal (0.773 for
    /// the c = 3 biweight), plus the confirmations; at least `minimumSamples`.
    public func expectedSamples(spread: Double) -> Int {
        let n = (1.96 * spread / precision) * (1.96 * spread / precision) / 0.773
        return max(minimumSamples, Int(n.rounded(.up)) + confirmations)
    }
}

/// Counts of RSSI samples per whole dBm: one count per dBm received (at most 256 for the
/// 8-bit RSSI of HCI), however many samples.
public struct Histogram: Sendable, Equatable {
    public private(set) var counts: [Int: Int] = [:]
    public private(set) var total = 0

    public init(_ samples: [Int] = []) {
        for s in samples { add(s) }
    }

    public mutating func add(_ rssi: Int) {
        counts[rssi, default: 0] += 1
        total += 1
    }

    /// Mean and sample standard deviation (n − 1) of the samples; nil for none. The sum of
    /// whole dBm values is exact in a `Double`, so the mean does not depend on the order the
    /// samples came in.
    public var meanAndSpread: (mean: Double, spread: Double)? {
        guard total > 0 else { return nil }
        let n = Double(total)
        let sum = counts.reduce(0.0) { $0 + Double($1.key) * Double($1.value) }
        let mean = sum / n
        guard total > 1 else { return (mean, 0) }
        let squares = counts.sorted { $0.key < $1.key }.reduce(0.0) {
            $0 + Double($1.value) * (Double($1.key) - mean) * (Double($1.key) - mean)
        }
        return (mean, (squares / (n - 1)).squareRoot())
    }

    /// Every dBm from the lowest to the highest sample, empty bins included, strongest first.
    public var bins: [(dBm: Int, count: Int)] {
        guard let lo = counts.keys.min(), let hi = counts.keys.max() else { return [] }
        return (lo...hi).reversed().map { ($0, counts[$0] ?? 0) }
    }

    /// One line per dBm, strongest first:
    /// ```
    ///  -57 dBm |#######                 7
    ///  -58 dBm |####################   20  <- estimate
    /// ```
    /// `width` is the length of the longest bar; `mark` flags the bin nearest a value.
    public func rendered(width: Int = 40, mark: Double? = nil, markLabel: String = "estimate") -> String {
        let rows = bins
        guard let peak = rows.map(\.count).max(), peak > 0 else { return "(no samples)\n" }
        let labelWidth = rows.map { String($0.dBm).count }.max() ?? 3
        let countWidth = String(peak).count
        let marked = mark.map { Int($0.rounded()) }
        var out = ""
        for row in rows {
            let label = String(row.dBm)
            let bar = (row.count * width + peak / 2) / peak
            let barText = String(repeating: "#", count: row.count > 0 ? max(1, bar) : 0)
            let countText = String(row.count)
            out +=
                label.padded(labelWidth, left: true) + " dBm |" + barText
                + countText.padded(width - barText.count + 1 + countWidth, left: true)
            if row.dBm == marked { out += "  <- \(markLabel)" }
            out += "\n"
        }
        return out
    }
}
