public import SparkDomain

/// A setup step failed in a way retrying the same step will not fix (Spark's `setupError`).
public struct SetupError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        /// The service is not started.
        public static let notStarted = Code(name: "notStarted")
        /// No token was given yet.
        public static let noToken = Code(name: "noToken")
        /// The call does not fit the current setup state.
        public static let wrongState = Code(name: "wrongState")
        /// The domain refused the request; see ``SetupError/domainCode``.
        public static let refused = Code(name: "refused")
        /// The domain cannot be reached or failed.
        public static let domainUnavailable = Code(name: "domainUnavailable")
        /// The local store failed.
        public static let storageFailure = Code(name: "storageFailure")
        /// The code's name.
        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// A human-readable explanation.
    public let reason: String
    /// The domain's code, when the domain refused.
    public let domainCode: DomainError.Code?

    /// Creates an error.
    public init(_ code: Code, _ reason: String, domainCode: DomainError.Code? = nil) {
        self.code = code
        self.reason = reason
        self.domainCode = domainCode
    }

    /// Errors are equal when their codes and domain codes are.
    public static func == (lhs: SetupError, rhs: SetupError) -> Bool { lhs.code == rhs.code && lhs.domainCode == rhs.domainCode }
    /// Hashes the codes.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(domainCode)
    }

    /// `SetupError.<code>: <reason>`.
    public var description: String { "SetupError.\(code)" + (domainCode.map { "(\($0))" } ?? "") + ": \(reason)" }
}
