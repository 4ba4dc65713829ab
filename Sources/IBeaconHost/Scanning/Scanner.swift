import IBeaconCore
import Logging

/// One advertisement heard: one report of one event.
public struct Sighting: Sendable, Equatable {
    public var address: BDAddress
    public var addressType: LEAddressType
    /// nil when the controller reports 127, "RSSI not available".
    public var rssi: Int8?
    /// The report's AD structures. A slice: the reports read from one event share its bytes
    /// instead of each copying its data (`append(fromEvent:to:)`).
    public var data: ArraySlice<UInt8>
    /// The iBeacon in the data, when there is one.
    public var beacon: IBeacon?
    /// Whether the report came from a legacy or an extended advertising report event.
    public var extended: Bool

    public init(
        address: BDAddress, addressType: LEAddressType, rssi: Int8?, data: ArraySlice<UInt8>, extended: Bool
    ) {
        self.address = address
        self.addressType = addressType
        self.rssi = rssi
        self.data = data
        self.extended = extended
        // A stranger's malformed data is common: it simply holds no iBeacon.
        self.beacon = IBeacon.find(inAdvertisingData: data)
    }

    public init(address: BDAddress, addressType: LEAddressType, rssi: Int8?, data: [UInt8], extended: Bool) {
        self.init(address: address, addressType: addressType, rssi: rssi, data: data[...], extended: extended)
    }

    /// The report `fields` describes, read from the event bytes `event`.
    public init(_ fields: AdvertisingReportFields, in event: [UInt8]) {
        self.init(
            address: fields.address, addressType: fields.addressType, rssi: fields.rssi, data: event[fields.data],
            extended: fields.extended)
    }

    /// Every report in an event, in order (an event may carry several: Num_Reports > 1).
    public static func all(in event: HCIEvent) -> [Sighting] {
        switch event {
        case .leAdvertisingReport(let reports):
            return reports.map {
                Sighting(
                    address: $0.address, addressType: $0.addressType, rssi: $0.rssi, data: $0.data, extended: false)
            }
        case .leExtendedAdvertisingReport(let reports):
            return reports.map {
                Sighting(address: $0.address, addressType: $0.addressType, rssi: $0.rssi, data: $0.data, extended: true)
            }
        default:
            return []
        }
    }

    /// Appends the reports of the event body `event` to `sightings`: the same as
    /// `all(in: HCIEvent.decode(event))`, without building the event or copying any report's
    /// data (every sighting's `data` is a slice of `event`). Returns false, appending nothing,
    /// for an event that is not an advertising report; throws, appending nothing, for a
    /// malformed one.
    public static func append(fromEvent event: [UInt8], to sightings: inout [Sighting]) throws(DecodingError) -> Bool {
        let start = sightings.count
        do {
            return try HCIEvent.forEachAdvertisingReport(in: event) { sightings.append(Sighting($0, in: event)) }
        } catch {
            sightings.removeSubrange(start...)
            throw error
        }
    }
}

/// Programs a controller to scan passively with duplicate filtering off, so every
/// advertisement is reported (RSSI statistics need each one, FIELD.md "Linux specifics").
public struct Scanner: Sendable {
    public var mode: AdvertisingMode
    /// True when this host owns the controller (H4): it may Reset it and set event masks.
    public var ownsController: Bool
    /// Scan interval and window: equal, so the receiver listens all the time.
    public var intervalMilliseconds: Double
    public var logger: Logger
    /// How long to let a controller settle after a reset before programming it again.
    public var settleTime: Duration = .milliseconds(250)
    /// What `recover` waits on (its settle time and back-off); tests set a `ManualClock`.
    var clock: any Clock<Duration> = ContinuousClock()

    public init(mode: AdvertisingMode = .auto, ownsController: Bool, intervalMilliseconds: Double = 60, logger: Logger)
    {
        self.mode = mode
        self.ownsController = ownsController
        self.intervalMilliseconds = intervalMilliseconds
        self.logger = logger
    }

    /// Starts scanning; returns the command set used (needed to stop).
    public func start(on client: ControllerClient) async throws -> LECommandSet {
        if ownsController { try await client.resetAndUnmaskEvents() }
        let features = try await client.execute(LEReadLocalSupportedFeatures())
        let useExtended: Bool
        switch mode {
        case .auto: useExtended = features.contains(.extendedAdvertising)
        case .extended:
            guard features.contains(.extendedAdvertising) else {
                throw AdvertisingError("--mode extended: this controller does not support extended scanning")
            }
            useExtended = true
        case .legacy: useExtended = false
        }
        if useExtended {
            let timing = try ScanTiming(milliseconds: intervalMilliseconds, for: .extended)
            _ = try? await client.execute(LESetExtendedScanEnable(enabled: false, filterDuplicates: .disabled))
            _ = try await client.execute(
                LESetExtendedScanParameters(le1M: .init(scanType: .passive, interval: timing, window: timing)))
            _ = try await client.execute(LESetExtendedScanEnable(enabled: true, filterDuplicates: .disabled))
            return .extended
        }
        let timing = try ScanTiming(milliseconds: intervalMilliseconds, for: .legacy)
        _ = try? await client.execute(LESetScanEnable(enabled: false, filterDuplicates: false))
        _ = try await client.execute(LESetScanParameters(scanType: .passive, interval: timing, window: timing))
        _ = try await client.execute(LESetScanEnable(enabled: true, filterDuplicates: false))
        return .legacy
    }

    /// Commands from another host that stop or change our scanning.
    static let scanningOpcodes: Set<HCIOpcode> = [
        .leSetScanEnable, .leSetScanParameters, .leSetExtendedScanEnable, .leSetExtendedScanParameters,
    ]

    /// What an unsolicited event does to a scan: nil for most events; for a controller reset by
    /// another host, a power-up, a Hardware Error, the adapter going down, another program
    /// changing the scan — the reason the receiver cannot hear, and whether to start scanning
    /// again now (not for an adapter that went down: the kernel's reset when it is back up
    /// says when).
    public static func interruption(by event: HCIEvent, on name: String) -> (deafness: Deafness, restart: Bool)? {
        if let loss = ControllerStateLoss(event) {
            if loss == .adapterDown {
                return (Deafness(.poweredOff, "\(name) went down"), false)
            }
            return (Deafness(.reset, loss.reason), true)
        }
        if case .commandComplete(_, let opcode, _) = event, scanningOpcodes.contains(opcode) {
            return (Deafness(.reset, "another program changed the scanning (\(opcode))"), true)
        }
        return nil
    }

    /// Keeps a scan going through what stops it behind our back (`interruption(by:on:)`): for
    /// such an event it says so on the log and starts scanning again (`restart`) and returns the
    /// command set now in use; for any other event it returns nil at once. Throws when scanning
    /// cannot be started again.
    public func recover(after event: HCIEvent, on client: ControllerClient) async throws -> LECommandSet? {
        guard let (deafness, restart) = Self.interruption(by: event, on: client.transport.name) else { return nil }
        guard restart else {
            logger.warning("\(deafness.reason); scanning resumes when it is back up")
            return nil
        }
        return try await self.restart(because: deafness.reason, on: client)
    }

    /// Starts scanning again after `reason` (logged), retrying with back-off while the
    /// controller is not ready; returns the command set now in use. Throws when scanning cannot
    /// be started again (the link is gone, or the controller refuses eight times, over about 12 s).
    public func restart(because reason: String, on client: ControllerClient) async throws -> LECommandSet {
        logger.warning("\(reason); scanning again")
        let logger = self.logger
        let (commandSet, elapsed) = try await recoveryPolicy.run(on: clock) {
            try await start(on: client)
        } retrying: { error, _, _ in
            guard let error = error as? ControllerError, error.isWorthRetrying else { return false }
            logger.warning("starting the scan again failed: \(error); retrying")
            return true
        }
        logger.notice("scanning resumed after \(elapsed.formattedSeconds)")
        return commandSet
    }

    /// Starting a scan again after a reset: the settle time first, then back-off up to 2 s,
    /// eight attempts (about 12 s).
    var recoveryPolicy: RetryPolicy {
        RetryPolicy(
            firstDelay: settleTime, maximumDelay: .seconds(2), maximumAttempts: 8, waitsBeforeFirstAttempt: true)
    }

    /// Stops scanning; errors are logged, not thrown (this runs on the way out).
    public func stop(on client: ControllerClient, commandSet: LECommandSet) async {
        do {
            if commandSet == .extended {
                _ = try await client.execute(
                    LESetExtendedScanEnable(enabled: false, filterDuplicates: .disabled), timeout: .seconds(1))
            } else {
                _ = try await client.execute(
                    LESetScanEnable(enabled: false, filterDuplicates: false), timeout: .seconds(1))
            }
        } catch {
            logger.debug("could not stop scanning: \(error)")
        }
    }
}

/// Which sightings scan shows: the iBeacons `identity` matches and, with `all` (`--all`) and no
/// identity given, the transmitters that are not iBeacons too.
public struct SightingFilter: Sendable {
    public var identity: BeaconIdentityPattern
    public var all: Bool

    public init(identity: BeaconIdentityPattern, all: Bool) {
        self.identity = identity
        self.all = all
    }

    public func matches(_ sighting: Sighting) -> Bool {
        guard let beacon = sighting.beacon else { return all && identity.isEmpty }
        return identity.matches(beacon)
    }
}
