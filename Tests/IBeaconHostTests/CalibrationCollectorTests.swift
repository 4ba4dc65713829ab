import Foundation
import IBeaconCore
import IBeaconTestSupport
import Testing

@testable import IBeaconHost

private let uuid = UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
private let addressA = BDAddress("D0:00:00:00:00:01")!
private let addressB = BDAddress("D0:00:00:00:00:02")!

private func target(address: BDAddress? = nil) -> CalibrationTarget {
    CalibrationTarget(proximityUUID: uuid, major: 0x0102, minor: 0x0304, address: address)
}

private func sighting(
    _ rssi: Int8?, from address: BDAddress = addressA, data: [UInt8] = Handmade.iBeaconAdvertisingData()
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
        #expect(try c.add(sighting(-59, from: addressB), at: 0.1) == .more)
        #expect(try c.add(sighting(-60, from: addressB), at: 0.2) == .more)
        let error = #expect(throws: CalibrationError.self) { try c.add(sighting(-58, from: addressA), at: 0.3) }
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
        // Interleaved at 10 Hz each: A at -70, B at -59; only B's samples may be used. Constant
        // RSSI is precise at once, so it stops at the first report once 10 s are complete.
        for k in 0..<100 {
            let t = Double(k) / 10 + 0.05
            #expect(try c.add(sighting(-70, from: addressA), at: t) == .more)
            #expect(try c.add(sighting(-59, from: addressB), at: t + 0.01) == .more)
        }
        // 10 s after B's first report (0.06 s).
        #expect(try c.add(sighting(-59, from: addressB), at: 10.06) == .done)
        #expect(c.histogram == Histogram([Int](repeating: -59, count: 100)))
        #expect(c.address == addressB)
        let r = try c.result(at: 10.06)
        #expect(r.address == addressB)
        #expect(r.measuredPower == -59)
    }

    @Test func otherBeaconsAndOtherAdvertisementsAreIgnored() throws {
        var c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        // Same UUID and major, other minor; other major; not an iBeacon at all (flags only).
        #expect(
            try c.add(sighting(-40, from: addressB, data: Handmade.iBeaconAdvertisingData(minor: 0x0305)), at: 0.1)
                == .more)
        #expect(
            try c.add(sighting(-40, from: addressB, data: Handmade.iBeaconAdvertisingData(major: 0x0201)), at: 0.2)
                == .more)
        #expect(try c.add(sighting(-40, from: addressB, data: [0x02, 0x01, 0x06]), at: 0.3) == .more)
        #expect(c.sampleCount == 0)
        #expect(c.address == nil)
        // …and they do not make the real one ambiguous.
        #expect(try c.add(sighting(-59, from: addressA), at: 0.4) == .more)
        #expect(c.histogram == Histogram([-59]))
    }

    /// Issue 23: a flood of reports must not grow the collector. 200,000 reports over 20 s of
    /// source time (10,000 a second, every RSSI from -40 to -99) leave one count per dBm and
    /// one sum per second, exactly what 200 reports over the same seconds leave; and the
    /// estimates from those counts are the ones the list of every sample gives.
    @Test func storageStaysBoundedWhateverTheReportRate() throws {
        var settings = CalibrationSettings()
        settings.maximumDuration = .seconds(3600)
        settings.minimumDuration = 3600  // never stops on precision: every report is kept
        func fill(_ reports: Int) throws -> CalibrationCollector {
            var c = CalibrationCollector(target: target(), settings: settings)
            var all: [Int] = []
            for k in 0..<reports {
                let rssi = -40 - (k * 7) % 60
                _ = try c.add(sighting(Int8(rssi)), at: Double(k) * 20 / Double(reports))
                all.append(rssi)
            }
            #expect(c.histogram == Histogram(all))
            #expect(c.storedValues <= 2 * 60 + 4 * 21)
            return c
        }
        let few = try fill(200)
        let many = try fill(200_000)
        #expect(many.sampleCount == 200_000)
        #expect(many.storedValues == few.storedValues)
        let r = try many.result(at: 20)
        #expect(r.sampleCount == 200_000)
        let list = r.histogram.counts.flatMap { [Int](repeating: $0.key, count: $0.value) }.shuffled()
        #expect(r.robust == MeasuredPowerEstimator().estimate(list))
    }

    @Test func rssiNotAvailableAfterFiveReportsWithout() throws {
        var c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        for k in 0..<4 { #expect(try c.add(sighting(nil), at: Double(k) / 10) == .more) }
        let error = #expect(throws: CalibrationError.self) { try c.add(sighting(nil), at: 0.5) }
        #expect(error == .rssiNotAvailable(reports: 5))
        #expect(error?.description.hasPrefix("RSSI not available") == true)
    }

    @Test func reportsWithoutRSSIAfterRealSamplesAreSkippedNotFatal() throws {
        var c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        #expect(try c.add(sighting(-59), at: 0) == .more)
        for k in 1...10 { #expect(try c.add(sighting(nil), at: Double(k) / 10) == .more) }
        #expect(c.histogram == Histogram([-59]))
    }

    @Test func notHeardOnlyAfterTheTimeout() throws {
        var settings = CalibrationSettings()
        settings.notHeardTimeout = .seconds(10)
        settings.maximumDuration = .seconds(30)
        var c = CalibrationCollector(target: target(), settings: settings)
        #expect(try c.check(at: 9.999) == .more)
        let error = #expect(throws: CalibrationError.self) { try c.check(at: 10) }
        #expect(error == .notHeard(target: target().identity, seconds: 10))
        #expect(error?.description.contains("was not heard in 10 s") == true)
    }

    @Test func notHeardTimeoutIsCappedByTheDuration() throws {
        var settings = CalibrationSettings()
        settings.notHeardTimeout = .seconds(10)
        settings.maximumDuration = .seconds(3)
        var c = CalibrationCollector(target: target(), settings: settings)
        #expect(try c.check(at: 2.9) == .more)
        #expect(throws: CalibrationError.self) { try c.check(at: 3) }
    }

    @Test func heardBeaconIsNotRefusedByTheClockButStopsAtTheDuration() throws {
        var settings = CalibrationSettings()
        settings.maximumDuration = .seconds(30)
        var c = CalibrationCollector(target: target(), settings: settings)
        _ = try c.add(sighting(-59), at: 0.5)
        #expect(try c.check(at: 20) == .more)
        #expect(try c.check(at: 30) == .done)
        // One sample is too few for a result.
        let error = #expect(throws: CalibrationError.self) { try c.result(at: 30) }
        #expect(error == .tooFewSamples(count: 1, needed: 10, seconds: 30))
    }

    @Test func neverStopsBeforeTenSecondsEvenWhenPrecise() throws {
        var c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        // Identical samples: the interval is 0 dB wide from the second second on. Apple's
        // procedure still takes 10 s, so the collector waits for 10 complete seconds.
        for k in 0..<100 {
            let t = Double(k) / 10 + 0.03
            #expect(try c.add(sighting(-59), at: t) == .more, "stopped at \(t) s")
            #expect(try c.check(at: t + 0.01) == .more, "stopped at \(t) s")
        }
        // Ten seconds after the first report (0.03 s), not after the scan started.
        #expect(try c.check(at: 10.02) == .more)
        #expect(try c.check(at: 10.03) == .done)
        let r = try c.result(at: 10.03)
        #expect(r.sampleCount == 100)
        #expect(r.precisionReached)
        #expect(r.measuredPower == -59)
        #expect(r.method == PhoneCalibrationEstimator.methodName)
    }

    /// The collector runs on the source's time: a capture replayed faster than real time (here:
    /// all at once) stops where its own clock says 10 s, and a tick that says 5 s cannot stop it.
    @Test func usesTheSourcesTimeNotTheWallClock() throws {
        var c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        for k in 0..<50 { _ = try c.add(sighting(-59), at: Double(k) / 10) }
        #expect(try c.check(at: 5) == .more)
        for k in 50..<100 { _ = try c.add(sighting(-59), at: Double(k) / 10) }
        #expect(try c.add(sighting(-59), at: 10.0) == .done)
        #expect(try c.result(at: 10).seconds == 10)
    }

    @Test func widelySpreadReportsDoNotStopBeforeAMinute() throws {
        // σ = 6 dB (the precision alone would stop after about 14 s, as above): strong fading, so
        // not before 60 s; σ = 3 dB, the same seed: after Apple's 10 s.
        for (sigma, earliest, latest) in [(6.0, 60.0, 64.0), (3.0, 10.0, 14.0)] {
            var c = CalibrationCollector(target: target(), settings: CalibrationSettings())
            var random = SplitMix64(seed: 42)
            var stoppedAt: Double?
            for k in 0..<1200 {
                let t = Double(k) / 10 + 0.05
                if try c.add(sighting(Int8((-59 + sigma * random.gaussian()).rounded())), at: t) == .done {
                    stoppedAt = t
                    break
                }
            }
            let t = try #require(stoppedAt)
            #expect((earliest...latest).contains(t), "σ \(sigma) dB: stopped after \(t) s")
            #expect(c.minimumDuration == (sigma > 4.8 ? 60 : 10), "\(String(describing: c.lastApple))")
            #expect(try c.result(at: t).precisionReached)
        }
    }

    @Test func stopsWhenThePrecisionIsReachedAndNotBefore() throws {
        // σ = 6 dB at 10 reports/s: the 1 Hz means spread by 6/√10 = 1.9 dB, so ±1 dB needs
        // about (1.96 · 1.9)² ≈ 14 s, beyond the 10 s minimum. (Without the noisy minimum, which
        // the next test is about.)
        var settings = CalibrationSettings()
        settings.precision = 1
        settings.noisySpread = .infinity
        var c = CalibrationCollector(target: target(), settings: settings)
        var random = SplitMix64(seed: 42)
        var stoppedAt: Double?
        for k in 0..<600 {
            let t = Double(k) / 10 + 0.05
            let rssi = Int8((-59 + 6 * random.gaussian()).rounded())
            if try c.add(sighting(rssi), at: t) == .done {
                stoppedAt = t
                break
            }
            if k == 100 {
                // At 10 s the interval over the 1 Hz means was still wider than ±1 dB.
                let e = try #require(c.lastApple)
                #expect(e.halfWidth95 > 1, "kept sampling at 10 s with ±\(e.halfWidth95) dB")
            }
        }
        let t = try #require(stoppedAt)
        #expect((11...30).contains(t), "stopped after \(t) s")
        let r = try c.result(at: t)
        #expect(r.halfWidth95 <= 1)
        #expect(r.precisionReached)
        #expect(abs(r.estimate - -59) <= 1.5)
    }

    @Test func offsetIsAddedToTheResult() throws {
        var settings = CalibrationSettings()
        settings.offset = 3
        var c = CalibrationCollector(target: target(), settings: settings)
        for k in 0..<100 { _ = try c.add(sighting(-62), at: Double(k) / 10) }
        #expect(try c.add(sighting(-62), at: 10) == .done)
        let r = try c.result(at: 10)
        #expect(r.estimate == -59)
        #expect(r.measuredPower == -59)
        #expect(r.offset == 3)
        // The raw samples are kept as received.
        #expect(r.histogram.counts.keys.sorted() == [-62])
        // A negative offset goes the other way.
        settings.offset = -2.5
        var d = CalibrationCollector(target: target(), settings: settings)
        for k in 0..<30 { _ = try d.add(sighting(-62), at: Double(k) / 10) }
        #expect(try d.result(at: 3).estimate == -64.5)
    }

    @Test func resultBeforeAnythingWasHeardIsNotHeard() {
        let c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        let error = #expect(throws: CalibrationError.self) { try c.result(at: 4) }
        #expect(error == .notHeard(target: target().identity, seconds: 4))
    }

    /// Apple's value is the mean of the 1 Hz means, fades included; the robust centre ignores
    /// the fades. Both are in the result; `method` picks the one written.
    @Test func appleMethodAveragesTheFadesTheRobustOneDoesNot() throws {
        for method in CalibrationMethod.allCases {
            var settings = CalibrationSettings()
            settings.method = method
            var c = CalibrationCollector(target: target(), settings: settings)
            // Every fifth report 15 dB down: Apple's mean is -59 - 3 = -62.
            for k in 0..<120 { _ = try c.add(sighting(k % 5 == 0 ? -74 : -59), at: Double(k) / 10) }
            let r = try c.result(at: 12)
            let apple = try #require(r.apple)
            let robust = try #require(r.robust)
            #expect(abs(apple.value - -62) < 1e-9)
            #expect(abs(robust.value - -59) < 0.5)
            #expect(r.estimate == (method == .apple ? apple.value : robust.value))
        }
    }

    /// The level steps 4 dB down after 8 s (a door closed): the collector never claims the
    /// precision (first the step looks like a transient that is still going on, then like
    /// drift), runs to the duration, and the result says the drift is large.
    @Test func aLevelThatMovedIsLargeDriftAndNeverStopsEarly() throws {
        var settings = CalibrationSettings()
        settings.maximumDuration = .seconds(16)
        var c = CalibrationCollector(target: target(), settings: settings)
        var random = SplitMix64(seed: 7)
        var decision = CalibrationCollector.Decision.more
        var t = 0.05
        while decision == .more && t < 30 {
            let level = t < 8 ? -59.0 : -63.0
            decision = try c.add(sighting(Int8((level + 2 * random.gaussian()).rounded())), at: t)
            t += 0.1
        }
        #expect(decision == .done)
        #expect(t >= 16)
        let r = try c.result(at: 16)
        let drift = try #require(r.apple?.drift)
        #expect(drift.isLarge)
        #expect(drift.difference < -3 && drift.difference > -5)
        #expect(r.driftIsLarge)
        #expect(!r.precisionReached)
    }

    /// A person walks between beacon and receiver (6 dB weaker for 3 s): those seconds are left
    /// out as a transient instead of dragging a short run's mean down by 1–2 dB.
    @Test func aPersonWalkingByIsLeftOutAsATransient() throws {
        var c = CalibrationCollector(target: target(), settings: CalibrationSettings())
        var random = SplitMix64(seed: 3)
        for k in 0..<150 {
            let t = Double(k) / 10 + 0.05
            let dip = t >= 4.5 && t < 7.5 ? 6.0 : 0
            _ = try c.add(sighting(Int8((-59.3 - dip + 2 * random.gaussian()).rounded())), at: t)
        }
        let r = try c.result(at: 15)
        let apple = try #require(r.apple)
        #expect(apple.transients.count == 1)
        let transient = try #require(apple.transients.first)
        #expect((3...4).contains(transient.seconds))
        #expect(transient.shift < -3)
        #expect(abs(apple.value - -59.3) < 0.6)
    }
}
