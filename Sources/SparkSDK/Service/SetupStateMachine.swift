/// Spark's setup states, as the app sees them.
public enum SetupState: Sendable, Equatable, CustomStringConvertible {
    /// Nothing is happening: no token yet, signed out, or this endpoint was removed.
    case notRequested
    /// Setup is running; `progress` says which step.
    case ongoing(SetupProgress)
    /// The domain allows one active endpoint and another holds it: ask the user, then
    /// `setupRetry()` takes the profile over.
    case deviceSwitchRequired
    /// The user has the maximum number of endpoints: remove one, then `setupRetry()`.
    case full
    /// The keys need a passcode: a new one (`syncPasscodeState == .new`) or the existing one.
    case syncRequired
    /// The passcode is being applied (key generation or PBKDF2 and unwrap).
    case syncStarted
    /// This endpoint is registered and holds the user's keys.
    case success

    /// Spark's name of the state.
    public var description: String {
        switch self {
        case .notRequested: "NotRequested"
        case .ongoing(let progress): "Ongoing(\(progress))"
        case .deviceSwitchRequired: "DeviceSwitchRequired"
        case .full: "Full"
        case .syncRequired: "SyncRequired"
        case .syncStarted: "SyncStarted"
        case .success: "Success"
        }
    }
}

/// The step an ongoing setup is at.
public enum SetupProgress: String, Sendable, Equatable {
    /// Registering this endpoint with the domain.
    case registering
    /// Looking for the user's keys.
    case checkingKeys
}

/// Whether the passcode asked for is a new one or the existing one.
public enum SyncPasscodeState: String, Sendable, Equatable {
    /// No passcode is needed now.
    case none
    /// First device: choose a passcode.
    case new
    /// Keys exist: enter the passcode.
    case existing
}

/// What the user asks for when the keys need a passcode.
public enum SyncAction: String, Sendable, Equatable {
    /// Create keys under a new passcode (first device).
    case new
    /// Unlock the keys with the existing passcode.
    case existing
    /// The passcode is forgotten: new identity, other endpoints removed, old chats unreadable.
    case reset
}

/// Why applying a passcode failed; setup stays at `syncRequired` and may be retried.
public enum SyncError: String, Sendable, Equatable {
    /// No error.
    case none
    /// The passcode was wrong.
    case incorrectPasscode
    /// Something else failed (see the service's last error).
    case failure
    /// The domain did not answer in time.
    case timeout
}

/// The state of the token the SDK holds.
public enum AuthTokenState: String, Sendable, Equatable {
    /// The domain accepted the token.
    case ok
    /// A (fresh) token is needed: the token manager is asked for one.
    case needed
    /// The domain refused the user; signing in again will not help.
    case rejected
}

/// The setup state machine as a pure value (swift-nio's style): one enum whose cases carry what
/// each step knows, events (failures and attempt counts included) that return actions the
/// service performs. It holds no secrets and does no I/O; every transition is tested.
struct SetupStateMachine: Sendable, Equatable {
    /// Where setup is, with what it knows there.
    enum State: Sendable, Equatable {
        /// Nothing runs: before a token, after a sign-out, or stopped (`stop` says why).
        case idle(Stop?)
        /// Registering this endpoint with the domain.
        case registering(takeOver: Bool)
        /// Registered as `regID`; looking for the user's keys.
        case checkingKeys(regID: Int64)
        /// Another endpoint holds the profile; the user decides.
        case deviceSwitchRequired
        /// The user has the maximum of endpoints; the user removes one.
        case full
        /// A passcode is awaited; `refusal` is why the last one failed, if it did.
        case syncRequired(regID: Int64, passcode: SyncPasscodeState, refusal: Refusal?)
        /// A passcode is being applied.
        case syncStarted(regID: Int64, passcode: SyncPasscodeState)
        /// Set up; `warning` is a failure that did not stop it (the registration not saved).
        case success(regID: Int64, warning: SetupError?)
    }

    /// Why setup stopped.
    enum Stop: Sendable, Equatable {
        /// A step failed in a way retrying it will not fix.
        case failed(SetupError)
        /// The domain refused the user for good (test auth switched off, forbidden).
        case rejected(SetupError)
        /// This endpoint was removed (elsewhere, superseded, keys reset): only an explicit retry
        /// starts setup again.
        case removed(reason: String)
    }

    /// Why the last passcode did not work.
    struct Refusal: Sendable, Equatable {
        var error: SyncError
        var failure: SetupError?
        var attemptsLeft: Int?
    }

    private(set) var state: State = .idle(nil)
    private(set) var authTokenState: AuthTokenState = .needed
    /// The step to resume once a fresh token arrives.
    private var pending: Action?

    enum Action: Sendable, Equatable {
        /// Register with the domain (`takeOver`: the user confirmed a device switch).
        case register(takeOver: Bool)
        /// Use keys kept on this endpoint if any, else ask the domain whether keys exist.
        case checkKeys
        /// Apply the passcode the user gave.
        case sync(SyncAction)
        /// Setup succeeded: record the registration.
        case finish
        /// Ask the token manager for a fresh token.
        case requestToken
        /// This endpoint was removed: wipe its keys and local data.
        case wipe
    }

    // MARK: What the app sees

    /// Spark's setup state.
    var setupState: SetupState {
        switch state {
        case .idle: .notRequested
        case .registering: .ongoing(.registering)
        case .checkingKeys: .ongoing(.checkingKeys)
        case .deviceSwitchRequired: .deviceSwitchRequired
        case .full: .full
        case .syncRequired: .syncRequired
        case .syncStarted: .syncStarted
        case .success: .success
        }
    }

    /// The passcode awaited or being applied.
    var passcodeState: SyncPasscodeState {
        switch state {
        case .syncRequired(_, let passcode, _), .syncStarted(_, let passcode): passcode
        default: .none
        }
    }

    /// Why the last passcode failed, while another is awaited.
    var syncError: SyncError {
        if case .syncRequired(_, _, let refusal?) = state { return refusal.error }
        return .none
    }

    /// The registration id, once registered.
    var regID: Int64? {
        switch state {
        case .checkingKeys(let id), .syncRequired(let id, _, _), .syncStarted(let id, _), .success(let id, _): id
        case .idle, .registering, .deviceSwitchRequired, .full: nil
        }
    }

    /// Why this endpoint left setup (removed elsewhere, superseded, keys reset), if it did.
    var removalReason: String? {
        if case .idle(.removed(let reason)?) = state { return reason }
        return nil
    }

    /// Set once this endpoint was removed: a new token must not restart setup by itself.
    var superseded: Bool { removalReason != nil }

    /// The failure setup stopped on or noted, if any.
    var setupError: SetupError? {
        switch state {
        case .idle(.failed(let error)?), .idle(.rejected(let error)?), .success(_, let error?): error
        case .syncRequired(_, _, let refusal?): refusal.failure
        default: nil
        }
    }

    /// Wrong passcodes still allowed this hour, after a refused one.
    var attemptsLeft: Int? {
        if case .syncRequired(_, _, let refusal?) = state { return refusal.attemptsLeft }
        return nil
    }

    // MARK: Events

    /// The app handed over a token (`sendAuthToken`).
    mutating func tokenReceived() -> Action? {
        authTokenState = .ok
        if let pending {
            self.pending = nil
            return pending
        }
        switch state {
        case .idle(.removed?): return nil
        case .idle:
            state = .registering(takeOver: false)
            return .register(takeOver: false)
        default: return nil
        }
    }

    /// The domain said the token is expired or invalid while `step` was running.
    mutating func tokenNeeded(retrying step: Action?) -> Action {
        authTokenState = .needed
        if let step { pending = step }
        return .requestToken
    }

    /// The domain refused the user for good (for example test auth switched off).
    mutating func tokenRejected(_ error: SetupError) {
        authTokenState = .rejected
        pending = nil
        state = .idle(.rejected(error))
    }

    /// The domain answered the registration.
    mutating func registered(regID: Int64) -> Action {
        state = .checkingKeys(regID: regID)
        return .checkKeys
    }

    mutating func deviceSwitchRequired() { state = .deviceSwitchRequired }

    mutating func endpointLimitReached() { state = .full }

    /// The user confirmed (device switch), removed an endpoint (full), or asks again after this
    /// endpoint was removed. Only an explicit retry restarts a superseded endpoint.
    mutating func setupRetry() -> Action? {
        switch state {
        case .deviceSwitchRequired:
            state = .registering(takeOver: true)
            return .register(takeOver: true)
        case .full:
            state = .registering(takeOver: false)
            return .register(takeOver: false)
        case .idle(.removed?) where authTokenState == .ok:
            state = .registering(takeOver: false)
            return .register(takeOver: false)
        default:
            return nil
        }
    }

    /// Keys were looked for: `local` are on this endpoint already (a restart), else the
    /// domain has them (`exist`) or not (first device).
    mutating func keysChecked(local: Bool, exist: Bool) -> Action? {
        guard case .checkingKeys(let regID) = state else { return nil }
        if local {
            state = .success(regID: regID, warning: nil)
            return .finish
        }
        state = .syncRequired(regID: regID, passcode: exist ? .existing : .new, refusal: nil)
        return nil
    }

    /// The user gave a passcode with an action. Refused unless a passcode is awaited and the
    /// action fits (`new` only for a first device; `existing` only when keys exist).
    mutating func syncStart(_ action: SyncAction) -> Action? {
        guard case .syncRequired(let regID, let passcode, _) = state else { return nil }
        switch (action, passcode) {
        case (.new, .new), (.existing, .existing), (.reset, .existing): break
        default: return nil
        }
        state = .syncStarted(regID: regID, passcode: passcode)
        return .sync(action)
    }

    /// The passcode worked.
    mutating func syncSucceeded() -> Action {
        state = .success(regID: regID ?? 0, warning: nil)
        return .finish
    }

    /// The passcode did not work; setup waits for another try. `failure` says why when it was
    /// not the passcode itself; `attemptsLeft` counts the wrong ones still allowed.
    mutating func syncFailed(_ error: SyncError, failure: SetupError? = nil, attemptsLeft: Int? = nil) {
        guard case .syncStarted(let regID, let passcode) = state else { return }
        state = .syncRequired(
            regID: regID, passcode: passcode, refusal: Refusal(error: error, failure: failure, attemptsLeft: attemptsLeft))
    }

    /// Another device created the keys first: this one must unlock them instead.
    mutating func keysAppeared(_ failure: SetupError) {
        guard case .syncStarted(let regID, _) = state else { return }
        state = .syncRequired(regID: regID, passcode: .existing, refusal: Refusal(error: .failure, failure: failure))
    }

    /// The registration could not be saved on this endpoint; setup stands, the failure is noted.
    mutating func finishFailed(_ error: SetupError) {
        guard case .success(let regID, _) = state else { return }
        state = .success(regID: regID, warning: error)
    }

    /// The domain said this endpoint is no longer registered.
    mutating func endpointRemoved(reason: String) -> Action {
        pending = nil
        state = .idle(.removed(reason: reason))
        return .wipe
    }

    /// A step failed for a reason the user cannot fix by retrying it; setup stops with it.
    mutating func setupFailed(_ error: SetupError) {
        pending = nil
        state = .idle(.failed(error))
    }

    /// Sign-out or `resetService()`: everything back to the start.
    mutating func reset() {
        self = SetupStateMachine()
    }
}
