// libFuzzer target: the profile loader (JSON parser + validation).
// Property: a profile that loads re-loads from its own encoding to an equal profile.
import IBeaconCoreFuzz

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let profile = try? Profile.load(bytes: bytes, file: "fuzz.json") else { return 0 }
    guard let again = try? Profile.load(bytes: profile.encoded(), file: "fuzz.json") else {
        fatalError("a loaded profile does not re-load from its own encoding")
    }
    if again != profile { fatalError("profile changed through encode/load") }
    return 0
}
