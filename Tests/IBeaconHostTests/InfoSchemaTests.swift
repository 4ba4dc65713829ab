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
