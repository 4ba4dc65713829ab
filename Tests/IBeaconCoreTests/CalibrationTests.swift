import IBeaconTestSupport
import Testing

@testable import IBeaconCore

/// A simulated receiver 1 m from the beacon.
struct RSSIScenario: Sendable, CustomStringConvertible {
    var name: String
    /// Centre of the un-faded distribution, dBm (not a whole number on purpose).
    var centre = -61.3
    var sigma = 4.0
    /// Per-advertising-channel offsets; each packet comes on a random channel.
    var channelOffsets: [Double] = [0]
    var fadeFraction = 0.0
    var fadeDepth = 15.0

    /// What the estimate should find: the centre averaged over channels.
    var truth: Double { centre + channelOffsets.reduce(0, +) / Double(channelOffsets.count) }

    func sample(_ rng: inout SplitMix64) -> Int {
        var x = centre + channelOffsets[Int(rng.next() % UInt64(channelOffsets.count))] + sigma * rng.gaussian()
        if rng.unit() <= fadeFraction { x -= fadeDepth }
        return Int(x.rounded())
    }

    var description: String { name }

    static let constant = RSSIScenario(name: "constant", centre: -61, sigma: 0)
    static let gaussian = RSSIScenario(name: "gaussian σ=4")
    static let fades = RSSIScenario(name: "σ=4, 15 % fades 15 dB down", fadeFraction: 0.15)
    static let threeChannels = RSSIScenario(name: "σ=4, channels -2/0/+2", channelOffsets: [-2, 0, 2])
    static let twoChannels = RSSIScenario(name: "σ=4, channels -2/+2", channelOffsets: [-2, 2])
}

struct SequentialRun {
    var samples: Int
    var error: Double
    var halfWidth: Double
}

/// Feeds samples one at a time, as `ibeacon calibrate` does, until the stopping rule says stop.
func calibrate(_ scenario: RSSIScenario, rng: inout SplitMix64, limit: Int = 600) -> SequentialRun {
    var rule = StoppingRule(precision: 1.0, minimumSamples: 30)
    let estimator = MeasuredPowerEstimator()
    var samples: [Int] = []
    while true {
        samples.append(scenario.sample(&rng))
        guard let e = estimator.estimate(samples) else { continue }
        if rule.update(with: e) != .keepSampling || samples.count >= limit {
            return SequentialRun(samples: e.count, error: e.value - scenario.truth, halfWidth: e.halfWidth95)
        }
    }
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let s = values.sorted()
    return s[min(s.count - 1, Int((p * Double(s.count)).rounded(.up)) - 1)]
}

@Suite(.ownThread) struct CalibrationTests {
    // Observed with these seeds, 200 sequential runs each (n = samples when the rule stopped,
    // StoppingRule(precision: 1.0, minimumSamples: 30) with its defaults: 10 confirmations,
    // assurance 2):
    //   constant                     n 39 every run, error 0
    //   gaussian σ=4                 n mean 106, p95 141, max 172; |err| mean 0.33, p95 0.77; coverage 0.99
    //   σ=4, 15 % fades 15 dB down   n mean 135, p95 186, max 204; |err| mean 0.40, p95 0.88; coverage 0.95
    //   σ=4, channels -2/0/+2        n mean 120, p95 152, max 203; |err| mean 0.40, p95 0.93; coverage 0.95
    //   σ=4, channels -2/+2          n mean 129, p95 167, max 194; |err| mean 0.36, p95 0.79; coverage 0.98
    // With the plain first-crossing rule (confirmations 1, assurance 0) the σ=4 runs stopped
    // at n mean 72 but |err| p95 was 1.1 dB (coverage 0.88). For contrast, the plain mean of the
    // fades scenario is 2.2 dB low and a 10 %-trimmed mean 1.5 dB low
    // (naiveEstimatorsFailTheFadeScenario). At σ=4 the rule stops by 150 samples in 95 % of
    // runs; the slowest of 200 took 172.
    static let scenarios: [(RSSIScenario, UInt64)] = [
        (.constant, 1), (.gaussian, 2), (.fades, 3), (.threeChannels, 4), (.twoChannels, 5),
    ]

    @Test(arguments: scenarios)
    func stoppingRuleGivesOneDecibel(_ c: (RSSIScenario, UInt64)) {
        var rng = SplitMix64(seed: c.1)
        let runs = (0..<200).map { _ in calibrate(c.0, rng: &rng) }
        let errors = runs.map { abs($0.error) }
        let meanError = errors.reduce(0, +) / Double(errors.count)
        let p95 = percentile(errors, 0.95)
        let n = runs.map(\.samples)
        let coverage = Double(runs.filter { abs($0.error) <= $0.halfWidth }.count) / Double(runs.count)
        let nSorted = n.sorted()
        print(
            "\(c.0): n mean \(n.reduce(0, +) / n.count), p95 \(nSorted[189]), max \(n.max() ?? 0); |err| mean \(JSONValue.decimal(meanError, fractionDigits: 2)), "
                + "p95 \(JSONValue.decimal(p95, fractionDigits: 2)); coverage \(JSONValue.decimal(coverage, fractionDigits: 2))"
        )
        #expect(meanError <= 1.0)
        #expect(p95 <= 1.0)
        if c.0.name == RSSIScenario.gaussian.name {
            // 15 s at 10 reports/s, in 95 % of runs (see the numbers above for the maximum).
            #expect(nSorted[189] <= 150)
            #expect(n.reduce(0, +) / n.count <= 120)
        }
        if c.0.sigma == 0 {
            #expect(runs.allSatisfy { $0.samples == 39 && $0.error == 0 })
        }
    }

    /// At a fixed sample count the 95 % interval must cover the truth about 95 % of the time.
    /// Observed (300 runs each): σ=4 n=60 0.917, fades n=100 0.933, three channels n=80 0.933;
    /// mean spread 3.94, 4.09, 4.28 dB.
    @Test(arguments: [(RSSIScenario.gaussian, 60, UInt64(11)), (.fades, 100, 12), (.threeChannels, 80, 13)])
    func intervalCoverage(_ c: (RSSIScenario, Int, UInt64)) {
        var rng = SplitMix64(seed: c.2)
        let estimator = MeasuredPowerEstimator()
        var covered = 0
        var spreads: [Double] = []
        for _ in 0..<300 {
            let samples = (0..<c.1).map { _ in c.0.sample(&rng) }
            let e = estimator.estimate(samples)!
            if abs(e.value - c.0.truth) <= e.halfWidth95 { covered += 1 }
            spreads.append(e.spread)
        }
        let coverage = Double(covered) / 300
        print("\(c.0) n=\(c.1): coverage \(coverage), mean spread \(spreads.reduce(0, +) / 300)")
        #expect(coverage >= 0.90 && coverage <= 0.99)
        // The spread estimates σ of the un-faded distribution (4 dB, plus the channel spread).
        let meanSpread = spreads.reduce(0, +) / 300
        #expect(
            abs(meanSpread - (c.0.sigma * c.0.sigma + 8.0 / 3 * (c.0.channelOffsets.count == 3 ? 1 : 0)).squareRoot())
                < 0.4)
    }

    /// The scenario is hard: naive estimators miss by more than 1 dB (so the test above can fail).
    @Test func naiveEstimatorsFailTheFadeScenario() {
        var rng = SplitMix64(seed: 21)
        var meanErr = 0.0
        var trimmedErr = 0.0
        for _ in 0..<200 {
            let s = (0..<100).map { _ in RSSIScenario.fades.sample(&rng) }.sorted()
            meanErr += Double(s.reduce(0, +)) / 100 - RSSIScenario.fades.truth
            let t = s[10..<90]  // AirLocate: drop 10 % at each end
            trimmedErr += Double(t.reduce(0, +)) / 80 - RSSIScenario.fades.truth
        }
        #expect(meanErr / 200 < -1.5)
        #expect(trimmedErr / 200 < -1.0)
    }

    @Test func smallInputs() throws {
        let e = MeasuredPowerEstimator()
        #expect(e.estimate([]) == nil)
        let one = try #require(e.estimate([-60]))
        #expect(one.value == -60 && one.halfWidth95 == .infinity && one.count == 1)
        let two = try #require(e.estimate([-60, -62]))
        #expect(abs(two.value + 61) < 1e-9 && two.halfWidth95 > 5)
        // Mostly one value with a few neighbours: the window does not collapse.
        let tight = try #require(e.estimate([Int](repeating: -59, count: 40) + [-58, -60, -58, -60]))
        #expect(abs(tight.value + 59) < 1e-9 && tight.halfWidth95 > 0 && tight.halfWidth95 < 0.5)
        #expect(tight.method == "biweight-c3-upper-scale")
        // A deep fade cluster is ignored; a clean strong cluster is not.
        let faded = try #require(
            e.estimate([Int](repeating: -59, count: 30) + [-58, -60, -60, -58] + [Int](repeating: -80, count: 8)))
        #expect(abs(faded.value + 59) < 0.2)
    }

    @Test func stoppingRuleNeedsConfirmation() {
        var rule = StoppingRule(precision: 1.0, minimumSamples: 30, confirmations: 3, maximumSamples: 40)
        func est(_ n: Int, _ h: Double) -> MeasuredPowerEstimate {
            MeasuredPowerEstimate(value: -59, halfWidth95: h, spread: 4, count: n, method: "m")
        }
        #expect(rule.update(with: est(29, 0.1)) == .keepSampling)  // below the minimum
        #expect(rule.update(with: est(30, 0.9)) == .keepSampling)
        #expect(rule.update(with: est(31, 1.1)) == .keepSampling)  // streak broken
        #expect(rule.update(with: est(32, 1.0)) == .keepSampling)
        #expect(rule.update(with: est(33, 0.8)) == .keepSampling)
        #expect(rule.update(with: est(34, 0.7)) == .precisionReached)
        var capped = StoppingRule(precision: 1.0, minimumSamples: 30, maximumSamples: 40)
        #expect(capped.update(with: est(40, 3)) == .sampleLimitReached)
        #expect(StoppingRule().expectedSamples(spread: 4) == 90)
    }

    @Test func studentQuantiles() {
        // Reference values: t(0.975; 10) 2.2281, 20 → 2.0860, 30 → 2.0423, 60 → 2.0003, 120 → 1.9799.
        for (df, t) in [(10, 2.2281), (11, 2.2010), (20, 2.0860), (30, 2.0423), (60, 2.0003), (120, 1.9799)] {
            #expect(abs(studentT975(degreesOfFreedom: df) - t) < 2e-3, "df \(df): \(studentT975(degreesOfFreedom: df))")
        }
    }

    @Test func histogram() {
        var h = Histogram([-59, -59, -60, -62, -59])
        h.add(-60)
        #expect(h.total == 6)
        #expect(h.bins.map(\.dBm) == [-59, -60, -61, -62])
        #expect(h.bins.map(\.count) == [3, 2, 0, 1])
        let text = h.rendered(width: 6, mark: -59.4)
        #expect(
            text == """
                -59 dBm |###### 3  <- estimate
                -60 dBm |####   2
                -61 dBm |       0
                -62 dBm |##     1

                """)
        #expect(Histogram().rendered() == "(no samples)\n")
    }
}
