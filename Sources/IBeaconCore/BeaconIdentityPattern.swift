#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Which beacons an identity names, each part optional: a proximity UUID, a major and a minor.
/// The one matcher of scan's filter, monitor's regions and calibrate's target: a part left out
/// matches every value, so the whole identity names one beacon and none of it names all.
public struct BeaconIdentityPattern: Sendable, Hashable {
    public var proximityUUID: UUID?
    public var major: UInt16?
    public var minor: UInt16?

    public init(proximityUUID: UUID? = nil, major: UInt16? = nil, minor: UInt16? = nil) {
        self.proximityUUID = proximityUUID
        self.major = major
        self.minor = minor
    }

    /// No part given: every beacon matches.
    public var isEmpty: Bool { proximityUUID == nil && major == nil && minor == nil }

    /// Whether `beacon` carries every part given.
    public func matches(_ beacon: IBeacon) -> Bool {
        (proximityUUID == nil || proximityUUID == beacon.proximityUUID) && (major == nil || major == beacon.major)
            && (minor == nil || minor == beacon.minor)
    }
}
