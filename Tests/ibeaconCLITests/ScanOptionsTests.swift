import Foundation
import Testing

/// `ibeacon scan` refuses bad ranging options before touching a controller: usage mistakes
/// exit 64 with a message naming the option (the device is a port nothing listens on).
@Suite struct ScanOptionsTests {
    static let device = ["--device", "tcp:127.0.0.1:1"]

    static let usageErrors: [([String], String)] = [
        (["--forget-after", "0.5"], "--forget-after must be a number of seconds within 1…3600, got 0.5"),
        (["--forget-after", "nan"], "--forget-after"),
        (["--forget-after", "inf"], "--forget-after"),
        (["--forget-after", "-5"], "--forget-after"),
        (["--forget-after", "4000"], "--forget-after"),
        (["--reports"], "--reports changes what --json prints: use --json --reports"),
    ]

    @Test(arguments: usageErrors.indices)
    func usageErrorsExit64(_ index: Int) async throws {
        let (arguments, message) = Self.usageErrors[index]
        let result = try await ibeacon(["scan"] + Self.device + arguments)
        #expect(!result.crashed)
        #expect(result.status == 64, "\(arguments): \(result.stderr)")
        #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
    }
}
