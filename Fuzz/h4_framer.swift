// libFuzzer target: the H4 framer. The first byte picks chunk sizes; the rest is the stream.
// Property: feeding in chunks gives exactly the packets (and the same failure) as feeding the
// stream whole, and the packets are a prefix of the stream.
import IBeaconCoreFuzz

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let seed = UInt(data[0])
    let stream = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    var whole = H4Framer()
    let wholeResult = Result { () throws(H4FramingError) -> [H4Packet] in try whole.push(stream) }
    var chunked = H4Framer()
    var packets: [H4Packet] = []
    var failure: H4FramingError?
    var i = 0
    var k = seed
    while i < stream.count, failure == nil {
        let n = min(stream.count - i, 1 + Int(k % 7))
        k = k &* 31 &+ 7
        do { packets += try chunked.push(stream[i..<i + n]) } catch { failure = error }
        i += n
    }
    switch wholeResult {
    case .success(let p):
        if failure != nil || p != packets { fatalError("chunked framing differs from whole") }
        let bytes = p.flatMap(\.bytes)
        if Array(stream.prefix(bytes.count)) != bytes { fatalError("packets are not a prefix of the stream") }
    case .failure(let e):
        // Chunked feeding may return packets completed before the garbage, then fail the same way.
        if failure != e { fatalError("chunked framing failed differently: \(String(describing: failure)) vs \(e)") }
    }
    return 0
}
