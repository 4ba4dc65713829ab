import IBeaconCore

/// The profile a calibration's result goes to (`--profile`, or `--write`), owned by the profile
/// store: read before measuring, and, unless it is a dry run, checked writable and locked, so
/// that a read-only or broken profile fails in a second rather than after the measurement, and
/// the file replaced at the end is the one read here, in the directory opened here, whatever
/// happens to the path meanwhile.
public struct CalibrationDestination {
    /// nil: the result is only shown.
    public let path: String?
    /// The profile as read (through the lock when there is one); nil for a new file.
    public private(set) var existing: Profile?
    let lock: ProfileStore.Lock?

    /// Reads the profile at `path` (which must exist when `mustExist`) and, unless `dryRun`,
    /// checks that it (or its directory, for a new file) can be written and locks it.
    public static func open(_ path: String?, mustExist: Bool, dryRun: Bool) throws -> CalibrationDestination {
        guard let path else { return CalibrationDestination(path: nil, existing: nil, lock: nil) }
        var existing: Profile?
        if try mustExist || ProfileStore.exists(path, writing: !dryRun) {
            existing = try Profile.load(bytes: ProfileStore.read(path), file: path)
        }
        guard !dryRun else { return CalibrationDestination(path: path, existing: existing, lock: nil) }
        guard existing != nil else {
            try ProfileStore.checkWritable(path, mayCreate: true)
            return CalibrationDestination(path: path, existing: nil, lock: nil)
        }
        // Locked, then read again through the lock. The file and its directory must be
        // writable before measuring, not after.
        try ProfileStore.checkWritable(path)
        let locked = try ProfileStore.lock(path)
        do {
            existing = try Profile.load(bytes: locked.read(), file: path)
            try locked.checkWritable()
        } catch {
            locked.unlock()
            throw error
        }
        return CalibrationDestination(path: path, existing: existing, lock: locked)
    }

    /// Writes measured power and the record: into the locked profile, read again so that edits
    /// made while measuring are kept, or into a new file made from `target` (never over one
    /// that appeared meanwhile).
    public func write(measuredPower: Int, record: CalibrationRecord, target: CalibrationTarget) throws {
        guard let path else { return }
        var updated =
            try existing
            ?? Profile.new(
                uuid: target.proximityUUID, major: target.major, minor: target.minor, measuredPower: measuredPower,
                file: path)
        if let lock {
            updated = try Profile.load(bytes: lock.read(), file: path)
        }
        try updated.applyCalibration(measuredPower: measuredPower, record: record)
        if let lock {
            try lock.replace(with: updated.encoded())
        } else {
            try ProfileStore.create(path, updated.encoded(), overwrite: false)
        }
    }

    /// Lets go of the lock (nothing to do without one).
    public func close() { lock?.unlock() }
}
