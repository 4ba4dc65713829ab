import IBeaconCore

extension BeaconRegion {
    /// The region of the beacon of the profile at `path` (read through the profile store),
    /// named by the profile (`Profile.displayName(file:)`).
    public init(profileAt path: String) throws {
        let p = try Profile.load(bytes: ProfileStore.read(path), file: path)
        try self.init(name: p.displayName(file: path), proximityUUID: p.proximityUUID, major: p.major, minor: p.minor)
    }

    /// The first name two of `regions` share (names key events and topics); nil when all differ.
    public static func sharedName(in regions: [BeaconRegion]) -> String? {
        var seen: Set<String> = []
        return regions.first { !seen.insert($0.name).inserted }?.name
    }
}
