public import Foundation
public import SparkDomain
import SparkLock

/// Test auth (Spark's sandbox): any user id gets a token from the domain's test issuer, as long
/// as the domain does not require user authentication.
///
/// ```swift
/// let manager = BBMTestTokenManager(domain: domain, store: store)
/// let account = try await manager.signIn(userID: "alice")
/// ```
public final class BBMTestTokenManager: BBMTokenManager {
    private struct Source: TokenSource {
        let domain: any DomainService
        func refresh(_ credential: StoredCredential) async throws -> StoredCredential {
            guard let userID = credential.refreshSecret else { throw AuthError(.userIDRequired, "no user id is cached") }
            let issued = try await refusing { try await domain.testToken(userID: userID) }
            return StoredCredential(
                account: try BBMAuthenticatedAccount(token: issued.token, fallbackExpiry: issued.expiresAt), refreshSecret: userID
            )
        }
        func isFinal(_ error: AuthError) -> Bool {
            error.domainCode == .userAuthenticationRequired || error.domainCode == .invalidRequest
                || error.code == .userIDRequired
        }
    }

    let core: TokenManagerCore
    private let domain: any DomainService
    private let userID = Locked<String?>(nil)

    /// A manager for `domain` caching credentials in `store`.
    ///
    /// - Parameters:
    ///   - domain: the domain whose test issuer signs the tokens.
    ///   - store: this device's endpoint store, where the credentials are cached.
    ///   - leeway: refresh this many seconds before the token expires.
    ///   - clock: the time tokens are checked against (a test clock in tests).
    public init(domain: any DomainService, store: EndpointStore, leeway: TimeInterval = 60, clock: WallClock = .system) {
        self.domain = domain
        core = TokenManagerCore(
            providerKey: "testAuth:\(domain.domainID)", store: store, clock: clock, leeway: leeway, source: Source(domain: domain)
        )
    }

    /// The user id ``signIn()`` uses (Spark's test auth asked for one).
    public var userIdentifier: String? {
        get { userID.withLock { $0 } }
        set { userID.withLock { $0 = newValue } }
    }

    /// Told whenever the account changes; held weakly.
    public var delegate: (any BBMTokenManagerDelegate)? {
        get { core.delegates.delegate }
        set { core.delegates.delegate = newValue }
    }

    /// The signed-in account, if any.
    public var account: BBMAuthenticatedAccount? { get async { await core.account } }

    /// Signs in as `userID`.
    public func signIn(userID: String) async throws -> BBMAuthenticatedAccount {
        userIdentifier = userID
        return try await signIn()
    }

    /// Signs in as ``userIdentifier``.
    public func signIn() async throws -> BBMAuthenticatedAccount {
        guard let userID = userIdentifier else { throw AuthError(.userIDRequired, "set a user id to sign in with test auth") }
        let issued = try await refusing { try await domain.testToken(userID: userID) }
        let account = try BBMAuthenticatedAccount(token: issued.token, fallbackExpiry: issued.expiresAt)
        return try await core.signedIn(StoredCredential(account: account, refreshSecret: userID))
    }

    /// Signs in from the cached user id, if any.
    public func signInSilently() async throws -> BBMAuthenticatedAccount? {
        let account = try await core.signInSilently()
        if let account { userIdentifier = account.accountId }
        return account
    }

    /// Signs out and forgets the cached user id.
    public func signOut() async { await core.signOut() }

    /// An account whose token outlives the leeway, refreshed once for all callers if needed.
    public func validAccount() async throws -> BBMAuthenticatedAccount { try await core.validAccount() }

    /// Refreshes after the domain rejected `token`.
    public func tokenRejected(_ token: String) async throws -> BBMAuthenticatedAccount { try await core.tokenRejected(token) }
}
