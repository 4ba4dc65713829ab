import IBeaconHost
import Testing

@testable import IBeaconTransports

/// The MQTT client's thread waits on the shared retry schedule, and finds its own executable
/// through `Sys` for the guardian it starts.
@Suite struct MosquittoReconnectTests {
    /// What the client's own loop did before it took `RetryPolicy.Delays`: 1 s, doubling, at
    /// most 30 s (and 1 s again once connected).
    @Test func theReconnectWaitsAreOneSecondDoublingToThirty() {
        var delays = MosquittoConnection.reconnecting.delays()
        #expect((0..<7).map { _ in delays.next() } == [1, 2, 4, 8, 16, 30, 30].map { Duration.seconds($0) })
        delays.reset()
        #expect(delays.next() == .seconds(1))
    }

    @Test func theGuardiansExecutableIsTheLinkTarget() throws {
        let path = ownExecutablePath()
        #expect(path != "/proc/self/exe")
        #expect(path == (try Sys.readLink("/proc/self/exe")))
    }
}
