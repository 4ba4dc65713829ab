/// The columns of `ibeacon scan`'s table, laid out for the width it is drawn in: a row never
/// wraps. The widest layout shows everything (106 columns); narrower ones first drop the
/// addresses (85), then shorten the UUID to its first 8 digits and bring the addresses back
/// (79, so an 80-column terminal shows every field), then drop the addresses again (58), then
/// measured power and the rate (46); below that each line is cut at the width.
public struct RangingTableLayout: Sendable, Equatable {
    public enum Column: String, Sendable, CaseIterable {
        case uuid, major, minor, rssi, power, distance, proximity, rate, address
    }

    public var columns: [Column]
    /// The UUID as its first 8 hex digits and `…`.
    public var shortUUID: Bool
    /// Lines are cut at this many columns (nil: never).
    public var width: Int?

    public init(columns: [Column], shortUUID: Bool = false, width: Int? = nil) {
        self.columns = columns
        self.shortUUID = shortUUID
        self.width = width
    }

    /// Every column, the UUID in full, no width: lines written to a pipe or a file.
    public static let full = RangingTableLayout(columns: Column.allCases)

    /// The layout that shows the most within `width` columns.
    public static func fitting(width: Int) -> RangingTableLayout {
        let all = Column.allCases
        let compact = all.filter { $0 != .power && $0 != .rate && $0 != .address }
        let candidates = [
            RangingTableLayout(columns: all),
            RangingTableLayout(columns: all.filter { $0 != .address }),
            RangingTableLayout(columns: all, shortUUID: true),
            RangingTableLayout(columns: all.filter { $0 != .address }, shortUUID: true),
            RangingTableLayout(columns: compact, shortUUID: true),
        ]
        var chosen = candidates.first { $0.lineWidth <= width } ?? candidates[candidates.count - 1]
        chosen.width = max(1, width)
        return chosen
    }

    /// Columns one row takes at most.
    public var lineWidth: Int { columns.map { cellWidth($0) }.reduce(0, +) + columns.count - 1 }

    func cellWidth(_ column: Column) -> Int {
        switch column {
        case .uuid: shortUUID ? 9 : 36
        case .major, .minor, .power, .rate: 5
        case .rssi: 6
        case .distance: 7
        case .proximity: 9
        case .address: 20  // an address and " +N" more
        }
    }

    static let headers: [Column: String] = [
        .uuid: "UUID", .major: "MAJOR", .minor: "MINOR", .rssi: "RSSI", .power: "POWER", .distance: "DIST(m)",
        .proximity: "PROXIMITY", .rate: "RPT/S", .address: "ADDRESS",
    ]

    /// Numbers are right-aligned under their headings, text left-aligned.
    static func rightAligned(_ column: Column) -> Bool {
        switch column {
        case .major, .minor, .rssi, .power, .distance, .rate: true
        case .uuid, .proximity, .address: false
        }
    }

    public var header: String { line(columns.map { Self.headers[$0] ?? "" }) }

    public func row(_ b: RangedBeacon) -> String { line(columns.map { cell($0, b) }) }

    func cell(_ column: Column, _ b: RangedBeacon) -> String {
        let id = b.identity
        switch column {
        case .uuid:
            guard let id else { return "(not an iBeacon)" }
            return shortUUID ? String(id.proximityUUID.uuidString.prefix(8)) + "…" : id.proximityUUID.uuidString
        case .major: return id.map { "\($0.major)" } ?? "-"
        case .minor: return id.map { "\($0.minor)" } ?? "-"
        case .rssi: return b.rssi.map { $0.fixed(1) } ?? "-"
        case .power: return b.measuredPower.map { "\($0)" } ?? "-"
        case .distance: return b.distance.map { $0.fixed(2) } ?? "-"
        case .proximity: return id == nil ? "-" : b.proximity.rawValue
        case .rate: return "\(b.count)"
        case .address:
            guard let first = b.addresses.first else { return "-" }
            return first.description + (b.addresses.count > 1 ? " +\(b.addresses.count - 1)" : "")
        }
    }

    /// Cells padded to their columns, trailing spaces dropped, cut at `width`.
    func line(_ cells: [String]) -> String {
        var parts: [String] = []
        for (column, text) in zip(columns, cells) {
            parts.append(text.padded(cellWidth(column), left: Self.rightAligned(column)))
        }
        var text = parts.joined(separator: " ")
        while text.last == " " { text.removeLast() }
        if let width, text.count > width { text = String(text.prefix(width)) }
        return text
    }
}
