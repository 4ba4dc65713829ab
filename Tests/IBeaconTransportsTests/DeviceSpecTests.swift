import IBeaconHost
import IBeaconTestSupport
import IBeaconTransports
import Testing

@Suite struct DeviceSpecTests {
    @Test(arguments: [
        ("hci0", DeviceSpec.hci(index: 0)),
        ("hci12", .hci(index: 12)),
        ("1", .hci(index: 1)),
        ("serial:/dev/ttyACM0", .serial(path: "/dev/ttyACM0", baudRate: 115_200, flowControl: .none)),
        ("serial:/dev/ttyUSB1,921600", .serial(path: "/dev/ttyUSB1", baudRate: 921_600, flowControl: .none)),
        (
            "serial:/dev/ttyUSB1,1000000,rtscts",
            .serial(path: "/dev/ttyUSB1", baudRate: 1_000_000, flowControl: .rtsCts)
        ),
        ("serial:/dev/ttyS0,rtscts,3000000", .serial(path: "/dev/ttyS0", baudRate: 3_000_000, flowControl: .rtsCts)),
        ("serial:/dev/pts/3,rtscts", .serial(path: "/dev/pts/3", baudRate: 115_200, flowControl: .rtsCts)),
        ("tcp:127.0.0.1:7000", .tcp(host: "127.0.0.1", port: 7000)),
        ("tcp:localhost:1", .tcp(host: "localhost", port: 1)),
        ("tcp:[::1]:65535", .tcp(host: "::1", port: 65535)),
        ("btsnoop:/tmp/scan.btsnoop", .btsnoop(path: "/tmp/scan.btsnoop")),
        ("btsnoop:relative/cap.log", .btsnoop(path: "relative/cap.log")),
        ("pklg:bluetoothd-hci-latest.pklg", .capture(path: "bluetoothd-hci-latest.pklg", prefix: .pklg)),
        ("capture:/tmp/x:y.log", .capture(path: "/tmp/x:y.log", prefix: .capture)),
    ])
    func parsesGoodSpecifications(text: String, expected: DeviceSpec) throws {
        let spec = try DeviceSpec(parsing: text)
        #expect(spec == expected)
        // The description is canonical: it parses back to the same value.
        #expect(try DeviceSpec(parsing: spec.description) == spec)
    }

    @Test func descriptionsAreCanonical() {
        #expect(DeviceSpec.hci(index: 3).description == "hci3")
        #expect(
            DeviceSpec.serial(path: "/dev/ttyACM0", baudRate: 115_200, flowControl: .none).description
                == "serial:/dev/ttyACM0,115200")
        #expect(
            DeviceSpec.serial(path: "/dev/ttyACM0", baudRate: 460_800, flowControl: .rtsCts).description
                == "serial:/dev/ttyACM0,460800,rtscts")
        #expect(DeviceSpec.tcp(host: "::1", port: 9).description == "tcp:[::1]:9")
        #expect(DeviceSpec.tcp(host: "example.org", port: 7000).description == "tcp:example.org:7000")
        #expect(DeviceSpec.btsnoop(path: "a.log").description == "btsnoop:a.log")
        #expect(DeviceSpec.capture(path: "a.pklg", prefix: .pklg).description == "pklg:a.pklg")
        #expect(DeviceSpec.capture(path: "a.pklg", prefix: .pklg).isCapture)
    }

    @Test(arguments: [
        ("", "unrecognised device"),
        ("hci", "unrecognised device"),
        ("hci-1", "unrecognised device"),
        ("hci65535", "unrecognised device"),
        ("hciX", "unrecognised device"),
        ("usb0", "unrecognised device"),
        ("/dev/ttyACM0", "unrecognised device"),
        ("pklg:", "capture file name is missing"),
        ("capture:", "capture file name is missing"),
        ("serial:", "path is missing"),
        ("serial:,115200", "path is missing"),
        ("serial:/dev/ttyACM0,115201", "unsupported baud rate 115201"),
        ("serial:/dev/ttyACM0,9600,9600", "baud rate is given twice"),
        ("serial:/dev/ttyACM0,rtscts,rtscts", "'rtscts' is given twice"),
        ("serial:/dev/ttyACM0,xonxoff", "unknown serial option 'xonxoff'"),
        ("serial:/dev/ttyACM0,", "unknown serial option ''"),
        ("serial:/dev/ttyACM0,-9600", "unknown serial option '-9600'"),
        ("tcp:", "port is missing"),
        ("tcp:127.0.0.1", "port is missing"),
        ("tcp::7000", "host is missing"),
        ("tcp:127.0.0.1:0", "port must be a number from 1 to 65535"),
        ("tcp:127.0.0.1:65536", "port must be a number from 1 to 65535"),
        ("tcp:127.0.0.1:70a", "port must be a number from 1 to 65535"),
        ("tcp:127.0.0.1:", "port must be a number from 1 to 65535"),
        ("tcp:::1:7000", "IPv6 address in brackets"),
        ("tcp:[::1:7000", "unterminated '['"),
        ("tcp:[::1]7000", "expected ':PORT' after ']'"),
        ("tcp:[]:7000", "host is missing"),
        ("btsnoop:", "capture file name is missing"),
    ])
    func rejectsBadSpecifications(text: String, why: String) {
        let error = transportError { _ = try DeviceSpec(parsing: text) }
        #expect(error?.kind == .badSpecification)
        #expect(
            error?.message.contains(why) == true,
            "message: \(error?.message ?? "none")")
        // Every usage error names the accepted forms.
        #expect(error?.hint?.contains("hciN") == true)
        #expect(error?.hint?.contains("serial:/dev/ttyACM0[,BAUD][,rtscts]") == true)
        #expect(error?.hint?.contains("tcp:HOST:PORT") == true)
        #expect(error?.hint?.contains("btsnoop:FILE") == true)
    }

    @Test func everyListedBaudRateOpensOrFailsForAnotherReason() {
        // Every rate DeviceSpec accepts must have a termios constant: openSerial reports a
        // missing device (not an unsupported rate) for each.
        for rate in DeviceSpec.supportedBaudRates {
            let error = transportError {
                _ = try H4StreamTransport.openSerial(
                    path: "/dev/ibeacon-no-such-tty", baudRate: rate, logger: quietLogger)
            }
            #expect(error?.kind == .notFound, "baud \(rate): \(String(describing: error))")
        }
        let error = transportError {
            _ = try H4StreamTransport.openSerial(path: "/dev/ibeacon-no-such-tty", baudRate: 12345, logger: quietLogger)
        }
        #expect(error?.kind == .badSpecification)
    }
}
