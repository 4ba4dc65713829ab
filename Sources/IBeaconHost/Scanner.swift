import IBeaconCore
import Logging

/// One advertisement heard: one report of one event.
public struct Sighting: Sendable, Equatable {
    public var address: BDAddress
    public var addressType: LEAddressType
    /// nil when the controller reports 127, "RSSI not available".
    public var rssi: Int8?
    public var data: [UInt8]
    /// The iBeacon in the data, when there is one.
    public var beacon: IBeacon?
    /// Whether the report came from a legacy or an extended advertising report event.
    public var extended: Bool

    public init(address: BDAddress, addressType: LEAddressType, rssi: Int8?, data: [UInt8], extended: Bool) {
        self.address = address
        self.addressType = addressType
        self.rssi = rssi
        self.data = data
        self.extended = extended
        // A stranger's malformed data is common: it simply holds no iBeacon.
        self.beacon = IBeacon.find(inAdvertisingData: data)
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

    public init(mode: AdvertisingMode = .auto, ownsController: Bool, intervalMilliseconds: Double = 60, logger: Logger)
    {
        self.mode = mode
        self.ownsController = ownsController
        self.intervalMilliseconds = intervalMilliseconds
        self.logger = logger
    }

    /// Starts scanning; returns the command set used (needed to stop).
    public func start(on client: ControllerClient) async throws -> AdvertisingMode {
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

    /// Stops scanning; errors are logged, not thrown (this runs on the way out).
    public func stop(on client: ControllerClient, mode: AdvertisingMode) async {
        do {
            if mode == .extended {
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
