import Testing

@testable import IBeaconCore

@Suite struct CalibrationCaptureTests {
    static func record(capture: CalibrationCaptureRecord?) -> CalibrationRecord {
        CalibrationRecord(
            timestamp: "2026-11-29T05:00:00Z", samples: 93, estimate: -60.88, interval95: 0.64, spread: 3.1,
            method: "apple-1hz-mean", receiver: "pklg:bluetoothd-hci-latest.pklg",
            receiverAddress: capture == nil ? "00:11:22:33:44:55" : CalibrationCaptureRecord.withheldAddress,
            offset: 0, txPower: nil, capture: capture)
    }

    @Test func aCaptureRecordRoundTripsThroughTheProfile() throws {
        // 2026-07-24T16:20:06.257Z plus 10.5 s of capture time.
        let capture = CalibrationCaptureRecord(
            kind: "iphone-packetlogger", firstReportUnixMicros: 1_784_910_006_257_000, seconds: 10.5)
        #expect(capture.first == "2026-07-24T16:20:06.257Z" && capture.last == "2026-07-24T16:20:16.757Z")
        let record = Self.record(capture: capture)
        guard case .object(let o) = record.json else {
            Issue.record("not an object")
            return
        }
        #expect(o["capture"] == capture.json && o["receiverAddress"]?.stringValue == "withheld")
        #expect(try CalibrationRecord(json: record.json) == record)
    }

    @Test func aLiveRecordHasNoCaptureKey() throws {
        let record = Self.record(capture: nil)
        guard case .object(let o) = record.json else {
            Issue.record("not an object")
            return
        }
        #expect(o["capture"] == nil)
        #expect(try CalibrationRecord(json: record.json) == record)
    }
}
