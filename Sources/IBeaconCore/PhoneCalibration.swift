/// Measured power as phones measure it: the long-run average of the 1 Hz mean RSSI at 1 m.
///
/// Core Location reports `CLBeacon.rssi` as the mean RSSI of the advertisements received in the
/// last second (one ranging callback per second). Apple's "Getting Started with iBeacon"
/// calibration holds the phone 1 m from the beacon for at least 10 s and averages those 1 Hz
/// values; AirLocate does the same over 20 s (with 10 % trimmed at each end). So the value a phone
/// compares its own RSSI with is the mean a receiver sees, fades included — not the centre of the
/// un-faded distribution (`MeasuredPowerEstimator`, kept as `--method robust`). docs/CALIBRATION.md
/// has the sources and the simulation that checks this estimator.

/// The reports of one beacon in one second: what Core Location averages into `CLBeacon.rssi`.
/// Shared by calibration (`SecondMeans`, a second per index) and ranging (`BeaconRanger`, the
/// second in progress), so the value `ibeacon scan` shows each second is exactly the one
/// `calibrate` averages into measured power.
public struct SecondSum: Sendable, Equatable {
    public private(set) var sum = 0.0
    public private(set) var count = 0
    /// Sum of squared deviations from the first sample (numerically safe).
    private var squares = 0.0
    private var first = 0.0

    public init() {}

    public mutating func add(_ rssi: Int) {
        if count == 0 { first = Double(rssi) }
        let d = Double(rssi) - first
        sum += Double(rssi)
        squares += d * d
        count += 1
    }

    /// The mean of the second's samples; nil when it had none.
    public var mean: Double? { count > 0 ? sum / Double(count) : nil }

    /// Σ (x − mean)² over the second's samples.
    public var sumOfSquares: Double {
        guard count > 0 else { return 0 }
        let n = Double(count)
        let shifted = sum - n * first
        return max(0, squares - shifted * shifted / n)
    }
}

/// The RSSI of one beacon, summed per whole second of the source's time (seconds since the scan
/// started; a replayed capture uses its own time, never the wall clock).
public struct SecondMeans: Sendable, Equatable {
    /// Second `k` at index `k`.
    public private(set) var seconds: [SecondSum] = []

    public init() {}

    /// How many numbers are kept: four per second from the first to the latest (a day at most).
    public var storedValues: Int { seconds.count * 4 }

    /// Adds a sample received at `time` seconds (negative times count as second 0). Samples at
    /// a time that is not finite or more than a day in are dropped: a broken source must not
    /// allocate a day of empty seconds.
    public mutating func add(_ rssi: Int, at time: Double) {
        guard time.isFinite, time < 86_400 else { return }
        let k = max(0, Int(time.rounded(.down)))
        if k >= seconds.count { seconds += [SecondSum](repeating: SecondSum(), count: k + 1 - seconds.count) }
        seconds[k].add(rssi)
    }

    /// The 1 Hz means (`CLBeacon.rssi`) of the seconds that ended by `time` and heard the beacon,
    /// oldest first, with their second numbers. Seconds without a report are skipped, as Core
    /// Location reports no RSSI (0) for them and the calibration ignores those callbacks.
    public func means(completedBy time: Double) -> [SecondMean] {
        guard time >= 0 else { return [] }  // also NaN
        let complete = time >= Double(seconds.count) ? seconds.count : Int(time.rounded(.down))
        var out: [SecondMean] = []
        out.reserveCapacity(complete)
        for k in 0..<complete {
            guard let mean = seconds[k].mean else { continue }
            out.append(
                SecondMean(second: k, mean: mean, count: seconds[k].count, sumOfSquares: seconds[k].sumOfSquares))
        }
        return out
    }
}

/// One second's `CLBeacon.rssi`, with what is needed for the variance inside the second.
public struct SecondMean: Sendable, Equatable {
    public var second: Int
    public var mean: Double
    public var count = 1
    /// Σ (x − mean)² over the second's samples.
    public var sumOfSquares = 0.0
}

/// A run of seconds whose 1 Hz mean was far from the rest (a person passing, a door), left out
/// of the estimate.
public struct CalibrationTransient: Sendable, Equatable {
    /// First second (source time) and number of seconds.
    public var start: Int
    public var seconds: Int
    /// Mean of those seconds minus the estimate, dB (negative: weaker).
    public var shift: Double
}

/// The level of the first half of the run against the second half.
public struct CalibrationDrift: Sendable, Equatable {
    /// Second half minus first half, dB.
    public var difference: Double
    /// `difference` in units of its own standard error (allowing for correlation over seconds).
    public var z: Double
    /// Significant (|z| > `PhoneCalibrationEstimator.driftZ`) and at least the precision asked
    /// for: the estimate depends on when the run stopped, so it is not written without --force.
    public var isLarge: Bool
}

/// Apple's quantity with an honest interval; see `PhoneCalibrationEstimator`.
public struct PhoneCalibrationEstimate: Sendable, Equatable {
    /// Mean of the 1 Hz means, dBm: Apple's calibration value.
    public var value: Double
    /// Half-width of the 95 % confidence interval of the long-run 1 Hz mean, dB.
    public var halfWidth95: Double
    /// Degrees of freedom behind `halfWidth95` (after allowing for correlation).
    public var degreesOfFreedom: Double
    /// Batch length in seconds of the batch-means fallback (at most one report per second); 1 otherwise.
    public var batchSeconds: Int
    /// Seconds averaged (heard, complete, not transient).
    public var seconds: Int
    /// Standard deviation of the 1 Hz means, dB.
    public var secondSpread: Double
    /// Standard deviation of the reports around their own second's mean, dB: the fast fading
    /// (Rayleigh fading alone gives 5.6 dB), whatever the level does over seconds.
    public var withinSecondSpread: Double
    public var transients: [CalibrationTransient]
    /// nil before 10 seconds.
    public var drift: CalibrationDrift?
    /// The 1 Hz means varied more than the spread inside each second explains (shadowing, a
    /// moving receiver): the interval allows for correlation over seconds.
    public var slowVariation: Bool
    /// A transient reaches into the last `PhoneCalibrationEstimator.settleSeconds` seconds: it may
    /// be a level that moved for good, so the run does not stop yet.
    public var transientOngoing: Bool

    public var interval95: ClosedRange<Double> { (value - halfWidth95)...(value + halfWidth95) }

    /// Relative standard error of the half-width itself (≈ 1/√(2·df)).
    public var halfWidthRelativeError: Double {
        degreesOfFreedom > 0 ? (0.5 / degreesOfFreedom).squareRoot() : .infinity
    }
}

/// Estimates the long-run mean of the 1 Hz mean RSSI and its 95 % interval from a short run.
///
/// Value: the mean of the 1 Hz means, exactly Apple's procedure — deep fades, skewed
/// Rayleigh/Rician fading and channel offsets are part of what a phone averages, so they are
/// averaged, not rejected. The one exception is a *transient*: a run of seconds whose 1 Hz mean
/// lies more than `transientSpread` robust standard deviations (and at least `transientFloor`
/// dB) from the median of the 1 Hz means, such as a person walking between beacon and receiver.
/// A 3 s dip weighs 3/600 in a 10-minute average but 3/15 in a 15 s run, so it is left out
/// (and reported), together with the neighbouring seconds that dip the same way by more than
/// half as much (a dip that starts mid-second).
///
/// Interval: the 1 Hz means are not independent when the level wanders over seconds (body
/// shadowing), so their plain standard error can be too small. The spread of the samples inside
/// each second (pooled, many degrees of freedom) predicts how much independent 1 Hz means would
/// vary; 1, 2, 3 and 5 s block means that vary more than predicted (F test, 10 % each) reveal
/// slow variation, and once seen in a run it is allowed for until the run ends (`assumeSlow`:
/// the collector passes it on, as a quiet stretch does not end the shadowing). Without it the
/// variance of a 1 Hz mean is the larger of the prediction and the observed spread; with it,
/// white noise plus an AR(1) whose lag-1 correlation is at least e^(−1/3) (a 3 s correlation
/// time, `minimumCorrelationTime`), with Satterthwaite degrees of freedom for the Student-t
/// quantile. With at most one report per second, batch means of the 1 Hz series instead.
/// docs/CALIBRATION.md argues the choice and BENCHMARKS.md shows the coverage.
public struct PhoneCalibrationEstimator: Sendable {
    public static let methodName = "apple-1hz-mean"
    /// A transient is this many robust standard deviations of the 1 Hz means away…
    public var transientSpread = 4.0
    /// …and at least this many dB.
    public var transientFloor = 3.0
    /// Standard-normal quantile of the slow-variation test at each block length (1.28: 10 %).
    /// Deliberately eager: missing slow variation writes a wrong value, a false alarm only
    /// allows for a correlation that is not there (a longer run); docs/CALIBRATION.md.
    public var detectionZ = 1.281_552
    /// Seconds back at the usual level after a transient before the run may stop.
    public static let settleSeconds = 2
    /// |z| of the first-half/second-half difference above which the level moved.
    public static let driftZ = 3.0

    public init() {}

    /// nil for no complete second. `precision`: a drift smaller than this is not large.
    ///
    /// `assumeSlow`: an earlier estimate of the same run saw slow variation (`slowVariation`); a
    /// quiet stretch does not make it go away, so it is allowed for whenever the spread of the
    /// 1 Hz means exceeds the within-second prediction at all.
    public func estimate(_ series: [SecondMean], precision: Double = 1, assumeSlow: Bool = false)
        -> PhoneCalibrationEstimate?
    {
        guard !series.isEmpty else { return nil }
        let transients = findTransients(series)
        var excluded = Set<Int>()
        for t in transients { excluded.formUnion(t.start..<(t.start + t.seconds)) }
        let kept = series.filter { !excluded.contains($0.second) }
        let y = kept.map(\.mean)
        let n = y.count
        let value = y.reduce(0, +) / Double(n)
        let within = Self.withinSecondVariance(kept)
        let lr = Self.longRunVariance(
            y, counts: kept.map(\.count), within: within, assumeSlow: assumeSlow, detectionZ: detectionZ)
        let half =
            n > 1
            ? studentT975(fractionalDegreesOfFreedom: lr.degreesOfFreedom) * (lr.variance / Double(n)).squareRoot()
            : .infinity
        // A transient still going on (or just over) may be a level that moved for good: the run
        // does not stop on it, and the drift test counts its seconds as part of the level.
        let last = series[series.count - 1].second
        let ongoingTransients = transients.filter { $0.start + $0.seconds > last - Self.settleSeconds }
        var over = Set<Int>()
        for t in transients where !ongoingTransients.contains(t) { over.formUnion(t.start..<(t.start + t.seconds)) }
        let level = series.filter { !over.contains($0.second) }
        var drift: CalibrationDrift?
        if level.count >= 10 {
            let z = level.map(\.mean)
            let n1 = z.count / 2
            let first = z[..<n1].reduce(0, +) / Double(n1)
            let second = z[n1...].reduce(0, +) / Double(z.count - n1)
            let residuals = z[..<n1].map { $0 - first } + z[n1...].map { $0 - second }
            let v = Self.longRunVariance(
                residuals, counts: level.map(\.count), within: within, assumeSlow: assumeSlow, detectionZ: detectionZ
            )
            .variance
            let se = (v * (1 / Double(n1) + 1 / Double(z.count - n1))).squareRoot()
            let d = second - first
            let score = se > 0 ? d / se : (d == 0 ? 0 : d < 0 ? -.infinity : .infinity)
            drift = CalibrationDrift(
                difference: d, z: score, isLarge: abs(score) > Self.driftZ && abs(d) >= precision)
        }
        var spread = 0.0
        if n > 1 { spread = (y.map { ($0 - value) * ($0 - value) }.reduce(0, +) / Double(n - 1)).squareRoot() }
        let shifted = transients.map {
            CalibrationTransient(start: $0.start, seconds: $0.seconds, shift: $0.shift - value)
        }
        let ongoing = !ongoingTransients.isEmpty
        return PhoneCalibrationEstimate(
            value: value, halfWidth95: half, degreesOfFreedom: lr.degreesOfFreedom, batchSeconds: lr.batch,
            seconds: n, secondSpread: spread, withinSecondSpread: within.variance.squareRoot(), transients: shifted,
            drift: drift, slowVariation: lr.slow,
            transientOngoing: ongoing)
    }

    /// Pooled variance of the samples around their own second's mean, and its degrees of freedom.
    static func withinSecondVariance(_ series: [SecondMean]) -> (variance: Double, degreesOfFreedom: Int) {
        var ss = 0.0
        var df = 0
        for s in series where s.count > 1 {
            ss += s.sumOfSquares
            df += s.count - 1
        }
        return (df > 0 ? ss / Double(df) : 0, df)
    }

    /// Shortest correlation time assumed for variation between seconds, s: 10–30 s of data
    /// cannot measure a correlation of a few seconds, so slow variation is taken to last at
    /// least this long (body shadowing of a hand-held receiver), longer if the data say so.
    public static let minimumCorrelationTime = 3.0
    /// e^(−1/3): the lag-1 s correlation of an AR(1) with a 3 s correlation time.
    static let minimumLagOneCorrelation = 0.716_531_310_573_789_3

    struct LongRunVariance {
        /// Per-second long-run variance of the 1 Hz means, dB².
        var variance: Double
        var degreesOfFreedom: Double
        var batch: Int
        /// The 1 Hz means vary more than the spread inside the seconds explains.
        var slow: Bool
    }

    /// Long-run variance (per second) of a series of 1 Hz means: see the type's documentation.
    static func longRunVariance(
        _ y: [Double], counts: [Int], within: (variance: Double, degreesOfFreedom: Int), assumeSlow: Bool = false,
        detectionZ: Double = 1.281_552
    ) -> LongRunVariance {
        let n = y.count
        guard n > 1 else { return LongRunVariance(variance: .infinity, degreesOfFreedom: 0, batch: 1, slow: false) }
        // One report per second (or fewer): nothing to compare with inside the seconds.
        guard within.degreesOfFreedom >= 10 else { return batchMeans(y) }
        let mean = y.reduce(0, +) / Double(n)
        let between = variance(y)
        // What independent samples would give: the within-second variance over each second's count.
        let white = within.variance * counts.map { 1 / Double($0) }.reduce(0, +) / Double(n)
        // Slow variation (shadowing) hides under fast fading in 1 s means but not in longer
        // blocks, where the fast part averages out and the slow part does not: compare the spread
        // of 1, 2, 3 and 5 s block means with what the within-second spread predicts (F test,
        // `detectionZ` each; the within-second variance has many degrees of freedom, so
        // between/white ~ χ²(blocks−1)/(blocks−1) for independent seconds).
        var slowSeen = 0.0
        var detected = false
        for b in [1, 2, 3, 5] {
            let blocks = n / b
            guard blocks >= 4 else { break }
            // Blocks from the start of the run, so the partition does not shift every second; each
            // second counts once, whatever its report count, as in Apple's average. The variance of
            // a mean of b second-means of n_k samples each is σ²·Σ(1/n_k)/b².
            let spread = variance(blockMeans(y, length: b, blocks: blocks, start: 0))
            let inverse =
                blockMeans(counts.map { 1 / Double($0) }, length: b, blocks: blocks, start: 0)
                .reduce(0, +) / Double(b)
            let expected = within.variance * inverse / Double(blocks)
            if spread > expected * chiSquareQuantile(degreesOfFreedom: blocks - 1, z: detectionZ) / Double(blocks - 1) {
                detected = true
            }
            slowSeen = max(slowSeen, spread - expected)
        }
        if !detected && !(assumeSlow && max(slowSeen, between - white) > 0) {
            // Independent seconds: the within-second prediction is the better estimate (many
            // degrees of freedom); the spread of the 1 Hz means when larger (a test that passes
            // only when that spread is small would otherwise bias the variance low).
            if white >= between {
                return LongRunVariance(
                    variance: white, degreesOfFreedom: Double(within.degreesOfFreedom), batch: 1, slow: false)
            }
            return LongRunVariance(variance: between, degreesOfFreedom: Double(n - 1), batch: 1, slow: false)
        }
        let slow = max(slowSeen, between - white)
        var lagged = 0.0
        for k in 1..<n { lagged += (y[k] - mean) * (y[k - 1] - mean) }
        // The correlation of the excess is measured only from 30 seconds on (before, a lag-1
        // estimate from a dozen values divided by a small excess is noise), only when the lag-1
        // autocovariance stands out of its own noise (≈ variance/√n for independent seconds,
        // one-sided 5 %: divided by a small excess, noise reads as ρ 0.9 and a false alarm then
        // holds a white run for minutes), and at most 0.9 (a 10 s correlation time).
        var rho = minimumLagOneCorrelation
        let lagOne = lagged / Double(n - 1)
        if n >= 30 && lagOne > 1.645 * between / Double(n).squareRoot() {
            let measured = lagOne / slow
            rho = min(0.9, max(rho, measured + (1 + 3 * measured) / Double(n)))
        }
        let factor = (1 + rho) / (1 - rho)
        let slowPart = slow * factor
        // Satterthwaite: the slow part has about n(1−ρ)/(1+ρ) independent values (at least 2).
        let slowDF = max(2, Double(n) / factor - 1)
        let whiteDF = Double(within.degreesOfFreedom)
        let variance = white + slowPart
        let df = variance * variance / (white * white / whiteDF + slowPart * slowPart / slowDF)
        return LongRunVariance(variance: variance, degreesOfFreedom: df, batch: 1, slow: true)
    }

    /// Means of `blocks` consecutive blocks of `length` values of `y`, from index `start`.
    static func blockMeans(_ y: [Double], length: Int, blocks: Int, start: Int) -> [Double] {
        (0..<blocks).map { k in
            y[(start + k * length)..<(start + k * length + length)].reduce(0, +) / Double(length)
        }
    }

    /// Sample variance (n − 1 denominator) of at least two values.
    static func variance(_ x: [Double]) -> Double {
        let m = x.reduce(0, +) / Double(x.count)
        return x.map { ($0 - m) * ($0 - m) }.reduce(0, +) / Double(x.count - 1)
    }

    /// Non-overlapping batch means, for series without several reports per second.
    static func batchMeans(_ y: [Double]) -> LongRunVariance {
        let n = y.count
        var fallback: LongRunVariance?
        for b in [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128] {
            let batches = n / b
            if b > 1 && batches < 10 { break }
            // The most recent batches; the oldest remainder is left out of the variance only.
            let means = blockMeans(y, length: b, blocks: batches, start: n - batches * b)
            let m = means.reduce(0, +) / Double(batches)
            let ss = means.map { ($0 - m) * ($0 - m) }.reduce(0, +)
            let variance = Double(b) * ss / Double(batches - 1)
            var lagged = 0.0
            for k in 1..<batches { lagged += (means[k] - m) * (means[k - 1] - m) }
            let r = ss > 0 ? lagged / ss : 0
            // E[r₁] ≈ ρ − (1 + 3ρ)/n for an AR(1): undo the bias.
            let corrected = r + (1 + 3 * r) / Double(batches)
            if corrected <= 1.645 / Double(batches).squareRoot() {
                return LongRunVariance(variance: variance, degreesOfFreedom: Double(batches - 1), batch: b, slow: b > 1)
            }
            let rho = min(0.9, max(0, corrected))
            let factor = (1 + rho) / (1 - rho)
            fallback = LongRunVariance(
                variance: variance * factor, degreesOfFreedom: max(1, Double(batches - 1) / factor), batch: b,
                slow: true)
        }
        return fallback ?? LongRunVariance(variance: .infinity, degreesOfFreedom: 0, batch: 1, slow: false)
    }

    /// Runs of transient seconds, `shift` = their mean (absolute dBm until `estimate` subtracts
    /// the value).
    func findTransients(_ series: [SecondMean]) -> [CalibrationTransient] {
        guard series.count >= 8 else { return [] }
        let y = series.map(\.mean)
        let centre = median(y.sorted())
        // A second with few reports (a busy or starved receiver) has a noisier mean: deviations
        // are compared in units of a typical second's, √(n_k / median n).
        let typical = median(series.map { Double($0.count) }.sorted())
        let weight = series.map { (Double($0.count) / typical).squareRoot() }
        let scale = 1.4826 * median(y.indices.map { abs(y[$0] - centre) * weight[$0] }.sorted())
        func beyond(_ i: Int, _ spread: Double, _ floor: Double) -> Bool {
            abs(y[i] - centre) >= floor && abs(y[i] - centre) * weight[i] >= spread * scale
        }
        var flagged = y.indices.map { beyond($0, transientSpread, transientFloor) }
        guard flagged.contains(true) else { return [] }
        // A dip that starts or ends mid-second: grow each run into neighbours on the same side.
        var changed = true
        while changed {
            changed = false
            for i in y.indices where !flagged[i] {
                for j in [i - 1, i + 1] where y.indices.contains(j) && flagged[j] {
                    let sameSide = (y[i] - centre).sign == (y[j] - centre).sign
                    if sameSide && beyond(i, transientSpread / 2, transientFloor / 2)
                        && series[j].second - series[i].second == j - i
                    {
                        flagged[i] = true
                        changed = true
                    }
                }
            }
        }
        // Leave at least half of the run: a level that moved for good is drift, not a transient.
        guard flagged.filter({ $0 }).count * 2 < y.count else { return [] }
        var out: [CalibrationTransient] = []
        var i = 0
        while i < y.count {
            guard flagged[i] else {
                i += 1
                continue
            }
            var j = i
            while j + 1 < y.count && flagged[j + 1] && series[j + 1].second == series[j].second + 1 { j += 1 }
            let mean = y[i...j].reduce(0, +) / Double(j - i + 1)
            out.append(CalibrationTransient(start: series[i].second, seconds: j - i + 1, shift: mean))
            i = j + 1
        }
        return out
    }
}

/// The 97.5 % quantile of χ² with `df` degrees of freedom (Wilson–Hilferty; within 2 % for
/// df ≥ 3, a little high below, which only makes the test stricter).
func chiSquareQuantile(degreesOfFreedom df: Int, z: Double) -> Double {
    let v = Double(df)
    let c = 2 / (9 * v)
    let x = 1 - c + z * c.squareRoot()
    return v * x * x * x
}

/// `studentT975(degreesOfFreedom:)` for fractional degrees of freedom (linear between whole ones;
/// the table is exact at whole ones).
func studentT975(fractionalDegreesOfFreedom df: Double) -> Double {
    guard df >= 1 else { return .infinity }
    let lo = Int(df.rounded(.down))
    let a = studentT975(degreesOfFreedom: lo)
    let b = studentT975(degreesOfFreedom: lo + 1)
    return a + (b - a) * (df - Double(lo))
}

/// Apple's calibration procedure on a whole list of samples: the mean of the 1 Hz means of the
/// complete seconds (truth for the simulations).
public func appleMeasuredPower(_ samples: [(time: Double, rssi: Int)]) -> Double? {
    var s = SecondMeans()
    for x in samples { s.add(x.rssi, at: x.time) }
    let last = samples.map(\.time).max() ?? 0
    let means = s.means(completedBy: last.rounded(.down))
    guard !means.isEmpty else { return nil }
    return means.map(\.mean).reduce(0, +) / Double(means.count)
}
