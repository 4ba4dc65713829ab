import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The path walk under every `SafeFile` operation: one component at a time, links followed only
/// when their owner may be trusted.
extension SafeFile {
    /// Links followed per path, like the kernel's MAXSYMLINKS.
    static let maximumLinks = 40

    /// Whether a symbolic link owned by `owner` may be followed by a process whose effective
    /// user is `user`: only its own links and root's. The kernel's `fs.protected_symlinks`
    /// (off on some systems) refuses links in sticky world-writable directories only; this
    /// also refuses, for root, a link a user made in a directory of their own.
    static func mayFollow(linkOwner owner: UInt32, user: UInt32) -> Bool { owner == user || owner == 0 }

    /// Walks `path` one component at a time without letting the kernel follow any link, and
    /// returns its directory, opened (`O_PATH`), and the last name with its `lstat`.
    static func locate(_ path: String, writing: Bool) throws(FileError) -> Location {
        guard !path.isEmpty else { throw FileError(.notFound, path: path, "an empty file name") }
        var walk = try PathWalk(path, writing: writing)
        while true {
            guard let component = walk.pending.popLast() else {
                try? walk.current.close()
                throw FileError(.notFound, path: path, "is a directory, not a profile file")
            }
            if component == "." { continue }
            if component == ".." {
                try walk.enter("..", shown: walk.shown + "/..")
                continue
            }
            let here = walk.shown + "/" + component
            guard let status = try walk.lstat(component, here: here) else {
                return Location(directory: walk.current, name: component, path: path, status: nil)
            }
            if status.isSymbolicLink {
                try walk.follow(component, status: status, here: here)
                continue
            }
            if walk.pending.isEmpty {
                return Location(directory: walk.current, name: component, path: path, status: status)
            }
            guard status.isDirectory else {
                try? walk.current.close()
                throw FileError(walk.kind, path: path, "\(here) is \(status.typeName), not a directory")
            }
            try walk.enter(component, shown: here)
        }
    }

    /// Where `locate` is in its walk: the directory it holds open, the components still to
    /// look at (last first), the path shown in messages, and the links followed so far.
    private struct PathWalk {
        let path: String
        let writing: Bool
        let kind: FileError.Kind
        let user: UInt32
        var pending: [String]
        var shown: String
        var current: FileDescriptor
        var links = 0

        init(_ path: String, writing: Bool) throws(FileError) {
            self.path = path
            self.writing = writing
            kind = writing ? .cannotWrite : .notFound
            user = Sys.effectiveUserID()
            pending = Array(path.split(separator: "/", omittingEmptySubsequences: true).map(String.init).reversed())
            shown = path.hasPrefix("/") ? "" : "."
            current = try openDirectory(at: nil, path.hasPrefix("/") ? "/" : ".", shown: path, writing: writing)
        }

        /// Opens directory `name` below the current one and makes it current.
        mutating func enter(_ name: String, shown: String) throws(FileError) {
            let next: FileDescriptor
            do throws(FileError) {
                next = try openDirectory(at: current, name, shown: shown, writing: writing)
            } catch {
                try? current.close()
                throw error
            }
            try? current.close()
            current = next
            self.shown = shown
        }

        /// The `lstat` of `component`; nil when it is the last one and does not exist.
        func lstat(_ component: String, here: String) throws(FileError) -> FileStatus? {
            do throws(Errno) {
                return try Sys.lstat(at: current, component)
            } catch let e {
                if pending.isEmpty && e == .noSuchFileOrDirectory { return nil }
                try? current.close()
                throw lookupFailure(e, path: path, at: here, writing: writing)
            }
        }

        /// Puts the target of link `component` in front of the components still to walk, after
        /// checking who owns it; an absolute target restarts at `/`.
        mutating func follow(_ component: String, status: FileStatus, here: String) throws(FileError) {
            guard mayFollow(linkOwner: status.uid, user: user) else {
                try? current.close()
                throw FileError(
                    kind, path: path,
                    (pending.isEmpty && links == 0 ? "is" : "goes through \(here), which is")
                        + " a symbolic link owned by uid \(status.uid); ibeacon (uid \(user)) follows only its own user's and root's links, so that a link planted in a shared directory cannot redirect it",
                    hint: "give the real file's path (readlink -f) or remove the link")
            }
            links += 1
            let text: String
            do throws(Errno) {
                text = try Sys.readLink(at: current, component)
                if links > maximumLinks { throw .tooManySymbolicLinkLevels }
            } catch {
                try? current.close()
                throw FileError(kind, path: path, "cannot follow the symbolic link \(here): \(error)")
            }
            pending.append(contentsOf: text.split(separator: "/").map(String.init).reversed())
            if text.hasPrefix("/") {
                try? current.close()
                current = try openDirectory(at: nil, "/", shown: text, writing: writing)
                shown = ""
            }
        }
    }

    private static func openDirectory(
        at directory: FileDescriptor?, _ name: String, shown: String, writing: Bool
    ) throws(FileError) -> FileDescriptor {
        do throws(Errno) {
            return try Sys.open(at: directory, name, Sys.openPathOnly | O_DIRECTORY | O_NOFOLLOW)
        } catch {
            throw lookupFailure(error, path: shown, at: shown, writing: writing)
        }
    }

    /// A failed `lstat`/`open` on the way to a file. EACCES is "cannot be looked up", never
    /// "does not exist".
    static func lookupFailure(_ e: Errno, path: String, at here: String, writing: Bool) -> FileError {
        var error = lookupFailureMessage(e, path: path, at: here, writing: writing)
        error.cause = e
        return error
    }

    private static func lookupFailureMessage(_ e: Errno, path: String, at here: String, writing: Bool) -> FileError {
        let kind: FileError.Kind = writing ? .cannotWrite : .notFound
        let place = here.hasPrefix("./") ? String(here.dropFirst(2)) : here
        switch e {
        case .noSuchFileOrDirectory:
            if writing {
                return FileError(.cannotWrite, path: path, "directory \(place) does not exist")
            }
            return FileError(
                .notFound, path: path, "no such file (\(place) does not exist)",
                hint: "check the path, or create one with `ibeacon profile new`")
        case .permissionDenied, .notPermitted:
            return FileError(
                kind, path: path, "\(place) cannot be looked up: permission denied",
                hint: "run as a user who may read that directory")
        case .notDirectory:
            return FileError(kind, path: path, "\(place) is not a directory")
        case .tooManySymbolicLinkLevels:
            return FileError(kind, path: path, "\(place) was replaced by a symbolic link while ibeacon opened it")
        default:
            return FileError(writing ? .cannotWrite : .io, path: path, "\(place): \(e)")
        }
    }
}
