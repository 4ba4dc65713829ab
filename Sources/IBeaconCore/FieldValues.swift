#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// A beacon's fields as a person writes them (command-line options): the same forms and ranges
// a profile's keys accept (`Profile.majorRange`…), so that every command and every profile
// agrees on what a major, a minor or a measured power may be.

/// A proximity UUID as written: the canonical 8-4-4-4-12 hex form only, as a profile holds it.
public struct ProximityUUID: Hashable, Sendable, CustomStringConvertible {
    public let uuid: UUID

    public init(_ uuid: UUID) { self.uuid = uuid }

    /// `F7826DA6-4FA2-4E98-8024-BC5B71E0893E` (either case); nil for any other form (no braces,
    /// no missing hyphens).
    public init?(parsing text: String) {
        guard let parsed = ParsedUUID(text) else { return nil }
        uuid = parsed.uuid
    }

    /// A new random (version 4) UUID, for a beacon of one's own.
    public static func random() -> ProximityUUID { ProximityUUID(UUID()) }

    /// The form to show in a message saying what a UUID looks like.
    public static let example = "F7826DA6-4FA2-4E98-8024-BC5B71E0893E"

    /// Upper-case 8-4-4-4-12.
    public var description: String { uuid.uuidString }
}

/// The range of one of a beacon's whole-number fields, and how a message spells it.
public struct FieldRange: Sendable, Hashable {
    public let range: ClosedRange<Int64>
    /// Appended to the range in messages: ` dBm`, or empty.
    public let unit: String

    public init(_ range: ClosedRange<Int64>, unit: String = "") {
        self.range = range
        self.unit = unit
    }

    /// Major, two octets of the payload (`Profile.majorRange`).
    public static let major = FieldRange(Profile.majorRange)
    /// Minor, two octets of the payload (`Profile.minorRange`).
    public static let minor = FieldRange(Profile.minorRange)
    /// Measured power, the RSSI at 1 m in dBm (`Profile.measuredPowerRange`).
    public static let measuredPower = FieldRange(Profile.measuredPowerRange, unit: " dBm")
    /// The legacy advertising interval in ms (`Profile.intervalMsRange`).
    public static let intervalMs = FieldRange(Profile.intervalMsRange)

    public func contains(_ value: Int) -> Bool { range.contains(Int64(value)) }

    /// `0…65535`, `-127…-1`: the bounds alone, for a help text that names the unit itself.
    public var bounds: String { "\(range.lowerBound)…\(range.upperBound)" }

    /// `0…65535`, `-127…-1 dBm`.
    public var text: String { bounds + unit }
}
