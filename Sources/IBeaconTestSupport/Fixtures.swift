import Logging

/// A logger that says only critical messages: for components under test whose log is not what
/// the test asserts (a `RecordingLog` is, where it is).
public let quietLogger: Logger = {
    var l = Logger(label: "test")
    l.logLevel = .critical
    return l
}()

/// Byte vectors assembled by hand from the published layouts, independent of the code under test.
public enum Handmade {
    /// Advertising data of an iBeacon, assembled by hand from Apple's iBeacon layout (the same
    /// bytes tests/e2e/test_harness_selftest.py sends and Bumble's AD parser decodes),
    /// independent of `IBeacon.advertisingData`. UUID E2C56DB5-DFFB-48D2-B060-D0F5A71096E0.
    public static func iBeaconAdvertisingData(
        major: UInt16 = 0x0102, minor: UInt16 = 0x0304, power: Int8 = -59
    ) -> [UInt8] {
        [0x02, 0x01, 0x06]  // AD Flags (length 2): LE General Discoverable, BR/EDR not supported
            + [0x1A, 0xFF]  // Manufacturer Specific Data, 26 octets follow the length byte
            + [0x4C, 0x00]  // company identifier 0x004C (Apple), little endian
            + [0x02, 0x15]  // iBeacon type 0x02, 0x15 = 21 octets follow
            + [
                0xE2, 0xC5, 0x6D, 0xB5, 0xDF, 0xFB, 0x48, 0xD2,  // proximity UUID E2C56DB5-DFFB-48D2-
                0xB0, 0x60, 0xD0, 0xF5, 0xA7, 0x10, 0x96, 0xE0,  // B060-D0F5A71096E0, big endian
            ]
            + [UInt8(major >> 8), UInt8(major & 0xFF)]  // major, big endian (0x0102 -> 01 02)
            + [UInt8(minor >> 8), UInt8(minor & 0xFF)]  // minor, big endian (0x0304 -> 03 04)
            + [UInt8(bitPattern: power)]  // measured power, two's complement (-59 -> 0xC5)
    }
}
