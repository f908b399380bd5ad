public import Foundation
public import SparkDomain

/// Real accounts through the domain's sign-up and login assistant: sign up, activate with the
/// emailed code, log in, recover a forgotten password. Tokens are refreshed with a rotating
/// refresh token cached in the endpoint store.
///
/// ```swift
/// try await manager.signUp(SignUpRequest(userName: "alice", password: pw, email: mail, country: "CA", age: 30))
/// try await manager.activate(userName: "alice", code: codeFromEmail)
/// let account = try await manager.logIn(userName: "alice", password: pw)
/// ```
public final class BBMAccountsTokenManager: BBMTokenManager {
    private struct Source: TokenSource {
        let domain: any DomainService
        func refresh(_ credential: StoredCredential) async throws -> StoredCredential {
            guard let refreshToken = credential.refreshSecret else { throw AuthError(.credentialsRequired, "log in again") }
            let issued = try await refusing { try await domain.refresh(refreshToken: refreshToken) }
            return StoredCredential(
                account: try BBMAuthenticatedAccount(token: issued.token, fallbackExpiry: issued.expiresAt),
                refreshSecret: issued.refreshToken)
        }
        func isFinal(_ error: AuthError) -> Bool {
            [.invalidToken, .tokenExpired, .forbidden].contains(error.domainCode) || error.code == .credentialsRequired
        }
    }

    let core: TokenManagerCore
    private let domain: any DomainService

    /// A manager for `domain` caching credentials in `store`.
    public init(domain: any DomainService, store: EndpointStore, leeway: TimeInterval = 60, clock: WallClock = .system) {
        self.domain = domain
        core = TokenManagerCore(
            providerKey: "accounts:\(domain.domainID)", store: store, clock: clock, leeway: leeway, source: Source(domain: domain)
        )
    }

    /// Told whenever the account changes; held weakly.
    public var delegate: (any BBMTokenManagerDelegate)? {
        get { core.delegates.delegate }
        set { core.delegates.delegate = newValue }
    }

    /// The signed-in account, if any.
    public var account: BBMAuthenticatedAccount? { get async { await core.account } }

    /// Creates an account; an activation code is emailed. Field problems are
    /// ``AuthError/Code/refused`` with the domain's specific code (`nameTaken`, `emailMalformed`,
    /// `passwordTooWeak`, `ageOutOfRange`, …).
    public func signUp(_ request: SignUpRequest) async throws { try await refusing { try await domain.signUp(request) } }

    /// Activates an account with the emailed code.
    public func activate(userName: String, code: String) async throws {
        try await refusing { try await domain.activate(userName: userName, code: code) }
    }

    /// Emails a new activation code.
    public func resendActivationCode(userName: String) async throws {
        try await refusing { try await domain.resendActivationCode(userName: userName) }
    }

    /// Logs in and caches the credentials for silent sign-in.
    public func logIn(userName: String, password: String) async throws -> BBMAuthenticatedAccount {
        let issued = try await refusing { try await domain.logIn(userName: userName, password: password) }
        let account = try BBMAuthenticatedAccount(token: issued.token, fallbackExpiry: issued.expiresAt)
        return try await core.signedIn(StoredCredential(account: account, refreshSecret: issued.refreshToken))
    }

    /// Emails a password-reset code if an account uses `email`.
    public func requestPasswordReset(email: String) async throws {
        try await refusing { try await domain.requestPasswordReset(email: email) }
    }

    /// Sets a new password with the emailed code; other sessions must log in again.
    public func resetPassword(email: String, code: String, newPassword: String) async throws {
        try await refusing { try await domain.resetPassword(email: email, code: code, newPassword: newPassword) }
    }

    /// Interactive sign-in needs a user name and password: use ``logIn(userName:password:)``.
    /// This signs in silently when credentials are cached.
    public func signIn() async throws -> BBMAuthenticatedAccount {
        if let account = try await signInSilently() { return account }
        throw AuthError(.credentialsRequired, "log in with a user name and password")
    }

    /// Signs in from the cached refresh token, if any.
    public func signInSilently() async throws -> BBMAuthenticatedAccount? { try await core.signInSilently() }

    /// Signs out: the refresh token is revoked at the domain and forgotten here.
    public func signOut() async {
        if let refreshToken = await core.refreshSecret {
            // Best effort: signing out locally must work offline too.
            try? await domain.revoke(refreshToken: refreshToken)
        }
        await core.signOut()
    }

    /// An account whose token outlives the leeway, refreshed once for all callers if needed.
    public func validAccount() async throws -> BBMAuthenticatedAccount { try await core.validAccount() }

    /// Refreshes after the domain rejected `token`.
    public func tokenRejected(_ token: String) async throws -> BBMAuthenticatedAccount { try await core.tokenRejected(token) }
}
