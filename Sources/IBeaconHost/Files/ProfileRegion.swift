import IBeaconCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension BeaconRegion {
    /// The region of the beacon of the profile at `path` (read through the profile store),
    /// named by the profile (`Profile.displayName(file:)`).
    public init(profileAt path: String) throws {
        let p = try Profile.load(path: path)
        try self.init(name: p.displayName(file: path), proximityUUID: p.proximityUUID, major: p.major, minor: p.minor)
    }

    /// monitor's regions from the command line: each `--region` text, then the one of `--uuid`
    /// (narrowed by `--major`, `--minor`) when it is given.
    public static func parsing(
        _ texts: [String], uuid: UUID?, major: UInt16?, minor: UInt16?
    ) throws(RegionError) -> [BeaconRegion] {
        var out = try texts.map { text throws(RegionError) in try BeaconRegion(parsing: text) }
        if let uuid { out.append(try BeaconRegion(proximityUUID: uuid, major: major, minor: minor)) }
        return out
    }

    /// Refuses `regions` when two share a name (names key the events and topics).
    public static func checkNamesApart(_ regions: [BeaconRegion]) throws(RegionError) {
        guard let name = sharedName(in: regions) else { return }
        throw RegionError(
            "two regions are named \(name); name them apart with --region NAME=UUID… or the profiles' name")
    }

    /// The first name two of `regions` share (names key events and topics); nil when all differ.
    public static func sharedName(in regions: [BeaconRegion]) -> String? {
        var seen: Set<String> = []
        return regions.first { !seen.insert($0.name).inserted }?.name
    }
}
