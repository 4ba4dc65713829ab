import Foundation
import IBeaconTestSupport
import Testing

@testable import IBeaconCore

/// `HCIEvent.forEachAdvertisingReport(in:_:)` reads advertising reports in place (what scanning a
/// capture runs for every event); `HCIEvent.decode` builds its reports from the same reader. The
/// two must accept and reject the same bytes and give the same fields.
@Suite struct AdvertisingReportFieldsTests {
    /// One legacy report: ADV_NONCONN_IND (03), random (01), address 11:22:33:44:55:66 (LE),
    /// 3 bytes of data, RSSI -60 (C4).
    static let legacyReport: [UInt8] = [0x03, 0x01, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x03, 0x02, 0x01, 0x06, 0xC4]

    /// One extended report: event type 0x0010 (legacy PDU), public (00), address
    /// 01:02:03:04:05:06, 1M (01), no secondary PHY (00), no SID (FF), TX power -8 (F8), RSSI
    /// not available (7F), no periodic interval, direct address type random (01), direct address
    /// 0A:0B:0C:0D:0E:0F, 2 bytes of data.
    static let extendedReport: [UInt8] =
        [0x10, 0x00, 0x00, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x01, 0x00, 0xFF, 0xF8, 0x7F, 0x00, 0x00, 0x01]
        + [0x0F, 0x0E, 0x0D, 0x0C, 0x0B, 0x0A, 0x02, 0xAB, 0xCD]

    /// An LE Meta event body: 3E, length, subevent, Num_Reports, the reports.
    static func event(_ subevent: UInt8, _ reports: [[UInt8]], count: Int? = nil) -> [UInt8] {
        let parameters = [subevent, UInt8(count ?? reports.count)] + reports.flatMap { $0 }
        return [0x3E, UInt8(truncatingIfNeeded: parameters.count)] + parameters
    }

    /// The fields the in-place reader gives, or the error it throws.
    static func fields(_ body: [UInt8]) -> Result<[AdvertisingReportFields], DecodingError>? {
        var out: [AdvertisingReportFields] = []
        do {
            guard try HCIEvent.forEachAdvertisingReport(in: body, { out.append($0) }) else { return nil }
            return .success(out)
        } catch {
            return .failure(error)
        }
    }

    @Test func legacyReportFields() throws {
        let body = Self.event(0x02, [Self.legacyReport])
        let f = try #require(try Self.fields(body)?.get().first)
        #expect(!f.extended)
        #expect(f.eventType == 0x03)
        #expect(f.addressType == .random)
        #expect(f.address.description == "11:22:33:44:55:66")
        #expect(f.rssi == -60)
        #expect(Array(body[f.data]) == [0x02, 0x01, 0x06])
        #expect(f.data.upperBound == body.count - 1)  // RSSI is the last byte
    }

    @Test func extendedReportFields() throws {
        let body = Self.event(0x0D, [Self.extendedReport])
        let f = try #require(try Self.fields(body)?.get().first)
        #expect(f.extended)
        #expect(f.eventType == 0x0010)
        #expect(f.address.description == "01:02:03:04:05:06")
        #expect(f.primaryPHY == .le1M)
        #expect(f.advertisingSID == nil)
        #expect(f.txPower == -8)
        #expect(f.rssi == nil)
        #expect(f.directAddressType == .random)
        #expect(f.directAddress.description == "0A:0B:0C:0D:0E:0F")
        #expect(f.data == body.count - 2..<body.count)  // data runs to the end of the buffer
        #expect(Array(body[f.data]) == [0xAB, 0xCD])
    }

    @Test func otherEventsAreNotReadAsReports() {
        #expect(Self.fields([0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00]) == nil)  // Command Complete
        #expect(Self.fields([0x3E, 0x02, 0x12, 0x00]) == nil)  // LE Advertising Set Terminated, short
    }

    @Test func malformedLengthsThrowWhereDecodeThrows() throws {
        let legacy = Self.event(0x02, [Self.legacyReport])
        // Data_Length 32: over the legacy maximum of 31 (§7.7.65.2).
        var long = Self.legacyReport
        long[8] = 32
        let cases: [[UInt8]] = [
            Array(legacy.dropLast()),  // cut by one: Parameter_Total_Length says one more
            legacy + [0x00],  // one byte too many
            Self.event(0x02, [Array(Self.legacyReport.dropLast())]),  // report cut, length consistent
            Self.event(0x02, [Self.legacyReport], count: 2),  // Num_Reports says two
            Self.event(0x02, [Self.legacyReport + [0x00]]),  // trailing byte after the reports
            Self.event(0x02, [long + [UInt8](repeating: 0, count: 29)]),
            Self.event(0x0D, [Array(Self.extendedReport.dropLast())]),  // extended data cut
            [0x3E, 0x01, 0x02],  // Num_Reports missing
        ]
        for body in cases {
            guard case .failure(let error) = Self.fields(body) else {
                Issue.record("accepted \(body.hexString)")
                continue
            }
            #expect(throws: error) { try HCIEvent.decode(body) }
        }
        // Zero reports is a well-formed event.
        #expect(try Self.fields(Self.event(0x02, []))?.get() == [])
    }

    /// Random events (valid ones with one byte changed, cut or extended, and random bytes): the
    /// in-place reader and `decode` agree on every one, and `Sighting`-style consumers get the
    /// same reports either way.
    @Test func agreesWithDecodeOnMutations() {
        var rng = SplitMix64(seed: 0xADD_5EED)
        var accepted = 0
        for round in 0..<20_000 {
            var body: [UInt8]
            let extended = round % 2 == 1
            let report = extended ? Self.extendedReport : Self.legacyReport
            body = Self.event(extended ? 0x0D : 0x02, Array(repeating: report, count: Int(rng.next() % 3)))
            switch round % 5 {
            case 0: body[Int(rng.next() % UInt64(body.count))] = UInt8(truncatingIfNeeded: rng.next())
            case 1: body = Array(body.prefix(Int(rng.next() % UInt64(body.count + 1))))
            case 2: body += [UInt8(truncatingIfNeeded: rng.next())]
            case 3: body = [0x3E] + (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            default: break
            }
            let decoded = Result { () throws(DecodingError) in try HCIEvent.decode(body) }
            switch (Self.fields(body), decoded) {
            case (.success(let fields), .success(.leAdvertisingReport(let reports))):
                #expect(fields.map { LEAdvertisingReport($0, in: body) } == reports)
                accepted += 1
            case (.success(let fields), .success(.leExtendedAdvertisingReport(let reports))):
                #expect(fields.map { LEExtendedAdvertisingReport($0, in: body) } == reports)
                accepted += 1
            case (.failure(let a), .failure(let b)):
                #expect(a == b)
            case (nil, .success(let event)):
                if case .leAdvertisingReport = event { Issue.record("skipped \(body.hexString)") }
                if case .leExtendedAdvertisingReport = event { Issue.record("skipped \(body.hexString)") }
            case (nil, .failure):
                // decode throws for an event that is not a report; the reader only reads reports.
                let isReport = body.count >= 3 && body[0] == 0x3E && (body[2] == 0x02 || body[2] == 0x0D)
                #expect(!isReport || body.count != 2 + Int(body[1]), "\(body.hexString)")
            default:
                Issue.record("disagree on \(body.hexString)")
            }
        }
        #expect(accepted > 2_000)
    }
}

/// `BDAddress` holds its six octets in one integer: parsing, printing, ordering and reading
/// must be what the six-byte array gave.
@Suite struct BDAddressTests {
    @Test func textAndBytesRoundTrip() throws {
        let a = try #require(BDAddress("C0:FF:EE:01:02:0A"))
        #expect(a.description == "C0:FF:EE:01:02:0A")
        #expect(a.bytes == [0x0A, 0x02, 0x01, 0xEE, 0xFF, 0xC0])  // HCI order: least significant first
        #expect(a.uint48 == 0xC0FF_EE01_020A)
        #expect(try BDAddress(littleEndian: a.bytes) == a)
        #expect(BDAddress("c0-ff-ee-01-02-0a") == a)
        #expect(BDAddress.zero.description == "00:00:00:00:00:00")
        #expect(BDAddress(uint48: 0xFFFF_FFFF_FFFF)?.description == "FF:FF:FF:FF:FF:FF")
        #expect(BDAddress(uint48: 1 << 48) == nil)
        for bad in ["C0:FF:EE:01:02", "C0:FF:EE:01:02:0A:0B", "C0:FF:EE:01:02:0G", "C0:FF:EE:01:02:ABC", ""] {
            #expect(BDAddress(bad) == nil, "\(bad)")
        }
        #expect(throws: DecodingError.invalidValue(what: "BD_ADDR length", value: 5, allowed: "6")) {
            try BDAddress(littleEndian: [1, 2, 3, 4, 5])
        }
    }

    @Test func randomRoundTripsAndOrder() throws {
        var rng = SplitMix64(seed: 48)
        var previous: BDAddress?
        for _ in 0..<2_000 {
            let bytes = (0..<6).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            let a = try BDAddress(littleEndian: bytes)
            #expect(a.bytes == bytes)
            #expect(BDAddress(a.description) == a)
            let text = bytes.reversed().map { $0 < 16 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
            #expect(a.description == text.joined(separator: ":").uppercased())
            if let previous {
                // Ordered as printed: most significant octet first.
                let expected = previous.bytes.reversed().lexicographicallyPrecedes(a.bytes.reversed())
                #expect((previous < a) == expected)
            }
            previous = a
        }
    }

    @Test func staticAndNonResolvableKinds() throws {
        // Core 5.4 Vol 6 Part B §1.3.2: top two bits 11 static, 00 non-resolvable; the random
        // part neither all 0 nor all 1.
        #expect(BDAddress("C3:12:34:56:78:9A")!.isStaticRandom)
        #expect(BDAddress("FF:FF:FF:FF:FF:FE")!.isStaticRandom)
        #expect(!BDAddress("C0:00:00:00:00:00")!.isStaticRandom)
        #expect(!BDAddress("FF:FF:FF:FF:FF:FF")!.isStaticRandom)
        #expect(!BDAddress("83:12:34:56:78:9A")!.isStaticRandom)  // 10: resolvable private
        #expect(!BDAddress("00:1A:7D:DA:71:13")!.isStaticRandom)
        #expect(BDAddress("00:1A:7D:DA:71:13")!.isNonResolvablePrivate)
        #expect(!BDAddress("3F:FF:FF:FF:FF:FF")!.isNonResolvablePrivate)
        #expect(!BDAddress.zero.isNonResolvablePrivate)

        var rng = SplitMix64(seed: 7)
        let public_ = BDAddress("00:AA:01:00:00:00")!
        var seen = Set<BDAddress>()
        for _ in 0..<500 {
            let a = BDAddress.nonResolvable(using: &rng, avoiding: public_)
            #expect(a.isNonResolvablePrivate && a != public_)
            seen.insert(a)
        }
        #expect(seen.count == 500)
    }

    @Test func aBeaconsStaticAddressDependsOnItsIdentityOnly() throws {
        let uuid = UUID(uuidString: "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")!
        let beacon = IBeacon(proximityUUID: uuid, major: 0x0102, minor: 0x0304, measuredPower: -59)
        let a = BDAddress.staticRandom(for: beacon)
        #expect(a.isStaticRandom)
        // Recalibrating (another measured power) keeps the address: one device to receivers.
        var recalibrated = beacon
        recalibrated.measuredPower = -63
        #expect(BDAddress.staticRandom(for: recalibrated) == a)
        // Another beacon of the same deployment gets another address.
        var neighbour = beacon
        neighbour.minor = 0x0305
        #expect(BDAddress.staticRandom(for: neighbour) != a)
        var swapped = beacon
        (swapped.major, swapped.minor) = (0x0304, 0x0102)
        #expect(BDAddress.staticRandom(for: swapped) != a)
        // Pinned: the same on every machine and every release (FNV-1a 64 of UUID ‖ major ‖ minor).
        #expect(a.description == "F8:02:54:19:DE:2F")
    }

    @Test func readsSixBytesAtTheEndOfABuffer() throws {
        var r = ByteReader([0xFF, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06])
        _ = try r.readUInt8()
        #expect(try BDAddress.read(from: &r).description == "06:05:04:03:02:01")
        #expect(r.isAtEnd)
        var short = ByteReader([0x01, 0x02, 0x03, 0x04, 0x05])
        #expect(throws: DecodingError.truncated(what: "Address", needed: 6, available: 5)) {
            try BDAddress.read(from: &short, "Address")
        }
    }
}
