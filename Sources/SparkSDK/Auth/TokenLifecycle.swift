import Foundation

/// The token lifecycle as a pure state machine (swift-nio's style): events return actions that
/// the owning actor performs. No I/O, no clock of its own; every transition is tested.
struct TokenLifecycle: Sendable, Equatable {
    enum State: Sendable, Equatable {
        case signedOut
        case signedIn(BBMAuthenticatedAccount)
        /// A refresh is in flight; `previous` is the account being refreshed.
        case refreshing(previous: BBMAuthenticatedAccount)
    }

    private(set) var state: State = .signedOut

    /// What to do when someone needs a token.
    enum RequestAction: Sendable, Equatable {
        /// Hand out this account: its token is good for longer than the leeway.
        case use(BBMAuthenticatedAccount)
        /// Start a refresh of this account, then hand out the result.
        case refresh(BBMAuthenticatedAccount)
        /// A refresh is already running: wait for it (single flight).
        case join
        /// Nobody is signed in.
        case fail(AuthError)
    }

    /// What to do when a refresh ends.
    enum CompletionAction: Sendable, Equatable {
        /// Cache the new account, then hand it to the waiters and tell the delegate.
        case cacheAndDeliver(BBMAuthenticatedAccount)
        /// Fail the waiters; the user stays signed in with the old token (a passing failure).
        case failWaiters(AuthError)
        /// Forget the credentials, fail the waiters and tell the delegate the user is signed out.
        case signOut(AuthError)
        /// The user signed out (or in again) meanwhile: drop the result.
        case discard
    }

    /// Someone needs a token valid for more than `leeway` seconds after `now`.
    mutating func tokenRequested(now: Date, leeway: TimeInterval) -> RequestAction {
        switch state {
        case .signedOut:
            return .fail(AuthError(.signedOut, "no user is signed in"))
        case .refreshing:
            return .join
        case .signedIn(let account):
            if account.expiresAt.timeIntervalSince(now) > leeway { return .use(account) }
            state = .refreshing(previous: account)
            return .refresh(account)
        }
    }

    /// The domain rejected `token` (or said a token is needed).
    mutating func tokenRejected(_ token: String) -> RequestAction {
        switch state {
        case .signedOut:
            return .fail(AuthError(.signedOut, "no user is signed in"))
        case .refreshing:
            return .join
        case .signedIn(let account):
            // Someone else already replaced the rejected token.
            if account.idToken != token { return .use(account) }
            state = .refreshing(previous: account)
            return .refresh(account)
        }
    }

    /// A refresh of `previous` produced `account`.
    mutating func refreshSucceeded(_ account: BBMAuthenticatedAccount, previous: BBMAuthenticatedAccount) -> CompletionAction {
        guard case .refreshing(let current) = state, current == previous else { return .discard }
        state = .signedIn(account)
        return .cacheAndDeliver(account)
    }

    /// A refresh of `previous` failed; `final` when the credentials can never work again (a
    /// revoked refresh token, a refused user).
    mutating func refreshFailed(_ error: AuthError, previous: BBMAuthenticatedAccount, final: Bool) -> CompletionAction {
        guard case .refreshing(let current) = state, current == previous else { return .discard }
        if final {
            state = .signedOut
            return .signOut(error)
        }
        state = .signedIn(previous)
        return .failWaiters(error)
    }

    /// The user signed in (interactively or silently) as `account`.
    mutating func signedIn(_ account: BBMAuthenticatedAccount) {
        state = .signedIn(account)
    }

    /// The user signed out.
    mutating func signedOut() {
        state = .signedOut
    }

    /// The current account, if signed in or refreshing.
    var account: BBMAuthenticatedAccount? {
        switch state {
        case .signedOut: nil
        case .signedIn(let account), .refreshing(let account): account
        }
    }
}
