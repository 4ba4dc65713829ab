import IBeaconCore
import IBeaconHost
import Logging

/// The one place that turns `--device` into an `Adapter`, and that holds the rule choosing the
/// path: `hciN` goes through the kernel's management interface when the kernel serves it
/// (`ControllerPath.forListedAdapter`), `raw:hciN`, `serial:` and `tcp:` over HCI this host
/// speaks, and `btsnoop:FILE` (`pklg:FILE`, `capture:FILE`) is a capture, read as a `SightingSource`.
public struct AdapterOpener: Sendable {
    /// `--device` as the user wrote it (messages name it so).
    public var device: String
    /// How long to wait for each controller answer.
    public var timeout: Duration
    /// `--btsnoop FILE`: record every HCI packet of a controller.
    public var btsnoop: String?
    public var overwriteBtsnoop: Bool
    /// `--index N`: the controller to read in a capture of several.
    public var captureIndex: UInt16?
    /// Files the btsnoop recording must never be: the profiles the command reads or writes.
    public var protecting: [SafeFile.ProtectedFile]
    public var logger: Logger
    /// How the kernel's management interface is opened: its socket (`openMgmtClient`); a test
    /// gives a client on a fake kernel, so the path rule and its failure policy run as they do here.
    public var openMgmt: MgmtOpener = AdapterOpener.mgmtSocket

    /// Opens a client of the kernel's management interface with this answer timeout.
    public typealias MgmtOpener = @Sendable (Logger, Duration) async throws -> MgmtClient
    /// The kernel's own management socket.
    public static let mgmtSocket: MgmtOpener = { logger, timeout in
        try await openMgmtClient(logger: logger, timeout: timeout)
    }

    public init(
        device: String, timeout: Duration, btsnoop: String? = nil, overwriteBtsnoop: Bool = false,
        captureIndex: UInt16? = nil, protecting: [SafeFile.ProtectedFile] = [], logger: Logger
    ) {
        self.device = device
        self.timeout = timeout
        self.btsnoop = btsnoop
        self.overwriteBtsnoop = overwriteBtsnoop
        self.captureIndex = captureIndex
        self.protecting = protecting
        self.logger = logger
    }

    /// The parsed `--device`; throws naming the accepted forms.
    public func spec() throws(TransportError) -> DeviceSpec { try DeviceSpec(parsing: device) }

    /// Opens the adapter `--device` names, on the path the rule picks.
    public func open() async throws -> any Adapter {
        let spec = try spec()
        switch spec {
        case .capture(let path, let prefix):
            return CaptureAdapter(path: path, prefix: prefix, opener: self, controller: controllerAdapter(spec))
        case .hci(let index, raw: false):
            if let kernel = try await kernelAdapter(index: index, spec: spec) { return kernel }
        default:
            break
        }
        return controllerAdapter(spec)
    }

    /// The receiver `scan`, `calibrate` and `monitor` read: `--index` belongs to captures only.
    public func openSightingSource(mode: AdvertisingMode = .auto) async throws -> any SightingSource {
        let spec = try spec()
        if let captureIndex, !spec.isCapture {
            throw TransportError(
                .badSpecification,
                "--index \(captureIndex) picks a controller in a btsnoop:FILE capture, not in \(spec)")
        }
        return try await open().sightingSource(mode: mode)
    }

    func controllerAdapter(_ spec: DeviceSpec) -> ControllerAdapter {
        let opener = self
        return ControllerAdapter(
            name: device, ownsController: spec.isExclusive, logger: logger,
            connect: { try await opener.connect(spec) })
    }

    /// Opens the transport (wrapped by the btsnoop recorder when asked) and starts a client.
    func connect(_ spec: DeviceSpec) async throws -> ControllerClient {
        // The capture file first: refusing it must not cost a connection.
        let recorder = try btsnoop.map {
            try BTSnoopFileRecorder(path: $0, overwrite: overwriteBtsnoop, avoiding: protecting, logger: logger)
        }
        var transport: any HCITransport
        do {
            transport = try openTransport(spec, logger: logger)
        } catch {
            recorder?.close()
            throw error
        }
        if let recorder {
            transport = RecordingTransport(wrapping: transport, recorder: recorder)
        }
        let client = ControllerClient(transport: transport, logger: logger, defaultTimeout: timeout)
        await client.start()
        return client
    }

    /// The management path for `hciN` when the kernel serves that adapter; nil for adapters it
    /// does not manage (a user channel, or no such adapter: the raw path then says which exist).
    func kernelAdapter(index: UInt16, spec: DeviceSpec) async throws -> KernelAdapter? {
        let client: MgmtClient
        do {
            client = try await openMgmt(logger, timeout)
        } catch let error as TransportError where error.kind == .bluetoothUnavailable {
            throw error
        } catch {
            logger.notice("the kernel's management interface cannot be opened (\(error)); using raw HCI on hci\(index)")
            return nil
        }
        guard await kernelManages(index: index, client: client) else {
            await client.close()
            logger.debug("hci\(index) is not in the kernel's management index list; using raw HCI")
            return nil
        }
        let info = try? await client.execute(MgmtReadControllerInfo(), index: MgmtIndex(index))
        if ControllerPath.choose(listed: true, settings: info?.currentSettings) == .raw {
            await client.close()
            let note =
                "hci\(index) is powered but Low Energy is off in the kernel (no bluetoothd set it up): "
                + "using raw HCI; `btmgmt --index \(index) le on` or bluetoothd makes ibeacon go through the kernel"
            logger.notice("\(note)")
            return nil
        }
        if btsnoop != nil {
            let note =
                "--btsnoop records HCI packets only: through the kernel's management interface there are none "
                + "to record; run `btmon -w FILE` alongside to capture the management and HCI traffic, "
                + "or use --device raw:hci\(index)"
            logger.warning("\(note)")
        }
        let logger = self.logger
        return KernelAdapter(
            client: client, index: index, records: RuntimeRecords.current(),
            requireAdministration: { what in
                guard hasNetAdminCapability() else { throw missingNetAdmin(what) }
            },
            startGuardian: { adapter in Self.startGuardian(adapter: adapter, logger: logger) },
            rawFallback: controllerAdapter(spec), requireRecords: ProcessEnvironment.current.elevated,
            openedHere: { index, link in leLinkOpenedHere(index: index.rawValue, address: link.address) },
            logger: logger)
    }

    /// Starts `ibeacon stop --device hciN --after-exit-of PID` for this process: should it die
    /// without removing its instances (SIGKILL, a crash), they are removed at once, before a power
    /// cycle could give their numbers to another program that `stop` would then take them from.
    static func startGuardian(adapter: String, logger: Logger) {
        // Without /proc nothing tells a gone advertiser from a live one (and no record is written).
        guard let me = ProcessTable.system.identity(Sys.processID()) else { return }
        let arguments = [
            ownExecutablePath(), "stop", "--device", adapter, "--after-exit-of", "\(me.pid)", "--start-time",
            "\(me.startTime)",
        ]
        do {
            let pid = try startHelperProcess(arguments)
            logger.debug("started the guardian (pid \(pid)) that removes this process's instances if it dies")
        } catch {
            logger.notice(
                "cannot start the guardian that removes the instances if ibeacon dies (\(error)); use `ibeacon stop`")
        }
    }

    /// The path `devices` shows for each adapter index: `mgmt` where the kernel's management
    /// interface lists it and the rule keeps it there, `raw` otherwise (`ControllerPaths`).
    public static func paths(_ indices: [UInt16], logger: Logger, openMgmt: MgmtOpener = mgmtSocket) async
        -> ControllerPaths
    {
        guard let client = try? await openMgmt(logger, .seconds(2)) else { return ControllerPaths(known: [:]) }
        let listed = try? await client.execute(MgmtReadIndexList(), index: .none)
        var out: [UInt16: ControllerPath] = [:]
        if let listed {
            for index in indices {
                let isListed = listed.contains(index)
                let info = isListed ? try? await client.execute(MgmtReadControllerInfo(), index: MgmtIndex(index)) : nil
                out[index] = ControllerPath.choose(listed: isListed, settings: info?.currentSettings)
            }
        }
        await client.close()
        return ControllerPaths(known: out)
    }

    /// Opens the sighting source (`openSightingSource`), runs `body` with it, and closes it
    /// (awaited) when `body` returns or throws: the scope of one scan, calibration or monitor run.
    public func withSightingSource<T: Sendable>(
        mode: AdvertisingMode = .auto, _ body: (any SightingSource) async throws -> T
    ) async throws -> T {
        let source = try await openSightingSource(mode: mode)
        return try await source.closing { try await body(source) }
    }

    /// Opens the adapter, runs `body` with it, and closes it (awaited) when `body` returns or
    /// throws: the scope of one command's use of the adapter.
    public func withAdapter<T: Sendable>(_ body: (any Adapter) async throws -> T) async throws -> T {
        let adapter = try await open()
        return try await adapter.closing { try await body(adapter) }
    }
}

struct CaptureAdapter: Adapter {
    let path: String
    let prefix: CapturePrefix
    let opener: AdapterOpener
    let controller: ControllerAdapter

    var name: String { "\(prefix.rawValue):\(path)" }

    func advertise(
        _ request: AdvertisingRequest, onReady: @escaping @Sendable (AdvertisingStatus) -> Void,
        onLost: @escaping @Sendable (String) -> Void, onRestored: @escaping @Sendable (AdvertisingStatus?) -> Void
    ) async throws {
        try await controller.advertise(request, onReady: onReady, onLost: onLost, onRestored: onRestored)
    }

    func stopAdvertising(leftBy writer: Int32?) async throws -> StopReport? {
        try await controller.stopAdvertising(leftBy: writer)
    }

    /// A capture is read, not asked: its receiver's address is not known here.
    func address() async throws -> BDAddress? { nil }

    func close() async {}

    func describe() async throws -> AdapterDescription { try await controller.describe() }

    func sightingSource(mode: AdvertisingMode) async throws -> any SightingSource {
        if opener.btsnoop != nil {
            throw TransportError(
                .badSpecification,
                "--btsnoop records the packets of a controller; \(name) is a capture, read as it is: drop --btsnoop")
        }
        return try CaptureSightingSource(
            path: path, controllerIndex: opener.captureIndex, prefix: prefix.rawValue, logger: opener.logger)
    }
}

extension DeviceSpec {
    /// True when this host owns the controller (H4 over serial or TCP): it may reset it. A BlueZ
    /// adapter is shared with the kernel; a capture is only read.
    public var isExclusive: Bool {
        switch self {
        case .hci, .capture: false
        case .serial, .tcp: true
        }
    }

    /// A capture read from a file rather than a controller.
    public var isCapture: Bool {
        if case .capture = self { true } else { false }
    }
}
