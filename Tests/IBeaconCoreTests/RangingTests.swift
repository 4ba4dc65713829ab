import FoundationEssentials
import Testing

@testable import IBeaconCore

/// `BeaconRanger`: ranging as Core Location's `didRangeBeacons` reports it, on source time fed
/// by the test (no clock is read: every time below is exact).
@Suite struct RangingTests {
    static let uuid = UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
    static func beacon(_ minor: UInt16, power: Int8 = -59) -> IBeacon {
        IBeacon(proximityUUID: uuid, major: 0x0102, minor: minor, measuredPower: power)
    }
    static func address(_ n: UInt8) -> BDAddress { BDAddress(uint48: 0xC000_0000_0000 | UInt64(n))! }

    /// The last update the ranger made, for one beacon.
    func ranged(_ ranger: inout BeaconRanger, _ minor: UInt16) -> [RangingUpdate] {
        ranger.takeUpdates().filter { $0.beacons.contains { $0.identity?.minor == minor } }
    }

    @Test func rssiIsTheMeanOfTheLastSecondsReports() {
        var r = BeaconRanger()
        // Second 0: -60, -70, -65 (mean -65); second 1: -50, -52 (mean -51); an RSSI-less
        // report counts as heard but adds nothing to the mean.
        for (t, rssi) in [(0.1, -60), (0.5, -70), (0.99, -65)] as [(Double, Int8)] {
            r.record(beacon: Self.beacon(4), address: Self.address(1), rssi: rssi, at: t)
        }
        #expect(!r.hasUpdates)  // second 0 is not over
        r.record(beacon: Self.beacon(4), address: Self.address(1), rssi: -50, at: 1.0)
        r.record(beacon: Self.beacon(4), address: Self.address(1), rssi: nil, at: 1.5)
        r.record(beacon: Self.beacon(4), address: Self.address(1), rssi: -52, at: 1.9)
        r.advance(to: 2.0)
        let updates = r.takeUpdates()
        #expect(updates.map(\.second) == [0, 1])
        #expect(updates.map(\.time) == [1, 2])
        let first = updates[0].beacons[0]
        #expect(first.rssi == -65 && first.count == 3)
        let second = updates[1].beacons[0]
        #expect(second.rssi == -51 && second.count == 3)
        // Distance and proximity from the second's mean: -59 - (-51) = 8 dB, 10^(-8/20) m.
        #expect(abs(second.distance! - 0.398_107) < 1e-6)
        #expect(second.proximity == .immediate)
        // The same number SecondMeans (what calibrate averages) gives for that second.
        var means = SecondMeans()
        for (t, rssi) in [(1.0, -50), (1.9, -52)] { means.add(rssi, at: t) }
        #expect(means.means(completedBy: 2).map(\.mean) == [second.rssi!])
    }

    @Test func aBeaconSilentForASecondIsUnknownWithoutRSSI() {
        var r = BeaconRanger()
        r.record(beacon: Self.beacon(4), address: Self.address(1), rssi: -60, at: 0.5)
        r.advance(to: 1.0)
        #expect(r.takeUpdates().first?.beacons.first?.proximity == .near)
        r.advance(to: 2.0)  // second 1: nothing heard
        let silent = try! #require(r.takeUpdates().first?.beacons.first)
        #expect(silent.rssi == nil && silent.distance == nil && silent.proximity == .unknown)
        #expect(silent.count == 0 && silent.lastHeard == 0.5)
        #expect(silent.measuredPower == -59)  // still known
    }

    @Test func aSilentBeaconIsDroppedAfterTheForgetWindow() {
        var r = BeaconRanger(.init(forgetAfter: 5))
        r.record(beacon: Self.beacon(4), address: Self.address(1), rssi: -60, at: 10.5)
        r.record(beacon: Self.beacon(5), address: Self.address(2), rssi: -60, at: 10.5)
        // Beacon 5 keeps being heard; beacon 4 falls silent at 10.5.
        for t in stride(from: 11.2, to: 20, by: 1.0) {
            r.record(beacon: Self.beacon(5), address: Self.address(2), rssi: -60, at: t)
        }
        r.advance(to: 20)
        let updates = r.takeUpdates()
        let listed = updates.filter { $0.beacons.contains { $0.identity?.minor == 4 } }.map(\.second)
        // Heard in second 10; unknown in 11…14 (silent less than 5 s at their ends); gone from
        // the update due at 16 on.
        #expect(listed == [10, 11, 12, 13, 14])
        #expect(updates.map(\.second) == Array(10...19))
        #expect(r.count == 1)
    }

    @Test func theForgetWindowIsConfigurable() {
        var r = BeaconRanger(.init(forgetAfter: 2))
        r.record(beacon: Self.beacon(4), address: Self.address(1), rssi: -60, at: 0.0)
        r.advance(to: 10)
        // Listed in seconds 0 and 1; the update of second 2 says the list is empty; then none.
        let updates = r.takeUpdates()
        #expect(updates.map(\.second) == [0, 1, 2])
        #expect(updates.map(\.beacons.count) == [1, 1, 0])
        #expect(r.count == 0)
        // Heard again: listed again, and the seconds in between were skipped.
        r.record(beacon: Self.beacon(4), address: Self.address(1), rssi: -61, at: 30.2)
        r.advance(to: 31)
        #expect(r.takeUpdates().map(\.second) == [30])
    }

    @Test func nearestFirst() {
        var r = BeaconRanger()
        // Minor 1: -70 at -59 (3.5 m); minor 2: -60 at -59 (1.1 m); minor 3: -64 at -65
        // (0.9 m: nearer though weaker, its measured power is lower); minor 4 not heard in the
        // second; minor 5 heard without RSSI.
        r.record(beacon: Self.beacon(4), address: Self.address(4), rssi: -40, at: 0.2)
        r.record(beacon: Self.beacon(1), address: Self.address(1), rssi: -70, at: 1.1)
        r.record(beacon: Self.beacon(2), address: Self.address(2), rssi: -60, at: 1.2)
        r.record(beacon: Self.beacon(3, power: -65), address: Self.address(3), rssi: -64, at: 1.3)
        r.record(beacon: Self.beacon(5), address: Self.address(5), rssi: nil, at: 1.4)
        r.advance(to: 2)
        let last = try! #require(r.takeUpdates().last)
        #expect(last.beacons.map { $0.identity!.minor } == [3, 2, 1, 5, 4])
        #expect(last.beacons.map(\.proximity) == [.near, .near, .far, .unknown, .unknown])
    }

    @Test func oneRowPerIdentityWhateverTheAddress() {
        var r = BeaconRanger()
        // A beacon rotating its address mid-second, and a re-calibrated measured power.
        r.record(beacon: Self.beacon(4), address: Self.address(1), rssi: -60, at: 0.2)
        r.record(beacon: Self.beacon(4), address: Self.address(2), rssi: -62, at: 0.6)
        r.record(beacon: Self.beacon(4, power: -61), address: Self.address(2), rssi: -64, at: 0.8)
        r.advance(to: 1)
        let update = try! #require(r.takeUpdates().first)
        #expect(update.beacons.count == 1)
        let b = update.beacons[0]
        #expect(b.rssi == -62 && b.count == 3)
        #expect(b.addresses == [Self.address(2), Self.address(1)])  // most recent first
        #expect(b.measuredPower == -61)
        #expect(r.beaconsHeard == [BeaconIdentity(Self.beacon(4))])
        // The old address leaves the list with the forget window; the beacon stays.
        for t in stride(from: 1.5, to: 9, by: 1.0) {
            r.record(beacon: Self.beacon(4), address: Self.address(2), rssi: -60, at: t)
        }
        r.advance(to: 9)
        #expect(r.takeUpdates().last?.beacons.first?.addresses == [Self.address(2)])
    }

    @Test func otherAdvertisementsAreRangedByAddress() {
        var r = BeaconRanger()
        r.record(beacon: nil, address: Self.address(7), rssi: -50, at: 0.1)
        r.record(beacon: nil, address: Self.address(8), rssi: -40, at: 0.2)
        r.record(beacon: Self.beacon(1), address: Self.address(1), rssi: -80, at: 0.3)
        r.finish(at: 0.5)
        let update = try! #require(r.takeUpdates().first)
        // The run ended inside second 0: its update is due at the end.
        #expect(update.second == 0 && update.time == 0.5)
        // The beacon (a distance) first, then the others by RSSI.
        #expect(update.beacons.map { $0.addresses.first } == [Self.address(1), Self.address(8), Self.address(7)])
        #expect(update.beacons[1].identity == nil && update.beacons[1].proximity == .unknown)
        #expect(r.beaconsHeard.count == 1 && r.othersHeard.count == 2 && r.reports == 3)
    }

    @Test func countsEveryTransmitterOfTheRunNotJustThoseListed() {
        // A capture with one beacon heard 6 times over 15 minutes (cnrd+yeelock): the summary
        // said "6 reports from 0 transmitter(s)" because the list at the end was empty.
        var r = BeaconRanger()
        for k in 0..<6 { r.record(beacon: Self.beacon(6), address: Self.address(1), rssi: -74, at: Double(k)) }
        r.finish(at: 901.3)
        #expect(r.count == 0)
        #expect(r.reports == 6 && r.beaconsHeard.count == 1)
    }

    @Test func aCrowdStaysWithinCapacity() {
        var r = BeaconRanger(.init(capacity: 256))
        for i in 0..<10_000 {
            let address = BDAddress(uint48: 0xC000_0000_0000 | UInt64(i))!
            r.record(beacon: nil, address: address, rssi: -60, at: Double(i) * 0.001)
        }
        #expect(r.count <= 256 && r.count > 256 - 256 / 8 - 1)
        #expect(r.othersHeard.count == 10_000)
    }

    @Test func timeNeverRunsBackwards() {
        var r = BeaconRanger()
        r.record(beacon: Self.beacon(4), address: Self.address(1), rssi: -60, at: 2.5)
        r.record(beacon: Self.beacon(4), address: Self.address(1), rssi: -70, at: 1.2)  // counts as 2.5
        r.record(beacon: Self.beacon(4), address: Self.address(1), rssi: -80, at: .nan)
        r.advance(to: 3)
        let b = try! #require(r.takeUpdates().last?.beacons.first)
        #expect(b.rssi == -70 && b.count == 3)
    }
}

/// `RangingTableLayout`: the live table fits the terminal it is drawn in.
@Suite struct RangingTableLayoutTests {
    static let rotating = RangedBeacon(
        identity: BeaconIdentity(proximityUUID: RangingTests.uuid, major: 65535, minor: 65535), measuredPower: -59,
        rssi: -127, count: 1000, addresses: [RangingTests.address(1), RangingTests.address(2)], lastHeard: 1)
    static let other = RangedBeacon(
        identity: nil, measuredPower: nil, rssi: -40, count: 3, addresses: [RangingTests.address(3)], lastHeard: 1)

    @Test(arguments: [80, 100, 120])
    func everyLineFitsTheWidth(_ width: Int) {
        let layout = RangingTableLayout.fitting(width: width)
        for line in [layout.header, layout.row(Self.rotating), layout.row(Self.other)] {
            #expect(line.count <= width, "\(width): \(line)")
        }
    }

    @Test func whatEachWidthShows() {
        let wide = RangingTableLayout.fitting(width: 120)
        #expect(wide.columns == RangingTableLayout.Column.allCases && !wide.shortUUID)
        #expect(wide.row(Self.rotating).contains("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"))
        #expect(wide.row(Self.rotating).hasSuffix("C0:00:00:00:00:01 +1"))
        // 100: the full UUID, no addresses.
        let hundred = RangingTableLayout.fitting(width: 100)
        #expect(!hundred.shortUUID && !hundred.columns.contains(.address))
        #expect(hundred.row(Self.rotating).contains("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"))
        // 80: every field, the UUID shortened.
        let eighty = RangingTableLayout.fitting(width: 80)
        #expect(eighty.shortUUID && eighty.columns == RangingTableLayout.Column.allCases)
        #expect(eighty.row(Self.rotating).hasPrefix("E2C56DB5… 65535 65535 -127.0   -59 2511.89 far"))
        #expect(eighty.header.hasPrefix("UUID      MAJOR MINOR   RSSI POWER DIST(m) PROXIMITY RPT/S ADDRESS"))
        // Narrower still: columns go, then lines are cut, never wrapped.
        #expect(RangingTableLayout.fitting(width: 50).columns == [.uuid, .major, .minor, .rssi, .distance, .proximity])
        #expect(RangingTableLayout.fitting(width: 20).row(Self.rotating).count == 20)
    }

    @Test func pipesGetEveryColumn() {
        let row = RangingTableLayout.full.row(Self.rotating)
        #expect(
            row
                == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 65535 65535 -127.0   -59 2511.89 far        1000 C0:00:00:00:00:01 +1"
        )
        #expect(
            RangingTableLayout.full.row(Self.other).hasPrefix(
                "(not an iBeacon)                         -     -  -40.0     -       - -"))
    }
}
