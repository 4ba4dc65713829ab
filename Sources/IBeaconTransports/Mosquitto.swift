import CMosquitto
import IBeaconCore
import IBeaconHost
import Synchronization
import SystemPackage

/// How to reach a broker: its URL and the credentials, TLS files and Last Will.
public struct MQTTClientSettings: Sendable {
    public var url: MQTTBrokerURL
    public var user: String?
    public var password: String?
    /// TLS: the CA to verify the broker against (nil: the system's, /etc/ssl/certs).
    public var caFile: String?
    /// TLS: a client certificate and its key (both or neither).
    public var certFile: String?
    public var keyFile: String?
    public var clientID: String
    /// Published by the broker when the connection ends without a clean disconnect (retained,
    /// QoS 1); nil: none (a client that only sends a command).
    public var will: MQTTMessage?
    public var subscriptions: [String]
    /// Topics whose messages are commands: subscribed with QoS 1 and (MQTT 5) "retain as
    /// published", so a command published retained is seen as such even live, and refused.
    public var commandSubscriptions: [String]
    /// Seconds between keep-alive pings; the broker drops (and sends the Will) after 1.5 times that.
    public var keepalive: Int32
    /// Seconds to wait for the broker's CONNACK before trying again.
    public var connectTimeout: Double

    public init(
        url: MQTTBrokerURL, user: String?, password: String?, caFile: String?, certFile: String?, keyFile: String?,
        clientID: String, will: MQTTMessage?, subscriptions: [String], commandSubscriptions: [String] = [],
        keepalive: Int32 = 30,
        connectTimeout: Double = 10
    ) {
        self.url = url
        self.user = user
        self.password = password
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.clientID = clientID
        self.will = will
        self.subscriptions = subscriptions
        self.commandSubscriptions = commandSubscriptions
        self.keepalive = keepalive
        self.connectTimeout = connectTimeout
    }
}

/// `mosquitto_lib_init` once per process (it is not thread-safe).
private let mosquittoLibrary: Void = { _ = mosquitto_lib_init() }()

/// The callbacks' view of a connection: its handler and whether CONNACK 0 has been seen.
private final class MosquittoCallbacks: @unchecked Sendable {
    // Set once in `start` before the loop thread exists; read on that thread only.
    var handler: (any MQTTConnectionHandler)?
    let connected = Atomic(false)
    let closing = Atomic(false)
    /// The broker answered the MQTT 5 CONNECT with "unsupported protocol version": use 3.1.1.
    let wantsMQTT311 = Atomic(false)
    /// MQTT 5 is spoken (until `wantsMQTT311` is acted on).
    let mqtt5 = Atomic(true)
    var subscriptions: [String] = []
    var commandSubscriptions: [String] = []
}

/// An MQTT connection through libmosquitto (Eclipse Mosquitto's C client) that never blocks
/// its callers: connecting, reconnecting, TLS handshakes and socket writes happen on a thread of
/// its own; `publish` only queues.
///
/// The thread runs `mosquitto_loop` itself rather than `mosquitto_loop_start`: libmosquitto's
/// own loop (`mosquitto_loop_forever`) stops reconnecting for good after a DNS failure
/// (MOSQ_ERR_EAI), a TLS error or a refused login, and a box must keep trying through a
/// network outage or a broker restarted with its ACLs half loaded. Back-off: 1 s doubling to 30 s.
public final class MosquittoConnection: MQTTConnection, @unchecked Sendable {
    /// `mosquitto *`, created in `init`, used from any thread (libmosquitto locks inside; the
    /// client is put in threaded mode so `publish` never writes to the socket itself).
    private let mosq: OpaquePointer
    private let callbacks = MosquittoCallbacks()
    private let settings: MQTTClientSettings
    private let stopping = Atomic(false)
    private let finished = Atomic(false)
    private let started = Atomic(false)

    public var brokerDescription: String { settings.url.description }

    /// The largest packet the broker may send this client (MQTT 5's Maximum Packet Size in the
    /// CONNECT, §3.1.2.11.4: "The Server MUST NOT send packets exceeding Maximum Packet Size to
    /// the Client"): larger messages on a subscribed topic are dropped by the broker, never
    /// sent. libmosquitto has no limit of its own (it allocates whatever length a packet
    /// announces, then copies the payload), so without this one message on
    /// `homeassistant/status`, which any client of a usual store broker may publish, cost every
    /// box four times its size in memory. Home Assistant's `online` is 6 bytes.
    public static let maximumPacketSize: UInt32 = 65_536

    /// The CONNECT's properties: the Maximum Packet Size (`mosquitto_property *`).
    private let connectProperties: OpaquePointer?
    /// libmosquitto holds the properties of the current protocol (`connect`). Client thread only.
    private var propertiesSet = false

    /// Sets the client up (credentials, TLS, Last Will); connects only in `start`. Throws when a
    /// TLS file cannot be used (`mosquitto_tls_set`).
    public init(settings: MQTTClientSettings) throws(MQTTSettingError) {
        _ = mosquittoLibrary
        self.settings = settings
        guard let m = mosquitto_new(settings.clientID, true, nil) else {
            throw MQTTSettingError("cannot create an MQTT client (mosquitto_new: \(Sys.lastErrno))")
        }
        mosq = m
        mosquitto_user_data_set(m, Unmanaged.passUnretained(callbacks).toOpaque())
        _ = mosquitto_threaded_set(m, true)
        _ = mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5)
        var properties: OpaquePointer?
        _ = mosquitto_property_add_int32(
            &properties, Int32(MQTT_PROP_MAXIMUM_PACKET_SIZE.rawValue), Self.maximumPacketSize)
        connectProperties = properties
        if settings.user != nil || settings.password != nil {
            _ = mosquitto_username_pw_set(m, settings.user, settings.password)
        }
        if let will = settings.will {
            let payload = Array(will.payload.utf8)
            _ = mosquitto_will_set(m, will.topic, Int32(payload.count), payload, 1, true)
        }
        if settings.url.tls {
            let rc = mosquitto_tls_set(
                m, settings.caFile, settings.caFile == nil ? "/etc/ssl/certs" : nil, settings.certFile,
                settings.keyFile, nil)
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                mosquitto_destroy(m)
                throw MQTTSettingError(
                    "the TLS settings cannot be used (mosquitto_tls_set: \(Self.describe(rc))): check --mqtt-ca, "
                        + "--mqtt-cert and --mqtt-key (PEM files, readable, the key matching the certificate)")
            }
        }
        Self.installCallbacks(m)
    }

    private static func installCallbacks(_ m: OpaquePointer) {
        mosquitto_connect_callback_set(m) { m, obj, rc in
            guard let obj else { return }
            let cb = Unmanaged<MosquittoCallbacks>.fromOpaque(obj).takeUnretainedValue()
            let mqtt5 = cb.mqtt5.load(ordering: .sequentiallyConsistent)
            if rc == 0 {
                // Subscribed again on every connect: a clean session forgets them.
                for topic in cb.subscriptions { _ = mosquitto_subscribe(m, nil, topic, 0) }
                for topic in cb.commandSubscriptions {
                    if mqtt5 {
                        let options = Int32(MQTT_SUB_OPT_RETAIN_AS_PUBLISHED.rawValue)
                        _ = mosquitto_subscribe_v5(m, nil, topic, 1, options, nil)
                    } else {
                        _ = mosquitto_subscribe(m, nil, topic, 1)
                    }
                }
                cb.connected.store(true, ordering: .sequentiallyConsistent)
                cb.handler?.connectionUp()
            } else if mqtt5 && rc == Int32(MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION.rawValue) {
                cb.wantsMQTT311.store(true, ordering: .sequentiallyConsistent)
                cb.handler?.connectionDown(
                    "the broker does not speak MQTT 5; trying MQTT 3.1.1, where the broker cannot be told the "
                        + "largest message this box takes (larger ones are dropped here, after the client library read them)"
                )
            } else {
                let why = mqtt5 ? mosquitto_reason_string(rc) : mosquitto_connack_string(rc)
                cb.handler?.connectionDown(
                    "the broker refused the connection: \(why.map { String(cString: $0) } ?? "reason \(rc)")")
            }
        }
        mosquitto_disconnect_callback_set(m) { _, obj, rc in
            guard let obj else { return }
            let cb = Unmanaged<MosquittoCallbacks>.fromOpaque(obj).takeUnretainedValue()
            let was = cb.connected.exchange(false, ordering: .sequentiallyConsistent)
            if was && !cb.closing.load(ordering: .sequentiallyConsistent) {
                cb.handler?.connectionDown("connection lost (\(MosquittoConnection.describe(rc)))")
            }
        }
        // The v5 callback (also called over MQTT 3.1.1, reason 0) carries the PUBACK's reason code.
        mosquitto_publish_v5_callback_set(m) { _, obj, _, reason, _ in
            guard let obj else { return }
            let handler = Unmanaged<MosquittoCallbacks>.fromOpaque(obj).takeUnretainedValue().handler
            if reason >= 0x80 {
                let text = mosquitto_reason_string(reason).map { String(cString: $0) } ?? "reason code \(reason)"
                handler?.brokerRefused("\(text) (MQTT reason code 0x\(String(reason, radix: 16)))")
            }
            handler?.delivered()
        }
        mosquitto_message_callback_set(m) { _, obj, message in
            guard let obj, let message, let topic = message.pointee.topic else { return }
            let cb = Unmanaged<MosquittoCallbacks>.fromOpaque(obj).takeUnretainedValue()
            let count = Int(max(0, message.pointee.payloadlen))
            // Over MQTT 3.1.1 the broker may send anything: not one more copy of an oversized one.
            guard count < Int(MosquittoConnection.maximumPacketSize) else { return }
            let bytes =
                message.pointee.payload.map {
                    Array(UnsafeRawBufferPointer(start: $0, count: count))
                } ?? []
            cb.handler?.received(
                topic: String(cString: topic), payload: String(decoding: bytes, as: UTF8.self),
                retained: message.pointee.retain)
        }
    }

    deinit {
        var properties = connectProperties
        mosquitto_property_free_all(&properties)
    }

    /// Starts a connection attempt. The first (and the first after switching to 3.1.1) is
    /// `mosquitto_connect_bind_v5`, the only call that sends CONNECT properties: it opens the TCP
    /// connection and TLS session before it returns, on this client's own thread. libmosquitto
    /// 2.0.11 keeps those properties for `mosquitto_reconnect_async` (seen on the wire: the
    /// Maximum Packet Size is in every CONNECT), so later attempts do not block; and it refuses a
    /// 3.1.1 connect that still has them (MOSQ_ERR_NOT_SUPPORTED), so the switch clears them by
    /// connecting once more without any.
    private func connect() -> Int32 {
        if callbacks.wantsMQTT311.exchange(false, ordering: .sequentiallyConsistent) {
            callbacks.mqtt5.store(false, ordering: .sequentiallyConsistent)
            _ = mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311)
            propertiesSet = false
        }
        if propertiesSet { return mosquitto_reconnect_async(mosq) }
        let properties = callbacks.mqtt5.load(ordering: .sequentiallyConsistent) ? connectProperties : nil
        let rc = mosquitto_connect_bind_v5(
            mosq, settings.url.host, Int32(settings.url.port), settings.keepalive, nil, properties)
        propertiesSet = rc == MOSQ_ERR_SUCCESS.rawValue
        return rc
    }

    /// `mosquitto_strerror`, or the errno text for MOSQ_ERR_ERRNO.
    static func describe(_ rc: Int32) -> String {
        if rc == MOSQ_ERR_ERRNO.rawValue { return Sys.lastErrno.description }
        return String(cString: mosquitto_strerror(rc))
    }

    public func start(handler: any MQTTConnectionHandler) {
        guard !started.exchange(true, ordering: .sequentiallyConsistent) else { return }
        callbacks.handler = handler
        callbacks.subscriptions = settings.subscriptions
        callbacks.commandSubscriptions = settings.commandSubscriptions
        do throws(Errno) {
            try Sys.spawnThread { self.run() }.detach()
        } catch {
            finished.store(true, ordering: .sequentiallyConsistent)
            handler.connectionDown("cannot start the MQTT thread (pthread_create: \(error))")
        }
    }

    public func publish(_ message: MQTTMessage) -> Bool {
        guard callbacks.connected.load(ordering: .sequentiallyConsistent) else { return false }
        let payload = Array(message.payload.utf8)
        let rc = mosquitto_publish(
            mosq, nil, message.topic, Int32(payload.count), payload, message.atLeastOnce ? 1 : 0, message.retain)
        return rc == MOSQ_ERR_SUCCESS.rawValue
    }

    public func close(timeout: Duration) async {
        callbacks.closing.store(true, ordering: .sequentiallyConsistent)
        if callbacks.connected.load(ordering: .sequentiallyConsistent) {
            _ = mosquitto_disconnect(mosq)
        } else {
            stopping.store(true, ordering: .sequentiallyConsistent)
        }
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while !finished.load(ordering: .sequentiallyConsistent) && started.load(ordering: .sequentiallyConsistent)
            && clock.now < deadline
        {
            try? await Task.sleep(for: .milliseconds(10))
        }
        stopping.store(true, ordering: .sequentiallyConsistent)
    }

    /// Sleeps `seconds` in 50 ms steps, returning early when stopping.
    private func pause(_ seconds: Double) {
        let end = Sys.monotonicSeconds() + seconds
        while !stopping.load(ordering: .sequentiallyConsistent) && Sys.monotonicSeconds() < end {
            Sys.sleepBlocking(nanoseconds: 50_000_000)
        }
    }

    /// The waits before reconnecting: 1 s doubling to 30 s, from 1 s again once connected.
    static let reconnecting = RetryPolicy(firstDelay: .seconds(1), maximumDelay: .seconds(30))

    /// The client's thread: connect, loop, and on any failure wait and reconnect, until closed.
    private func run() {
        defer { finished.store(true, ordering: .sequentiallyConsistent) }
        var delays = Self.reconnecting.delays()
        var attemptStarted = Sys.monotonicSeconds()
        var rc = connect()
        var socketOpen = rc == MOSQ_ERR_SUCCESS.rawValue
        if !socketOpen { callbacks.handler?.connectionDown("cannot connect (\(Self.describe(rc)))") }
        while !stopping.load(ordering: .sequentiallyConsistent) {
            if !socketOpen {
                if callbacks.closing.load(ordering: .sequentiallyConsistent) { return }
                pause(delays.next().seconds)
                if stopping.load(ordering: .sequentiallyConsistent) { return }
                attemptStarted = Sys.monotonicSeconds()
                rc = connect()
                socketOpen = rc == MOSQ_ERR_SUCCESS.rawValue
                if !socketOpen {
                    callbacks.handler?.connectionDown("cannot connect (\(Self.describe(rc)))")
                    continue
                }
            }
            rc = mosquitto_loop(mosq, 250, 1)
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                socketOpen = false
                if callbacks.closing.load(ordering: .sequentiallyConsistent) { return }
                if !callbacks.connected.load(ordering: .sequentiallyConsistent) {
                    callbacks.handler?.connectionDown("cannot connect (\(Self.describe(rc)))")
                }
                continue
            }
            if callbacks.closing.load(ordering: .sequentiallyConsistent) {
                continue  // handing over the last messages and the DISCONNECT: no timeout to judge
            } else if callbacks.connected.load(ordering: .sequentiallyConsistent) {
                delays.reset()
            } else if Sys.monotonicSeconds() - attemptStarted > settings.connectTimeout {
                // A listener that never answers the CONNECT: try again (reconnecting closes the socket).
                callbacks.handler?.connectionDown(
                    "no answer to the MQTT CONNECT within \(Int(settings.connectTimeout)) s")
                socketOpen = false
                continue
            }
            callbacks.handler?.idle()
        }
    }
}
