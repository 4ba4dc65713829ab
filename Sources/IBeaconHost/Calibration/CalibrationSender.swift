import IBeaconCore
import Logging
import Synchronization

/// Sends a calibration to the box that advertises the beacon (`calibrate --apply-to NAME`) and
/// waits, a bounded time, for that box to say it applied it: the box publishes its settings
/// only once the value is on the air and in the profile, and an event for every change it
/// accepts or refuses (`CalibrationHandover`).
///
/// The command goes once, at QoS 1, not retained (a retained command would be applied again at
/// every reconnect of the box). Answers count only after the broker acknowledged it: what the
/// broker hands over at subscription (the retained settings) comes before, and is the box's
/// state from before the command.
public final class CalibrationSender: MQTTConnectionHandler {
    /// How it ended.
    public enum Outcome: Sendable, Equatable {
        /// The box applied it; what it said.
        case confirmed(String)
        /// The box refused it, with its reason.
        case refusedByBox(String)
        /// The broker refused the command (its ACL: this user may not steer that box).
        case refusedByBroker(String)
        /// Sent (acknowledged by the broker) but no answer within the time.
        case noAnswer
        /// The broker never took the command: why (not reachable, refused the login).
        case notSent(String)
    }

    public let handover: CalibrationHandover
    let connection: any MQTTConnection
    let logger: Logger
    private struct State {
        var sent = false
        var acknowledged = false
        var outcome: Outcome?
        var lastProblem: String?
    }
    private let state = Mutex(State())

    public init(handover: CalibrationHandover, connection: any MQTTConnection, logger: Logger) {
        self.handover = handover
        self.connection = connection
        self.logger = logger
    }

    /// The topics the client must subscribe to (before it publishes): the box's settings and events.
    public static func subscriptions(for handover: CalibrationHandover) -> [String] {
        [handover.settingsTopic, handover.eventTopic]
    }

    /// Connects, sends, and waits at most `timeout` (from the start, connecting included) for
    /// the answer; then disconnects.
    public func run(timeout: Duration, clock: some Clock<Duration> = ContinuousClock()) async -> Outcome {
        let deadline = clock.now.advanced(by: timeout)
        connection.start(handler: self)
        while clock.now < deadline, state.withLock({ $0.outcome }) == nil {
            try? await clock.sleep(for: .milliseconds(20))
            if Task.isCancelled { break }
        }
        await connection.close(timeout: .seconds(1))
        return state.withLock { s in
            if let outcome = s.outcome { return outcome }
            if s.acknowledged { return .noAnswer }
            return .notSent(s.lastProblem ?? "the broker did not acknowledge the command")
        }
    }

    // MARK: MQTTConnectionHandler (the client's thread)

    public func connectionUp() {
        let first = state.withLock { s in
            defer { s.sent = true }
            return !s.sent
        }
        guard first else { return }
        let message = MQTTMessage(
            topic: handover.commandTopic, payload: handover.payload, kind: .event, atLeastOnce: true)
        if !connection.publish(message) {
            state.withLock { s in
                s.sent = false
                s.lastProblem = "the client did not take the command"
            }
        } else {
            logger.info("MQTT: sent measured power \(handover.measuredPower) dBm to \(handover.commandTopic)")
        }
    }

    public func connectionDown(_ reason: String) {
        state.withLock { $0.lastProblem = reason }
    }

    public func delivered() {
        state.withLock { s in if s.sent { s.acknowledged = true } }
    }

    public func brokerRefused(_ reason: String) {
        state.withLock { s in if s.outcome == nil { s.outcome = .refusedByBroker(reason) } }
    }

    /// A message from the broker's retained store is the box's state from before the command,
    /// whenever it arrives: never an answer.
    public func received(topic: String, payload: String, retained: Bool) {
        guard !retained else { return }
        received(topic: topic, payload: payload)
    }

    public func received(topic: String, payload: String) {
        guard state.withLock({ $0.acknowledged && $0.outcome == nil }),
            let answer = handover.answer(topic: topic, payload: payload)
        else { return }
        state.withLock { s in
            guard s.outcome == nil else { return }
            switch answer {
            case .confirmed(let what): s.outcome = .confirmed(what)
            case .refused(let reason): s.outcome = .refusedByBox(reason)
            }
        }
    }

    public func idle() {}
}

extension CalibrationSender.Outcome {
    /// What to tell the person who calibrated; nil when confirmed.
    public func problem(_ handover: CalibrationHandover, timeout: Duration) -> String? {
        let what = "measured power \(handover.measuredPower) dBm for \(handover.beacon)"
        switch self {
        case .confirmed: return nil
        case .refusedByBox(let reason):
            return "the box refused \(what): \(reason)"
        case .refusedByBroker(let reason):
            return "the broker refused the command on \(handover.commandTopic): \(reason); "
                + "this MQTT user may not steer that box (the broker's ACL decides: docs/SECURITY.md)"
        case .noAnswer:
            return "sent \(what) to \(handover.commandTopic), but no box confirmed it within "
                + "\(timeout.formattedSeconds) (no box runs advertise --mqtt-control for \(handover.beacon) under "
                + "\(handover.base), or it is offline); not applied as far as this machine knows"
        case .notSent(let why):
            return "could not send \(what): \(why)"
        }
    }
}

extension CalibrationSender.Outcome: CustomStringConvertible {
    /// The box refused the value (exit 83), as opposed to no confirmation at all (82).
    public var refusedByBox: Bool { if case .refusedByBox = self { true } else { false } }

    public var description: String {
        switch self {
        case .confirmed(let what): "applied, confirmed by \(what)"
        case .refusedByBox(let reason): "refused by the box: \(reason)"
        case .refusedByBroker(let reason): "refused by the broker: \(reason)"
        case .noAnswer: "no answer"
        case .notSent(let why): "not sent: \(why)"
        }
    }
}

/// A setting libmosquitto cannot use (a TLS file): a usage error.
extension MQTTSettingError: ClassifiedError {
    public var failureKind: FailureKind { .transport(.badSpecification) }
}
