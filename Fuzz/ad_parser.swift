// libFuzzer target: the AD-structure parser and the iBeacon lookups.
// Properties: parsing never traps; what parses re-encodes to the same bytes (up to the zero
// padding after a terminator); the allocation-free iBeacon lookup agrees with the parser.
import IBeaconCoreFuzz

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let parsed = try? ADStructure.parse(bytes)
    let slow = parsed.flatMap { IBeacon.find(in: $0) }
    if IBeacon.find(inAdvertisingData: bytes) != slow { fatalError("iBeacon fast path disagrees") }
    if let parsed, let encoded = try? ADStructure.encode(parsed, limit: 1 << 20) {
        guard Array(bytes.prefix(encoded.count)) == encoded, bytes.dropFirst(encoded.count).allSatisfy({ $0 == 0 })
        else { fatalError("AD structures do not re-encode to their bytes") }
    }
    if let beacon = slow, IBeacon.find(inAdvertisingData: beacon.advertisingData) != beacon {
        fatalError("iBeacon does not round-trip")
    }
    return 0
}
