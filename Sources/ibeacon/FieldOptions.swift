import ArgumentParser
import IBeaconCore

// Typed option values for a beacon's fields, their forms and ranges Core's (`ProximityUUID`,
// `FieldRange`). Parsing keeps what was given and never fails on a bad value: the options'
// `validate()` refuses it, so that every command says the same thing, naming the option
// (`--major 65536 is outside 0…65535`), where the parser would say `The value … is invalid`.

/// A `--uuid` value: the text as given, and the UUID when it is one.
struct UUIDArgument: ExpressibleByArgument, Sendable, CustomStringConvertible {
    let text: String
    let value: ProximityUUID?

    init(argument: String) {
        text = argument
        value = ProximityUUID(parsing: argument)
    }

    var description: String { text }

    /// The UUID, or the usage error every command gives for one that is not.
    func checked() throws -> ProximityUUID {
        guard let value else {
            throw ValidationError("--uuid \(text) is not a UUID like \(ProximityUUID.example)")
        }
        return value
    }
}

/// A whole-number option with a range from Core.
protocol RangedField {
    static var option: String { get }
    static var range: FieldRange { get }
}

/// The value of a `Field` option: any integer (a value that is not one is the parser's
/// `The value 'x' is invalid for '--major <n>'`, as for every integer option), checked against
/// Core's range by `checked()`.
struct Ranged<Field: RangedField>: ExpressibleByArgument, Sendable, CustomStringConvertible {
    let number: Int

    init(_ number: Int) { self.number = number }

    init?(argument: String) {
        guard let number = Int(argument) else { return nil }
        self.number = number
    }

    var description: String { String(number) }

    /// The number, or the usage error every command gives for one outside the range.
    @discardableResult
    func checked() throws -> Int {
        guard Field.range.contains(number) else {
            throw ValidationError("\(Field.option) \(number) is outside \(Field.range.text)")
        }
        return number
    }
}

enum MajorField: RangedField {
    static let option = "--major"
    static let range = FieldRange.major
}

enum MinorField: RangedField {
    static let option = "--minor"
    static let range = FieldRange.minor
}

enum MeasuredPowerField: RangedField {
    static let option = "--measured-power"
    static let range = FieldRange.measuredPower
}

enum IntervalMsField: RangedField {
    static let option = "--interval-ms"
    static let range = FieldRange.intervalMs
}

typealias Major = Ranged<MajorField>
typealias Minor = Ranged<MinorField>
typealias MeasuredPower = Ranged<MeasuredPowerField>
typealias IntervalMs = Ranged<IntervalMsField>

extension Ranged where Field == MajorField {
    /// Two octets of the payload; in range once `checked()` has passed.
    var value: UInt16 { UInt16(clamping: number) }
}

extension Ranged where Field == MinorField {
    /// Two octets of the payload; in range once `checked()` has passed.
    var value: UInt16 { UInt16(clamping: number) }
}

/// How a command's help describes its `--uuid`, `--major` and `--minor`.
protocol IdentityHelp {
    static var uuid: String { get }
    static var major: String { get }
    static var minor: String { get }
}

/// `--uuid`, `--major`, `--minor`, each optional: a beacon's identity, or a part of one, given
/// on the command line (encode, scan, monitor, calibrate); `Help` words their help texts. Its
/// `validate()` is the one check of their forms and ranges; what a command requires of them
/// together is the command's.
struct IdentityOptions<Help: IdentityHelp>: ParsableArguments {
    @Option(help: ArgumentHelp(Help.uuid, valueName: "uuid"))
    var uuid: UUIDArgument?

    // Negative numbers are values, refused for their range: `--major -1`.
    @Option(parsing: .unconditional, help: ArgumentHelp(Help.major, valueName: "n"))
    var major: Major?

    @Option(parsing: .unconditional, help: ArgumentHelp(Help.minor, valueName: "n"))
    var minor: Minor?

    func validate() throws {
        _ = try uuid?.checked()
        try major?.checked()
        try minor?.checked()
    }

    /// None of the three was given.
    var isEmpty: Bool { uuid == nil && major == nil && minor == nil }
}

/// monitor's `--uuid`, `--major`, `--minor`: a region.
enum RegionIdentityHelp: IdentityHelp {
    static let uuid = "A region by proximity UUID (with --major, --minor)."
    static let major = "Narrow the --uuid region to this major."
    static let minor = "Narrow the --uuid region to this minor (needs --major)."
}
