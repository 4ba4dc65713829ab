import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging

/// calibrate's `--uuid`, `--major`, `--minor`: a beacon without a profile.
enum CalibrationIdentityHelp: IdentityHelp {
    static let uuid = "Calibrate a beacon without a profile: its UUID (with --major, --minor, --write)."
    static let major = "Major of the beacon without a profile."
    static let minor = "Minor of the beacon without a profile."
}

struct CalibrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "calibrate",
        abstract: "Measure a beacon's RSSI at 1 m and write its measured power into the profile.",
        discussion: """
            Hold this receiver 1 m from the beacon, in the open, facing it, as still as you can. \
            The tool collects the RSSI of every advertisement from the beacon the profile names \
            and estimates what phones expect measured power to be: the long-run average of the \
            1 Hz mean RSSI at 1 m, fades included (Apple's calibration procedure, --method \
            apple). It never stops before 10 s (60 s when the reports spread 4.8 dB or more within \
            each second: slow variation under fading that strong takes that long to show), \
            then stops once the \
            95 % confidence interval is within ±--precision dB and the level has not drifted \
            (docs/CALIBRATION.md). Usually 10-15 s; at most --duration. It \
            then writes measuredPower (rounded dBm) and a calibration record into the profile, \
            atomically, keeping every other key.

            When the precision is not reached by --duration (exit 80) or the level moved during \
            the run, a person or a door (exit 81), nothing is written: hold still, move away \
            from people, or give a longer --duration; --force writes the estimate anyway.

            --method robust writes the centre of the un-faded distribution instead (Tukey \
            biweight; deep fades do not drag it, but phones do not see it). --offset corrects \
            for a receiver that reads a known number of dB weaker (positive) or stronger \
            (negative) than a reference phone.

            With the phone in the pocket: --device btsnoop:FILE (Android's HCI snoop log) or \
            pklg:FILE (an iPhone's PacketLogger trace from a sysdiagnose), recorded 1 m from the \
            beacon, is read as the receiver and written the same way; the record names the \
            receiver's kind and the span of capture time read, never an address (README).

            --apply-to NAME sends the result, with its evidence, to the box that advertises the \
            profile NAME (advertise --mqtt-control under --mqtt-base) instead of writing a \
            profile here: that box applies it, writes it into its profile and confirms; no \
            confirmation within --confirm-timeout exits 83, a refusal 84.

            Interrupted (SIGINT, SIGTERM), it writes nothing and exits 130 or 143.
            """)

    @Option(help: ArgumentHelp("Profile of the beacon to calibrate; measuredPower is written back.", valueName: "file"))
    var profile: String?
    @OptionGroup var identity: IdentityOptions<CalibrationIdentityHelp>
    @Option(help: ArgumentHelp("With --uuid/--major/--minor: the profile file to create or update.", valueName: "file"))
    var write: String?
    @OptionGroup var device: DeviceOptions<ReadsReports>
    @Option(help: ArgumentHelp("Give up after this many seconds.", valueName: "seconds"))
    var duration: Double = 180
    @Option(help: ArgumentHelp("Stop when the 95 % interval is within ± this many dB.", valueName: "dB"))
    var precision: Double = 1
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("dB to add to every sample (receiver correction).", valueName: "dB"))
    var offset: Double = 0
    @Option(help: ArgumentHelp("Only this transmitter, when several carry the same identity.", valueName: "address"))
    var address: String?
    @Option(help: ArgumentHelp("Value to write: apple (1 Hz mean, what phones expect) or robust.", valueName: "method"))
    var method: CalibrationMethod = .apple
    @Flag(help: "Write even when the precision was not reached or the level drifted.")
    var force = false
    @Flag(help: "Measure and show the result, but write nothing.")
    var dryRun = false
    @Flag(help: "Print the result as one JSON object.")
    var json = false
    @Option(
        help: ArgumentHelp(
            "Send the result to the box advertising this profile (needs --mqtt, --mqtt-base).", valueName: "name"))
    var applyTo: String?
    @Option(help: ArgumentHelp("With --apply-to: wait this long for the box to confirm.", valueName: "seconds"))
    var confirmTimeout: Double = 10
    @OptionGroup var mqtt: MQTTOptions<CalibrateMQTT>
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if profile != nil && (!identity.isEmpty || write != nil) {
            throw ValidationError("give either --profile FILE, or --uuid/--major/--minor with --write FILE")
        }
        if profile == nil {
            guard identity.uuid != nil, identity.major != nil, identity.minor != nil else {
                throw ValidationError("give --profile FILE, or --uuid, --major, --minor and --write FILE")
            }
            if write == nil && !dryRun && applyTo == nil {
                throw ValidationError("--uuid/--major/--minor need --write FILE (or --apply-to NAME, or --dry-run)")
            }
        }
        let problem = CalibrationHandover.optionProblem((applyTo, mqtt.url != nil, mqtt.base != nil, write))
        if let problem { throw ValidationError(problem) }
        try validateSeconds("--confirm-timeout", confirmTimeout, 0.1...600)
        try validateSeconds("--duration", duration, 0.001...3600)
        if let problem = CalibrationSettings.precisionProblem(precision) { throw ValidationError(problem) }
        guard abs(offset) <= 40 else { throw ValidationError("--offset must be within -40…40 dB") }
        if let address, BDAddress(address) == nil {
            throw ValidationError("--address \(address) is not a Bluetooth address like AA:BB:CC:DD:EE:FF")
        }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let command = self
        try await reporting {
            // Interrupted, it writes nothing and exits 130 (SIGINT) or 143 (SIGTERM).
            try await runUntilSignalled(interrupt: .abort) { try await command.calibrate(logger: logger) }
        }
    }

    /// The steps, in order: everything that can be checked before scanning is checked first, so
    /// a read-only or broken profile fails in a second, not after 30 s of measuring; then the
    /// measurement, the report, and the profile written (or why not).
    func calibrate(logger: Logger) async throws {
        // With --apply-to the profile here is only read: the box that advertises keeps the value.
        let (path, readOnly) = (profile ?? write, dryRun || applyTo != nil)
        try await CalibrationDestination.withOpened(path, mustExist: profile != nil, dryRun: readOnly) {
            try await calibrate(into: $0, logger: logger)
        }
    }

    func calibrate(into destination: CalibrationDestination, logger: Logger) async throws {
        let target = try calibrationTarget(existing: destination.existing)
        let (result, receiverAddress, capture) = try await measure(target, protecting: destination.path, logger: logger)
        // From a phone's capture: its kind and span, and no address of the phone or anyone.
        let record = destination.record(
            of: result, receiver: capture?.receiver ?? device.deviceText, receiverAddress: receiverAddress,
            capture: capture?.record, addressWithheld: device.isCapture, unixTime: ProcessContext.unixTime)
        let reason = result.refusal(precision: precision, duration: duration, capture: device.isCapture)
        let refusal = force ? nil : reason
        if json {
            printOut(
                result.json(
                    target: target, refusal: refusal, forced: force, previous: destination.existing?.measuredPower,
                    written: !dryRun && applyTo == nil && destination.path != nil && refusal == nil,
                    file: destination.path))
        } else {
            // The histogram, the estimate, and what the estimators saw.
            let lines = result.textLines(precision: precision, maximumDuration: duration, capture: device.isCapture)
            printOut(lines.joined(separator: "\n"))
        }
        if let warning = result.spreadWarning { logger.warning("\(warning)") }
        // A signal during the measurement: the result is partial, and nothing may be written.
        try Task.checkCancellation()
        let unchanged = dryRun ? nil : destination.path
        if let refusal { throw CLIError(refusal.message(leaving: unchanged), code: refusal.exitCode) }
        if force && !json, let reason {
            logger.warning("\(reason.forcedWarning(measuredPower: result.measuredPower, writing: !dryRun))")
        }
        if let applyTo, !dryRun { return try await send(result.measuredPower, record, to: applyTo, logger: logger) }
        guard !dryRun, destination.path != nil else {
            if !json { printOut("measured power \(result.measuredPower) dBm (dry run: nothing written)") }
            return
        }
        try destination.write(measuredPower: result.measuredPower, record: record, target: target)
        if !json { printOut(destination.writtenLine(result.measuredPower)) }
    }

    /// The beacon to listen to: the profile's, or --uuid/--major/--minor's.
    func calibrationTarget(existing: Profile?) throws -> CalibrationTarget {
        CalibrationTarget(
            profile: existing, proximityUUID: try identity.uuid?.checked().uuid, major: identity.major?.value,
            minor: identity.minor?.value, address: address.flatMap(BDAddress.init))
    }

    /// Scans until the calibrator has its result, showing the estimate as it goes on a terminal.
    func measure(
        _ target: CalibrationTarget, protecting path: String?, logger: Logger
    ) async throws -> (CalibrationResult, receiverAddress: BDAddress?, capture: CaptureCalibrationEvidence?) {
        let settings = CalibrationSettings(duration: duration, precision: precision, offset: offset, method: method)
        let calibrator = Calibrator(target: target, settings: settings, logger: logger)
        let live = stdoutIsTerminal && !json
        let (offset, precision, duration, capture) = (self.offset, self.precision, self.duration, device.isCapture)
        return try await device.opener(logger: logger, writing: path).withSightingSource { opened in
            // A capture is read from the beacon's first report on (a phone's log may start minutes before).
            let source = (opened as? CaptureSightingSource)?.calibrating(target) ?? opened
            let receiverAddress = try await source.receiverAddress()
            if !json { printOut(CalibrationProgress.startLine(target, device: device.deviceText, capture: capture)) }
            defer { if live { printOut("") } }
            let result: CalibrationResult
            do {
                result = try await calibrator.run(on: source) { collector, elapsed in
                    guard live else { return }
                    let line = CalibrationProgress.line(
                        samples: collector.sampleCount, elapsed: elapsed.seconds, estimate: collector.current(),
                        offset: offset, precision: precision, maximumDuration: duration, capture: capture)
                    printTerminalControl("\r\u{1B}[K", line, terminator: "")
                }
            } catch {
                throw CaptureBeaconAbsent.explained(error, source: source)
            }
            let evidence = try? (source as? CaptureSightingSource)?.calibrationEvidence(seconds: result.seconds)
            return (result, receiverAddress, evidence ?? nil)
        }
    }

    /// --apply-to: sends measured power and its record to the box and says whether it confirmed.
    func send(_ measuredPower: Int, _ record: CalibrationRecord, to name: String, logger: Logger) async throws {
        let handover = CalibrationHandover(
            beacon: name, measuredPower: measuredPower, record: record, base: mqtt.baseTopic)
        guard let opener = try mqtt.prepare(command: "calibrate", logger: logger) else { return }
        let outcome = try await opener.calibrationSender(handover, logger: logger).run(
            timeout: .seconds(confirmTimeout))
        if let problem = outcome.problem(handover, timeout: .seconds(confirmTimeout)) {
            throw CLIError(problem, code: outcome.refusedByBox ? Exit.applyRefused : Exit.applyUnconfirmed)
        }
        if !json { printOut("\(name) under \(handover.base): \(outcome)") }
    }
}

extension CalibrationMethod: ExpressibleByArgument {}
