/// What a command does with `--device`, which decides the options it takes: a command that reads
/// reports (scan, monitor, calibrate) reads a capture too (`btsnoop:FILE`, `--index N` picks a
/// controller of a btmon file); one that programs a controller (info, advertise, stop) takes
/// neither, and its help does not offer them.
public protocol DeviceUse {
    static var readsCaptures: Bool { get }
}

/// scan, monitor, calibrate.
public enum ReadsReports: DeviceUse {
    public static let readsCaptures = true
}

/// info, advertise, stop.
public enum ProgramsController: DeviceUse {
    public static let readsCaptures = false
}

extension DeviceUse {
    /// The help of `--device`: the forms this command takes.
    public static var deviceHelp: String {
        "Controller: hciN (through the kernel's management interface when the kernel manages it), raw:hciN "
            + "(raw HCI always), serial:PATH[,BAUD][,rtscts], tcp:HOST:PORT"
            + (readsCaptures ? "; or a capture to read, btsnoop:FILE or pklg:FILE" : "")
            + " (default: $IBEACON_DEVICE, else hci0)."
    }

    /// Why `--index` is refused by a command that programs a controller (nil: it is taken).
    public static func indexProblem(_ index: UInt16?) -> String? {
        guard let index, !readsCaptures else { return nil }
        return "--index \(index) picks a controller in a btsnoop:FILE capture; this command programs a controller "
            + "and reads no capture: drop --index (choose the controller with --device)"
    }
}

/// What a command publishes with `--mqtt`: only scan's ranging goes to a room (`--mqtt-room`).
public protocol MQTTUse {
    static var command: String { get }
}

extension MQTTUse {
    public static var publishesRooms: Bool { command == "scan" }
    /// Publishes states (and Home Assistant discovery): all but `calibrate`.
    public static var publishesStates: Bool { command != "calibrate" }

    /// Why `--no-mqtt-discovery` or the state option `option` given (`--mqtt-name`,
    /// `--mqtt-discovery-prefix`) is refused (nil: taken).
    public static func stateOptionProblem(noDiscovery: Bool, name option: String?) -> String? {
        guard !publishesStates, let given = noDiscovery ? "--no-mqtt-discovery" : option else { return nil }
        return "\(given) is for the commands that publish states; \(command) sends one command: drop it"
    }

    /// Why `--mqtt-room` is refused (nil: it is taken).
    public static func roomProblem(_ room: String?) -> String? {
        guard room != nil, !publishesRooms else { return nil }
        return "--mqtt-room is scan's (the room of its mqtt_room presence); \(command) publishes no room: drop it"
    }
}

/// `calibrate --apply-to`: sends one command, publishes no state (no discovery, no name).
public enum CalibrateMQTT: MQTTUse {
    public static let command = "calibrate"
}

public enum ScanMQTT: MQTTUse {
    public static let command = "scan"
}

public enum AdvertiseMQTT: MQTTUse {
    public static let command = "advertise"
}

public enum MonitorMQTT: MQTTUse {
    public static let command = "monitor"
}
