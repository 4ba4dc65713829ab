// Decoding benchmark: HCI event bytes from a btsnoop capture → decoded iBeacon sightings,
// the same path `ibeacon scan` and `ibeacon calibrate` use (HCIEvent.decode, then every report
// of every event, its AD structures, and the iBeacon fields). Run by `make bench`; see
// BENCHMARKS.md for the method.
import IBeaconCore
import IBeaconHost

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Writes `message` to stderr and exits with `code` (sysexits).
func fail(_ message: String, _ code: Int32) -> Never {
    let bytes = Array((message + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    exit(code)
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    fail("usage: ibeacon-bench CAPTURE.btsnoop [REPEAT]", 64)
}
let repeats = arguments.count >= 3 ? Int(arguments[2]) ?? 5 : 5
let data: [UInt8]
do {
    data = try Sys.readFile(arguments[1])
} catch {
    fail("cannot read \(arguments[1])", 66)
}

// Load the event packets first, so the timed loop measures decoding, not file parsing.
var bodies: [[UInt8]] = []
do {
    var reader = try BTSnoopReader(bytes: data)
    while let record = try reader.next() {
        if let packet = record.packet, packet.type == .event, record.direction == .received {
            bodies.append(packet.body)
        }
    }
} catch {
    fail("bad capture: \(error)", 65)
}

var best = Double.infinity
var reports = 0
var beacons = 0
for _ in 0..<repeats {
    reports = 0
    beacons = 0
    let start = ContinuousClock.now
    for body in bodies {
        guard let event = try? HCIEvent.decode(body) else { continue }
        for s in Sighting.all(in: event) {
            reports += 1
            if s.beacon != nil { beacons += 1 }
        }
    }
    let elapsed = start.duration(to: .now)
    let (s, atto) = elapsed.components
    best = min(best, Double(s) + Double(atto) / 1e18)
}
guard reports > 0 else { fail("no advertising reports in \(arguments[1]): nothing to time", 65) }
let rate = Double(reports) / best
// `seconds` unrounded, in Swift's shortest round-trip form.
print(
    jsonLine([
        "events": bodies.count, "reports": reports, "ibeacons": beacons,
        "seconds": JSONValue.number(best, text: best.description), "reportsPerSecond": Int(rate),
        "nanosecondsPerReport": Int(1e9 / rate),
    ]))
