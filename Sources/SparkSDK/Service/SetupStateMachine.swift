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

/// The setup state machine as a pure value (swift-nio's style): events return actions that the
/// service performs. It holds no secrets and does no I/O; every transition is tested.
struct SetupStateMachine: Sendable, Equatable {
    private(set) var setupState: SetupState = .notRequested
    private(set) var passcodeState: SyncPasscodeState = .none
    private(set) var syncError: SyncError = .none
    private(set) var authTokenState: AuthTokenState = .needed
    private(set) var regID: Int64?
    /// Why this endpoint left setup (removed elsewhere, superseded, keys reset), if it did.
    private(set) var removalReason: String?
    /// Set once this endpoint was removed: a new token must not restart setup by itself.
    private(set) var superseded = false
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

    /// The app handed over a token (`sendAuthToken`).
    mutating func tokenReceived() -> Action? {
        authTokenState = .ok
        if let pending {
            self.pending = nil
            return pending
        }
        guard setupState == .notRequested, !superseded else { return nil }
        setupState = .ongoing(.registering)
        syncError = .none
        return .register(takeOver: false)
    }

    /// The domain said the token is expired or invalid while `step` was running.
    mutating func tokenNeeded(retrying step: Action?) -> Action {
        authTokenState = .needed
        if let step { pending = step }
        return .requestToken
    }

    /// The domain refused the user for good (for example test auth switched off).
    mutating func tokenRejected() {
        authTokenState = .rejected
        pending = nil
        setupState = .notRequested
        passcodeState = .none
    }

    /// The domain answered the registration.
    mutating func registered(regID: Int64) -> Action {
        self.regID = regID
        removalReason = nil
        setupState = .ongoing(.checkingKeys)
        return .checkKeys
    }

    mutating func deviceSwitchRequired() { setupState = .deviceSwitchRequired }

    mutating func endpointLimitReached() { setupState = .full }

    /// The user confirmed (device switch), removed an endpoint (full), or asks again after this
    /// endpoint was removed. Only an explicit retry restarts a superseded endpoint.
    mutating func setupRetry() -> Action? {
        switch setupState {
        case .deviceSwitchRequired:
            setupState = .ongoing(.registering)
            return .register(takeOver: true)
        case .full:
            setupState = .ongoing(.registering)
            return .register(takeOver: false)
        case .notRequested where superseded && authTokenState == .ok:
            superseded = false
            removalReason = nil
            setupState = .ongoing(.registering)
            return .register(takeOver: false)
        default:
            return nil
        }
    }

    /// Keys were looked for: `local` are on this endpoint already (a restart), else the
    /// domain has them (`exist`) or not (first device).
    mutating func keysChecked(local: Bool, exist: Bool) -> Action? {
        guard setupState == .ongoing(.checkingKeys) else { return nil }
        if local {
            setupState = .success
            passcodeState = .none
            return .finish
        }
        setupState = .syncRequired
        passcodeState = exist ? .existing : .new
        return nil
    }

    /// The user gave a passcode with an action. Refused unless a passcode is awaited and the
    /// action fits (`new` only for a first device; `existing` only when keys exist).
    mutating func syncStart(_ action: SyncAction) -> Action? {
        guard setupState == .syncRequired else { return nil }
        switch (action, passcodeState) {
        case (.new, .new), (.existing, .existing), (.reset, .existing): break
        default: return nil
        }
        setupState = .syncStarted
        syncError = .none
        return .sync(action)
    }

    /// The passcode worked.
    mutating func syncSucceeded() -> Action {
        setupState = .success
        passcodeState = .none
        syncError = .none
        return .finish
    }

    /// The passcode did not work; setup waits for another try.
    mutating func syncFailed(_ error: SyncError) {
        guard setupState == .syncStarted else { return }
        setupState = .syncRequired
        syncError = error
    }

    /// Another device created the keys first: this one must unlock them instead.
    mutating func keysAppeared() {
        guard setupState == .syncStarted else { return }
        setupState = .syncRequired
        passcodeState = .existing
        syncError = .failure
    }

    /// The domain said this endpoint is no longer registered.
    mutating func endpointRemoved(reason: String) -> Action {
        superseded = true
        removalReason = reason
        pending = nil
        regID = nil
        setupState = .notRequested
        passcodeState = .none
        syncError = .none
        return .wipe
    }

    /// A step failed for a reason the user cannot fix by retrying it (the service records a
    /// `setupError`); setup stops.
    mutating func setupFailed() {
        pending = nil
        setupState = .notRequested
        passcodeState = .none
    }

    /// Sign-out or `resetService()`: everything back to the start.
    mutating func reset() {
        self = SetupStateMachine()
    }
}
