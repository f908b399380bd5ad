/// A problem with `ConfigSettings.plist`: its ``reason`` names the file and the key path and says
/// what is expected, for example `ConfigSettings.plist: key 'testAuth.domain' is missing (expected
/// a string: the domain id)`.
public struct ConfigError: CodedError {
    /// What kind of problem. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        /// The file does not exist or cannot be read.
        public static let missingFile = Code(name: "missingFile")
        /// The file is not a property list with a dictionary at its root.
        public static let notAPlist = Code(name: "notAPlist")
        /// A required key is missing.
        public static let missingKey = Code(name: "missingKey")
        /// A key holds a value of the wrong type.
        public static let wrongType = Code(name: "wrongType")
        /// A key is not one this SDK knows (often a typo).
        public static let unknownKey = Code(name: "unknownKey")
        /// A value is outside its allowed range or set.
        public static let outOfRange = Code(name: "outOfRange")
        /// A value is below a security floor.
        public static let securityFloor = Code(name: "securityFloor")
        /// The plist and the domain it names disagree (for example real accounts on a domain
        /// that is a sandbox).
        public static let domainMismatch = Code(name: "domainMismatch")
        /// The code's name.
        public var description: String { name }
    }

    /// What kind of problem.
    public let code: Code
    /// The file's path as given.
    public let file: String
    /// The dotted key path, empty for the file as a whole.
    public let keyPath: String
    /// What is wrong and what is expected.
    public let message: String

    /// Creates an error.
    public init(_ code: Code, file: String, keyPath: String, _ message: String) {
        self.code = code
        self.file = file
        self.keyPath = keyPath
        self.message = message
    }

    /// What a person reads: `<file>: key '<path>' <message>`, or `<file>: <message>` for the file
    /// as a whole.
    public var reason: String { keyPath.isEmpty ? "\(file): \(message)" : "\(file): key '\(keyPath)' \(message)" }

    /// The key path: errors of one code are equal when their key paths are.
    public var qualifier: String? { keyPath.isEmpty ? nil : keyPath }
}
