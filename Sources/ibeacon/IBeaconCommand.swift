import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports

@main
struct IBeaconCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ibeacon",
        abstract: "Turn a Linux Bluetooth LE controller into a store iBeacon, and calibrate it.",
        discussion: """
            Profiles (JSON) describe one beacon each: proximity UUID, major (store), minor \
            (department), measured power. `ibeacon advertise` broadcasts one; `ibeacon calibrate`, \
            run on a second receiver held 1 m away, measures and writes its measured power.

            DEVICES (--device, or $IBEACON_DEVICE; default hci0)
              hciN                         BlueZ adapter, through the kernel's management
                                           interface when the kernel manages it
              raw:hciN                     BlueZ adapter through the raw HCI socket
              serial:PATH[,BAUD][,rtscts]  H4 over a UART (HCI-UART firmware; 115200)
              tcp:HOST:PORT                H4 over TCP (emulators such as Bumble)
              btsnoop:FILE, pklg:FILE      a capture, read as a receiver (scan, monitor,
                                           calibrate): Android's HCI snoop log, btmon -w,
                                           an iPhone's PacketLogger .pklg; told apart by
                                           content (capture:FILE says neither)

            \(Exit.helpText)
            """,
        version: ProgramInfo.version,
        subcommands: [
            ProfileCommand.self, EncodeCommand.self, DecodeCommand.self, DevicesCommand.self,
            InfoCommand.self, AdvertiseCommand.self, StopCommand.self, StatusCommand.self, ScanCommand.self,
            CalibrateCommand.self, MonitorCommand.self,
        ]
    )

    static func main() async { await main(CommandLineStart.prepare(Array(CommandLine.arguments.dropFirst()))) }
}
