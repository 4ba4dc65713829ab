import Glibc

/// A fresh directory for a test's files: `$TMPDIR` (else /tmp) / `PREFIX-XXXXXX`, made by
/// `mkdtemp` (mode 0700, a name no other test run can take). Remove it with
/// `removeScratchDirectory`.
public func makeScratchDirectory(_ prefix: String) throws(ScratchDirectoryError) -> String {
    let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
    guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
        throw ScratchDirectoryError("mkdtemp \(base)/\(prefix)-XXXXXX failed: errno \(errno)")
    }
    return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Removes `path` and everything below it, whatever the modes a test left (read-only files and
/// directories); symbolic links are removed, never followed. Best effort: a test's clean-up.
public func removeScratchDirectory(_ path: String) {
    var st = stat()
    guard lstat(path, &st) == 0 else { return }
    guard st.st_mode & S_IFMT == S_IFDIR else {
        unlink(path)
        return
    }
    chmod(path, 0o700)
    if let dir = opendir(path) {
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        closedir(dir)
        for name in names { removeScratchDirectory(path + "/" + name) }
    }
    rmdir(path)
}

/// `mkdtemp` failed.
public struct ScratchDirectoryError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
