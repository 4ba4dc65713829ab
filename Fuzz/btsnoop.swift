// libFuzzer target: the btsnoop reader. Property: reading never traps and always ends
// (every record consumes bytes), and every record read is framed as its packet type says.
import IBeaconCoreFuzz

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard var reader = try? BTSnoopReader(bytes: bytes) else { return 0 }
    var records = 0
    while let record = try? reader.next() {
        records += 1
        if records > size { fatalError("the reader does not advance") }
        _ = record.packet?.bytes.count
    }
    return 0
}
