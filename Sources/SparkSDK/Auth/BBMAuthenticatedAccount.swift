public import Foundation

/// The signed-in user as the token manager knows them (Spark's `BBMAuthenticatedAccount`).
/// Its description never shows the tokens.
public struct BBMAuthenticatedAccount: Sendable, Equatable, Codable, CustomStringConvertible {
    /// The user id (the token's `sub`).
    public var accountId: String
    /// The id token (a JWT) the SDK sends to the domain.
    public var idToken: String
    /// The access token, when the provider issues a separate one (else the id token).
    public var accessToken: String
    /// A display name, if known.
    public var name: String?
    /// An email address, if known.
    public var email: String?
    /// An avatar image, if known.
    public var avatarURL: URL?
    /// When the id token expires.
    public var expiresAt: Date

    /// An account with its tokens.
    public init(
        accountId: String, idToken: String, accessToken: String? = nil, name: String? = nil, email: String? = nil,
        avatarURL: URL? = nil, expiresAt: Date
    ) {
        self.accountId = accountId
        self.idToken = idToken
        self.accessToken = accessToken ?? idToken
        self.name = name
        self.email = email
        self.avatarURL = avatarURL
        self.expiresAt = expiresAt
    }

    /// Shows the account id and expiry only.
    public var description: String { "BBMAuthenticatedAccount(\(accountId), expires: \(expiresAt))" }
}

/// Told whenever the signed-in account changes (Spark's `BBMTokenManagerDelegate`).
public protocol BBMTokenManagerDelegate: AnyObject, Sendable {
    /// The account changed: signed in, token refreshed, or `nil` for signed out (with the
    /// error that caused it, if any).
    func localAuthDataChanged(_ account: BBMAuthenticatedAccount?, error: (any Error)?)
}

/// Obtains and refreshes the user's tokens (Spark's `BBMTokenManager`). SparkSDK ships three:
/// ``BBMTestTokenManager`` (sandbox), ``BBMAccountsTokenManager`` (the sign-up and login
/// assistant) and ``BBMCustomTokenManager`` (the app's own identity provider).
public protocol BBMTokenManager: AnyObject, Sendable {
    /// Told whenever the account changes; held weakly.
    var delegate: (any BBMTokenManagerDelegate)? { get set }
    /// The signed-in account, if any (its token may be due for refresh).
    var account: BBMAuthenticatedAccount? { get async }
    /// Signs in with what the manager was given (a user id, credentials, a JWT).
    func signIn() async throws -> BBMAuthenticatedAccount
    /// Signs in from cached credentials without asking the user; `nil` when there are none.
    func signInSilently() async throws -> BBMAuthenticatedAccount?
    /// Signs out and forgets the cached credentials.
    func signOut() async
    /// An account whose token is valid for longer than the leeway, refreshing it first if
    /// needed; concurrent callers share one refresh.
    func validAccount() async throws -> BBMAuthenticatedAccount
    /// The domain said a token is needed or was rejected: refresh now (once, however many
    /// callers report the same token).
    func tokenRejected(_ token: String) async throws -> BBMAuthenticatedAccount
}
