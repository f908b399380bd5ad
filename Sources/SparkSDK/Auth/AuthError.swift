public import SparkDomain

/// An error from authentication: signing in, refreshing tokens, the accounts assistant.
/// Compare by ``code``; when the domain refused something, ``domainCode`` says what.
public struct AuthError: CodedError {
    /// What went wrong. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        /// No user is signed in.
        public static let signedOut = Code(name: "signedOut")
        /// Test auth needs a user id before it can sign in.
        public static let userIDRequired = Code(name: "userIDRequired")
        /// The accounts assistant needs a user name and password (call `logIn`).
        public static let credentialsRequired = Code(name: "credentialsRequired")
        /// The token could not be refreshed; the user must sign in again.
        public static let refreshFailed = Code(name: "refreshFailed")
        /// The domain refused the request; see ``AuthError/domainCode``.
        public static let refused = Code(name: "refused")
        /// The app's token is not a usable JWT (no `sub` or `exp`).
        public static let malformedToken = Code(name: "malformedToken")
        /// The call belongs to another provider than the configured one (for example
        /// `signIn(userID:)` with `authProvider` set to `accounts`).
        public static let wrongProvider = Code(name: "wrongProvider")
        /// The endpoint store's key is missing or is not this store's: nothing was changed.
        /// Restore the key (the Secret Service entry, the key file, the app's key), or reset
        /// the device (`resetService()`), which starts over without the old data.
        public static let storeLocked = Code(name: "storeLocked")
        /// The OpenID provider refused or failed the sign-in, or what it returned failed a check
        /// (state, ID token); the reason says which.
        public static let providerError = Code(name: "providerError")
        /// The local credential store failed.
        public static let storageFailure = Code(name: "storageFailure")
        /// The code's name.
        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// A human-readable explanation, free of tokens and passwords.
    public let reason: String
    /// The domain's error code when the domain refused something.
    public let domainCode: DomainError.Code?
    /// For `DomainError.Code.tooManyAttempts`: seconds to wait.
    public let retryAfter: Int?

    /// Creates an error.
    public init(_ code: Code, _ reason: String, domainCode: DomainError.Code? = nil, retryAfter: Int? = nil) {
        self.code = code
        self.reason = reason
        self.domainCode = domainCode
        self.retryAfter = retryAfter
    }

    /// Wraps a domain refusal.
    public init(_ error: DomainError) {
        self.init(.refused, error.reason, domainCode: error.code, retryAfter: error.retryAfter)
    }

    /// Errors are equal when their codes and domain codes are equal.
    public static func == (lhs: AuthError, rhs: AuthError) -> Bool { lhs.code == rhs.code && lhs.domainCode == rhs.domainCode }
    /// Hashes the codes.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(domainCode)
    }

    /// `AuthError.<code>[(<domain code>)]: <reason>`.
    public var description: String {
        "AuthError.\(code)" + (domainCode.map { "(\($0))" } ?? "") + ": \(reason)"
    }
}
