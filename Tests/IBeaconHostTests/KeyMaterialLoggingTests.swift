import IBeaconCore
import IBeaconTestSupport
import Logging
import Testing

@testable import IBeaconHost

/// Issue 40, hole 1: the kernel sends New Link Key, New Long Term Key, New IRK/CSRK and the
/// pairing requests to every management socket opened with CAP_NET_ADMIN. None of their
/// parameters may reach a log line, at any verbosity (here: trace, `-vv`).
@Suite struct KeyMaterialLoggingTests {
    /// A key no other bytes of the test contain.
    static let key: [UInt8] = [
        0x5E, 0xC4, 0xE7, 0x4B, 0x1D, 0x9A, 0x37, 0xC2, 0x88, 0x61, 0xF0, 0x0D, 0xB3, 0x2A, 0x7E, 0x95,
    ]
    static let address: [UInt8] = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66]

    /// Every management event mgmt-api.txt gives key, passkey or pairing parameters, with
    /// parameters of its layout holding `key` (or a passkey made of its first bytes).
    static var secretEvents: [MgmtPacket] {
        let a = address
        let passkey = Array(key.prefix(4))
        func event(_ code: UInt16, _ parameters: [UInt8]) -> MgmtPacket {
            MgmtPacket(code: code, index: MgmtIndex(0), parameters: parameters)
        }
        return [
            // New Link Key: Store_Hint, Address, Address_Type, Key_Type, Value(16), PIN_Length.
            event(0x0009, [1] + a + [0, 4] + key + [0]),
            // New Long Term Key: Store_Hint, Address, Type, Key_Type, Central, Enc_Size, EDIV, Rand, Value.
            event(0x000A, [1] + a + [1, 1, 1, 16] + [0x12, 0x34] + Array(key.prefix(8)) + key),
            // PIN Code Request: Address, Type, Secure.
            event(0x000E, a + [0, 1]),
            // User Confirmation Request: Address, Type, Confirm_Hint, Value(4).
            event(0x000F, a + [1, 0] + passkey),
            // User Passkey Request: Address, Type.
            event(0x0010, a + [1]),
            // Passkey Notify: Address, Type, Passkey(4), Entered.
            event(0x0017, a + [1] + passkey + [0]),
            // New IRK: Store_Hint, Random_Address, Address, Type, Value.
            event(0x0018, [1] + a + a + [1] + key),
            // New CSRK: Store_Hint, Address, Type, Key_Type, Value.
            event(0x0019, [1] + a + [1, 0] + key),
            // New Connection Parameter: Store_Hint, Address, Type, intervals, latency, timeout.
            event(0x001C, [1] + a + [1, 6, 0, 12, 0, 0, 0] + passkey.prefix(2)),
            // Local Out Of Band Extended Data Updated: Type, EIR_Data_Length, EIR_Data (hash, randomizer).
            event(0x0022, [2, 18, 0, 17, 0x0E] + key),
        ]
    }

    /// The key, and the passkey, in every spelling a log could use.
    static func leaks(in line: String) -> Bool {
        let spellings = [
            key.hexString, key.hexString(separator: " "), Array(key.prefix(4)).hexString(separator: " "),
            Array(key.prefix(4)).hexString, key.map { "\($0)" }.joined(separator: ", "),
        ]
        return spellings.contains { line.lowercased().contains($0.lowercased()) }
    }

    @Test func noSecretManagementEventParameterReachesATraceLine() async throws {
        let kernel = FakeMgmtKernel()
        let log = RecordingLog(level: .trace)
        let client = MgmtClient(transport: kernel, logger: log.logger, defaultTimeout: .seconds(5))
        await client.start()
        for packet in Self.secretEvents { kernel.kernelBroadcasts(packet) }
        // Every one was received and logged (by code), so the test sees what -vv shows.
        #expect(
            await eventually {
                log.linesWithMetadata.filter { $0.contains("mgmt receive") }.count == Self.secretEvents.count
            })
        let lines = log.linesWithMetadata
        #expect(lines.contains { $0.contains("management event 0x0009 on hci0, 26 parameter bytes not shown") })
        #expect(!lines.contains { Self.leaks(in: $0) }, "\(lines.joined(separator: "\n"))")
        await client.close()
    }

    @Test func aManagementPacketNeverDescribesItsParameters() {
        for packet in Self.secretEvents {
            #expect(!Self.leaks(in: "\(packet)"))
            let event = try? MgmtEvent(packet)
            #expect(event != nil)
            #expect(!Self.leaks(in: "\(String(describing: event))"))
            #expect(!Self.leaks(in: event?.logDescription ?? ""))
        }
        // A decoded event still shows its fields.
        #expect(MgmtEvent.advertisingAdded(index: MgmtIndex(0), instance: 3).logDescription.contains("instance: 3"))
    }

    @Test func traceIsRefusedToAnElevatedProcess() {
        let elevated = ProcessEnvironment(variables: [:], elevated: true)
        let (level, note) = elevated.logLevel(requested: .trace)
        #expect(level == .debug)
        #expect(note?.contains("-vv (every packet) is refused") == true)
        #expect(elevated.logLevel(requested: .debug) == (.debug, nil))
        let plain = ProcessEnvironment(variables: [:], elevated: false)
        #expect(plain.logLevel(requested: .trace) == (.trace, nil))
    }
}

/// The raw path: HCI packets with keys or pairing parameters (a raw socket sees bluetoothd's).
@Suite struct HCIKeyMaterialTests {
    static let key = KeyMaterialLoggingTests.key
    static let address = KeyMaterialLoggingTests.address

    static var secretPackets: [H4Packet] {
        let a = address
        return [
            // Link Key Notification: BD_ADDR, Link_Key, Key_Type.
            H4Packet(type: .event, body: [0x18, 23] + a + key + [4]),
            // Return Link Keys: Num_Keys, BD_ADDR, Link_Key.
            H4Packet(type: .event, body: [0x15, 23, 1] + a + key),
            // User Passkey Notification: BD_ADDR, Passkey.
            H4Packet(type: .event, body: [0x3B, 10] + a + Array(key.prefix(4))),
            // LE Meta, LE Long Term Key Request: handle, Random_Number, EDIV.
            H4Packet(type: .event, body: [0x3E, 13, 0x05, 0x40, 0x00] + Array(key.prefix(8)) + [0x12, 0x34]),
            // Link Key Request Reply command: BD_ADDR, Link_Key.
            H4Packet(type: .command, body: [0x0B, 0x04, 22] + a + key),
            // LE Long Term Key Request Reply command: handle, LTK.
            H4Packet(type: .command, body: [0x1A, 0x20, 18, 0x40, 0x00] + key),
            // Command Complete of Read Local OOB Data: status, C, R.
            H4Packet(type: .event, body: [0x0E, 36, 1, 0x1C, 0x0C, 0] + key + key),
        ]
    }

    @Test func secretPacketsAreDescribedWithoutTheirBytes() {
        for packet in Self.secretPackets {
            #expect(packet.carriesSecrets)
            #expect(!KeyMaterialLoggingTests.leaks(in: "\(packet)"), "\(packet)")
        }
        let ordinary = H4Packet(type: .event, body: [0x0E, 4, 1, 0x03, 0x0C, 0x00])
        #expect(!ordinary.carriesSecrets)
        #expect("\(ordinary)" == "04 0e 04 01 03 0c 00")
    }

    /// The raw path at -vv: the controller client traces every packet; those with keys are
    /// shown by kind and length only.
    @Test func noKeyReachesATraceLineOfTheControllerClient() async throws {
        let log = RecordingLog(level: .trace)
        let fake = FakeController()
        let client = ControllerClient(transport: fake, logger: log.logger, clock: ManualClock())
        await client.start()
        for packet in Self.secretPackets where packet.type == .event { fake.inject(packet) }
        _ = try await client.execute(ReadBDAddr())  // answered after them: all received
        let lines = log.linesWithMetadata
        #expect(lines.contains { $0.contains("event Link Key Notification: 25 bytes withheld") }, "\(lines)")
        #expect(!lines.contains { KeyMaterialLoggingTests.leaks(in: $0) }, "\(lines.joined(separator: "\n"))")
        await client.close()
    }

    @Test func theRawSocketFilterAsksOnlyForDecodedEvents() {
        let mask = HCIEvent.socketFilterEventMask
        // Command Complete, Command Status, Hardware Error, LE Meta, and 0xFD (bit 0x3D).
        #expect(mask == 1 << 0x0E | 1 << 0x0F | 1 << 0x10 | 1 << 0x3E | 1 << 0x3D)
        for code in H4Packet.secretEvents.keys {
            #expect(mask & 1 << UInt64(code & 63) == 0, "event 0x\([code].hexString) would be received")
        }
    }
}
