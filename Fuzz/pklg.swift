// libFuzzer target: the capture decoder (btsnoop or PacketLogger, told apart by content), so the
// PacketLogger reader and the format recognition are both exercised. Properties: reading never
// traps and always ends (every record consumes bytes); fed in chunks (sizes from the first byte)
// it returns the same format, records and final error as fed whole.
import IBeaconCoreFuzz

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    func read(chunk: Int) -> (CaptureFormat?, [BTSnoopRecord], BTSnoopError?) {
        var decoder = CaptureDecoder()
        var records: [BTSnoopRecord] = []
        var i = 0
        do {
            while i < bytes.count {
                decoder.append(bytes[i..<min(bytes.count, i + chunk)])
                i += chunk
                while let record = try decoder.next() {
                    records.append(record)
                    if records.count > size { fatalError("the decoder does not advance") }
                }
            }
            try decoder.finish()
            return (decoder.format, records, nil)
        } catch {
            return (decoder.format, records, error)
        }
    }
    let whole = read(chunk: max(1, size))
    let chunked = read(chunk: Int(bytes.first ?? 0) % 7 + 1)
    if whole.0 != chunked.0 || whole.1 != chunked.1 || whole.2 != chunked.2 {
        fatalError("chunked reading differs from whole")
    }
    return 0
}
