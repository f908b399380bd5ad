public import Foundation
public import SparkDomain
public import SparkObservable

/// The values the setup block and the observable ``BBMEnterpriseService/authState`` carry.
public struct ServiceAuthState: Sendable, Equatable, CustomStringConvertible {
    /// The token's state.
    public var authTokenState: AuthTokenState
    /// The setup state.
    public var setupState: SetupState
    /// Spark's registration id of this endpoint, once registered.
    public var regId: Int64?
    /// Whether a passcode is awaited, and which kind.
    public var syncPasscodeState: SyncPasscodeState
    /// Why the last passcode attempt failed.
    public var syncError: SyncError
    /// Why this endpoint left setup (removed elsewhere, superseded, keys reset), if it did.
    public var removalReason: String?
    /// The last fatal setup error, if any.
    public var setupError: SetupError?
    /// Wrong passcodes still allowed this hour, after an incorrect one.
    public var passcodeAttemptsLeft: Int?

    /// The start: no token, nothing requested.
    public static let initial = ServiceAuthState(
        authTokenState: .needed, setupState: .notRequested, regId: nil, syncPasscodeState: .none, syncError: .none)

    /// `authTokenState/setupState/regId`.
    public var description: String {
        "\(authTokenState)/\(setupState)/\(regId.map(String.init) ?? "-")"
            + (syncPasscodeState == .none ? "" : " passcode:\(syncPasscodeState)")
            + (syncError == .none ? "" : " error:\(syncError)")
    }
}

/// Told when connectivity to the domain changes (Spark's connectivity listener).
public protocol BBMConnectivityListener: AnyObject, Sendable {
    /// `connected`: the domain answers; `strict`: this endpoint is also set up and reachable.
    func connectivityStateChange(connected: Bool, strict: Bool)
}

/// Registers this device as an endpoint of the signed-in user and brings it to setup
/// ``SetupState/success`` holding the user's keys: Spark's `BBMEnterpriseService`.
///
/// ```swift
/// let service = BBMEnterpriseService(store: store, endpointDescription: "laptop")
/// try await service.start(domain: domain, environment: .sandbox)
/// await service.sendAuthToken(account.idToken, userIdentifier: account.accountId) { state in
///     if state.setupState == .syncRequired { Task { try await service.syncStart(passcode: code, action: .existing) } }
/// }
/// ```
///
/// Every state is observable: ``authState`` and ``serviceStarted`` are `StateFlow`s (tracked by
/// monitors, subscribable, async sequences).
public final class BBMEnterpriseService: Sendable {
    let engine: ServiceEngine
    private let startedOwner = MutableStateFlow(false, label: "BBMEnterpriseService.serviceStarted")
    private let authOwner = MutableStateFlow(ServiceAuthState.initial, label: "BBMEnterpriseService.authState")
    private let connectedOwner = MutableStateFlow(false, label: "BBMEnterpriseService.connected")

    /// Whether the service is started.
    public var serviceStarted: StateFlow<Bool> { startedOwner.flow }
    /// The setup state, the token state and the registration id, and the passcode details.
    public var authState: StateFlow<ServiceAuthState> { authOwner.flow }
    /// Whether the domain answers.
    public var connected: StateFlow<Bool> { connectedOwner.flow }

    /// A service keeping this device's data in `store`.
    ///
    /// - Parameters:
    ///   - store: this device's endpoint store (``EndpointStore``, one per data directory).
    ///   - endpointDescription: how this device is listed among the user's endpoints.
    ///   - keyStorage: where the protected key blobs live; the domain's key store by default.
    ///   - passcodeIterations: PBKDF2 iterations for new passcode blobs (at least 600,000).
    ///   - checkInInterval: how often a set-up endpoint asks the domain whether it is still
    ///     registered (it also learns on any other call).
    ///   - pollInterval: how often the mailbox is read while entries keep coming, and when
    ///     idle for a domain that cannot signal changes. The embedded domain signals every
    ///     commit (Linux inotify on its file), so an idle endpoint sleeps until something
    ///     happens and then reads at once.
    ///   - ownDeviceApproval: whether a new device of the user joins chats only once a device
    ///     the user has approves it (``OwnDeviceApproval/required``, the default).
    ///   - clock: the wall clock this device's KeyPackages are made and rotated by.
    ///   - transparencyAuditorKey: a third-party auditor's P-256 key (`x ‖ y`): the device then
    ///     accepts only transparency heads it co-signed (``ConfigSettings/transparencyAuditorKey``).
    ///   - postQuantumChats: whether the device runs post-quantum chats
    ///     (``ConfigSettings/postQuantumChats``, true by default).
    public convenience init(
        store: EndpointStore, endpointDescription: String, keyStorage: (any BBMKeyStorageProvider)? = nil,
        passcodeIterations: Int = ConfigSettings.passcodeIterationsFloor, checkInInterval: Duration = .seconds(5),
        pollInterval: Duration = .milliseconds(10), ownDeviceApproval: OwnDeviceApproval = .required,
        clock: WallClock = .system, transparencyAuditorKey: Data? = nil, postQuantumChats: Bool = true
    ) {
        self.init(
            store: store, endpointDescription: endpointDescription,
            keyManager: { domain in
                BBMKeyManager(domain: domain, store: store, storage: keyStorage, passcodeIterations: passcodeIterations)
            },
            checkInInterval: checkInInterval, pollInterval: pollInterval, ownDeviceApproval: ownDeviceApproval, clock: clock,
            transparencyAuditorKey: transparencyAuditorKey, postQuantumChats: postQuantumChats)
    }

    /// A service whose passcode blobs use a low PBKDF2 count, for tests.
    ///
    /// - Warning: blobs written this way are cheap to brute-force.
    public convenience init(
        store: EndpointStore, endpointDescription: String, unsafePasscodeIterations: Int, checkInInterval: Duration = .seconds(5),
        pollInterval: Duration = .milliseconds(10), ownDeviceApproval: OwnDeviceApproval = .required,
        clock: WallClock = .system, transparencyAuditorKey: Data? = nil, postQuantumChats: Bool = true
    ) {
        self.init(
            store: store, endpointDescription: endpointDescription,
            keyManager: { domain in
                BBMKeyManager(domain: domain, store: store, unsafePasscodeIterations: unsafePasscodeIterations)
            },
            checkInInterval: checkInInterval, pollInterval: pollInterval, ownDeviceApproval: ownDeviceApproval, clock: clock,
            transparencyAuditorKey: transparencyAuditorKey, postQuantumChats: postQuantumChats)
    }

    private init(
        store: EndpointStore, endpointDescription: String, keyManager: @escaping @Sendable (any DomainService) -> BBMKeyManager,
        checkInInterval: Duration, pollInterval: Duration, ownDeviceApproval: OwnDeviceApproval, clock: WallClock,
        transparencyAuditorKey: Data?, postQuantumChats: Bool
    ) {
        let auth = authOwner
        let connected = connectedOwner
        let started = startedOwner
        engine = ServiceEngine(
            store: store, endpointDescription: endpointDescription, makeKeyManager: keyManager, checkInInterval: checkInInterval,
            pollInterval: pollInterval, ownDeviceApproval: ownDeviceApproval, clock: clock,
            transparencyAuditorKey: transparencyAuditorKey, postQuantumChats: postQuantumChats,
            publish: { state in auth.value = state },
            setConnected: { value in connected.value = value },
            setStarted: { value in started.value = value })
    }

    // MARK: Lifecycle

    /// Starts the service against `domain`.
    public func start(domain: any DomainService, environment: ConfigSettings.Environment) async throws {
        try await engine.start(domain: domain, environment: environment)
    }

    /// Spark's completion form of ``start(domain:environment:)``.
    public func start(
        domain: any DomainService, environment: ConfigSettings.Environment, completion: @escaping @Sendable ((any Error)?) -> Void
    ) {
        Task {
            do {
                try await start(domain: domain, environment: environment)
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }

    /// Stops the service; setup state is kept for the next start. When it returns, nothing of
    /// the service runs any more (no mailbox poll, no heartbeat), so an app may exit right after.
    public func stop() async { await engine.stop() }

    /// Wipes everything this endpoint keeps (registration, keys, cached credentials) and
    /// returns to ``SetupState/notRequested``. The endpoint stays registered in the domain until
    /// removed there.
    public func resetService() async throws { try await engine.resetService() }

    // MARK: Setup

    /// Hands over the user's token; starts setup the first time. `setupStateBlock` fires on every
    /// change of `(authTokenState, setupState, regId)` (and of the passcode details).
    public func sendAuthToken(
        _ token: String, userIdentifier: String, setupStateBlock: (@Sendable (ServiceAuthState) -> Void)? = nil
    ) async {
        await engine.sendAuthToken(token, userID: userIdentifier, block: setupStateBlock)
    }

    /// Sets a token manager that is asked for a fresh token whenever the domain needs one.
    public func setTokenManager(_ manager: (any BBMTokenManager)?) async { await engine.setTokenManager(manager) }

    /// Continues after the user confirmed a device switch or removed an endpoint (full), or asks
    /// again after this endpoint was removed.
    public func setupRetry() async { await engine.setupRetry() }

    /// Applies a passcode at ``SetupState/syncRequired`` and returns the state it settles in
    /// (``SetupState/success`` unless another step needs the user): `.new` on a first device,
    /// `.existing` to unlock, `.reset` when the passcode is forgotten (new identity, other
    /// endpoints removed, old chats unreadable).
    ///
    /// A new passcode (`.new`, `.reset`) has at least 8 characters, is not the user id and does
    /// not repeat one character; it is checked here before anything changes.
    ///
    /// - Throws: ``SetupError``: ``SetupError/Code/passcodeTooWeak`` (the reason names the rule),
    ///   ``SetupError/Code/incorrectPasscode`` (with ``SetupError/attemptsLeft``),
    ///   ``SetupError/Code/tooManyAttempts`` (with ``SetupError/retryAfter``),
    ///   ``SetupError/Code/keysExist`` (another device created keys first: unlock those),
    ///   ``SetupError/Code/wrongState`` (no passcode is awaited for `action`),
    ///   ``SetupError/Code/endpointRemoved`` and the domain's refusals. After a refused passcode
    ///   setup is back at ``SetupState/syncRequired`` with the keys untouched: ask again.
    @discardableResult
    public func syncStart(passcode: String, action: SyncAction) async throws -> ServiceAuthState {
        try await engine.syncStart(passcode: passcode, action: action)
        let state = await waitForSettledState()
        if let failure = state.failure { throw failure }
        return state
    }

    /// Waits until setup reaches a state that needs the user or is done, and returns it.
    public func waitForSettledState() async -> ServiceAuthState {
        for await state in authState.values where state.isSettled { return state }
        return authState.value
    }

    /// Signs out of the service: setup returns to the start; keys stay on the endpoint unless
    /// `wipeKeys`.
    public func signOut(wipeKeys: Bool = false) async { await engine.signOut(wipeKeys: wipeKeys) }

    // MARK: Endpoints and keys

    /// The user's registered endpoints (each with its description, nickname and last check-in),
    /// and once set up, whether each is approved as this device sees it
    /// (`EndpointInfo.approval`: a device awaiting approval carries the code to compare).
    public func endpoints() async throws -> [EndpointInfo] { try await engine.endpoints() }

    /// Gives this endpoint a nickname (an endpoint names only itself: the domain refuses another's
    /// with `DomainError.Code.forbidden`).
    public func setNickname(_ nickname: String, forEndpoint endpointID: String) async throws {
        try await engine.setNickname(endpointID, nickname: nickname)
    }

    /// Removes one of the user's endpoints (this one included).
    public func deregisterEndpoint(_ endpointID: String) async throws { try await engine.deregister(endpointID) }

    /// This device's endpoint id.
    public var endpointID: String { get async throws { try await engine.endpointID() } }

    /// The user's pending identity reset, if one was asked for (from any device, or with a
    /// stolen token) and waits out the domain's delay; ``MessagingEvent/identityResetPending(userID:effectiveAt:)``
    /// says when one starts.
    public func pendingIdentityReset() async throws -> PendingIdentityReset? { try await engine.pendingIdentityReset() }

    /// Cancels the user's pending identity reset: a user who did not ask for it keeps their keys.
    public func cancelIdentityReset() async throws { try await engine.cancelIdentityReset() }

    /// Changes the passcode (the old one is required).
    public func changePasscode(from old: String, to new: String) async throws {
        try await engine.changePasscode(from: old, to: new)
    }

    /// The user's keys, once setup succeeded.
    public var keys: UnlockedKeys? { get async { await engine.keys } }

    /// Asks the domain now whether this endpoint is still registered (otherwise done every
    /// `checkInInterval` while set up).
    public func checkIn() async { await engine.checkIn() }

    /// Chats and messages for the signed-in user; available once setup succeeded. New messages
    /// arrive by themselves (the mailbox is polled every `pollInterval`).
    public func messaging() async throws -> BBMAccess { BBMAccess(messenger: try await engine.messaging(), service: self) }

    /// Adds a connectivity listener (held weakly).
    public func addConnectivityListener(_ listener: any BBMConnectivityListener) async { await engine.addListener(listener) }
}

extension ServiceAuthState {
    /// Whether setup waits for the user or is done (not ongoing or applying a passcode).
    public var isSettled: Bool {
        switch setupState {
        case .ongoing, .syncStarted: false
        case .notRequested: authTokenState != .ok || removalReason != nil || setupError != nil
        default: true
        }
    }
}
