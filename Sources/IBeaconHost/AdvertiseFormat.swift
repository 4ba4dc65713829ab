import IBeaconCore

extension BeaconSpec {
    /// What to advertise from the profile file at `path` (read through the profile store).
    public init(profileAt path: String, forceRandomAddress: Bool) throws {
        let profile = try Profile.load(bytes: ProfileStore.read(path), file: path)
        let beacon = profile.iBeacon
        self.init(
            beacon: beacon, intervalMilliseconds: profile.intervalMs, txPower: profile.txPower,
            address: Self.address(forceRandomAddress ? .randomStatic : profile.address, beacon: beacon),
            calibratedTxPower: profile.calibrationRecord?.txPower.map { Int8($0) },
            label: path.split(separator: "/").last.map(String.init) ?? path)
    }
}

extension BeaconSpec {
    /// The profile's `address` as an address to advertise from; a non-resolvable one is new for each run.
    public static func address(_ kind: Profile.AddressKind, beacon: IBeacon) -> BeaconAddress {
        switch kind {
        case .public: return .identity
        case .randomStatic: return .staticRandom(.staticRandom(for: beacon))
        case .fixed(let address): return .staticRandom(address)
        case .nonResolvable:
            var generator = SystemRandomNumberGenerator()
            return .nonResolvable(.nonResolvable(using: &generator))
        }
    }
}

extension AdvertisingStatus {
    /// The status line of each beacon on the air: on a controller this host programs, or as an
    /// advertising instance of the kernel's (whose interval and TX power the kernel may choose).
    public func lines(device: String, json: Bool) -> String {
        if beacons.isEmpty { return Self.allSwitchedOff(device: device, json: json) }
        return beacons.map { b in
            switch b.placement {
            case .controller(let address, _):
                return controllerLine(b, address: address, commandSet: commandSet, device: device, json: json)
            case .kernelInstance(let instance, let method, let connectable, _):
                return kernelInstanceLine(
                    b, instance: instance, method: method.rawValue, extended: method == .extendedParameters,
                    connectable: connectable, device: device, json: json)
            }
        }.joined(separator: "\n")
    }
}

extension AdvertisingStatus {
    /// The status line when every profile says `"advertising": false` (switched off from Home
    /// Assistant): nothing is on the air until a command switches one on.
    static func allSwitchedOff(device: String, json: Bool) -> String {
        let why = "every profile says \"advertising\": false (switched off); nothing on the air until switched on"
        guard json else { return "advertising nothing on \(device): \(why)" }
        return JSONValue.object(
            JSONObject([("device", .string(device)), ("status", .string("off")), ("reason", .string(why))])
        ).compactText()
    }
}

private func controllerLine(
    _ b: AdvertisingStatus.Beacon, address: BDAddress, commandSet: LECommandSet?, device: String, json: Bool
) -> String {
    let beacon = b.spec.beacon
    let mode = commandSet?.rawValue ?? ""
    if json {
        return statusJSON(
            b, device: device, path: .raw, address: address.description, intervalMs: b.spec.intervalMilliseconds,
            mode: mode, instance: nil, connectable: false, method: nil)
    }
    let tx = b.txPower.map { "\($0) dBm" } ?? "not reported"
    return "advertising \(b.spec.label) on \(device) from \(address): \(beacon.uuidString) "
        + "major \(beacon.major) minor \(beacon.minor), measured power \(beacon.measuredPower) dBm, "
        + "every \(b.spec.intervalMilliseconds) ms, \(mode), TX power \(tx)"
}

private func kernelInstanceLine(
    _ b: AdvertisingStatus.Beacon, instance: UInt8, method: String, extended: Bool, connectable: Bool,
    device: String, json: Bool
) -> String {
    let beacon = b.spec.beacon
    let address = b.address?.description
    if json {
        return statusJSON(
            b, device: device, path: .kernel, address: address,
            intervalMs: extended ? b.spec.intervalMilliseconds : nil,
            mode: nil, instance: Int(instance), connectable: connectable, method: method)
    }
    // Add Advertising reports no power (the kernel chooses it); Add Extended Advertising
    // Parameters reports the controller's, or that it does not know it.
    let tx = b.txPower.map { "\($0) dBm" } ?? (extended ? "unknown" : "chosen by the kernel")
    let interval = extended ? "every \(b.spec.intervalMilliseconds) ms" : "at the kernel's default interval"
    let from = address.map { "from \($0)" } ?? "from a new non-resolvable address"
    return "advertising \(b.spec.label) on \(device) through the kernel (instance \(instance)) \(from)"
        + "\(connectable ? ", connectable" : ""): "
        + "\(beacon.uuidString) major \(beacon.major) minor \(beacon.minor), measured power "
        + "\(beacon.measuredPower) dBm, \(interval), TX power \(tx)"
}

/// `advertise --json`'s status line: one schema on both paths, every member present in this
/// order, `null` where the path has no such thing (a controller this host programs has a command
/// set, `mode`; a kernel instance has an `instance` number and a `method`; the kernel may choose
/// the interval and the TX power).
private func statusJSON(
    _ b: AdvertisingStatus.Beacon, device: String, path: ControllerPath, address: String?, intervalMs: Int?,
    mode: String?, instance: Int?, connectable: Bool, method: String?
) -> String {
    let beacon = b.spec.beacon
    return jsonLine([
        "event": "advertising", "device": device, "path": path.rawValue, "address": address,
        "profile": b.spec.label, "uuid": beacon.uuidString, "major": Int(beacon.major), "minor": Int(beacon.minor),
        "measuredPower": Int(beacon.measuredPower), "intervalMs": intervalMs, "txPower": b.txPower.map { Int($0) },
        "mode": mode, "instance": instance, "connectable": connectable, "method": method,
    ])
}
