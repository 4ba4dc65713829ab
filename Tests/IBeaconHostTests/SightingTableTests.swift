import IBeaconCore
import Testing

@testable import IBeaconHost

@Suite struct SightingTableTests {
    func sighting(_ i: Int, rssi: Int8? = -60) -> Sighting {
        let address = BDAddress(
            "C0:00:00:00:\(String(format: "%02X", (i >> 8) & 0xFF)):\(String(format: "%02X", i & 0xFF))")!
        return Sighting(
            address: address, addressType: .random, rssi: rssi, data: testBeacon.advertisingData, extended: false)
    }

    @Test func thousandsOfDistinctAddressesStayWithinCapacity() {
        var table = SightingTable(capacity: 256, expiry: 60)
        for i in 0..<10_000 {
            table.record(sighting(i), now: Double(i) * 0.001)
        }
        // Never more than the capacity; room is made an eighth at a time.
        #expect(table.entries.count <= 256 && table.entries.count > 256 - 256 / 8 - 1)
        // The survivors are exactly the most recently heard.
        let newest = Set((10_000 - table.entries.count..<10_000).map { sighting($0).address })
        #expect(Set(table.entries.keys) == newest)
    }

    @Test func silentTransmittersAgeOut() {
        var table = SightingTable(capacity: 100, expiry: 30)
        table.record(sighting(1), now: 0)
        table.record(sighting(2), now: 20)
        table.prune(now: 31)
        #expect(table.entries.keys.map(\.description) == [sighting(2).address.description])
    }

    @Test func ratesAndSmoothingFollowTheReports() {
        var table = SightingTable(capacity: 10, expiry: 60, rateWindow: 5)
        for k in 0..<50 {
            table.record(sighting(7, rssi: k % 2 == 0 ? -60 : -70), now: 10 + Double(k) * 0.1)
        }
        let e = try! #require(table.entries[sighting(7).address])
        #expect(e.reports == 50)
        #expect(abs(e.rate(now: 15, window: 5) - 10) < 0.5)
        #expect(e.smoothedRSSI == -65)  // sliding median of alternating -60/-70
        #expect(e.beacon == testBeacon)
    }

    @Test func reportsWithoutRSSIDoNotInventOne() {
        var table = SightingTable()
        table.record(sighting(3, rssi: nil), now: 0)
        #expect(table.entries[sighting(3).address]?.smoothedRSSI == nil)
    }
}
