import IBeaconCore
import IBeaconTestSupport
import Logging
import Testing

@testable import IBeaconHost

/// Issue 31 step 2: one `info --json` schema for both paths. The kernel's management interface
/// and raw HCI know different facts; both objects have every member, in one order, `null` where
/// the path cannot know it.
@Suite struct InfoSchemaTests {
    @Test func theKernelsInfoHasEveryMemberInTheSchemasOrder() async throws {
        let kernel = FakeMgmtKernel()
        let adapter = await KernelAdapterTests.adapter(kernel, administer: false)
        let json = try await adapter.describe().json
        #expect(json.keys == AdapterDescription.members)
        #expect(json["path"] == .string("mgmt"))
        #expect(json["hciVersion"] == .null && json["leFeatures"] == .null)
        #expect(json["powered"] != .null && json["name"] != .null)
    }

    @Test func rawHCIsInfoHasEveryMemberInTheSchemasOrder() throws {
        let info = ControllerInfo(
            address: try #require(BDAddress("A1:B2:C3:D4:E5:F6")), version: nil, features: [.extendedAdvertising])
        let json = ControllerAdapter.describe(info, name: "tcp:127.0.0.1:1").json
        #expect(json.keys == AdapterDescription.members)
        #expect(json["path"] == .string("raw"))
        #expect(json["extendedAdvertising"] == .bool(true))
        #expect(json["settings"] == .null && json["name"] == .null && json["hciVersion"] == .null)
    }
}

/// `advertise --json`'s status line: one schema through the kernel and on a controller this host
/// programs, every member present in one order, `null` where the path has no such thing.
@Suite struct AdvertiseStatusSchemaTests {
    static let members = [
        "event", "device", "path", "address", "profile", "uuid", "major", "minor", "measuredPower", "intervalMs",
        "txPower", "mode", "instance", "connectable", "method",
    ]

    static func keys(_ line: String) throws -> [String] {
        guard case .object(let object) = try JSONValue.parse(Array(line.utf8)) else { return [] }
        return object.keys
    }

    @Test func bothPathsWriteTheSameMembers() throws {
        let spec = BeaconSpec(beacon: testBeacon, intervalMilliseconds: 100, label: "t.json")
        let address = try #require(BDAddress("C3:12:34:56:78:9A"))
        let raw = AdvertisingStatus(
            commandSet: .legacy,
            beacons: [.init(spec: spec, placement: .controller(address: address, handle: nil), txPower: 3)],
            warnings: [])
        let kernel = AdvertisingStatus(
            commandSet: nil,
            beacons: [
                .init(
                    spec: spec, placement: .kernelInstance(2, method: .addAdvertising, connectable: true, address: nil),
                    txPower: nil)
            ], warnings: [])
        let rawLine = raw.lines(device: "tcp:127.0.0.1:1", json: true)
        let kernelLine = kernel.lines(device: "hci0", json: true)
        #expect(try Self.keys(rawLine) == Self.members)
        #expect(try Self.keys(kernelLine) == Self.members)
        #expect(rawLine.contains(#""path":"raw""#) && rawLine.contains(#""mode":"legacy""#))
        #expect(rawLine.contains(#""instance":null"#) && rawLine.contains(#""connectable":false"#))
        #expect(kernelLine.contains(#""path":"mgmt""#) && kernelLine.contains(#""mode":null"#))
        #expect(kernelLine.contains(#""instance":2"#) && kernelLine.contains(#""intervalMs":null"#))
    }
}
