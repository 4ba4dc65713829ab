// Calibration simulation (`make calsim`): runs `ibeacon calibrate`'s collector on the RSSI models
// of issue 14 with many seeds and prints the accuracy table of BENCHMARKS.md. `--dump` writes one
// model's reports as a list the Bumble harness replays (`--rssi list:FILE`), for the end-to-end runs.
import IBeaconCore
import IBeaconHost
import IBeaconTestSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

let usage = """
    usage: ibeacon-calsim [--seeds N] [--models a,b] [--method apple|robust] [--duration S] [--precision DB]
                          [--assurance K] [--slow-assurance K] [--noisy-minimum S] [--noisy-spread DB] [--confirmations N] [--detect-z Z]
           ibeacon-calsim --dump MODEL --seed N [--duration S]     (one "time rssi" line per report)
           ibeacon-calsim --truth MODEL                            (Apple's procedure, 10-minute lists)
           ibeacon-calsim --trace MODEL --seed N [--duration S]    (the estimate second by second)
           ibeacon-calsim --detection Z [--seeds N] [--models a,b] (how often the slow-variation test fires)
           ibeacon-calsim --list                                   (the model names)
    models: \(RSSIModel.all.map(\.name).joined(separator: ", "))

    """

func fail(_ message: String, _ code: Int32 = 64) -> Never {
    let bytes = Array((message + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    exit(code)
}

if CommandLine.arguments.dropFirst().first == "--list" {
    print(RSSIModel.all.map(\.name).joined(separator: "\n"))
    exit(0)
}
func parse() -> [String: String] {
    var options: [String: String] = [:]
    var args = CommandLine.arguments.dropFirst()
    while let a = args.popFirst() {
        guard a.hasPrefix("--"), let v = args.popFirst() else { fail(usage + "bad argument \(a)") }
        options[String(a.dropFirst(2))] = v
    }
    return options
}
let options = parse()
func number(_ key: String, _ fallback: Double) -> Double {
    guard let s = options[key] else { return fallback }
    guard let v = Double(s), v > 0 else { fail("--\(key) \(s) is not a positive number") }
    return v
}
func model(_ name: String) -> RSSIModel {
    guard let m = RSSIModel.named(name) else { fail(usage + "unknown model \(name)") }
    return m
}

if let name = options["dump"] {
    let m = model(name)
    let seed = UInt64(number("seed", 1))
    var out = ""
    for s in m.samples(duration: number("duration", 60), seed: seed) {
        out += "\(s.time.fixed(4)) \(s.rssi)\n"
    }
    print(out, terminator: "")
    exit(0)
}
if let name = options["trace"] {
    // Second by second: what the estimator sees during one run.
    var means = SecondMeans()
    let samples = model(name).samples(duration: number("duration", 30), seed: UInt64(number("seed", 1)))
    var next = 1
    for s in samples {
        while s.time >= Double(next) {
            if let e = PhoneCalibrationEstimator().estimate(means.means(completedBy: Double(next))) {
                let drift = e.drift.map { "\($0.difference.signedFixed(2)) dB z \($0.z.signedFixed(1))" } ?? "–"
                print(
                    "\(String(next).padded(3, left: true)) s  "
                        + "\(e.value.fixed(2)) ± \(e.halfWidth95.fixed(2)) dB  df \(e.degreesOfFreedom.fixed(1))  "
                        + "slow \(e.slowVariation ? "yes" : "no")  1 Hz sd \(e.secondSpread.fixed(2))  "
                        + "transients \(e.transients.count)  drift \(drift)")
            }
            next += 1
        }
        means.add(s.rssi, at: s.time)
    }
    exit(0)
}
if let z = options["detection"] {
    // How often the slow-variation test fires at least once by 13 s and by 29 s of a run (each
    // completed second is one look), per model: docs/CALIBRATION.md, "Slow variation under strong fading".
    var estimator = PhoneCalibrationEstimator()
    guard let v = Double(z), v > 0 else { fail("--detection takes the test's z, e.g. 1.28") }
    estimator.detectionZ = v
    let seedCount = UInt64(number("seeds", 200))
    print("| model | slow variation seen by 13 s | by 29 s |")
    print("|---|---|---|")
    for m in options["models"].map({ $0.split(separator: ",").map { model(String($0)) } }) ?? RSSIModel.all {
        var by13 = 0
        var by29 = 0
        for seed in 1...seedCount {
            let samples = m.samples(duration: 31, seed: seed)
            var means = SecondMeans()
            var seen = false
            var next = 1
            for s in samples {
                let heard = s.time - samples[0].time
                while heard >= Double(next) && next <= 29 {
                    if estimator.estimate(means.means(completedBy: Double(next)))?.slowVariation == true { seen = true }
                    if next == 13 && seen { by13 += 1 }
                    if next == 29 && seen { by29 += 1 }
                    next += 1
                }
                means.add(s.rssi, at: heard)
            }
        }
        let n = Double(seedCount)
        print("| \(m.name) | \((100 * Double(by13) / n).fixed(1)) % | \((100 * Double(by29) / n).fixed(1)) % |")
    }
    exit(0)
}
if let name = options["truth"] {
    let t = model(name).truth()
    print("\(t.value.fixed(3)) \(t.standardError.fixed(3))")
    exit(0)
}

var settings = CalibrationSettings()
settings.maximumDuration = .seconds(number("duration", 180))
settings.precision = number("precision", 1)
if let method = options["method"] {
    guard let m = CalibrationMethod(rawValue: method) else { fail("--method is apple or robust") }
    settings.method = m
}
if let a = options["assurance"], let v = Double(a) { settings.assurance = v }
if let a = options["slow-assurance"], let v = Double(a) { settings.slowAssurance = v }
if let d = options["noisy-minimum"], let v = Double(d) { settings.noisyMinimumDuration = v }
if let d = options["noisy-spread"], let v = Double(d) { settings.noisySpread = v }
if let c = options["confirmations"], let v = Int(c) { settings.confirmations = v }
if let z = options["detect-z"], let v = Double(z) { settings.estimator.detectionZ = v }
let seeds = UInt64(number("seeds", 200))
let models = options["models"].map { $0.split(separator: ",").map { model(String($0)) } } ?? RSSIModel.all

func percent(_ x: Double) -> String { x.isNaN ? "–" : "\((100 * x).fixed(1)) %" }
print(
    "| model | truth (dBm) | within 1 dB | coverage | precision reached | within 1 dB of written | drift refusals | median s | p90 s | min s | bias dB |"
)
print("|---|---|---|---|---|---|---|---|---|---|---|")
var covered = 0
var total = 0
let simulation = CalibrationSimulation(settings: settings)
for m in models {
    let s = simulation.summarise(m, seeds: 1..<(seeds + 1))
    covered += s.covered
    total += s.results
    print(
        "| \(s.model) | \(s.truth.fixed(2)) ± \(s.truthStandardError.fixed(2)) | \(percent(s.within1dB)) | "
            + "\(percent(s.coverage)) | \(percent(s.written)) | \(percent(s.writtenWithin1dB)) | "
            + "\(percent(s.driftRefused)) | \(s.medianSeconds.fixed(1)) | "
            + "\(s.p90Seconds.fixed(1)) | \(s.minimumSeconds.fixed(1)) | "
            + "\(s.bias.signedFixed(2)) |")
}
print("")
print(
    "pooled coverage \(percent(Double(covered) / Double(max(1, total)))) over \(total) runs; method \(settings.method.rawValue), "
        + "precision \(settings.precision) dB, duration \(settings.maximumDuration.seconds) s, \(seeds) seeds per model"
)
