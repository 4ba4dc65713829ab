import Foundation
import Testing

@testable import IBeaconCore

@Suite struct IBeaconTests {
    /// Produced by Bumble 0.0.236, independently of this code:
    /// ```
    /// /tmp/probe-venv/bin/python -c '
    /// import uuid, struct
    /// from bumble.core import AdvertisingData
    /// u = uuid.UUID("F7826DA6-4FA2-4E98-8024-BC5B71E0893E")
    /// payload = bytes([0x02, 0x15]) + u.bytes + struct.pack(">HHb", 0x0102, 0x0304, -59)
    /// ad = AdvertisingData([(AdvertisingData.FLAGS, bytes([0x06])),
    ///     (AdvertisingData.MANUFACTURER_SPECIFIC_DATA, struct.pack("<H", 0x004C) + payload)])
    /// print(len(bytes(ad)), bytes(ad).hex()); print(AdvertisingData.from_bytes(bytes(ad)))'
    /// ```
    /// printed `30 0201061aff4c000215f7826da64fa24e988024bc5b71e0893e01020304c5` and
    /// `[Flags]: LE General, No BR/EDR, [Manufacturer Specific Data]: company=Apple, Inc., data=0215f7…c5`.
    static let golden: [UInt8] = [
        0x02, 0x01, 0x06,  // length 2, AD type Flags, LE General Discoverable | BR/EDR Not Supported
        0x1A, 0xFF,  // length 26, AD type Manufacturer Specific Data
        0x4C, 0x00,  // company identifier 0x004C Apple, little-endian
        0x02, 0x15,  // iBeacon type 0x02, 21 bytes follow
        0xF7, 0x82, 0x6D, 0xA6, 0x4F, 0xA2, 0x4E, 0x98,  // proximity UUID F7826DA6-4FA2-4E98-
        0x80, 0x24, 0xBC, 0x5B, 0x71, 0xE0, 0x89, 0x3E,  //   8024-BC5B71E0893E, in written order
        0x01, 0x02,  // major 0x0102 = 258, big-endian
        0x03, 0x04,  // minor 0x0304 = 772, big-endian
        0xC5,  // measured power -59 dBm, two's complement
    ]

    static let beacon = IBeacon(
        proximityUUID: UUID(uuidString: "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")!,  // constant, valid
        major: 0x0102, minor: 0x0304, measuredPower: -59)

    @Test func encodesGoldenVector() {
        #expect(Self.beacon.advertisingData == Self.golden)
        #expect(Self.beacon.advertisingData.count == 30)
        #expect((try? ADStructure.encode(Self.beacon.adStructures)) == Self.golden)
    }

    @Test func decodesGoldenVector() throws {
        let structures = try ADStructure.parse(Self.golden)
        #expect(structures.map(\.type) == [.flags, .manufacturerSpecificData])
        let b = try #require(IBeacon.find(in: structures))
        #expect(b == Self.beacon)
        #expect(b.proximityUUID.uuidString == "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")
        #expect(b.major == 258 && b.minor == 772 && b.measuredPower == -59)
        // Also with the zero padding LE Set Advertising Data carries.
        let padded = Self.golden + [0x00]
        #expect(IBeacon.find(in: try ADStructure.parse(padded)) == Self.beacon)
    }

    @Test func byteSwapWouldBeCaught() {
        let swapped = IBeacon(
            proximityUUID: Self.beacon.proximityUUID, major: 0x0201, minor: 0x0403, measuredPower: -59)
        #expect(swapped.advertisingData != Self.golden)
    }

    @Test func rejectsNearMisses() {
        let good = Array(Self.golden[5...])  // the 25 bytes of manufacturer data
        #expect(good.count == 25)
        #expect(IBeacon(manufacturerData: good) == Self.beacon)
        var otherCompany = good
        otherCompany[0] = 0x4D
        var otherType = good
        otherType[2] = 0x03
        var otherLength = good
        otherLength[3] = 0x14
        for bad in [otherCompany, otherType, otherLength, Array(good.dropLast()), good + [0x00], [], [0x4C]] {
            #expect(IBeacon(manufacturerData: bad) == nil, "\(bad.hexString)")
        }
        #expect(throws: DecodingError.trailingBytes(what: "iBeacon manufacturer data", count: 1)) {
            try IBeacon.decode(manufacturerData: good + [0x00])
        }
        // Not found among other structures.
        #expect(IBeacon.find(in: [ADStructure(type: .manufacturerSpecificData, data: otherType)]) == nil)
    }

    @Test func extremesRoundTrip() throws {
        for (major, minor, power) in [(UInt16(0), UInt16(65535), Int8(-127)), (65535, 0, -1), (0x8000, 0x00FF, 20)] {
            let b = IBeacon(proximityUUID: UUID(), major: major, minor: minor, measuredPower: power)
            #expect(IBeacon.find(in: try ADStructure.parse(b.advertisingData)) == b)
        }
    }

    @Test func summaryNamesTheBeacon() throws {
        let s = try ADStructure.parse(Self.golden).map(\.summary)
        #expect(s[0] == "Flags: LE General Discoverable Mode, BR/EDR Not Supported (0x06)")
        #expect(
            s[1]
                == "Manufacturer Specific Data: Apple, Inc. (0x004C) iBeacon F7826DA6-4FA2-4E98-8024-BC5B71E0893E major 258 minor 772 measured power -59 dBm"
        )
    }
}
