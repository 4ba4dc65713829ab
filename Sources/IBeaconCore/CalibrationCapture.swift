/// The evidence a calibration read from a phone's capture leaves in the profile's `calibration`
/// record, under `capture`: which kind of receiver recorded it and the span of capture time the
/// calibration read (the first advertising report to where the measurement stopped), in UTC.
/// Never an address: not the phone's (its Read BD_ADDR reply, a PacketLogger note) nor any
/// other device's; the record's `receiverAddress` says `withheld`.
public struct CalibrationCaptureRecord: Sendable, Equatable {
    /// `android-btsnoop`, `btmon` or `iphone-packetlogger` (`CaptureFormat.receiverKind`).
    public var kind: String
    /// ISO 8601 UTC with milliseconds: the first advertising report read, and where reading stopped.
    public var first: String
    public var last: String

    /// What `receiverAddress` holds for a capture.
    public static let withheldAddress = "withheld"

    public init(kind: String, first: String, last: String) {
        self.kind = kind
        self.first = first
        self.last = last
    }

    /// From the capture's first report (µs since 1970) and the seconds of capture time read.
    public init(kind: String, firstReportUnixMicros: Int64, seconds: Double) {
        let start = Double(firstReportUnixMicros) / 1e6
        self.init(
            kind: kind, first: iso8601(unixSeconds: start, milliseconds: true),
            last: iso8601(unixSeconds: start + max(0, seconds), milliseconds: true))
    }

    public var json: JSONValue {
        var o = JSONObject()
        o["kind"] = .string(kind)
        o["first"] = .string(first)
        o["last"] = .string(last)
        return .object(o)
    }

    /// The typed view, nil when `json` is not an object of three strings.
    public init?(json: JSONValue) {
        guard case .object(let o) = json, let kind = o["kind"]?.stringValue, let first = o["first"]?.stringValue,
            let last = o["last"]?.stringValue
        else { return nil }
        self.init(kind: kind, first: first, last: last)
    }
}
