public import Foundation
public import SparkDomain

/// Tokens from the app's own identity provider: the app hands over a JWT and a closure that
/// fetches a fresh one. The domain must trust the provider (`spark-admin issuer add`).
///
/// ```swift
/// let manager = BBMCustomTokenManager(store: store) { _ in try await myIdP.freshToken() }
/// let account = try await manager.signIn(jwtToken: tokenFromMyIdP)
/// ```
public final class BBMCustomTokenManager: BBMTokenManager {
    /// Fetches a fresh JWT; given the current account, if any.
    public typealias Refresh = @Sendable (BBMAuthenticatedAccount?) async throws -> String

    private struct Source: TokenSource {
        let fetch: Refresh
        func refresh(_ credential: StoredCredential) async throws -> StoredCredential {
            StoredCredential(account: try BBMAuthenticatedAccount(token: try await fetch(credential.account)), refreshSecret: nil)
        }
        func isFinal(_ error: AuthError) -> Bool { error.code == .malformedToken }
    }

    let core: TokenManagerCore
    private let fetch: Refresh

    /// A manager caching credentials in `store`; `refresh` fetches new tokens from the app.
    public init(
        store: EndpointStore, providerKey: String = "custom", leeway: TimeInterval = 60, clock: WallClock = .system,
        refresh: @escaping Refresh
    ) {
        fetch = refresh
        core = TokenManagerCore(
            providerKey: providerKey, store: store, clock: clock, leeway: leeway, source: Source(fetch: refresh))
    }

    /// Told whenever the account changes; held weakly.
    public var delegate: (any BBMTokenManagerDelegate)? {
        get { core.delegates.delegate }
        set { core.delegates.delegate = newValue }
    }

    /// The signed-in account, if any.
    public var account: BBMAuthenticatedAccount? { get async { await core.account } }

    /// Signs in with a JWT from the app's provider (its `sub` is the user id).
    public func signIn(jwtToken: String) async throws -> BBMAuthenticatedAccount {
        try await core.signedIn(StoredCredential(account: try BBMAuthenticatedAccount(token: jwtToken), refreshSecret: nil))
    }

    /// Signs in with a token from the refresh closure.
    public func signIn() async throws -> BBMAuthenticatedAccount { try await signIn(jwtToken: try await fetch(nil)) }

    /// Signs in from the cached token, fetching a new one if it is due.
    public func signInSilently() async throws -> BBMAuthenticatedAccount? { try await core.signInSilently() }

    /// Signs out and forgets the cached token.
    public func signOut() async { await core.signOut() }

    /// An account whose token outlives the leeway, refreshed once for all callers if needed.
    public func validAccount() async throws -> BBMAuthenticatedAccount { try await core.validAccount() }

    /// Refreshes after the domain rejected `token`.
    public func tokenRejected(_ token: String) async throws -> BBMAuthenticatedAccount { try await core.tokenRejected(token) }
}
