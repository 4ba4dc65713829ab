/// A reader of the time passed on `clock` since this call. Generic, so that the instants of
/// whatever clock an `any Clock<Duration>` holds can be subtracted: `ControllerClient`'s warning
/// windows and `LiveScanLoop`'s source time read an injected clock through it.
func stopwatch<C: Clock<Duration>>(on clock: C) -> @Sendable () -> Duration {
    let origin = clock.now
    return { origin.duration(to: clock.now) }
}
