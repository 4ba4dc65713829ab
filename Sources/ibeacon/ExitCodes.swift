import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports

struct CLIError: Error, CustomStringConvertible {
    var message: String
    var code: Int32
    init(_ message: String, code: Int32) {
        self.message = message
        self.code = code
    }
    var description: String { message }
}

/// Maps any error to the message printed on stderr and the exit code.
func classify(_ error: any Error) -> (message: String, code: Int32) {
    switch error {
    case let e as CLIError:
        return (e.message, e.code)
    case let e as any ClassifiedError:
        return (e.description, exitCode(for: e.failureKind))
    default:
        return ("internal error: \(error)", Exit.software)
    }
}

/// Runs a command body, turning errors into a message on stderr and an exit code.
func reporting(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let e as ExitCode {
        throw e
    } catch let e as CleanExit {
        throw e
    } catch let e as ValidationError {
        throw e
    } catch is CancellationError {
        throw ExitCode(Exit.ok)
    } catch {
        let (message, code) = classify(error)
        printError("ibeacon: " + message)
        throw ExitCode(code)
    }
}
