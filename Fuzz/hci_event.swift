// libFuzzer target: HCI event decoding, and every report's advertising data.
// Property: decoding never traps; a decoded advertising report's iBeacon lookup agrees with the
// general AD parser.
import IBeaconCoreFuzz

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let event = try? HCIEvent.decode(bytes) else { return 0 }
    if case .leAdvertisingReport(let reports) = event {
        for r in reports {
            let slow = (try? ADStructure.parse(r.data)).flatMap { IBeacon.find(in: $0) }
            if IBeacon.find(inAdvertisingData: r.data) != slow { fatalError("iBeacon fast path disagrees") }
        }
    }
    return 0
}
