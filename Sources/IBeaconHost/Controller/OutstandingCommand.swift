/// The one command a client has outstanding (`ControllerClient`, `MgmtClient`): numbered, so that
/// a late timer or send failure cannot end a newer command; matched to its reply by `key` (the
/// opcode, and for the management interface the controller index too); resumed exactly once,
/// its timer stopped then. Each client keeps its protocol: what a reply looks like, credits,
/// what a timeout means.
struct OutstandingCommand<Key: Equatable & Sendable> {
    private struct Entry {
        let id: UInt64
        let key: Key
        let continuation: CheckedContinuation<[UInt8], any Error>
        var timer: Task<Void, Never>
    }

    private var entry: Entry?
    private var lastID: UInt64 = 0

    /// A number for the next command (never reused).
    mutating func nextID() -> UInt64 {
        lastID += 1
        return lastID
    }

    /// Command `id` is now the outstanding one; `continuation` gets its reply.
    mutating func begin(
        id: UInt64, key: Key, continuation: CheckedContinuation<[UInt8], any Error>, timer: Task<Void, Never>
    ) {
        entry = Entry(id: id, key: key, continuation: continuation, timer: timer)
    }

    /// The outstanding command, if any.
    var current: (id: UInt64, key: Key)? { entry.map { ($0.id, $0.key) } }

    /// The id of the outstanding command when a reply for `key` answers it.
    func id(answeredBy key: Key) -> UInt64? {
        guard let entry, entry.key == key else { return nil }
        return entry.id
    }

    /// Resumes command `id` with `result` and stops its timer; false (and nothing done) when
    /// `id` is not outstanding any more.
    @discardableResult
    mutating func finish(id: UInt64, with result: Result<[UInt8], any Error>) -> Bool {
        guard let e = entry, e.id == id else { return false }
        entry = nil
        e.timer.cancel()
        e.continuation.resume(with: result)
        return true
    }
}
