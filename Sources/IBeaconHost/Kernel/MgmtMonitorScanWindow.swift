import IBeaconCore
import Logging

/// The kernel's passive-scan parameters for advertisement monitors (Default System
/// Configuration 0x0013/0x0014), in 0.625 ms slots.
public struct MonitorScanParameters: Sendable, Equatable, CustomStringConvertible {
    public var interval: UInt16
    public var window: UInt16

    public init(interval: UInt16, window: UInt16) {
        self.interval = interval
        self.window = window
    }

    /// The radio listens all the time: "LE_Scan_Window shall be less than or equal to
    /// LE_Scan_Interval" (Core Vol 4 Part E §7.8.10), equal means continuous.
    public var isContinuous: Bool { window >= interval }

    /// `interval 60 ms, window 30 ms`.
    public var description: String {
        "interval \(Self.milliseconds(interval)), window \(Self.milliseconds(window))"
    }

    static func milliseconds(_ slots: UInt16) -> String {
        formatMilliseconds(Slots.milliseconds(slots), decimals: 1)
    }

    /// `btmgmt set-sysconfig` spelling of the window: type (big-endian hex), length, value
    /// (little-endian hex): `0014:2:3000` for 48 slots.
    var btmgmtWindowArgument: String {
        let type = MgmtSystemParameter.leScanWindowAdvMonitor
        let value = MgmtSystemParameter(type: type, uint16: window).value
        return "\([UInt8(type >> 8), UInt8(type & 0xFF)].hexString):\(value.count):\(value.hexString)"
    }
}

/// How concurrent ibeacon scans on one adapter share the widened window: each records the
/// parameters to restore (the CLI keeps them next to the advertising instance records), and
/// only the last one to end restores them.
public struct ScanWindowRecords: Sendable {
    /// The parameters another running ibeacon scan on this adapter recorded to restore, if any.
    public var inherited: @Sendable () -> MonitorScanParameters?
    /// Saves this process's record (nil: removes it).
    public var save: @Sendable (MonitorScanParameters?) -> Void
    /// Process ids of other running ibeacon scans on this adapter with a record.
    public var othersScanning: @Sendable () -> [Int32]
    /// The parameters a killed ibeacon scan (its process gone, in this boot) recorded to
    /// restore and never did; its record is spent by the call.
    public var orphaned: @Sendable () -> MonitorScanParameters?

    public init(
        inherited: @escaping @Sendable () -> MonitorScanParameters?,
        save: @escaping @Sendable (MonitorScanParameters?) -> Void,
        othersScanning: @escaping @Sendable () -> [Int32],
        orphaned: @escaping @Sendable () -> MonitorScanParameters? = { nil }
    ) {
        self.inherited = inherited
        self.save = save
        self.othersScanning = othersScanning
        self.orphaned = orphaned
    }

    /// No other process to coordinate with (tests, a single scan).
    public static let alone = ScanWindowRecords(inherited: { nil }, save: { _ in }, othersScanning: { [] })
}

/// Without controller offload the kernel scans for advertisement monitors with its own
/// interval and window, 60 ms / 30 ms by default (hci_core.c `le_scan_int_adv_monitor`,
/// `le_scan_window_adv_monitor`): the radio listens half of the time and about half of a
/// beacon's advertisements are lost — too few for calibration. For the duration of a scan this
/// raises the window to the interval through Set Default System Configuration (set before the
/// monitor is added, so the kernel starts its passive scan with it) and restores the previous
/// window afterwards (before the monitor is removed). The setting is the adapter's, not
/// ibeacon's: every change and restore is logged, a window someone else changed meanwhile is
/// left alone, and a window that is already continuous is not touched.
public struct MgmtMonitorScanWindow: Sendable {
    public let client: MgmtClient
    public let index: MgmtIndex
    public let records: ScanWindowRecords
    let logger: Logger

    /// What `widen` changed: the parameters to put back and those it set.
    public struct Change: Sendable, Equatable {
        public var original: MonitorScanParameters
        public var applied: MonitorScanParameters
    }

    public init(client: MgmtClient, index: MgmtIndex, records: ScanWindowRecords = .alone, logger: Logger) {
        self.client = client
        self.index = index
        self.records = records
        self.logger = logger
    }

    /// The kernel's current monitor scan parameters; nil when it does not report them.
    public func read() async throws -> MonitorScanParameters? {
        let parameters = try await client.execute(MgmtReadDefaultSystemConfiguration(), index: index)
        guard
            let interval = parameters.first(where: { $0.type == MgmtSystemParameter.leScanIntervalAdvMonitor })?
                .uint16,
            let window = parameters.first(where: { $0.type == MgmtSystemParameter.leScanWindowAdvMonitor })?.uint16
        else { return nil }
        return MonitorScanParameters(interval: interval, window: window)
    }

    private func setWindow(_ window: UInt16) async throws {
        let set = try MgmtSetDefaultSystemConfiguration([
            MgmtSystemParameter(type: MgmtSystemParameter.leScanWindowAdvMonitor, uint16: window)
        ])
        try await client.execute(set, index: index)
    }

    /// Makes the monitor scan continuous; nil when nothing is to be restored afterwards. Never
    /// throws: without it the scan still works, with fewer reports (said in the log).
    public func widen() async -> Change? {
        let current: MonitorScanParameters
        do {
            guard let read = try await read() else {
                logger.notice(
                    "the kernel does not report its advertisement-monitor scan window on \(index) (kernel < 5.10?): scanning with its default window, which hears about half of the advertisements"
                )
                return nil
            }
            current = read
        } catch {
            logger.notice(
                "cannot read the kernel's advertisement-monitor scan window on \(index) (\(error)): scanning with its default window, which hears about half of the advertisements"
            )
            return nil
        }
        if current.isContinuous {
            // Read before `inherited`, which removes the records of processes that are gone.
            let orphan = records.orphaned()
            if let inherited = records.inherited() {
                records.save(inherited)
                logger.info(
                    "the advertisement-monitor scan on \(index) is already continuous (\(current)), widened by another ibeacon scan: whichever ends last restores \(inherited)"
                )
                return Change(original: inherited, applied: current)
            }
            // Issue 40, hole 4: a scan killed before it restored the window left it widened for
            // good; its record says what to put back, and this scan does when it ends.
            if let orphan, orphan.interval == current.interval, !orphan.isContinuous {
                records.save(orphan)
                logger.notice(
                    "the advertisement-monitor scan window on \(index) is still widened (\(current)) by an ibeacon scan that was killed before it restored it: \(orphan) is restored when this scan ends"
                )
                return Change(original: orphan, applied: current)
            }
            logger.info("the advertisement-monitor scan on \(index) is already continuous (\(current)): left as it is")
            return nil
        }
        let applied = MonitorScanParameters(interval: current.interval, window: current.interval)
        do {
            try await setWindow(applied.window)
        } catch {
            logger.warning(
                "cannot widen the kernel's advertisement-monitor scan window on \(index) (\(error)): scanning with \(current), which hears about \(Int(current.window) * 100 / max(1, Int(current.interval))) % of the advertisements"
            )
            return nil
        }
        records.save(current)
        logger.notice(
            "set the kernel's advertisement-monitor scan window on \(index) from \(MonitorScanParameters.milliseconds(current.window)) to \(MonitorScanParameters.milliseconds(applied.window)) (interval \(MonitorScanParameters.milliseconds(current.interval))) so that every advertisement is heard; this default applies to every program's monitors on \(index) and is restored when the scan ends"
        )
        return Change(original: current, applied: applied)
    }

    /// Puts the window back unless another ibeacon scan still needs it or someone else changed
    /// it meanwhile. Never throws: a failure is a warning naming the command that fixes it.
    public func restore(_ change: Change) async {
        records.save(nil)
        let others = records.othersScanning()
        if !others.isEmpty {
            logger.notice(
                "left the advertisement-monitor scan window on \(index) at \(change.applied): ibeacon process(es) \(others.map(String.init).joined(separator: ", ")) still scanning there restore it"
            )
            return
        }
        let hint =
            "`btmgmt --index \(index.rawValue) set-sysconfig -v \(change.original.btmgmtWindowArgument)` restores it"
        do {
            let now = try await read()
            guard now == change.applied else {
                logger.notice(
                    "the advertisement-monitor scan parameters on \(index) were changed by another program meanwhile (now \(now.map { "\($0)" } ?? "unknown")): left as they are"
                )
                return
            }
            try await setWindow(change.original.window)
            logger.notice(
                "restored the kernel's advertisement-monitor scan window on \(index) to \(MonitorScanParameters.milliseconds(change.original.window)) (\(change.original))"
            )
        } catch {
            logger.warning(
                "could not restore the advertisement-monitor scan window on \(index) to \(MonitorScanParameters.milliseconds(change.original.window)) (\(error)); \(hint)"
            )
        }
    }
}
