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
        // CPU-bound for about 2 s: on a thread of its own, not in Swift Concurrency's shared pool
        // (which `DispatchQueue.global()` shares on Linux), where it would hold up the other
        // suites' tasks when `swift test` runs in parallel.
        let all = await onOwnThread { Self.summaries(method: .apple) }
        var covered = 0
        var runs = 0
        for s in all {
            #expect(s.results == Self.seeds.count, "\(s.model): runs without a result")
            covered += s.covered
            runs += s.results
            // Never under Apple's 10 s.
            #expect(s.minimumSeconds >= 10, "\(s.model) stopped after \(s.minimumSeconds) s")
            // Written value within 1 dB of the truth in ≥ 95 % of the runs (≥ 90 % at 40 seeds),
            // all runs, and at most 2 of 40 written without --force more than 1 dB off (shadowing
            // writes few runs: 9 of 40 here, 1 of them off).
            #expect(s.within1dB >= 0.90, "\(s.model): within 1 dB in \(s.within1dB)")
            #expect(s.writtenOff <= 2, "\(s.model): \(s.writtenOff) runs written more than 1 dB off")
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
    /// seeds. An honest ±1 dB needs about 100 s of it (docs/CALIBRATION.md, "Slow variation"): a
    /// run must not stop on a quiet stretch in its first minute (the reports spread 5.6 dB: the
    /// noisy minimum), and a run that stops on slow variation must clear the precision by a
    /// margin (the slow assurance). Now: within 1 dB in 97 of 100 runs, 1 run written more
    /// than 1 dB off, coverage 97 %. Without the two rules (3 minutes still): 90 %, 9 runs
    /// written off, coverage 85 %.
    @Test func slowVariationIsGivenTheTimeItNeeds() async throws {
        let model = try #require(RSSIModel.named("shadow-3s+rayleigh"))
        let s = await onOwnThread { CalibrationSimulation().summarise(model, seeds: 41..<141, truthLists: 5) }
        #expect(s.results == 100)
        #expect(s.within1dB >= 0.95, "within 1 dB in \(s.within1dB)")
        #expect(s.coverage >= 0.9, "coverage \(s.coverage)")
        #expect(s.writtenOff <= 2, "\(s.writtenOff) of 100 runs written more than 1 dB off")
    }
}
