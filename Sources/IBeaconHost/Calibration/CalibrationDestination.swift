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
        if try mustExist || SafeFile.exists(path, writing: !dryRun) {
            existing = try Profile.load(path: path)
        }
        guard !dryRun else { return CalibrationDestination(path: path, existing: existing, lock: nil) }
        guard existing != nil else {
            try SafeFile.checkWritable(path, mayCreate: true)
            return CalibrationDestination(path: path, existing: nil, lock: nil)
        }
        // Locked, then read again through the lock. The file and its directory must be
        // writable before measuring, not after.
        try SafeFile.checkWritable(path)
        let locked = try ProfileStore.lock(path)
        do {
            existing = try Profile.load(bytes: locked.read(), file: path)
            try locked.checkWritable()
            if let existing { try checkRoom(in: existing, path: path) }
        } catch {
            locked.unlock()
            throw error
        }
        return CalibrationDestination(path: path, existing: existing, lock: locked)
    }

    /// Opens the destination (`open`), runs `body` with it, and lets go of the lock when `body`
    /// returns or throws: the scope of one calibration's hold on its profile.
    public static func withOpened<T>(
        _ path: String?, mustExist: Bool, dryRun: Bool, _ body: (CalibrationDestination) async throws -> T
    ) async throws -> T {
        let destination = try open(path, mustExist: mustExist, dryRun: dryRun)
        defer { destination.close() }
        return try await body(destination)
    }

    /// The calibration record written with measured power: `result`'s estimate and the offset
    /// the calibrator applied to it (once: the record states it, nothing adds it again), the
    /// receiver, when (`unixTime`, to the second), and the TX power the profile gives.
    public func record(
        of result: CalibrationResult, receiver: String, receiverAddress: BDAddress?,
        capture: CalibrationCaptureRecord? = nil, addressWithheld: Bool = false, unixTime: Double
    ) -> CalibrationRecord {
        CalibrationRecord(
            timestamp: iso8601(unixSeconds: unixTime, milliseconds: false), samples: result.sampleCount,
            estimate: result.estimate, interval95: result.halfWidth95, spread: result.spread, method: result.method,
            receiver: receiver,
            receiverAddress: addressWithheld
                ? CalibrationCaptureRecord.withheldAddress : receiverAddress?.description ?? "unknown",
            offset: result.offset, txPower: existing?.txPower.map { Int($0) }, capture: capture)
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
        try Self.checkSize(updated.encoded(), path: path)
        if let lock {
            try lock.replace(with: updated.encoded())
        } else {
            try SafeFile.create(path, updated.encoded(), overwrite: false)
        }
    }

    /// A profile calibrated here must still be one ibeacon reads: at most `SafeFile.maximumSize`
    /// with its calibration record. Checked before measuring (with a record of the longest
    /// values a calibration writes), and again with the real one before writing.
    static func checkRoom(in profile: Profile, path: String) throws {
        let long = String(repeating: "x", count: 512)
        let record = CalibrationRecord(
            timestamp: "2026-01-01T00:00:00Z", samples: Int(Int32.max), estimate: -127.123456789012,
            interval95: 20.123456789012, spread: 100.123456789012, method: long, receiver: long,
            receiverAddress: "00:00:00:00:00:00", offset: -40.123456789012, txPower: profile.txPower.map { Int($0) })
        var probe = profile
        try probe.applyCalibration(measuredPower: -127, record: record)
        try checkSize(probe.encoded(), path: path)
    }

    /// Refuses `bytes` when they are more than a profile may be (ibeacon would refuse to read it).
    static func checkSize(_ bytes: [UInt8], path: String) throws(FileError) {
        guard bytes.count > SafeFile.maximumSize else { return }
        throw FileError(
            .badData, path: path,
            "with its calibration record it would be \(bytes.count) bytes, more than the 1 MiB a profile may be "
                + "(ibeacon would refuse to read it); nothing written",
            hint: "remove what the profile does not need (keys ibeacon ignores, a long name) and calibrate again")
    }

    /// Lets go of the lock (nothing to do without one); `withOpened` calls it.
    func close() { lock?.unlock() }
}
