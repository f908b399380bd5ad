public import SparkDomain

/// A setup step failed in a way retrying the same step will not fix (Spark's `setupError`).
public struct SetupError: CodedError {
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
        /// The passcode was wrong; ``SetupError/attemptsLeft`` says how many tries remain this
        /// hour. Nothing changed: ask again.
        public static let incorrectPasscode = Code(name: "incorrectPasscode")
        /// A new passcode breaks a rule (see ``BBMKeyManager/checkPasscode(_:userID:)``); the
        /// reason names it. Nothing changed: ask for another.
        public static let passcodeTooWeak = Code(name: "passcodeTooWeak")
        /// Too many wrong passcodes this hour; ``SetupError/retryAfter`` says how long to wait.
        public static let tooManyAttempts = Code(name: "tooManyAttempts")
        /// Another device created the user's keys first: ask for that device's passcode instead.
        public static let keysExist = Code(name: "keysExist")
        /// This endpoint was removed (from another device, or superseded by a device switch).
        public static let endpointRemoved = Code(name: "endpointRemoved")
        /// The domain refused the user or the token; signing in again is needed.
        public static let tokenRejected = Code(name: "tokenRejected")
        /// The app's ``SetupHandler`` gave no answer (no passcode, no device switch, no endpoint
        /// to remove), so setup stopped where it was.
        public static let declined = Code(name: "declined")
        /// A transparency alarm at setup: the domain serves an identity for the user that this
        /// device's keys did not publish. The device keeps its keys; see the reason.
        public static let identitySubstituted = Code(name: "identitySubstituted")
        /// The code's name.
        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// A human-readable explanation.
    public let reason: String
    /// The domain's code, when the domain refused.
    public let domainCode: DomainError.Code?
    /// For ``Code/incorrectPasscode``: the wrong passcodes still allowed this hour, when known.
    public let attemptsLeft: Int?
    /// For ``Code/tooManyAttempts``: seconds until another attempt is allowed, when known.
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

    /// The domain's code, when the domain refused: errors of one code are equal when their domain
    /// codes are, and read `SetupError.refused(<domain code>): <reason>`.
    public var qualifier: String? { domainCode?.rawValue }
}
