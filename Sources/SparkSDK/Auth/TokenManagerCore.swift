import Foundation
import SparkCrypto
import SparkDomain
import SparkLock

/// How one kind of token manager renews a credential.
protocol TokenSource: Sendable {
    /// A fresh credential for `credential` (a new id token, and for the accounts assistant a new
    /// refresh token).
    func refresh(_ credential: StoredCredential) async throws -> StoredCredential
    /// Whether `error` from `refresh` means the credential can never work again.
    func isFinal(_ error: AuthError) -> Bool
}

/// The delegate, held weakly and readable from any thread.
final class DelegateBox: Sendable {
    private struct Weak { weak var delegate: (any BBMTokenManagerDelegate)? }
    private let box = Locked(Weak())

    var delegate: (any BBMTokenManagerDelegate)? {
        get { box.withLock { $0.delegate } }
        set { box.withLock { $0.delegate = newValue } }
    }
}

/// The machinery every token manager shares: the lifecycle state machine, single-flight
/// refresh, the credential cache in the endpoint store (written before a token is handed out),
/// and delegate notification.
actor TokenManagerCore {
    let providerKey: String
    let store: EndpointStore
    let clock: WallClock
    let leeway: TimeInterval
    let source: any TokenSource
    nonisolated let delegates = DelegateBox()

    private var lifecycle = TokenLifecycle()
    private var credential: StoredCredential?
    private var inFlight: Task<BBMAuthenticatedAccount, any Error>?

    init(providerKey: String, store: EndpointStore, clock: WallClock, leeway: TimeInterval, source: any TokenSource) {
        self.providerKey = providerKey
        self.store = store
        self.clock = clock
        self.leeway = leeway
        self.source = source
    }

    var account: BBMAuthenticatedAccount? { lifecycle.account }

    /// The stored credential's refresh secret (the accounts assistant revokes it on sign-out).
    var refreshSecret: String? { credential?.refreshSecret }

    /// Records a sign-in: cached first, then announced.
    func signedIn(_ credential: StoredCredential) throws -> BBMAuthenticatedAccount {
        try store.saveCredential(credential, for: providerKey, now: clock.now())
        inFlight?.cancel()
        inFlight = nil
        self.credential = credential
        lifecycle.signedIn(credential.account)
        notify(credential.account, error: nil)
        return credential.account
    }

    /// Signs in from the cache, refreshing the token when it is due.
    func signInSilently() async throws -> BBMAuthenticatedAccount? {
        guard let cached = try store.credential(for: providerKey) else { return nil }
        credential = cached
        lifecycle.signedIn(cached.account)
        let account = try await validAccount()
        if account == cached.account { notify(account, error: nil) }
        return account
    }

    func signOut() {
        inFlight?.cancel()
        inFlight = nil
        credential = nil
        lifecycle.signedOut()
        // Forgetting the cache must not fail sign-out; a stale row is overwritten next sign-in.
        try? store.removeCredential(for: providerKey)
        notify(nil, error: nil)
    }

    func validAccount() async throws -> BBMAuthenticatedAccount {
        try await perform(lifecycle.tokenRequested(now: clock.now(), leeway: leeway))
    }

    func tokenRejected(_ token: String) async throws -> BBMAuthenticatedAccount {
        try await perform(lifecycle.tokenRejected(token))
    }

    private func perform(_ action: TokenLifecycle.RequestAction) async throws -> BBMAuthenticatedAccount {
        switch action {
        case .use(let account):
            return account
        case .fail(let error):
            throw error
        case .join:
            guard let inFlight else { throw AuthError(.signedOut, "no refresh is running") }
            return try await inFlight.value
        case .refresh(let previous):
            guard let credential else { throw AuthError(.signedOut, "no credentials are cached") }
            let source = self.source
            let task = Task<BBMAuthenticatedAccount, any Error> {
                let result: Result<StoredCredential, AuthError>
                do {
                    result = .success(try await source.refresh(credential))
                } catch let error as AuthError {
                    result = .failure(error)
                } catch let error as DomainError {
                    result = .failure(AuthError(error))
                } catch {
                    result = .failure(AuthError(.refreshFailed, "refreshing the token failed: \(error)"))
                }
                return try self.finishRefresh(result, previous: previous)
            }
            inFlight = task
            return try await task.value
        }
    }

    private func finishRefresh(_ result: Result<StoredCredential, AuthError>, previous: BBMAuthenticatedAccount) throws
        -> BBMAuthenticatedAccount
    {
        inFlight = nil
        switch result {
        case .success(let refreshed):
            switch lifecycle.refreshSucceeded(refreshed.account, previous: previous) {
            case .cacheAndDeliver(let account):
                // Cached before it is handed out: a crash now still leaves a usable credential.
                try store.saveCredential(refreshed, for: providerKey, now: clock.now())
                credential = refreshed
                notify(account, error: nil)
                return account
            default:
                throw AuthError(.signedOut, "the user signed out while the token was being refreshed")
            }
        case .failure(let error):
            switch lifecycle.refreshFailed(error, previous: previous, final: source.isFinal(error)) {
            case .signOut(let error):
                credential = nil
                try? store.removeCredential(for: providerKey)
                notify(nil, error: error)
                throw error
            case .failWaiters(let error):
                throw error
            default:
                throw AuthError(.signedOut, "the user signed out while the token was being refreshed")
            }
        }
    }

    private func notify(_ account: BBMAuthenticatedAccount?, error: (any Error)?) {
        delegates.delegate?.localAuthDataChanged(account, error: error)
    }
}

extension BBMAuthenticatedAccount {
    /// An account from a JWT the domain (or the app's provider) issued. The token is not
    /// verified here (the domain verifies every token it is given); this only reads its claims.
    init(token: String, fallbackExpiry: Date? = nil) throws {
        guard let payload = try? JWS.unverifiedPayload(of: token),
            let claims = try? JSONDecoder().decode(JWTClaims.self, from: payload), let subject = claims.subject, !subject.isEmpty
        else { throw AuthError(.malformedToken, "the token is not a JWT with a sub claim") }
        guard let expiry = claims.expiresAt.map({ Date(timeIntervalSince1970: TimeInterval($0)) }) ?? fallbackExpiry else {
            throw AuthError(.malformedToken, "the token has no exp claim")
        }
        self.init(accountId: subject, idToken: token, name: claims.name, email: claims.email, expiresAt: expiry)
    }
}

/// Runs a domain call, turning its refusals into ``AuthError``.
func refusing<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as DomainError {
        throw AuthError(error)
    }
}
