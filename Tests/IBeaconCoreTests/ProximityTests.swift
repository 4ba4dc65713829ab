import IBeaconTestSupport
import Testing

@testable import IBeaconCore

@Suite struct ProximityTests {
    @Test func logDistance() throws {
        // At measured power the distance is 1 m; every 20 dB lower is ×10 at n = 2.
        #expect(abs(try #require(estimatedDistance(rssi: -59, measuredPower: -59)) - 1) < 1e-12)
        #expect(abs(try #require(estimatedDistance(rssi: -79, measuredPower: -59)) - 10) < 1e-9)
        #expect(abs(try #require(estimatedDistance(rssi: -39, measuredPower: -59)) - 0.1) < 1e-12)
        // 6.0206 dB ≈ ×2 at n = 2; n = 3 makes 30 dB ×10.
        #expect(abs(try #require(estimatedDistance(rssi: -65.0206, measuredPower: -59)) - 2) < 1e-4)
        #expect(abs(try #require(estimatedDistance(rssi: -89, measuredPower: -59, pathLossExponent: 3)) - 10) < 1e-9)
        // 10^0.35 = 2.2387211385683394
        #expect(abs(try #require(estimatedDistance(rssi: -66, measuredPower: -59)) - 2.2387211385683394) < 1e-12)
        #expect(estimatedDistance(rssi: .nan, measuredPower: -59) == nil)
        #expect(estimatedDistance(rssi: -60, measuredPower: -59, pathLossExponent: 0) == nil)
    }

    @Test func zones() {
        #expect(Proximity(distance: nil) == .unknown)
        #expect(Proximity(distance: 0.49) == .immediate)
        #expect(Proximity(distance: 0.5) == .near)
        #expect(Proximity(distance: 3.0) == .near)
        #expect(Proximity(distance: 3.01) == .far)
        #expect(Proximity(rssi: nil, measuredPower: -59) == .unknown)
        #expect(Proximity(rssi: -50, measuredPower: -59) == .immediate)  // 0.35 m
        #expect(Proximity(rssi: -65, measuredPower: -59) == .near)  // 2.0 m
        #expect(Proximity(rssi: -75, measuredPower: -59) == .far)  // 6.3 m
    }

    @Test func medianSmootherIgnoresFades() {
        var s = RSSISmoother(.median(window: 5))
        #expect(s.value == nil)
        for r in [-60.0, -59, -80, -61, -60] { s.add(r) }
        #expect(s.value == -60)
        s.add(nil)  // RSSI not available
        #expect(s.value == -60)
        for r in [-70.0, -70, -70] { s.add(r) }
        #expect(s.value == -70)  // the window has moved on
        s.reset()
        #expect(s.value == nil)
    }

    /// The sliding median kept in order as readings come and go gives, after every reading, the
    /// median of the last `window` readings sorted afresh; also after a reset, and for
    /// windows of 1 and 2 and runs of equal readings.
    @Test func medianSmootherMatchesSortingTheWindow() {
        var rng = SplitMix64(seed: 0x5E_D1A7)
        for window in [1, 2, 3, 10, 25] {
            var s = RSSISmoother(.median(window: window))
            var readings: [Double] = []
            for step in 0..<3_000 {
                if step == 1_500 {
                    s.reset()
                    readings.removeAll()
                    #expect(s.value == nil)
                }
                // Few distinct values, so equal readings enter and leave the window together.
                let r = -Double(40 + rng.next() % (step % 3 == 0 ? 4 : 60))
                readings.append(r)
                let last = readings.suffix(window).sorted()
                let n = last.count
                let expected = n % 2 == 1 ? last[n / 2] : (last[n / 2 - 1] + last[n / 2]) / 2
                #expect(s.add(r) == expected, "window \(window), step \(step)")
            }
        }
    }

    @Test func exponentialSmoother() {
        var s = RSSISmoother(.exponential(alpha: 0.5))
        #expect(s.add(-60) == -60)
        #expect(s.add(-70) == -65)
        #expect(s.add(-70) == -67.5)
    }
}
