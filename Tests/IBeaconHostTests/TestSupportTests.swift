import Glibc
import IBeaconTestSupport
import Testing

/// The shared waiting and scratch-directory helpers: a wait that can never succeed still ends
/// and says so, and clean-up removes whatever modes a test left.
@Suite struct TestSupportTests {
    @Test func eventuallyEndsFalseWhenTheConditionNeverHolds() async {
        #expect(await eventually(within: 0.05) { false } == false)
        #expect(await eventually(within: 0.05) { true } == true)
    }

    @Test func withinGivesUpOnABodyThatNeverReturnsAndPassesOnAResult() async {
        let never = Latch()
        #expect(await within(0.05) { await never.wait() } == nil)
        #expect(await within(5) { 42 } == 42)
        never.open()
    }

    @Test func aLatchLetsEveryWaiterThroughOnceOpen() async {
        let latch = Latch()
        let waiters = (0..<3).map { _ in Task { await latch.wait() } }
        #expect(!latch.isOpen)
        latch.open()
        for w in waiters { await w.value }
        await latch.wait()  // already open: returns at once
        #expect(latch.isOpen)
    }

    @Test func onOwnThreadReturnsTheBodysResultAndError() async throws {
        #expect(await onOwnThread { 6 * 7 } == 42)
        struct Refused: Error {}
        await #expect(throws: Refused.self) { try await onOwnThread { () throws -> Int in throw Refused() } }
    }

    @Test func aScratchDirectoryIsFreshAndRemovedWithReadOnlyContents() throws {
        let a = try makeScratchDirectory("ibeacon-support")
        let b = try makeScratchDirectory("ibeacon-support")
        #expect(a != b)
        #expect(mkdir(a + "/sub", 0o755) == 0)
        let file = fopen(a + "/sub/f", "w")
        #expect(file != nil)
        fclose(file)
        #expect(symlink("/etc", a + "/link") == 0)
        chmod(a + "/sub/f", 0o400)
        chmod(a + "/sub", 0o500)
        removeScratchDirectory(a)
        removeScratchDirectory(b)
        var st = stat()
        #expect(lstat(a, &st) != 0)
        #expect(lstat(b, &st) != 0)
        #expect(lstat("/etc", &st) == 0)  // the link was removed, not followed
    }
}
