import ArgumentParser
import IBeaconHost
import IBeaconTransports
import Logging

struct StopCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stop",
        abstract: "Turn off advertising left on by ibeacon (hciN) or by anything (raw HCI).",
        discussion: """
            On hciN through the kernel: removes the advertising instances that ibeacon processes \
            now gone recorded in /run/ibeacon (or $IBEACON_RUNTIME_DIR, unless run with file \
            capabilities or set-user-ID) for that adapter, and no other program's; records another \
            user could have written are ignored. With \
            raw:hciN, serial: or tcp:, turns the controller's advertising off whoever set it, \
            legacy or extended. Exits 0 if nothing was advertising.
            """)

    @OptionGroup var device: DeviceOptions<ProgramsController>
    @OptionGroup var logging: LoggingOptions

    /// The guardian `advertise` starts (`startGuardian`): waits for that process to end, then
    /// removes what it recorded and left behind.
    @Option(help: .hidden) var afterExitOf: Int32?
    /// That process's start time (`/proc/PID/stat`), so that a guardian that starts after its
    /// advertiser already died (or whose PID was reused) still knows it is gone.
    @Option(help: .hidden) var startTime: UInt64?

    func run() async throws {
        let logger = logging.makeLogger()
        try await reporting {
            if let pid = afterExitOf {
                try await guardAdvertiser(pid, logger: logger)
                return
            }
            let report = try await device.opener(logger: logger).withAdapter {
                try await $0.stopAdvertising(leftBy: nil)
            }
            if let report { printOut(report.description) }
            for file in RuntimeRecords.current().removeGoneSessions(device: device.deviceText) {
                printOut("removed \(file) (its process is gone)")
            }
        }
    }

    /// Waits until process `pid` is gone, then removes the instances its record still names,
    /// and says so only then.
    private func guardAdvertiser(_ pid: Int32, logger: Logger) async throws {
        guard let startTime else { return }
        try await ProcessTable.system.waitUntilGone(pid, startTime: startTime)
        // Only the kernel path keeps records (raw HCI answers nil).
        let report = try await device.opener(logger: logger).withAdapter { try await $0.stopAdvertising(leftBy: pid) }
        if let report, report.removedSomething {
            logger.warning("ibeacon advertise (pid \(pid)) ended without cleaning up: \(report)")
        }
    }
}
