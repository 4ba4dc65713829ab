import SystemPackage

/// A file-system failure, classified for the CLI's exit codes.
public struct FileError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The file does not exist or cannot be read (EX_NOINPUT).
        case notFound
        /// The file, or its directory, cannot be written (EX_CANTCREAT).
        case cannotWrite
        /// Another process holds the file's lock (EX_TEMPFAIL).
        case locked
        /// The file is too large or of a kind that cannot be a profile (EX_DATAERR).
        case badData
        /// Any other I/O failure (EX_IOERR).
        case io
    }

    public var kind: Kind
    public var path: String
    public var message: String
    public var hint: String?
    /// The system call's error behind it, when one is (a missing file, permission denied):
    /// callers with their own wording for those (capture files) use it.
    public var cause: Errno?

    public init(_ kind: Kind, path: String, _ message: String, hint: String? = nil) {
        self.kind = kind
        self.path = path
        self.message = message
        self.hint = hint
    }

    public var description: String {
        let base = "\(path): \(message)"
        return hint.map { "\(base) — \($0)" } ?? base
    }
}

/// Which file an open descriptor or a directory entry is: device and inode numbers.
public struct FileIdentity: Sendable, Equatable, Hashable, CustomStringConvertible {
    public var device: UInt64
    public var inode: UInt64
    public var description: String { "device \(device) inode \(inode)" }
}

/// What the profile store decides on from swift-system's `Stat` (`fstat`/`fstatat`): type,
/// permission bits, owner, link count, size and identity.
struct FileStatus: Sendable {
    let stat: Stat

    init(_ stat: Stat) { self.stat = stat }

    /// `st_mode`: type and permission bits.
    var mode: UInt32 { UInt32(stat.mode.rawValue) }
    var uid: UInt32 { stat.userID.rawValue }
    var gid: UInt32 { stat.groupID.rawValue }
    var links: Int { stat.linkCount }
    var size: Int64 { stat.size }
    var identity: FileIdentity {
        FileIdentity(device: UInt64(stat.deviceID.rawValue), inode: UInt64(stat.inode.rawValue))
    }

    var isRegular: Bool { stat.type == .regular }
    var isDirectory: Bool { stat.type == .directory }
    var isSymbolicLink: Bool { stat.type == .symbolicLink }

    /// `a directory`, `a FIFO`, … for messages that refuse a file of the wrong type.
    var typeName: String {
        switch stat.type {
        case .regular: "a regular file"
        case .directory: "a directory"
        case .symbolicLink: "a symbolic link"
        case .fifo: "a FIFO (named pipe)"
        case .characterSpecial: "a character device"
        case .blockSpecial: "a block device"
        case .socket: "a socket"
        default: "a special file"
        }
    }
}

extension FileError {
    /// This error for a file an option names that is not a profile (`--mqtt-ca FILE`): the
    /// profile store's advice (`ibeacon profile new`, "a profile file") becomes the option's.
    public func naming(option: String) -> FileError {
        var out = self
        if hint?.contains("profile") == true { out.hint = "check the path given to \(option)" }
        return out
    }
}
