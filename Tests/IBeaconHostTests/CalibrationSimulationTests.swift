import Dispatch
import IBeaconCore
import IBeaconTestSupport
import Testing

@testable import IBeaconHost

/// The simulation of BENCHMARKS.md ("Calibration accuracy", `make calsim` runs 200 seeds per
/// model) with 40 seeds, so `make unit` checks the goals of issue 14 against every model: the
/// truth is Apple's procedure on 10-minute lists of the same model.
///
/// These bounds fail for the previous estimator (`--method robust`, the un-faded centre): its
/// pooled coverage of Apple's value is about 60 % and it misses the 1 dB goal under deep fades,
/// Rician K = 3 and a person walking by.
@Suite(.serialized) struct CalibrationSimulationTests {
    static let seeds: Range<UInt64> = 1..<41

    static func summaries(method: CalibrationMethod) -> [CalibrationSimulation.Summary] {
        var settings = CalibrationSettings()
        settings.method = method
        let simulation = CalibrationSimulation(settings: settings)
        return RSSIModel.all.map { simulation.summarise($0, seeds: seeds, truthLists: 5) }
    }

    @Test func accuracyCoverageAndTimeMeetTheGoals() async throws {
        // CPU-bound for about 2 s: on a dispatch thread, not in Swift Concurrency's shared pool,
        // where it would hold up the other suites' tasks when `swift test` runs in parallel.
        let all = await withCheckedContinuation { done in
            DispatchQueue.global().async { done.resume(returning: Self.summaries(method: .apple)) }
        }
        var covered = 0
        var runs = 0
        for s in all {
            #expect(s.results == Self.seeds.count, "\(s.model): runs without a result")
            covered += s.covered
            runs += s.results
            // Never under Apple's 10 s.
            #expect(s.minimumSeconds >= 10, "\(s.model) stopped after \(s.minimumSeconds) s")
            if s.model.hasPrefix("shadow") {
                // Known miss (BENCHMARKS.md, docs/CALIBRATION.md); see the test below.
                #expect(s.within1dB >= 0.55, "\(s.model): \(s.within1dB)")
                #expect(s.coverage >= 0.8, "\(s.model): coverage \(s.coverage)")
                continue
            }
            // Written value within 1 dB of the truth in ≥ 95 % of the runs (≥ 90 % at 40 seeds).
            #expect(s.within1dB >= 0.90, "\(s.model): within 1 dB in \(s.within1dB)")
            #expect(abs(s.bias) <= 0.3, "\(s.model): bias \(s.bias) dB")
        }
        // The 95 % interval covers the truth in 93–97 % of all runs (the seeds are fixed, so this
        // moves only when the code does).
        let coverage = Double(covered) / Double(runs)
        #expect((0.93...0.97).contains(coverage), "pooled coverage \(coverage)")
        // Median time ≤ 15 s at 100 ms advertising for σ ≤ 4 dB.
        for name in ["gauss-2", "gauss-4"] {
            let s = try #require(all.first { $0.model == name })
            #expect(s.medianSeconds <= 15, "\(name): median \(s.medianSeconds) s")
        }
    }

    /// Slow variation (shadowing with a 3 s correlation time under Rayleigh fading) on 100 more
    /// seeds. 30 s hold about 5 independent looks at it and in some runs it looks like
    /// independent seconds, so an honest ±1 dB needs about 100 s (docs/CALIBRATION.md): most
    /// runs must end without the precision, the interval must allow for the correlation, and
    /// few runs may claim the precision with a value more than 1 dB off. Now: coverage 87 %,
    /// precision claimed in 19 runs, 6 of them more than 1 dB off. These bounds fail for the
    /// estimator that forgot slow variation seen earlier in the run on a quiet stretch and
    /// tested for it at 2.5 % (coverage 82 %, claimed in 32 runs, 13 of them off).
    @Test func slowVariationIsNotForgottenOnAQuietStretch() async throws {
        let model = try #require(RSSIModel.named("shadow-3s+rayleigh"))
        let s = await withCheckedContinuation { done in
            DispatchQueue.global().async {
                done.resume(returning: CalibrationSimulation().summarise(model, seeds: 41..<141, truthLists: 5))
            }
        }
        #expect(s.results == 100)
        #expect(s.coverage >= 0.85, "coverage \(s.coverage)")
        #expect(s.writtenOff <= 9, "\(s.writtenOff) of 100 runs written more than 1 dB off")
        #expect(s.written <= 0.25, "precision claimed in \(s.written) of the runs")
    }
}
