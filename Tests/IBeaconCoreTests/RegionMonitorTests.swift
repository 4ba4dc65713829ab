import FoundationEssentials
import IBeaconTestSupport
import Testing

@testable import IBeaconCore

private let u1 = UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
private let u2 = UUID(uuidString: "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")!

/// Lopsided identities (0x0102 / 0x0304) so a byte swap anywhere shows.
private func beacon(_ uuid: UUID = u1, _ major: UInt16 = 0x0102, _ minor: UInt16 = 0x0304) -> IBeacon {
    IBeacon(proximityUUID: uuid, major: major, minor: minor, measuredPower: -59)
}

private func region(_ text: String) throws -> BeaconRegion { try BeaconRegion(parsing: text) }

@Suite struct BeaconRegionTests {
    @Test func parsesTheThreeKindsOfRegion() throws {
        let r1 = try region("e2c56db5-dffb-48d2-b060-d0f5a71096e0")
        #expect(r1.proximityUUID == u1 && r1.major == nil && r1.minor == nil)
        #expect(r1.name == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
        let r2 = try region("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0:258")
        #expect(r2.major == 258 && r2.minor == nil && r2.name == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0:258")
        let r3 = try region("bakery=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0:258:772")
        #expect(r3.name == "bakery" && r3.major == 258 && r3.minor == 772)
        #expect(r3.description == "bakery (E2C56DB5-DFFB-48D2-B060-D0F5A71096E0:258:772)")
    }

    @Test(arguments: [
        ("not-a-uuid", "is not a UUID"),
        ("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0:65536", "major 65536 is not an integer in 0…65535"),
        ("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0:1:-1", "minor -1 is not an integer in 0…65535"),
        ("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0:", "major  is not an integer"),
        ("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0:1:2:3", "expected [NAME=]UUID[:MAJOR[:MINOR]]"),
        ("=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "the name before = is empty"),
        ("", "is not a UUID"),
    ])
    func rejectsMalformedRegions(_ text: String, _ message: String) {
        #expect {
            try BeaconRegion(parsing: text)
        } throws: { error in
            (error as? RegionError)?.message.contains(message) == true
        }
    }

    @Test func aMinorNeedsAMajor() {
        #expect(throws: RegionError.self) { try BeaconRegion(proximityUUID: u1, major: nil, minor: 3) }
    }

    @Test func membership() throws {
        let byUUID = try region("\(u1.uuidString)")
        let byMajor = try region("\(u1.uuidString):258")
        let byMinor = try region("\(u1.uuidString):258:772")
        #expect(byUUID.contains(beacon()) && byMajor.contains(beacon()) && byMinor.contains(beacon()))
        #expect(byUUID.contains(beacon(u1, 1, 1)) && !byMajor.contains(beacon(u1, 1, 772)))
        #expect(byMajor.contains(beacon(u1, 258, 1)) && !byMinor.contains(beacon(u1, 258, 773)))
        // Major and minor swapped must not match.
        #expect(!byMinor.contains(beacon(u1, 772, 258)))
        #expect(!byUUID.contains(beacon(u2)))
    }
}

@Suite struct RegionMonitorTests {
    func monitor(
        _ regions: [String], exitAfter: Double = 30, minRSSI: Double? = nil, hysteresis: Double = 6,
        smoothing: Double = 5
    ) throws -> RegionMonitor {
        RegionMonitor(
            regions: try regions.map(region),
            configuration: .init(exitAfter: exitAfter, minRSSI: minRSSI, hysteresis: hysteresis, smoothing: smoothing))
    }

    /// Issue 24 changed this: the first sighting after the start is the state `inside`, not an
    /// enter (a fence does not fire when you are already inside after a reboot).
    @Test func theFirstSightingIsTheStateInsideNotAnEnter() throws {
        var m = try monitor([u1.uuidString])
        let first = m.observe(beacon(), rssi: -61, at: 1.25)
        #expect(first.count == 1)
        #expect(first[0].kind == .inside && first[0].state == .inside && first[0].time == 1.25 && first[0].rssi == -61)
        #expect(first[0].beacon == beacon() && first[0].region.name == u1.uuidString)
        for i in 1...50 { #expect(m.observe(beacon(), rssi: -60, at: 1.25 + Double(i) * 0.1).isEmpty) }
        #expect(m.states == [.inside])
    }

    @Test func exitsAfterTheSilenceWithTheLastBeaconHeard() throws {
        var m = try monitor([u1.uuidString], exitAfter: 30)
        _ = m.observe(beacon(u1, 1, 1), rssi: -61, at: 2)
        _ = m.observe(beacon(u1, 1, 2), rssi: -70, at: 10)
        #expect(m.advance(to: 39.999).isEmpty)
        let exit = m.advance(to: 41)
        #expect(exit.count == 1)
        #expect(exit[0].kind == .exit && exit[0].time == 40 && exit[0].lastHeard == 10)
        #expect(exit[0].beacon == beacon(u1, 1, 2) && exit[0].rssi == -70)
        #expect(m.states == [.outside])
        #expect(exit[0].silent == 30)
        #expect(m.advance(to: 100).isEmpty)  // once
        // Heard again: outside -> inside is an enter.
        #expect(m.observe(beacon(u1, 1, 1), rssi: -61, at: 101).map(\.kind) == [.enter])
    }

    @Test func staysInsideWhileAnyOfItsBeaconsIsHeard() throws {
        var m = try monitor([u1.uuidString], exitAfter: 5)
        var events: [RegionMonitor.Event] = []
        events += m.observe(beacon(u1, 1, 1), rssi: -60, at: 0)
        // Beacon 1 falls silent at 0; beacon 2 of the same region is heard every second until 20.
        for t in stride(from: 1.0, through: 20, by: 1) {
            events += m.observe(beacon(u1, 1, 2), rssi: -60, at: t)
        }
        events += m.advance(to: 30)
        #expect(events.map(\.kind) == [.inside, .exit])
        #expect(events[1].time == 25 && events[1].beacon == beacon(u1, 1, 2))
    }

    @Test func initialOutsideOnceTheFirstWindowPassedWithoutASighting() throws {
        var m = try monitor(["a=\(u1.uuidString):1", "b=\(u1.uuidString):2"], exitAfter: 30)
        _ = m.observe(beacon(u1, 2, 0), rssi: -60, at: 29)  // b entered within the window
        #expect(m.advance(to: 29.9).isEmpty)
        let events = m.advance(to: 30)
        #expect(events.count == 1)
        #expect(events[0].kind == .outside && events[0].region.name == "a" && events[0].time == 30)
        #expect(events[0].beacon == nil && events[0].rssi == nil)
        #expect(m.states == [.outside, .inside])
        #expect(m.advance(to: 58.9).isEmpty)
        #expect(m.advance(to: 60).map(\.kind) == [.exit])
    }

    @Test func theStartNeedNotBeZero() {
        var m = RegionMonitor(
            regions: [try! region(u1.uuidString)], configuration: .init(exitAfter: 10), start: 1000)
        #expect(m.advance(to: 1009).isEmpty)
        #expect(m.advance(to: 1010).map(\.time) == [1010])
    }

    @Test func overlappingRegionsEachSeeTheirOwnBeacons() throws {
        var m = try monitor(
            ["store=\(u1.uuidString)", "bakery=\(u1.uuidString):258:772", "other=\(u2.uuidString)"])
        let a = m.observe(beacon(u1, 258, 773), rssi: -60, at: 1)
        #expect(a.map(\.region.name) == ["store"])
        let b = m.observe(beacon(u1, 258, 772), rssi: -60, at: 2)
        #expect(b.map(\.region.name) == ["bakery"])
        #expect(m.states == [.inside, .inside, .unknown])
        #expect(m.advance(to: 30).map(\.region.name) == ["other"])
        // The bakery beacon keeps the store inside too (the 773 beacon alone would have left
        // it at 31).
        _ = m.observe(beacon(u1, 258, 772), rssi: -60, at: 31.5)
        let exits = m.advance(to: 100)
        #expect(exits.map(\.region.name) == ["store", "bakery"])
        #expect(exits.map(\.time) == [61.5, 61.5])
    }

    @Test func beaconsOfNoRegionAreIgnoredAndNotKept() throws {
        var m = try monitor([u1.uuidString])
        for i in 0..<1000 { #expect(m.observe(beacon(u2, UInt16(i), 0), rssi: -40, at: Double(i) * 0.01).isEmpty) }
        #expect(m.trackedBeacons == 0)
        #expect(m.states == [.unknown])
    }

    @Test func eventsComeOutInTimeOrderWhenTimeJumps() throws {
        var m = try monitor(["a=\(u1.uuidString):1", "b=\(u1.uuidString):2", "c=\(u2.uuidString)"])
        _ = m.observe(beacon(u1, 2, 0), rssi: -60, at: 5)
        _ = m.observe(beacon(u1, 1, 0), rssi: -60, at: 20)
        // One step from 20 to 100: b exits at 35, c is outside at 30, a exits at 50.
        let events = m.advance(to: 100)
        #expect(events.map(\.region.name) == ["c", "b", "a"])
        #expect(events.map(\.time) == [30, 35, 50])
    }

    @Test func aSightingAfterALongGapExitsThenEnters() throws {
        var m = try monitor([u1.uuidString], exitAfter: 10)
        _ = m.observe(beacon(), rssi: -60, at: 0)
        // No ticks in between (a replayed capture with a gap): the exit comes first.
        let events = m.observe(beacon(), rssi: -62, at: 50)
        #expect(events.map(\.kind) == [.exit, .enter])
        #expect(events.map(\.time) == [10, 50])
    }

    @Test func timeThatStepsBackIsTakenAsTheLatest() throws {
        var m = try monitor([u1.uuidString], exitAfter: 10)
        _ = m.observe(beacon(), rssi: -60, at: 100)
        #expect(m.observe(beacon(), rssi: -60, at: 3).isEmpty)
        #expect(m.now == 100)
        // The sighting at "3" counted at 100: exit due at 110.
        #expect(m.advance(to: 109.9).isEmpty)
        #expect(m.advance(to: 110).map(\.kind) == [.exit])
    }

    @Test func withoutAThresholdReportsWithoutRSSICount() throws {
        var m = try monitor([u1.uuidString])
        let events = m.observe(beacon(), rssi: nil, at: 1)
        #expect(events.map(\.kind) == [.inside] && events[0].rssi == nil)
    }

    @Test func withAThresholdReportsWithoutRSSINeverCount() throws {
        var m = try monitor([u1.uuidString], minRSSI: -90)
        for i in 0..<100 { #expect(m.observe(beacon(), rssi: nil, at: Double(i)).allSatisfy { $0.kind == .outside }) }
        #expect(m.states == [.outside])
    }

    @Test func weakBeaconsDoNotEnter() throws {
        var m = try monitor([u1.uuidString], minRSSI: -70)
        for i in 0..<100 { #expect(m.observe(beacon(), rssi: -75, at: Double(i) * 0.1).isEmpty) }
        // Closer: enters once the smoothed level has climbed to the threshold.
        var events: [RegionMonitor.Event] = []
        for i in 100..<200 { events += m.observe(beacon(), rssi: -68, at: Double(i) * 0.1) }
        #expect(events.map(\.kind) == [.inside])
    }

    @Test func oneStrongPacketFromAFarBeaconDoesNotEnter() throws {
        // A beacon at -85 dBm whose single packet reads -60: the smoothed level barely moves.
        var m = try monitor([u1.uuidString], minRSSI: -70)
        for i in 0..<50 { _ = m.observe(beacon(), rssi: -85, at: Double(i) * 0.1) }
        #expect(m.observe(beacon(), rssi: -60, at: 5).isEmpty)
        #expect(m.smoothedRSSI(of: beacon())! < -80)
        #expect(m.states == [.unknown])
    }

    @Test func hysteresisKeepsARegionInsideBetweenTheTwoThresholds() throws {
        var m = try monitor([u1.uuidString], exitAfter: 3, minRSSI: -70, hysteresis: 6, smoothing: 1)
        var events: [RegionMonitor.Event] = []
        var t = 0.0
        func feed(_ rssi: Int8, seconds: Double) {
            let end = t + seconds
            while t < end {
                events += m.observe(beacon(), rssi: rssi, at: t)
                t += 0.1
            }
        }
        feed(-65, seconds: 5)  // inside
        feed(-74, seconds: 10)  // between -76 and -70: stays inside
        #expect(events.map(\.kind) == [.inside])
        // Below -76: no longer counts. The level crosses -76 after ln(6/4) = 0.41 time constants
        // of 1 s; the exit comes 3 s after the last report that counted.
        feed(-80, seconds: 10)
        #expect(events.map(\.kind) == [.inside, .exit])
        let exit = events[1]
        #expect(exit.time > 15 + 3 + 0.3 && exit.time < 15 + 3 + 0.6)
        #expect(exit.belowGate.map { $0 < -76 } == true)
        feed(-74, seconds: 10)  // below -70 again: does not re-enter while outside
        #expect(events.map(\.kind) == [.inside, .exit])
    }

    /// A beacon at the edge: its RSSI scatters (σ 4 dB, as indoors) around the threshold, heard
    /// at 10 reports/s, with a short exit-after and a 1 s time constant: with the default
    /// hysteresis it is determined inside once and stays; without hysteresis the same reports
    /// make it flap.
    @Test func noisyRSSIAtTheThresholdDoesNotFlap() throws {
        func run(hysteresis: Double) throws -> [RegionMonitor.Event] {
            var m = try monitor([u1.uuidString], exitAfter: 2, minRSSI: -70, hysteresis: hysteresis, smoothing: 1)
            var rng = SplitMix64(seed: 7)
            var events: [RegionMonitor.Event] = []
            for i in 0..<6000 {
                let rssi = Int8((-70.5 + 4 * rng.gaussian()).rounded())
                events += m.observe(beacon(), rssi: rssi, at: Double(i) * 0.1)
            }
            return events
        }
        #expect(try run(hysteresis: 6).map(\.kind) == [.inside])
        let flapping = try run(hysteresis: 0)
        #expect(flapping.filter { $0.kind == .exit }.count >= 3, "the simulation does not exercise the edge")
    }

    @Test func aBeaconBackAfterALongSilenceStartsItsLevelAfresh() throws {
        var m = try monitor([u1.uuidString], exitAfter: 5, minRSSI: -70)
        for i in 0..<100 { _ = m.observe(beacon(), rssi: -90, at: Double(i) * 0.1) }
        #expect(m.states == [.outside])
        // An hour later it is close: the first report counts on its own.
        #expect(m.observe(beacon(), rssi: -60, at: 3600).map(\.kind) == [.enter])
    }

    // MARK: Issue 24: unknown, states after an unknown period, exit delays, smoothing by time

    @Test func outsideThenHeardIsAnEnter() throws {
        var m = try monitor([u1.uuidString], exitAfter: 10)
        #expect(m.advance(to: 10).map(\.kind) == [.outside])
        let enter = m.observe(beacon(), rssi: -60, at: 12)
        #expect(enter.map(\.kind) == [.enter] && enter[0].state == .inside && enter[0].since == 12)
    }

    static let poweredOff = Deafness(.poweredOff, "hci1 was powered off")

    @Test func aDeafReceiverMakesDeterminedRegionsUnknownAndStopsTheExitTimer() throws {
        var m = try monitor(["in=\(u1.uuidString)", "out=\(u2.uuidString)", "later=\(u1.uuidString):9"], exitAfter: 10)
        _ = m.observe(beacon(), rssi: -60, at: 1)
        #expect(m.advance(to: 9).isEmpty)
        _ = m.observe(beacon(u1, 9, 1), rssi: -60, at: 9)
        #expect(m.advance(to: 10).map(\.region.name) == ["out"])
        let deaf = m.receiverDeaf(Self.poweredOff, at: 5 + 6)
        #expect(deaf.map(\.kind) == [.unknown, .unknown, .unknown])
        #expect(deaf.allSatisfy { $0.state == .unknown && $0.deafness == Self.poweredOff && $0.time == 11 })
        #expect(deaf[0].beacon == nil && deaf[0].lastHeard == 9)
        #expect(m.states == [.unknown, .unknown, .unknown])
        // Deaf for far longer than the exit delay: no exit, no outside.
        #expect(m.advance(to: 500).isEmpty)
        #expect(m.receiverDeaf(Deafness(.watchdog, "nothing"), at: 501).isEmpty)
        #expect(m.deafness == Self.poweredOff)
        // Hearing again: a whole exit delay of scanning before anything is judged outside,
        // and then it is the state outside, never an exit.
        #expect(m.receiverHears(at: 600).isEmpty)
        #expect(m.receiverHears(at: 601).isEmpty)
        #expect(m.hearingSince == 600)
        #expect(m.advance(to: 609.9).isEmpty)
        let after = m.advance(to: 610)
        #expect(after.map(\.kind) == [.outside, .outside, .outside] && after.allSatisfy { $0.time == 610 })
    }

    @Test func unknownThenHeardIsTheStateInsideNeverAnEnter() throws {
        var m = try monitor([u1.uuidString], exitAfter: 10)
        #expect(m.advance(to: 10).map(\.kind) == [.outside])
        _ = m.receiverDeaf(Deafness(.reset, "the controller was reset by another host"), at: 11)
        _ = m.receiverHears(at: 11.3)
        let back = m.observe(beacon(), rssi: -60, at: 11.5)
        #expect(back.map(\.kind) == [.inside] && back[0].deafness == nil)
        // A region inside before the deaf period: inside again as a state.
        _ = m.receiverDeaf(Self.poweredOff, at: 20)
        _ = m.receiverHears(at: 40)
        #expect(m.observe(beacon(), rssi: -60, at: 41).map(\.kind) == [.inside])
        // From here on crossings are crossings.
        #expect(m.advance(to: 51).map(\.kind) == [.exit])
        #expect(m.observe(beacon(), rssi: -60, at: 52).map(\.kind) == [.enter])
    }

    @Test func aRegionNotYetDeterminedGivesNoUnknownEventButItsStateSaysWhy() throws {
        var m = try monitor([u1.uuidString], exitAfter: 10)
        #expect(m.receiverDeaf(Self.poweredOff, at: 2).isEmpty)
        let status = m.statusEvents()
        #expect(status.map(\.kind) == [.state] && status[0].state == .unknown)
        #expect(status[0].deafness == Self.poweredOff)
        _ = m.receiverHears(at: 3)
        #expect(m.statusEvents()[0].deafness == nil)
        #expect(m.advance(to: 12.9).isEmpty)
        #expect(m.advance(to: 13).map(\.kind) == [.outside])
    }

    @Test func heardWhileDeafIsInsideAndTheExitDelayCountsFromWhenItHearsAgain() throws {
        var m = try monitor([u1.uuidString], exitAfter: 10)
        _ = m.receiverDeaf(Self.poweredOff, at: 0)
        #expect(m.observe(beacon(), rssi: -60, at: 1).map(\.kind) == [.inside])
        #expect(m.advance(to: 100).isEmpty)
        _ = m.receiverHears(at: 100)
        #expect(m.advance(to: 109.9).isEmpty)
        let exit = m.advance(to: 110)
        #expect(exit.map(\.kind) == [.exit] && exit[0].time == 110 && exit[0].lastHeard == 1)
    }

    @Test func eachRegionWaitsItsOwnExitDelay() throws {
        var m = try monitor(["quick=\(u1.uuidString):1@5s", "slow=\(u1.uuidString)"], exitAfter: 30)
        #expect(m.regions[0].exitAfter == 5 && m.regions[1].exitAfter == nil)
        _ = m.observe(beacon(u1, 1, 1), rssi: -60, at: 0)
        let first = m.advance(to: 100)
        #expect(first.map(\.region.name) == ["quick", "slow"])
        #expect(first.map(\.time) == [5, 30] && first.map(\.silent) == [5, 30])
        #expect(first.map(\.exitAfter) == [5, 30])
    }

    @Test(arguments: [("@120s", 120.0), ("@120", 120), ("@2m", 120), ("@0.5s", 0.5)])
    func regionExitDelays(_ suffix: String, _ seconds: Double) throws {
        #expect(try region("bakery=\(u1.uuidString):12:7\(suffix)").exitAfter == seconds)
    }

    @Test(arguments: ["@", "@0", "@-3s", "@fast", "@1e9", "@nan", "@2h"])
    func badRegionExitDelays(_ suffix: String) {
        #expect {
            try region("bakery=\(u1.uuidString):12:7\(suffix)")
        } throws: { error in
            (error as? RegionError)?.message.contains("is not a number of seconds within 0.1…86400") == true
        }
    }

    @Test func warnsOnceWhenTheExitDelayIsShorterThanThreeObservedIntervals() throws {
        var m = try monitor(["short=\(u1.uuidString)@5s", "long=\(u1.uuidString):258@10s"])
        for i in 0..<40 { _ = m.observe(beacon(), rssi: -60, at: Double(i) * 2) }
        #expect(m.intervalWarnings.map(\.region.name) == ["short"])
        #expect(m.intervalWarnings[0].interval == 2)
        #expect(m.intervalWarnings[0].description.contains("heard every 2.00 s"))
        #expect(m.intervalWarnings[0].description.contains("give it at least 6 s"))
    }

    /// The gate judges a level averaged over time: a 1 Hz and a 10 Hz beacon stepping from
    /// -80 to -60 dBm cross -70 at the same time, about ln 2 time constants after the step
    /// (with 1/8 per report the 1 Hz one took ten times longer).
    @Test func smoothingIsByTimeNotByReport() throws {
        func crossing(every interval: Double) throws -> Double? {
            var m = try monitor([u1.uuidString], minRSSI: -70, smoothing: 5)
            var t = 0.0
            while t < 60 {
                let events = m.observe(beacon(), rssi: t < 20 ? -80 : -60, at: t)
                if let first = events.first(where: { $0.kind == .inside }) { return first.time - 20 }
                t += interval
            }
            return nil
        }
        let fast = try #require(try crossing(every: 0.1))
        let slow = try #require(try crossing(every: 1))
        #expect(abs(fast - 5 * 0.693) < 0.2)
        #expect(abs(slow - fast) <= 1)
    }

    @Test func outsideSaysTheRegionWasHeardBelowTheGate() throws {
        var m = try monitor(["weak=\(u1.uuidString)", "silent=\(u2.uuidString)"], exitAfter: 5, minRSSI: -70)
        for i in 0..<50 { _ = m.observe(beacon(), rssi: -85, at: Double(i) * 0.1) }
        let events = m.advance(to: 5)
        #expect(events.map(\.kind) == [.outside, .outside])
        #expect(events[0].belowGate.map { abs($0 + 85) < 0.01 } == true && events[1].belowGate == nil)
    }

    @Test func stateEventsSayWhatEachRegionIsAndSinceWhen() throws {
        var m = try monitor(["a=\(u1.uuidString)", "b=\(u2.uuidString)"], exitAfter: 10)
        _ = m.observe(beacon(), rssi: -60, at: 3)
        _ = m.advance(to: 20)
        _ = m.observe(beacon(), rssi: -60, at: 20)
        let states = m.statusEvents()
        #expect(states.map(\.state) == [.inside, .outside])
        #expect(states.map(\.since) == [20, 10] && states.map(\.time) == [20, 20])
        #expect(states[0].lastHeard == 20 && states[1].lastHeard == nil)
    }

    @Test func aCrowdOfMatchingBeaconsStaysWithinCapacity() throws {
        var m = RegionMonitor(
            regions: [try region(u1.uuidString)],
            configuration: .init(exitAfter: 30, minRSSI: -100, beaconCapacity: 256))
        for i in 0..<20_000 {
            _ = m.observe(beacon(u1, UInt16(i >> 8), UInt16(i & 0xFF)), rssi: -60, at: Double(i) * 0.0001)
            #expect(m.trackedBeacons <= 256)
        }
        #expect(m.states == [.inside])
    }
}

@Suite struct CommandWordsTests {
    @Test(arguments: [
        ("notify-send alarm", ["notify-send", "alarm"]),
        ("  a   b\tc  ", ["a", "b", "c"]),
        ("logger -t ibeacon 'bakery is silent'", ["logger", "-t", "ibeacon", "bakery is silent"]),
        ("echo \"a \\\"b\\\" \\$HOME \\n\"", ["echo", "a \"b\" $HOME \\n"]),
        ("echo a\\ b", ["echo", "a b"]),
        ("echo '' x", ["echo", "", "x"]),
        ("echo $IBEACON_EVENT; rm -rf /", ["echo", "$IBEACON_EVENT;", "rm", "-rf", "/"]),
        ("a'b'\"c\"d", ["abcd"]),
        ("", []),
    ])
    func splits(_ line: String, _ words: [String]) throws {
        #expect(try CommandWords.split(line) == words)
    }

    @Test(arguments: ["echo 'open", "echo \"open", "echo \\"])
    func rejectsUnterminatedQuotes(_ line: String) {
        #expect(throws: CommandWords.SplitError.self) { try CommandWords.split(line) }
    }
}
