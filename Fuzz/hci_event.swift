// libFuzzer target: HCI event decoding, and every report's advertising data.
// Properties: decoding never traps; the in-place report reader (what scanning a capture runs)
// accepts exactly what `decode` accepts and gives the same reports; a decoded advertising
// report's iBeacon lookup agrees with the general AD parser, on the copy and on the slice.
import IBeaconCoreFuzz

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var fields: [AdvertisingReportFields] = []
    let inPlace = Result { () throws(DecodingError) in
        try HCIEvent.forEachAdvertisingReport(in: bytes) { fields.append($0) }
    }
    guard let event = try? HCIEvent.decode(bytes) else {
        if case .success(true) = inPlace { fatalError("in-place reader accepts what decode rejects") }
        return 0
    }
    switch event {
    case .leAdvertisingReport(let reports):
        guard case .success(true) = inPlace, fields.count == reports.count else { fatalError("reader disagrees") }
        for (r, f) in zip(reports, fields) {
            guard r.address == f.address, r.rssi == f.rssi, r.data[...] == bytes[f.data] else {
                fatalError("in-place report differs")
            }
            let slow = (try? ADStructure.parse(r.data)).flatMap { IBeacon.find(in: $0) }
            if IBeacon.find(inAdvertisingData: r.data) != slow { fatalError("iBeacon fast path disagrees") }
            if IBeacon.find(inAdvertisingData: bytes[f.data]) != slow { fatalError("iBeacon slice path disagrees") }
        }
    case .leExtendedAdvertisingReport(let reports):
        guard case .success(true) = inPlace, fields.count == reports.count else { fatalError("reader disagrees") }
        for (r, f) in zip(reports, fields) where r.data[...] != bytes[f.data] || r.address != f.address {
            fatalError("in-place extended report differs")
        }
    default:
        if case .success(true) = inPlace { fatalError("in-place reader reads a non-report event") }
    }
    return 0
}
