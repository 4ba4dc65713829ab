import Foundation
import IBeaconCore
import IBeaconTestSupport
import Testing

@testable import IBeaconHost

/// Advertising data of an iBeacon, assembled by hand from Apple's iBeacon layout (the same bytes
/// tests/e2e/test_harness_selftest.py sends and Bumble's AD parser decodes), independent of
/// `IBeacon.advertisingData`.
private func iBeaconAD(major: UInt16 = 0x0102, minor: UInt16 = 0x0304, power: Int8 = -59) -> [UInt8] {
    [0x02, 0x01, 0x06]  // AD Flags (length 2): LE General Discoverable, BR/EDR not supported
        + [0x1A, 0xFF]  // Manufacturer Specific Data, 26 octets follow the length byte
        + [0x4C, 0x00]  // company identifier 0x004C (Apple), little endian
        + [0x02, 0x15]  // iBeacon type 0x02, 0x15 = 21 octets follow
        + [
            0xE2, 0xC5, 0x6D, 0xB5, 0xDF, 0xFB, 0x48, 0xD2,  // proximity UUID E2C56DB5-DFFB-48D2-
            0xB0, 0x60, 0xD0, 0xF5, 0xA7, 0x10, 0x96, 0xE0,  // B060-D0F5A71096E0, big endian
        ]
        + [UInt8(major >> 8), UInt8(major & 0xFF)]  // major, big endian (0x0102 -> 01 02)
        + [UInt8(minor >> 8), UInt8(minor & 0xFF)]  // minor, big endian (0x0304 -> 03 04)
        + [UInt8(bitPattern: power)]  // measured power, two's complement (-59 -> 0xC5)
}

private let uuid = UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
private let addressA = BDAddress("D0:00:00:00:00:01")!
private let addressB = BDAddress("D0:00:00:00:00:02")!

private func target(address: BDAddress? = nil) -> CalibrationTarget {
    CalibrationTarget(proximityUUID: uuid, major: 0x0102, minor: 0x0304, address: address)
}

private func sighting(
    _ rssi: Int8?, from address: BDAddress = addressA, data: [UInt8] = iBeaconAD()
) -> Sighting {
    Sighting(address: address, addressType: .random, rssi: rssi, data: data, extended: false)
}

@Suite struct CalibrationCollectorTests {
    @Test func parsedTestVectorIsTheTargetBeacon() throws {
        // Guards the hand-made vector: if it did not decode, every "ignored" test would pass vacuously.
        let s = sighting(-59)
        let beacon = try #require(s.beacon)
        #expect(beacon.proximityUUID == uuid)
        #expect(beacon.major == 0x0102)
        #expect(beacon.minor == 0x0304)
        #expect(beacon.measuredPower == -59)
    }

    @Test func twoTransmittersWithTheSameIdentityAreAmbiguous() throws {
        var c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        #expect(try c.add(sighting(-59, from: addressB)) == .more)
        #expect(try c.add(sighting(-60, from: addressB)) == .more)
        let error = #expect(throws: CalibrationError.self) { try c.add(sighting(-58, from: addressA)) }
        guard case .ambiguous(let identity, let addresses)? = error else {
            Issue.record("expected .ambiguous, got \(String(describing: error))")
            return
        }
        #expect(identity == target().identity)
        #expect(Set(addresses) == [addressA, addressB])
        let message = error?.description ?? ""
        #expect(message.contains("D0:00:00:00:00:01"))
        #expect(message.contains("D0:00:00:00:00:02"))
        #expect(message.contains("--address"))
    }

    @Test func addressPicksOneTransmitterAndIgnoresTheOther() throws {
        var c = CalibrationCollector(target: target(address: addressB), settings: CalibrationSettings())
        // Interleaved: A at -70, B at -59; only B's samples may be used, so B's reports alone
        // decide when it stops: the 39th (30 samples, then 10 confirmations of the precision).
        for _ in 0..<38 {
            #expect(try c.add(sighting(-70, from: addressA)) == .more)
            #expect(try c.add(sighting(-59, from: addressB)) == .more)
        }
        #expect(try c.add(sighting(-70, from: addressA)) == .more)
        #expect(try c.add(sighting(-59, from: addressB)) == .done)
        #expect(c.samples.count == 39)
        #expect(c.samples.allSatisfy { $0 == -59 })
        #expect(c.address == addressB)
        let r = try c.result(elapsed: .seconds(3))
        #expect(r.address == addressB)
        #expect(r.measuredPower == -59)
    }

    @Test func otherBeaconsAndOtherAdvertisementsAreIgnored() throws {
        var c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        // Same UUID and major, other minor; other major; not an iBeacon at all (flags only).
        #expect(try c.add(sighting(-40, from: addressB, data: iBeaconAD(minor: 0x0305))) == .more)
        #expect(try c.add(sighting(-40, from: addressB, data: iBeaconAD(major: 0x0201))) == .more)
        #expect(try c.add(sighting(-40, from: addressB, data: [0x02, 0x01, 0x06])) == .more)
        #expect(c.samples.isEmpty)
        #expect(c.address == nil)
        // …and they do not make the real one ambiguous.
        #expect(try c.add(sighting(-59, from: addressA)) == .more)
        #expect(c.samples == [-59])
    }

    @Test func rssiNotAvailableAfterFiveReportsWithout() throws {
        var c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        for _ in 0..<4 { #expect(try c.add(sighting(nil)) == .more) }
        let error = #expect(throws: CalibrationError.self) { try c.add(sighting(nil)) }
        #expect(error == .rssiNotAvailable(reports: 5))
        #expect(error?.description.hasPrefix("RSSI not available") == true)
    }

    @Test func reportsWithoutRSSIAfterRealSamplesAreSkippedNotFatal() throws {
        var c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        #expect(try c.add(sighting(-59)) == .more)
        for _ in 0..<10 { #expect(try c.add(sighting(nil)) == .more) }
        #expect(c.samples == [-59])
    }

    @Test func notHeardOnlyAfterTheTimeout() throws {
        var settings = CalibrationSettings()
        settings.notHeardTimeout = .seconds(10)
        settings.maximumDuration = .seconds(30)
        let c = CalibrationCollector(target: target(), settings: settings)
        #expect(try c.check(elapsed: .milliseconds(9_999)) == .more)
        let error = #expect(throws: CalibrationError.self) { try c.check(elapsed: .seconds(10)) }
        #expect(error == .notHeard(target: target().identity, seconds: 10))
        #expect(error?.description.contains("was not heard in 10 s") == true)
    }

    @Test func notHeardTimeoutIsCappedByTheDuration() throws {
        var settings = CalibrationSettings()
        settings.notHeardTimeout = .seconds(10)
        settings.maximumDuration = .seconds(3)
        let c = CalibrationCollector(target: target(), settings: settings)
        #expect(try c.check(elapsed: .milliseconds(2_900)) == .more)
        #expect(throws: CalibrationError.self) { try c.check(elapsed: .seconds(3)) }
    }

    @Test func heardBeaconIsNotRefusedByTheClockButStopsAtTheDuration() throws {
        var settings = CalibrationSettings()
        settings.maximumDuration = .seconds(30)
        var c = CalibrationCollector(target: target(), settings: settings)
        _ = try c.add(sighting(-59))
        #expect(try c.check(elapsed: .seconds(20)) == .more)
        #expect(try c.check(elapsed: .seconds(30)) == .done)
        // One sample is too few for a result.
        let error = #expect(throws: CalibrationError.self) { try c.result(elapsed: .seconds(30)) }
        #expect(error == .tooFewSamples(count: 1, needed: 10, seconds: 30))
    }

    @Test func neverStopsBeforeThirtySamplesEvenWhenPrecise() throws {
        var c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        // Identical samples: the interval is 0 dB wide from the second sample on. The rule still
        // waits for 30 samples, then for the precision to hold over 10 more (StoppingRule).
        for n in 1...38 { #expect(try c.add(sighting(-59)) == .more, "stopped at \(n) samples") }
        #expect(try c.add(sighting(-59)) == .done)
        let r = try c.result(elapsed: .seconds(3))
        #expect(r.samples.count == 39)
        #expect(r.precisionReached)
        #expect(r.measuredPower == -59)
    }

    @Test func stopsWhenThePrecisionIsReachedAndNotBefore() throws {
        // σ = 6 dB: a ±1 dB interval needs about (1.96 · 6)² ≈ 140 samples, far beyond 30.
        var settings = CalibrationSettings()
        settings.precision = 1
        var c = CalibrationCollector(target: target(), settings: settings)
        var random = SplitMix64(seed: 42)
        var stoppedAt: Int?
        for n in 1...1000 {
            let rssi = Int8((-59 + 6 * random.gaussian()).rounded())
            if try c.add(sighting(rssi)) == .done {
                stoppedAt = n
                break
            }
            // Well before stopping, the interval over the samples so far was wider than ±1 dB.
            // (Near the end it may dip under 1 dB: the rule then waits for confirmations.)
            if n == 30 || n == 60 {
                let e = try #require(MeasuredPowerEstimator().estimate(c.samples))
                #expect(e.halfWidth95 > 1, "kept sampling at n = \(n) with ±\(e.halfWidth95) dB")
            }
        }
        let n = try #require(stoppedAt)
        #expect((80...300).contains(n), "stopped after \(n) samples")
        let r = try c.result(elapsed: .seconds(15))
        #expect(r.halfWidth95 <= 1)
        #expect(r.precisionReached)
        #expect(abs(r.estimate - -59) <= 1.5)
    }

    @Test func offsetIsAddedToTheResult() throws {
        var settings = CalibrationSettings()
        settings.offset = 3
        var c = CalibrationCollector(target: target(), settings: settings)
        for _ in 0..<38 { _ = try c.add(sighting(-62)) }
        #expect(try c.add(sighting(-62)) == .done)
        let r = try c.result(elapsed: .seconds(3))
        #expect(r.estimate == -59)
        #expect(r.measuredPower == -59)
        #expect(r.offset == 3)
        // The raw samples are kept as received.
        #expect(r.samples.allSatisfy { $0 == -62 })
        // A negative offset goes the other way.
        settings.offset = -2.5
        var d = CalibrationCollector(target: target(), settings: settings)
        for _ in 0..<30 { _ = try d.add(sighting(-62)) }
        #expect(try d.result(elapsed: .seconds(3)).estimate == -64.5)
    }

    @Test func resultBeforeAnythingWasHeardIsNotHeard() {
        let c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        let error = #expect(throws: CalibrationError.self) { try c.result(elapsed: .seconds(4)) }
        #expect(error == .notHeard(target: target().identity, seconds: 4))
    }
}
