@_exported public import SparkError

/// An error from the domain (the service side). Compare by ``code``; the ``reason`` is for people
/// and never contains a token, password, code or key.
public struct DomainError: CodedError, Codable {
    /// What went wrong. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, Codable, CustomStringConvertible, RawRepresentable {
        /// The code's stable name, as sent over the wire.
        public let rawValue: String
        /// A code from its name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The code's name.
        public var description: String { rawValue }

        // Tokens
        /// The token is malformed, unsigned, signed by an untrusted key or with a refused algorithm.
        public static let invalidToken = Code(rawValue: "invalidToken")
        /// The token has expired (or is not valid yet): get a fresh one.
        public static let tokenExpired = Code(rawValue: "tokenExpired")
        /// The token is for another audience or issuer than this domain trusts.
        public static let wrongAudience = Code(rawValue: "wrongAudience")
        /// Test tokens are refused because this domain requires user authentication.
        public static let userAuthenticationRequired = Code(rawValue: "userAuthenticationRequired")
        /// The caller may not do this (another user's data, an admin-only call).
        public static let forbidden = Code(rawValue: "forbidden")

        // Accounts (the sign-up and login assistant)
        /// The user name is not 3–32 characters of `a-z 0-9 . _ -`.
        public static let nameInvalid = Code(rawValue: "nameInvalid")
        /// Another account has this user name.
        public static let nameTaken = Code(rawValue: "nameTaken")
        /// The email address is not well formed.
        public static let emailMalformed = Code(rawValue: "emailMalformed")
        /// Another account has this email address.
        public static let emailTaken = Code(rawValue: "emailTaken")
        /// The password does not meet the policy.
        public static let passwordTooWeak = Code(rawValue: "passwordTooWeak")
        /// The age is outside the allowed range.
        public static let ageOutOfRange = Code(rawValue: "ageOutOfRange")
        /// The country is not an ISO 3166-1 alpha-2 code.
        public static let countryInvalid = Code(rawValue: "countryInvalid")
        /// The user name or password is wrong (which one is never said).
        public static let invalidCredentials = Code(rawValue: "invalidCredentials")
        /// The account exists but has not been activated yet.
        public static let notActivated = Code(rawValue: "notActivated")
        /// The account is already active.
        public static let alreadyActivated = Code(rawValue: "alreadyActivated")
        /// The activation or reset code is wrong.
        public static let codeInvalid = Code(rawValue: "codeInvalid")
        /// The activation or reset code has expired or used up its tries: request a new one.
        public static let codeExpired = Code(rawValue: "codeExpired")
        /// Too many failed attempts, or more writes than the policy allows a user: wait
        /// ``DomainError/retryAfter`` seconds.
        public static let tooManyAttempts = Code(rawValue: "tooManyAttempts")

        // Endpoints and keys
        /// This endpoint is no longer registered (removed from another endpoint, superseded by a
        /// device switch, or dropped by a key reset); ``DomainError/reason`` says which.
        public static let endpointRemoved = Code(rawValue: "endpointRemoved")
        /// The unlock proof does not verify or its challenge is unknown, used or expired.
        public static let invalidProof = Code(rawValue: "invalidProof")

        // Messaging and moderation
        /// The sender is timed out or banned; ``DomainError/reason`` says which and why.
        public static let moderated = Code(rawValue: "moderated")
        /// The caller is not a member of the chat (or not an admin, for admin actions).
        public static let notAMember = Code(rawValue: "notAMember")
        /// The message is larger than the domain accepts.
        public static let tooLarge = Code(rawValue: "tooLarge")
        /// A read of a blob starts past its end.
        public static let rangeNotSatisfiable = Code(rawValue: "rangeNotSatisfiable")

        // General
        /// A request field is malformed or out of range.
        public static let invalidRequest = Code(rawValue: "invalidRequest")
        /// The thing asked for does not exist.
        public static let notFound = Code(rawValue: "notFound")
        /// The request conflicts with the current state (a compare-and-swap lost).
        public static let conflict = Code(rawValue: "conflict")
        /// The domain's storage failed.
        public static let storageFailure = Code(rawValue: "storageFailure")
        /// The domain is not set up (no such domain file, or a newer schema).
        public static let unavailable = Code(rawValue: "unavailable")
    }

    /// What went wrong.
    public let code: Code
    /// A human-readable explanation, free of secrets.
    public let reason: String
    /// For ``Code/tooManyAttempts``: seconds until another attempt is allowed.
    public let retryAfter: Int?

    /// Creates an error.
    public init(_ code: Code, _ reason: String, retryAfter: Int? = nil) {
        self.code = code
        self.reason = reason
        self.retryAfter = retryAfter
    }

    private enum CodingKeys: String, CodingKey {
        case code
        case reason = "message"
        case retryAfter
    }

    /// The HTTP status this error has on the wire (a fixed mapping; 5xx only for the domain's
    /// own trouble, never for a client's input).
    public var httpStatus: Int {
        switch code {
        case .invalidToken, .tokenExpired, .wrongAudience, .invalidCredentials: 401
        case .forbidden, .userAuthenticationRequired, .notActivated, .moderated, .notAMember: 403
        case .notFound: 404
        case .conflict, .nameTaken, .emailTaken, .alreadyActivated: 409
        case .endpointRemoved: 410
        case .tooLarge: 413
        case .rangeNotSatisfiable: 416
        case .tooManyAttempts: 429
        case .unavailable, .storageFailure: 503
        default: 400
        }
    }
}
