import IBeaconCore
import IBeaconHost

/// Runs `CalibrationCollector` on simulated reports, as `ibeacon calibrate` feeds it: every
/// report with its time, and a tick every 0.5 s (the progress interval).
public struct CalibrationSimulation: Sendable {
    /// Advertising data of the simulated beacon: flags, then Apple's iBeacon (UUID
    /// E2C56DB5-DFFB-48D2-B060-D0F5A71096E0, major 0x0102, minor 0x0304, measured power -59).
    public static let advertisingData = Handmade.iBeaconAdvertisingData()
    public static let beacon = IBeacon.find(inAdvertisingData: advertisingData)!
    public static let address = BDAddress("D0:00:00:00:00:01")!

    public var settings: CalibrationSettings

    public init(settings: CalibrationSettings = CalibrationSettings()) {
        self.settings = settings
    }

    public struct Run: Sendable {
        public var estimate: Double
        public var halfWidth95: Double
        public var seconds: Double
        public var precisionReached: Bool
        public var driftIsLarge: Bool
        public var transients: Int
    }

    /// One calibration over `samples`; nil when it produced no result.
    public func run(_ samples: [(time: Double, rssi: Int)]) -> Run? {
        let target = CalibrationTarget(
            proximityUUID: Self.beacon.proximityUUID, major: Self.beacon.major, minor: Self.beacon.minor)
        var collector = CalibrationCollector(target: target, settings: settings)
        let data = Self.advertisingData
        let maximum = settings.maximumDuration.seconds
        var nextTick = 0.5
        var end = maximum
        do {
            loop: for s in samples {
                while nextTick <= s.time {
                    if try collector.check(at: nextTick) == .done {
                        end = nextTick
                        break loop
                    }
                    nextTick += 0.5
                }
                let sighting = Sighting(
                    address: Self.address, addressType: .random, rssi: Int8(s.rssi), data: data, extended: false)
                if try collector.add(sighting, at: s.time) == .done {
                    end = s.time
                    break loop
                }
            }
            let r = try collector.result(at: min(end, maximum))
            return Run(
                estimate: r.estimate, halfWidth95: r.halfWidth95, seconds: min(end, maximum),
                precisionReached: r.precisionReached, driftIsLarge: r.driftIsLarge,
                transients: r.apple?.transients.count ?? 0)
        } catch {
            return nil
        }
    }

    /// Summary of many seeds of one model.
    public struct Summary: Sendable {
        public var model: String
        public var truth: Double
        public var truthStandardError: Double
        public var runs: Int
        /// Runs with a result.
        public var results: Int
        /// |estimate − truth| ≤ 1 dB, over all results (as written with --force).
        public var within1dB: Double
        /// Among the runs that would be written without --force (precision reached, no drift).
        public var written: Double
        public var writtenWithin1dB: Double
        /// Runs written without --force with a value more than 1 dB from the truth.
        public var writtenOff: Int
        public var coverage: Double
        public var driftRefused: Double
        public var medianSeconds: Double
        public var p90Seconds: Double
        public var minimumSeconds: Double
        public var bias: Double
        public var covered: Int
    }

    public func summarise(_ model: RSSIModel, seeds: Range<UInt64>, truthLists: Int = 20) -> Summary {
        let truth = model.truth(lists: truthLists)
        let duration = settings.maximumDuration.seconds + 1
        var runs: [Run] = []
        for seed in seeds {
            if let r = run(model.samples(duration: duration, seed: seed)) { runs.append(r) }
        }
        let errors = runs.map { $0.estimate - truth.value }
        let n = Double(max(1, runs.count))
        let written = runs.filter { $0.precisionReached && !$0.driftIsLarge }
        let covered = zip(runs, errors).filter { abs($1) <= $0.halfWidth95 }.count
        let times = runs.map(\.seconds).sorted()
        func quantile(_ p: Double) -> Double {
            times.isEmpty ? .nan : times[min(times.count - 1, Int((p * Double(times.count)).rounded(.up)) - 1)]
        }
        return Summary(
            model: model.name, truth: truth.value, truthStandardError: truth.standardError, runs: seeds.count,
            results: runs.count,
            within1dB: Double(errors.filter { abs($0) <= 1 }.count) / n,
            written: Double(written.count) / n,
            writtenWithin1dB: written.isEmpty
                ? .nan : Double(written.filter { abs($0.estimate - truth.value) <= 1 }.count) / Double(written.count),
            writtenOff: written.filter { abs($0.estimate - truth.value) > 1 }.count,
            coverage: Double(covered) / n, driftRefused: Double(runs.filter(\.driftIsLarge).count) / n,
            medianSeconds: quantile(0.5), p90Seconds: quantile(0.9), minimumSeconds: times.first ?? .nan,
            bias: errors.reduce(0, +) / n, covered: covered)
    }
}
