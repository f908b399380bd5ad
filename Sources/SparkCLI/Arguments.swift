import Foundation

/// A small command-line reader: positional words and `--flag value` options, with errors that
/// become usage messages (exit status 64).
public struct Arguments {
    /// A usage mistake, said to the user with exit status 64.
    public struct UsageError: Error {
        /// What is wrong.
        public let message: String
        /// A mistake described by `message`.
        public init(message: String) { self.message = message }
    }

    private var words: [String]

    /// Reads `words` (the arguments after the program name).
    public init(_ words: [String]) { self.words = words }

    /// Whether every word was taken.
    public var isEmpty: Bool { words.isEmpty }

    /// Removes and returns `--name VALUE`, if present.
    public mutating func option(_ name: String) throws -> String? {
        guard let index = words.firstIndex(of: name) else { return nil }
        guard index + 1 < words.count, !words[index + 1].hasPrefix("--") else {
            throw UsageError(message: "\(name) needs a value")
        }
        let value = words[index + 1]
        words.removeSubrange(index...(index + 1))
        return value
    }

    /// Removes `--name VALUE` and parses it as an integer in `range`.
    public mutating func integer(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = try option(name) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw UsageError(
                message: "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
        }
        return value
    }

    /// Removes `--name on|off`.
    public mutating func onOff(_ name: String) throws -> Bool? {
        guard let text = try option(name) else { return nil }
        switch text {
        case "on", "yes", "true": return true
        case "off", "no", "false": return false
        default: throw UsageError(message: "\(name) takes on or off, not '\(text)'")
        }
    }

    /// Removes `--name` (a switch without a value), returning whether it was there.
    public mutating func flag(_ name: String) -> Bool {
        guard let index = words.firstIndex(of: name) else { return false }
        words.remove(at: index)
        return true
    }

    /// Removes and returns the next positional word.
    public mutating func next(_ what: String) throws -> String {
        guard let index = words.firstIndex(where: { !$0.hasPrefix("--") }) else { throw UsageError(message: "missing \(what)") }
        return words.remove(at: index)
    }

    /// Fails on anything left over (an unknown flag or an extra word).
    public func finish() throws {
        if let extra = words.first {
            throw UsageError(message: extra.hasPrefix("-") ? "unknown option \(extra)" : "unexpected argument '\(extra)'")
        }
    }
}
