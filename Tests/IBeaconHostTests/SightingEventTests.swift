import IBeaconCore
import IBeaconTestSupport
import Testing

@testable import IBeaconHost

/// `Sighting.append(fromEvent:to:)` (scanning a capture) gives what `Sighting.all(in:)` gives
/// for the decoded event, shares the event's bytes instead of copying each report's data, and
/// appends nothing for a malformed event.
@Suite struct SightingEventTests {
    static let iBeaconData = [UInt8](hex: "0201061aff4c000215f7826da64fa24e988024bc5b71e0893e01020304c5")!

    /// An LE Advertising Report event: an iBeacon from C0:FF:EE:00:00:01 at -70 dBm, then a
    /// non-iBeacon (flags only) from 11:22:33:44:55:66, RSSI not available.
    static var twoReports: [UInt8] {
        var w = ByteWriter()
        LEAdvertisingReport(
            eventType: .advNonconnInd, addressType: .random, address: BDAddress("C0:FF:EE:00:00:01")!,
            data: iBeaconData, rssi: -70
        ).encode(into: &w)
        LEAdvertisingReport(
            eventType: .advInd, addressType: .public, address: BDAddress("11:22:33:44:55:66")!, data: [2, 1, 6],
            rssi: nil
        ).encode(into: &w)
        let parameters = [0x02, 0x02] + w.bytes
        return [0x3E, UInt8(parameters.count)] + parameters
    }

    @Test func sameSightingsAsTheDecodedEvent() throws {
        let body = Self.twoReports
        var sightings: [Sighting] = []
        #expect(try Sighting.append(fromEvent: body, to: &sightings))
        #expect(sightings == Sighting.all(in: try HCIEvent.decode(body)))
        #expect(sightings.count == 2)
        #expect(sightings[0].beacon?.major == 0x0102)
        #expect(sightings[0].rssi == -70)
        #expect(sightings[1].beacon == nil)
        #expect(sightings[1].rssi == nil)
        #expect(sightings[1].data == [2, 1, 6])
        // The data is a slice of the event, not a copy.
        #expect(sightings[0].data.startIndex == 2 + 2 + 1 + 1 + 6 + 1)
        body.withUnsafeBufferPointer { event in
            sightings[0].data.withUnsafeBufferPointer { data in
                #expect(data.baseAddress == event.baseAddress! + sightings[0].data.startIndex)
            }
        }
    }

    @Test func extendedReportsAndOtherEvents() throws {
        var w = ByteWriter()
        LEExtendedAdvertisingReport(
            eventType: .legacyAdvNonconnInd, addressType: .random, address: BDAddress("C0:FF:EE:00:00:02")!,
            rssi: -55, data: Self.iBeaconData
        ).encode(into: &w)
        let parameters = [0x0D, 0x01] + w.bytes
        let body = [0x3E, UInt8(parameters.count)] + parameters
        var sightings: [Sighting] = []
        #expect(try Sighting.append(fromEvent: body, to: &sightings))
        #expect(sightings == Sighting.all(in: try HCIEvent.decode(body)))
        #expect(sightings.first?.extended == true)
        // Command Complete: not a report, nothing appended.
        #expect(try Sighting.append(fromEvent: [0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00], to: &sightings) == false)
        #expect(sightings.count == 1)
    }

    @Test func malformedEventAppendsNothing() throws {
        var sightings: [Sighting] = []
        _ = try Sighting.append(fromEvent: Self.twoReports, to: &sightings)
        // The second report cut short (Parameter_Total_Length kept consistent): the first report
        // was read before the fault, and must not stay.
        var cut = Array(Self.twoReports.dropLast())
        cut[1] -= 1
        #expect(throws: DecodingError.self) { try Sighting.append(fromEvent: cut, to: &sightings) }
        #expect(sightings.count == 2)
        #expect(throws: DecodingError.self) { try HCIEvent.decode(cut) }
    }
}
