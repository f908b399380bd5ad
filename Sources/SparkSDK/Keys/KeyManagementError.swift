public import SparkDomain

/// An error from key management: creating, unlocking, re-protecting or resetting the user's
/// keys. It never contains key material or the passcode.
public struct KeyManagementError: CodedError {
    /// What went wrong. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        /// The passcode does not meet the policy (too short, the user id).
        public static let passcodeTooWeak = Code(name: "passcodeTooWeak")
        /// The passcode is wrong; nothing changed and it may be retried.
        public static let incorrectPasscode = Code(name: "incorrectPasscode")
        /// Too many wrong passcodes this hour; see ``KeyManagementError/retryAfter``.
        public static let tooManyAttempts = Code(name: "tooManyAttempts")
        /// A stored blob is malformed, tampered with, or does not match the published identity.
        public static let corruptKeys = Code(name: "corruptKeys")
        /// The user has no keys yet (first device).
        public static let noKeys = Code(name: "noKeys")
        /// The user already has keys (another device created them first).
        public static let keysExist = Code(name: "keysExist")
        /// Another device changed the keys at the same time; try again.
        public static let conflict = Code(name: "conflict")
        /// The domain refused the request; see ``KeyManagementError/domainCode``.
        public static let refused = Code(name: "refused")
        /// The local store failed.
        public static let storageFailure = Code(name: "storageFailure")
        /// The domain evaluated the passcode with a key other than the one the backup was made
        /// with (a misconfigured or impersonated domain); the passcode was not judged.
        public static let domainKeyMismatch = Code(name: "domainKeyMismatch")
        /// A reset without the current keys waits out the domain's delay; see the message.
        public static let resetPending = Code(name: "resetPending")
        /// A transparency alarm: the backup opened with the passcode, holds the keys this device
        /// keeps, and the domain serves another identity for the user, which no device of theirs
        /// published. The keys are kept; nothing is replaced.
        public static let identitySubstituted = Code(name: "identitySubstituted")
        /// The code's name.
        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// A human-readable explanation.
    public let reason: String
    /// The domain's error code when the domain refused something.
    public let domainCode: DomainError.Code?
    /// For wrong passcodes: the attempts left this hour; for too many attempts: seconds to wait.
    public let attemptsLeft: Int?
    /// For ``Code/tooManyAttempts``: seconds until another attempt is allowed.
    public let retryAfter: Int?

    /// Creates an error.
    public init(
        _ code: Code, _ reason: String, domainCode: DomainError.Code? = nil, attemptsLeft: Int? = nil, retryAfter: Int? = nil
    ) {
        self.code = code
        self.reason = reason
        self.domainCode = domainCode
        self.attemptsLeft = attemptsLeft
        self.retryAfter = retryAfter
    }

}

extension KeyManagementError {
    /// Runs a call to the domain or the key storage, turning its refusals into key-management
    /// errors (too many attempts keeps its `retryAfter`).
    static func refusing<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as DomainError where error.code == .tooManyAttempts {
            throw KeyManagementError(.tooManyAttempts, error.reason, domainCode: error.code, retryAfter: error.retryAfter)
        } catch let error as DomainError {
            throw KeyManagementError(.refused, error.reason, domainCode: error.code)
        }
    }
}
