// Scanning commands: legacy (Core 5.4 Vol 4 Part E §7.8.10, §7.8.11) and extended
// (§7.8.64, §7.8.65). The legacy/extended exclusion of §3.1 applies to scanning too.

/// LE_Scan_Type / Scan_Type, 1 octet. Core 5.4 Vol 4 Part E §7.8.10.
public struct LEScanType: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Listen only; no scan requests are sent.
    public static let passive = LEScanType(rawValue: 0x00)
    /// Send scan requests to get scan responses.
    public static let active = LEScanType(rawValue: 0x01)
}

/// Scanning_Filter_Policy, 1 octet. Core 5.4 Vol 4 Part E §7.8.10.
public struct ScanningFilterPolicy: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Accept all advertisements (except directed ones not addressed to this device).
    public static let basicUnfiltered = ScanningFilterPolicy(rawValue: 0x00)
    /// Only advertisers on the Filter Accept List.
    public static let basicFiltered = ScanningFilterPolicy(rawValue: 0x01)
    public static let extendedUnfiltered = ScanningFilterPolicy(rawValue: 0x02)
    public static let extendedFiltered = ScanningFilterPolicy(rawValue: 0x03)
}

/// Checks Scan_Window ≤ Scan_Interval and both within `set`'s range.
private func validateScanTiming(
    interval: ScanTiming, window: ScanTiming, set: LECommandSet, reference: String
) throws(ParameterError) {
    let range = ScanTiming.range(for: set)
    for (name, value) in [("Scan_Interval", interval), ("Scan_Window", window)] {
        guard range.contains(value.slots) else {
            throw .outOfRange(
                what: name, value: value.description, allowed: "\(range.lowerBound)…\(range.upperBound) slots",
                reference: reference)
        }
    }
    // §7.8.10, §7.8.64: the scan window shall be less than or equal to the scan interval.
    guard window <= interval else {
        throw .inconsistent(
            what: "scan window", reason: "window \(window) is longer than interval \(interval)", reference: reference)
    }
}

/// HCI_LE_Set_Scan_Parameters. Core 5.4 Vol 4 Part E §7.8.10. 7 parameter octets.
public struct LESetScanParameters: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x000B, "LE Set Scan Parameters", supportedCommandsBit: (26, 2))

    /// LE_Scan_Type, 1 octet.
    public let scanType: LEScanType
    /// LE_Scan_Interval, 2 octets (0x0004…0x4000).
    public let interval: ScanTiming
    /// LE_Scan_Window, 2 octets (0x0004…0x4000, ≤ interval).
    public let window: ScanTiming
    /// Own_Address_Type, 1 octet.
    public let ownAddressType: OwnAddressType
    /// Scanning_Filter_Policy, 1 octet.
    public let filterPolicy: ScanningFilterPolicy

    public init(
        scanType: LEScanType, interval: ScanTiming, window: ScanTiming, ownAddressType: OwnAddressType = .public,
        filterPolicy: ScanningFilterPolicy = .basicUnfiltered
    ) throws(ParameterError) {
        try validateScanTiming(
            interval: interval, window: window, set: .legacy, reference: "Core 5.4 Vol 4 Part E §7.8.10")
        self.scanType = scanType
        self.interval = interval
        self.window = window
        self.ownAddressType = ownAddressType
        self.filterPolicy = filterPolicy
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.uint8(scanType.rawValue)
        w.uint16LE(interval.slots)
        w.uint16LE(window.slots)
        w.uint8(ownAddressType.rawValue)
        w.uint8(filterPolicy.rawValue)
    }
}

/// HCI_LE_Set_Scan_Enable. Core 5.4 Vol 4 Part E §7.8.11: LE_Scan_Enable (1 octet),
/// Filter_Duplicates (1 octet). Calibration needs duplicates *not* filtered, or a scanner
/// reports each advertiser once.
public struct LESetScanEnable: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x000C, "LE Set Scan Enable", supportedCommandsBit: (26, 3))
    public var enabled: Bool
    public var filterDuplicates: Bool

    public init(enabled: Bool, filterDuplicates: Bool) {
        self.enabled = enabled
        self.filterDuplicates = filterDuplicates
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.uint8(enabled ? 0x01 : 0x00)
        w.uint8(filterDuplicates ? 0x01 : 0x00)
    }
}

/// HCI_LE_Set_Extended_Scan_Parameters. Core 5.4 Vol 4 Part E §7.8.64: Own_Address_Type,
/// Scanning_Filter_Policy, Scanning_PHYs (bit 0 LE 1M, bit 2 LE Coded), then for each PHY
/// set, in bit order, Scan_Type (1), Scan_Interval (2), Scan_Window (2).
public struct LESetExtendedScanParameters: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0041, "LE Set Extended Scan Parameters", supportedCommandsBit: (37, 5))

    /// The parameters for one PHY.
    public struct PHYParameters: Hashable, Sendable {
        public let scanType: LEScanType
        /// Scan_Interval[i], 0x0004…0xFFFF.
        public let interval: ScanTiming
        /// Scan_Window[i], 0x0004…0xFFFF, ≤ interval.
        public let window: ScanTiming

        public init(scanType: LEScanType, interval: ScanTiming, window: ScanTiming) throws(ParameterError) {
            try validateScanTiming(
                interval: interval, window: window, set: .extended, reference: "Core 5.4 Vol 4 Part E §7.8.64")
            self.scanType = scanType
            self.interval = interval
            self.window = window
        }
    }

    public let ownAddressType: OwnAddressType
    public let filterPolicy: ScanningFilterPolicy
    /// Scanning on the LE 1M PHY (Scanning_PHYs bit 0).
    public let le1M: PHYParameters?
    /// Scanning on the LE Coded PHY (Scanning_PHYs bit 2).
    public let leCoded: PHYParameters?

    /// At least one PHY is required.
    public init(
        ownAddressType: OwnAddressType = .public, filterPolicy: ScanningFilterPolicy = .basicUnfiltered,
        le1M: PHYParameters?, leCoded: PHYParameters? = nil
    ) throws(ParameterError) {
        guard le1M != nil || leCoded != nil else {
            throw .inconsistent(
                what: "Scanning_PHYs", reason: "at least one PHY (LE 1M or LE Coded) must be scanned",
                reference: "Core 5.4 Vol 4 Part E §7.8.64")
        }
        self.ownAddressType = ownAddressType
        self.filterPolicy = filterPolicy
        self.le1M = le1M
        self.leCoded = leCoded
    }

    /// Scanning_PHYs, 1 octet.
    public var scanningPHYs: UInt8 { (le1M != nil ? 0x01 : 0) | (leCoded != nil ? 0x04 : 0) }

    public func encodeParameters(into w: inout ByteWriter) {
        w.uint8(ownAddressType.rawValue)
        w.uint8(filterPolicy.rawValue)
        w.uint8(scanningPHYs)
        for phy in [le1M, leCoded] {
            guard let phy else { continue }
            w.uint8(phy.scanType.rawValue)
            w.uint16LE(phy.interval.slots)
            w.uint16LE(phy.window.slots)
        }
    }
}

/// Filter_Duplicates of LE Set Extended Scan Enable, 1 octet. Core 5.4 Vol 4 Part E §7.8.65.
public struct ExtendedScanDuplicateFilter: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let disabled = ExtendedScanDuplicateFilter(rawValue: 0x00)
    public static let enabled = ExtendedScanDuplicateFilter(rawValue: 0x01)
    /// Enabled, reset at the start of each scan period.
    public static let resetEachPeriod = ExtendedScanDuplicateFilter(rawValue: 0x02)
}

/// HCI_LE_Set_Extended_Scan_Enable. Core 5.4 Vol 4 Part E §7.8.65: Enable (1), Filter_Duplicates
/// (1), Duration (2, units of 10 ms, 0 = until disabled), Period (2, units of 1.28 s, 0 = once).
public struct LESetExtendedScanEnable: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0042, "LE Set Extended Scan Enable", supportedCommandsBit: (37, 6))
    public var enabled: Bool
    public var filterDuplicates: ExtendedScanDuplicateFilter
    public var duration: UInt16
    public var period: UInt16

    public init(enabled: Bool, filterDuplicates: ExtendedScanDuplicateFilter, duration: UInt16 = 0, period: UInt16 = 0)
    {
        self.enabled = enabled
        self.filterDuplicates = filterDuplicates
        self.duration = duration
        self.period = period
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.uint8(enabled ? 0x01 : 0x00)
        w.uint8(filterDuplicates.rawValue)
        w.uint16LE(duration)
        w.uint16LE(period)
    }
}
