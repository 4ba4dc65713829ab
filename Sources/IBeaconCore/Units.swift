/// A value given to an HCI command that the specification does not allow. Thrown at
/// construction, before anything reaches a controller.
public enum ParameterError: Error, Equatable, Sendable, CustomStringConvertible {
    /// `value` of `what` lies outside `allowed`.
    case outOfRange(what: String, value: String, allowed: String, reference: String)
    /// `what` holds `count` bytes (or entries) where at most `maximum` fit.
    case tooLong(what: String, count: Int, maximum: Int, reference: String)
    /// Two parameters that are each valid contradict each other.
    case inconsistent(what: String, reason: String, reference: String)

    public var description: String {
        switch self {
        case .outOfRange(let what, let value, let allowed, let reference):
            return "\(what) \(value) is out of range: allowed \(allowed) (\(reference))"
        case .tooLong(let what, let count, let maximum, let reference):
            return "\(what) is \(count) long, at most \(maximum) allowed (\(reference))"
        case .inconsistent(let what, let reason, let reference):
            return "\(what): \(reason) (\(reference))"
        }
    }
}

/// The LE command set a controller is driven with, for advertising and scanning alike: the
/// legacy commands (§7.8.5, §7.8.10) or the extended ones (§7.8.53, §7.8.64), which allow
/// wider ranges. The raw value is the name printed in output.
public enum LECommandSet: String, Sendable, Hashable {
    case legacy
    case extended
}

/// The unit advertising intervals and scan intervals/windows are counted in: one slot is
/// 0.625 ms (Core 5.4 Vol 4 Part E §7.8.5, §7.8.10).
public enum Slots {
    public static let unitMilliseconds = 0.625

    /// `slots` in milliseconds.
    public static func milliseconds<T: BinaryInteger>(_ slots: T) -> Double { Double(slots) * unitMilliseconds }

    /// `slots` in whole milliseconds, rounded down (5 ms per 8 slots).
    static func wholeMilliseconds(_ slots: Int) -> Int { slots * 5 / 8 }

    /// The slot count nearest to `milliseconds` (1.6 slots a millisecond: never a half).
    static func nearest(milliseconds: Int) -> Int { (milliseconds * 8 + 2) / 5 }

    /// The slot count nearest to `milliseconds`, a half away from zero (not finite when the
    /// input is not).
    static func nearest(milliseconds: Double) -> Double { (milliseconds / unitMilliseconds).rounded() }

    /// `20 ms…10240 ms (32…16384 slots of 0.625 ms)`: a range of slots, for messages.
    static func rangeText<T: BinaryInteger>(_ r: ClosedRange<T>) -> String {
        "\(formatMilliseconds(milliseconds(r.lowerBound)))…\(formatMilliseconds(milliseconds(r.upperBound)))"
            + " (\(r.lowerBound)…\(r.upperBound) slots of 0.625 ms)"
    }
}

/// An advertising interval, stored as the controller counts it: slots of 0.625 ms.
/// Legacy range 0x0020…0x4000 (20 ms…10.24 s, Core 5.4 Vol 4 Part E §7.8.5); extended range
/// 0x000020…0xFFFFFF (§7.8.53). The controller adds 0–10 ms of random delay to each event.
public struct AdvertisingInterval: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// Units of 0.625 ms.
    public let slots: UInt32

    public static let legacyRange: ClosedRange<UInt32> = 0x0020...0x4000
    public static let extendedRange: ClosedRange<UInt32> = 0x00_0020...0xFF_FFFF

    public static func range(for set: LECommandSet) -> ClosedRange<UInt32> {
        set == .legacy ? legacyRange : extendedRange
    }

    private static func reference(_ set: LECommandSet) -> String {
        set == .legacy ? "Core 5.4 Vol 4 Part E §7.8.5" : "Core 5.4 Vol 4 Part E §7.8.53"
    }

    private static func allowedText(_ set: LECommandSet) -> String { Slots.rangeText(range(for: set)) }

    /// From a slot count, validated against the range of `set`.
    public init(slots: UInt32, for set: LECommandSet = .legacy) throws(ParameterError) {
        guard Self.range(for: set).contains(slots) else {
            throw .outOfRange(
                what: "advertising interval", value: "\(slots) slots", allowed: Self.allowedText(set),
                reference: Self.reference(set))
        }
        self.slots = slots
    }

    /// From milliseconds, rounded to the nearest 0.625 ms slot (100 ms → 160 slots),
    /// validated against the range of `set` (20…10240 ms for legacy advertising).
    public init(milliseconds: Int, for set: LECommandSet = .legacy) throws(ParameterError) {
        let range = Self.range(for: set)
        // Compare in milliseconds first so huge inputs cannot overflow the slot arithmetic.
        let minMs = Slots.wholeMilliseconds(Int(range.lowerBound))
        let maxMs = Slots.wholeMilliseconds(Int(range.upperBound))
        guard milliseconds >= minMs, milliseconds <= maxMs else {
            throw .outOfRange(
                what: "advertising interval", value: "\(milliseconds) ms", allowed: Self.allowedText(set),
                reference: Self.reference(set))
        }
        try self.init(slots: UInt32(Slots.nearest(milliseconds: milliseconds)), for: set)
    }

    public var milliseconds: Double { Slots.milliseconds(slots) }

    /// `100 ms (160 slots)`.
    public var description: String { "\(formatMilliseconds(milliseconds)) (\(slots) slots)" }

    public static func < (a: AdvertisingInterval, b: AdvertisingInterval) -> Bool { a.slots < b.slots }
}

/// A scan interval or scan window, in slots of 0.625 ms. Legacy range 0x0004…0x4000
/// (2.5 ms…10.24 s, Core 5.4 Vol 4 Part E §7.8.10); extended range 0x0004…0xFFFF (§7.8.64).
public struct ScanTiming: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// Units of 0.625 ms.
    public let slots: UInt16

    public static let legacyRange: ClosedRange<UInt16> = 0x0004...0x4000
    public static let extendedRange: ClosedRange<UInt16> = 0x0004...0xFFFF

    public static func range(for set: LECommandSet) -> ClosedRange<UInt16> {
        set == .legacy ? legacyRange : extendedRange
    }

    private static func reference(_ set: LECommandSet) -> String {
        set == .legacy ? "Core 5.4 Vol 4 Part E §7.8.10" : "Core 5.4 Vol 4 Part E §7.8.64"
    }

    private static func allowedText(_ set: LECommandSet) -> String { Slots.rangeText(range(for: set)) }

    public init(slots: UInt16, for set: LECommandSet = .legacy) throws(ParameterError) {
        guard Self.range(for: set).contains(slots) else {
            throw .outOfRange(
                what: "scan interval/window", value: "\(slots) slots", allowed: Self.allowedText(set),
                reference: Self.reference(set))
        }
        self.slots = slots
    }

    /// From milliseconds, rounded to the nearest 0.625 ms slot (2.5 ms → 4 slots).
    public init(milliseconds: Double, for set: LECommandSet = .legacy) throws(ParameterError) {
        let r = Self.range(for: set)
        let slots = Slots.nearest(milliseconds: milliseconds)
        guard slots.isFinite, slots >= Double(r.lowerBound), slots <= Double(r.upperBound) else {
            throw .outOfRange(
                what: "scan interval/window", value: "\(milliseconds) ms", allowed: Self.allowedText(set),
                reference: Self.reference(set))
        }
        self.slots = UInt16(slots)
    }

    public var milliseconds: Double { Slots.milliseconds(slots) }

    /// `60 ms (96 slots)`.
    public var description: String { "\(formatMilliseconds(milliseconds)) (\(slots) slots)" }

    public static func < (a: ScanTiming, b: ScanTiming) -> Bool { a.slots < b.slots }
}
