import IBeaconCore
import IBeaconHost

/// What a calibration from a capture records about the capture: the receiver's kind, the span of
/// capture time read, and the capture named by its file name alone (no directory, which may
/// hold a person's name). Never an address (`CalibrationCaptureRecord`).
public struct CaptureCalibrationEvidence: Sendable, Equatable {
    public var record: CalibrationCaptureRecord
    /// `pklg:bluetoothd-hci-latest.pklg`: the record's `receiver`.
    public var receiver: String
}

extension CaptureSightingSource {
    /// This capture read for a calibration of `target`: its time starts at the beacon's first
    /// report (a phone's log may hold minutes of other devices before it), so --duration and the
    /// minimum time count from there.
    public func calibrating(_ target: CalibrationTarget) -> CaptureSightingSource {
        var source = self
        source.startsAt = { sightings in
            sightings.contains { s in
                s.beacon.map { target.pattern.matches($0) && (target.address == nil || target.address == s.address) }
                    ?? false
            }
        }
        return source
    }

    /// The evidence of a calibration that read `seconds` of this capture's time (counted, as
    /// `scan` counts it, from the first advertising report of the controller read); nil when
    /// the capture holds no advertising report.
    public func calibrationEvidence(seconds: Double) throws -> CaptureCalibrationEvidence? {
        guard let first = try firstReportUnixMicros() else { return nil }
        let file = path.split(separator: "/").last.map(String.init) ?? path
        return CaptureCalibrationEvidence(
            record: CalibrationCaptureRecord(kind: format.receiverKind, firstReportUnixMicros: first, seconds: seconds),
            receiver: "\(prefix):\(file)")
    }

    /// The time (µs since 1970) of the first advertising report event `scan` takes: of the
    /// controller given with `--index`, else of any (the first one heard is the one read), and
    /// one `startsAt` accepts; a malformed event does not count, as in `scan`.
    func firstReportUnixMicros() throws -> Int64? {
        var reader = try CaptureFileReader(path: path)
        var sightings: [Sighting] = []
        while let result = try reader.next() {
            guard case .success(let record) = result else { return nil }
            guard let packet = record.packet, packet.type == .event, record.direction == .received,
                Self.isAdvertisingReport(packet.body)
            else { continue }
            if let wanted = controllerIndex, let index = record.controllerIndex, index != wanted { continue }
            sightings.removeAll(keepingCapacity: true)
            guard (try? Sighting.append(fromEvent: packet.body, to: &sightings)) != nil,
                startsAt?(sightings) ?? true
            else { continue }
            return record.unixMicroseconds
        }
        return nil
    }
}

/// The beacon is nowhere in the capture read for its calibration: said as such, not as a live
/// receiver's "not heard in 0 s — … within range" (exit 68 all the same).
public struct CaptureBeaconAbsent: ClassifiedError, Sendable {
    public var capture: String
    public var target: String
    public var failureKind: FailureKind { .notHeard }

    public var description: String {
        "the beacon \(target) is not in \(capture): no advertising report of it — check the profile's uuid, major "
            + "and minor, that the phone's log was recorded near the beacon while an app scanned, and README, "
            + "\"Calibrating a spot\""
    }

    /// `error` as the calibration of `source` should say it: a capture's `notHeard` before the
    /// beacon's first report becomes this; anything else is returned as it is.
    public static func explained(_ error: any Error, source: any SightingSource) -> any Error {
        guard let capture = source as? CaptureSightingSource, capture.startsAt != nil,
            case .notHeard(let target, _) = error as? CalibrationError
        else { return error }
        return CaptureBeaconAbsent(capture: capture.name, target: target)
    }
}
