import Foundation
import SparkDomain

/// The actor behind ``BBMEnterpriseService``: it owns the setup state machine and performs its
/// actions against the domain, the key manager and the endpoint store.
actor ServiceEngine {
    private let store: EndpointStore
    private let endpointDescription: String
    private let makeKeyManager: @Sendable (any DomainService) -> BBMKeyManager
    private let checkInInterval: Duration
    private let publishState: @Sendable (ServiceAuthState) -> Void
    private let setConnected: @Sendable (Bool) -> Void
    private let setStarted: @Sendable (Bool) -> Void

    private var domain: (any DomainService)?
    private var keyManager: BBMKeyManager?
    private var machine = SetupStateMachine()
    private var token: String?
    private var userID: String?
    private var block: (@Sendable (ServiceAuthState) -> Void)?
    private var tokenManager: (any BBMTokenManager)?
    /// Why the domain last refused a token as invalid (an untrusted issuer, a bad signature, an
    /// unacceptable user id): told as the setup's failure when no fresh token comes after it.
    private var tokenRefusal: SetupError?
    /// Held only between `syncStart` and the sync step that consumes it.
    private var pendingPasscode: String?
    /// The endpoints the domain listed with a device-switch or full answer.
    private var offeredEndpoints: [EndpointInfo] = []
    /// The endpoint the user chose to remove so that this one can register (list full).
    private var replacing: String?
    private var published = ServiceAuthState.initial
    private var heartbeat: Task<Void, Never>?
    private var listeners: [WeakListener] = []
    private var isConnected = false
    /// Whether the messenger's mailbox long-poll last reached the domain (nil: no messenger).
    private var mailboxLive: Bool?
    /// What listeners were last told: they hear of changes only.
    private var told: (connected: Bool, strict: Bool)?
    private(set) var keys: UnlockedKeys?
    private var messenger: Messenger?
    private let pollInterval: Duration
    private let ownDeviceApproval: OwnDeviceApproval
    private let transparencyAuditorKey: Data?
    private let postQuantumChats: Bool
    private let clock: WallClock

    private struct WeakListener { weak var listener: (any BBMConnectivityListener)? }

    init(
        store: EndpointStore, endpointDescription: String,
        makeKeyManager: @escaping @Sendable (any DomainService) -> BBMKeyManager,
        checkInInterval: Duration, pollInterval: Duration, ownDeviceApproval: OwnDeviceApproval, clock: WallClock,
        transparencyAuditorKey: Data? = nil, postQuantumChats: Bool = true,
        publish: @escaping @Sendable (ServiceAuthState) -> Void, setConnected: @escaping @Sendable (Bool) -> Void,
        setStarted: @escaping @Sendable (Bool) -> Void
    ) {
        self.store = store
        self.endpointDescription = endpointDescription
        self.makeKeyManager = makeKeyManager
        self.checkInInterval = checkInInterval
        self.pollInterval = pollInterval
        self.ownDeviceApproval = ownDeviceApproval
        self.transparencyAuditorKey = transparencyAuditorKey
        self.postQuantumChats = postQuantumChats
        self.clock = clock
        self.publishState = publish
        self.setConnected = setConnected
        self.setStarted = setStarted
    }

    // MARK: Lifecycle

    func start(domain: any DomainService, environment: ConfigSettings.Environment) async throws {
        do {
            _ = try await domain.policy()
        } catch {
            updateConnectivity(false)
            throw SetupError(.domainUnavailable, "the domain \(domain.domainID) does not answer: \(error)")
        }
        self.domain = domain
        keyManager = makeKeyManager(domain)
        updateConnectivity(true)
        setStarted(true)
        publish()
        // Started again after a stop with setup kept: messaging and the heartbeat resume.
        if machine.setupState == .success, token != nil { await perform(.finish) }
    }

    func stop() async {
        await stopBackgroundWork()
        domain = nil
        updateConnectivity(false)
        setStarted(false)
    }

    func resetService() async throws {
        await stopBackgroundWork()
        try store.wipe()
        keys = nil
        token = nil
        userID = nil
        pendingPasscode = nil
        machine.reset()
        publish()
    }

    func signOut(wipeKeys: Bool) async {
        await stopBackgroundWork()
        // The token manager forgot its credentials already when the controller signs out.
        if wipeKeys { try? store.wipe(keeping: .registration) }
        keys = nil
        token = nil
        userID = nil
        pendingPasscode = nil
        machine.reset()
        publish()
    }

    func setTokenManager(_ manager: (any BBMTokenManager)?) { tokenManager = manager }

    func addListener(_ listener: any BBMConnectivityListener) {
        listeners.append(WeakListener(listener: listener))
        listener.connectivityStateChange(connected: isConnected, strict: isStrict)
    }

    // MARK: Setup

    /// Takes a token. The user is the one the domain validates it for: `claimed` (the app's
    /// `userIdentifier`) must name the same user, or the token is refused.
    func sendAuthToken(_ token: String, userID claimed: String, block: (@Sendable (ServiceAuthState) -> Void)?) async {
        if let block { self.block = block }
        guard let domain else {
            machine.setupFailed(SetupError(.notStarted, "start the service before sending a token"))
            publish()
            return
        }
        let userID: String
        do {
            userID = try await domain.validate(token: token).userID
            tokenRefusal = nil
        } catch {
            // Expired: the token manager is asked for a fresh one; refused: setup stops.
            self.token = token
            await perform(handle(error, retrying: nil))
            return
        }
        guard userID == claimed else {
            self.token = nil
            machine.tokenRejected(
                SetupError(
                    .refused, "the token is for user '\(userID)', not '\(claimed)' as the app says", domainCode: .forbidden))
            publish()
            return
        }
        // The previous user of this endpoint, also from before a restart.
        if let previous = self.userID ?? (try? store.registration().userID), previous != userID {
            // Another user on this endpoint: start over (their keys are not this user's).
            await stopMessenger()
            // The new user's credentials were just saved; everything of the previous user goes,
            // its endpoint id too (the domain keeps that id for the previous user).
            try? store.wipe(keeping: .credentials)
            keys = nil
            machine.reset()
        }
        self.token = token
        self.userID = userID
        await perform(machine.tokenReceived())
    }

    func setupRetry() async {
        await perform(machine.setupRetry())
    }

    /// Applies a passcode; throws at once, changing nothing, when none is awaited for `action`
    /// or a new passcode breaks a rule. How applying it went is in the published state.
    func syncStart(passcode: String, action: SyncAction) async throws {
        if machine.setupState == .syncRequired, action != .existing, let userID {
            do {
                try BBMKeyManager.checkPasscode(passcode, userID: userID)
            } catch let error as KeyManagementError {
                throw SetupError(.passcodeTooWeak, error.reason)
            }
        }
        guard let step = machine.syncStart(action) else {
            throw SetupError(
                .wrongState, "no passcode is awaited for '\(action.rawValue)' now (setup is \(machine.setupState))")
        }
        pendingPasscode = passcode
        await perform(step)
    }

    /// Runs actions until the machine has nothing more to do, publishing each state.
    private func perform(_ first: SetupStateMachine.Action?) async {
        var next = first
        publish()
        while let action = next {
            next = await run(action)
            publish()
        }
    }

    /// The token manager had no token fresher than the one the domain refused as invalid: setup
    /// stops with the domain's reason (not "no token").
    private func noFreshToken() {
        guard let refusal = tokenRefusal, machine.authTokenState == .needed else { return }
        tokenRefusal = nil
        machine.tokenRejected(refusal)
        publish()
    }

    private func run(_ action: SetupStateMachine.Action) async -> SetupStateMachine.Action? {
        if action == .requestToken {
            // The one route for a fresh token: this service asks its token manager.
            if let tokenManager {
                let stale = token
                Task { [weak self] in
                    let fresh: BBMAuthenticatedAccount? =
                        if let stale { try? await tokenManager.tokenRejected(stale) } else {
                            try? await tokenManager.validAccount()
                        }
                    guard let fresh, fresh.idToken != stale else {
                        await self?.noFreshToken()
                        return
                    }
                    await self?.sendAuthToken(fresh.idToken, userID: fresh.accountId, block: nil)
                }
            }
            return nil
        }
        guard let domain, let keyManager, let token, let userID else {
            machine.setupFailed(SetupError(.noToken, "no token or service"))
            return nil
        }
        let registration: StoredRegistration
        do {
            registration = try store.registration()
        } catch {
            machine.setupFailed(error as? SetupError ?? SetupError(.storageFailure, "\(error)"))
            return nil
        }
        let caller = BBMKeyManager.Caller(token: token, userID: userID, endpointID: registration.endpointID)
        switch action {
        case .register(let takeOver):
            do {
                let outcome = try await domain.registerEndpoint(
                    token: token,
                    registration: EndpointRegistration(
                        endpointID: registration.endpointID, description: endpointDescription, takeOver: takeOver,
                        replacing: replacing))
                replacing = nil
                updateConnectivity(true)
                switch outcome {
                case .registered(let info):
                    offeredEndpoints = []
                    return machine.registered(regID: info.registrationID)
                case .deviceSwitchRequired(let active):
                    offeredEndpoints = active
                    machine.deviceSwitchRequired()
                case .full(let endpoints, _):
                    offeredEndpoints = endpoints
                    machine.endpointLimitReached()
                }
                return nil
            } catch {
                return handle(error, retrying: action)
            }
        case .checkKeys:
            do {
                if let local = try keyManager.localKeys(userID: userID),
                    let published = try await domain.identity(token: token, endpointID: registration.endpointID, userID: userID),
                    local.matches(published)
                {
                    keys = local
                    return machine.keysChecked(local: true, exist: true)
                }
                // Keys on the endpoint that do not match the directory are kept: the domain may
                // serve an identity no device of the user published (a substitution), and keys
                // are never destroyed on the domain's word. The passcode decides: a backup that
                // opens to the directory's keys (a reset on another device) replaces them; one
                // that opens to these keys raises the alarm (`identitySubstituted`).
                return machine.keysChecked(local: false, exist: try await keyManager.keysExist(caller))
            } catch {
                return handle(error, retrying: action)
            }
        case .sync(let syncAction):
            guard let passcode = pendingPasscode else {
                machine.syncFailed(.failure, failure: SetupError(.wrongState, "the passcode is no longer held; give it again"))
                return nil
            }
            do {
                switch syncAction {
                case .new: keys = try await keyManager.createKeys(passcode: passcode, caller: caller)
                case .existing: keys = try await keyManager.unlock(passcode: passcode, caller: caller)
                case .reset: keys = try await keyManager.resetKeys(newPasscode: passcode, caller: caller)
                }
                pendingPasscode = nil
                return machine.syncSucceeded()
            } catch let error as KeyManagementError {
                switch error.code {
                case .incorrectPasscode:
                    pendingPasscode = nil
                    machine.syncFailed(.incorrectPasscode, attemptsLeft: error.attemptsLeft)
                case .keysExist:
                    pendingPasscode = nil
                    machine.keysAppeared(SetupError(.keysExist, error.reason))
                case .identitySubstituted:
                    pendingPasscode = nil
                    machine.syncFailed(.failure, failure: SetupError(.identitySubstituted, error.reason))
                case .refused where error.domainCode == .tokenExpired || error.domainCode == .invalidToken:
                    // The passcode is kept for the retry after a fresh token.
                    return machine.tokenNeeded(retrying: action)
                case .refused where error.domainCode == .endpointRemoved:
                    pendingPasscode = nil
                    return machine.endpointRemoved(reason: error.reason)
                case .tooManyAttempts:
                    pendingPasscode = nil
                    machine.syncFailed(
                        .failure,
                        failure: SetupError(
                            .tooManyAttempts, error.reason, domainCode: error.domainCode, retryAfter: error.retryAfter),
                        attemptsLeft: 0)
                default:
                    pendingPasscode = nil
                    machine.syncFailed(
                        .failure, failure: SetupError(.refused, error.description, domainCode: error.domainCode))
                }
                return nil
            } catch {
                pendingPasscode = nil
                return handle(error, retrying: nil)
            }
        case .finish:
            do {
                try store.saveRegistration(userID: userID, registrationID: machine.regID)
            } catch {
                machine.finishFailed(error as? SetupError ?? SetupError(.storageFailure, "\(error)"))
            }
            startHeartbeat()
            updateConnectivity(true)
            if messenger == nil, let keys {
                let messenger = Messenger(
                    domain: domain, storage: store.messagingStorage(), keys: keys, endpointID: registration.endpointID,
                    token: { [weak self] in
                        guard let self else { throw SetupError(.notStarted, "the service is gone") }
                        return try await self.currentToken()
                    }, pollInterval: pollInterval, ownDeviceApproval: ownDeviceApproval,
                    clock: clock, transparencyAuditor: transparencyAuditorKey, postQuantumChats: postQuantumChats,
                    onMailbox: { [weak self] reached in await self?.mailboxReached(reached) })
                self.messenger = messenger
                await messenger.start()
            }
            return nil
        case .requestToken:
            return nil  // handled above
        case .wipe:
            await stopMessenger()
            heartbeat?.cancel()
            heartbeat = nil
            keys = nil
            // Everything of the user goes; the removed endpoint id is never reused (the next
            // setup registers a new one). The credentials stay, for `setupRetry()`.
            try? store.wipe(keeping: .credentials)
            updateConnectivity(isConnected)
            return nil
        }
    }

    /// Maps a domain failure to the machine's events.
    private func handle(_ error: any Error, retrying action: SetupStateMachine.Action?) -> SetupStateMachine.Action? {
        let domainError =
            (error as? DomainError)
            ?? (error as? KeyManagementError).flatMap { key in
                key.domainCode.map { DomainError($0, key.reason) }
            }
        guard let domainError else {
            machine.setupFailed(SetupError(.storageFailure, "\(error)"))
            return nil
        }
        switch domainError.code {
        case .tokenExpired:
            return machine.tokenNeeded(retrying: action)
        case .invalidToken:
            // Asked again once; if the token manager has nothing fresher, this is the reason.
            tokenRefusal = SetupError(.tokenRejected, domainError.reason, domainCode: domainError.code)
            return machine.tokenNeeded(retrying: action)
        case .userAuthenticationRequired, .forbidden, .wrongAudience:
            machine.tokenRejected(SetupError(.refused, domainError.reason, domainCode: domainError.code))
            return nil
        case .endpointRemoved:
            return machine.endpointRemoved(reason: domainError.reason)
        case .storageFailure, .unavailable:
            updateConnectivity(false)
            machine.setupFailed(SetupError(.domainUnavailable, domainError.reason, domainCode: domainError.code))
            return nil
        default:
            machine.setupFailed(SetupError(.refused, domainError.reason, domainCode: domainError.code))
            return nil
        }
    }

    // MARK: Messaging

    func messaging() throws -> Messenger {
        guard machine.setupState == .success, let messenger else {
            throw MessagingError(.notReady, "messaging needs setup to succeed first (setup is \(machine.setupState))")
        }
        return messenger
    }

    private func stopMessenger() async {
        mailboxLive = nil
        await messenger?.stop()
        messenger = nil
    }

    /// Ends the messenger and the heartbeat and waits until neither runs, so that nothing of
    /// this service touches the store, the domain or OpenSSL after `stop()`, `resetService()` or
    /// `signOut` returns (an app may exit right after). Only for calls from the app: the
    /// heartbeat's own wipe path cancels it instead, since it cannot wait for itself.
    private func stopBackgroundWork() async {
        await stopMessenger()
        let beat = heartbeat
        heartbeat = nil
        beat?.cancel()
        await beat?.value
    }

    /// The token for messaging calls, refreshed through the token manager when due.
    func currentToken() async throws -> String {
        if let tokenManager, let account = try? await tokenManager.validAccount(), account.accountId == userID {
            token = account.idToken
        }
        guard let token else { throw SetupError(.noToken, "no token") }
        return token
    }

    // MARK: Moderation

    func userStatus() async throws -> UserStatus {
        let (domain, _) = try await requireSession()
        let token = try await currentToken()
        return try await call { try await domain.userStatus(token: token, endpointID: try endpointID()) }
    }

    func dismissInfraction(_ id: Int64) async throws {
        let (domain, _) = try await requireSession()
        let token = try await currentToken()
        try await call { try await domain.dismissInfraction(token: token, endpointID: try endpointID(), id: id) }
    }

    // MARK: Endpoints and keys

    func endpointID() throws -> String { try store.registration().endpointID }

    /// The user's endpoints. Before this endpoint is registered (a device switch or a full
    /// list pending), the ones the domain offered with its answer: an unregistered endpoint
    /// makes no other call. Once set up, each with its approval as this device sees it.
    func endpoints() async throws -> [EndpointInfo] {
        let (domain, token) = try await requireSession()
        if machine.setupState == .deviceSwitchRequired || machine.setupState == .full { return offeredEndpoints }
        if let messenger { return try await messenger.identities.devices() }
        return try await call { try await domain.endpoints(token: token, endpointID: try endpointID()) }
    }

    func setNickname(_ target: String, nickname: String) async throws {
        let (domain, token) = try await requireSession()
        try await call {
            try await domain.setEndpointNickname(token: token, endpointID: try endpointID(), target: target, nickname: nickname)
        }
    }

    /// Removes one of the user's endpoints. While the list is full and this endpoint waits to
    /// register, the removal goes with the next registration attempt instead (one step at the
    /// domain: remove that one, register this one).
    func deregister(_ target: String) async throws {
        let (domain, token) = try await requireSession()
        if machine.setupState == .full {
            guard offeredEndpoints.contains(where: { $0.endpointID == target }) else {
                throw SetupError(.refused, "the user has no registered endpoint \(target)", domainCode: .notFound)
            }
            replacing = target
            return
        }
        let me = try endpointID()
        // Another device's removal is signed by this device's key: a token alone evicts no device.
        let signature = target == me ? nil : try await messenger?.identities.removalSignature(of: target)
        try await call {
            try await domain.deregisterEndpoint(token: token, endpointID: me, target: target, signature: signature)
        }
        if target == (try? store.registration().endpointID) {
            await perform(machine.endpointRemoved(reason: "deregistered by the user"))
        }
    }

    func pendingIdentityReset() async throws -> PendingIdentityReset? {
        let (domain, token) = try await requireSession()
        let user = try await domain.validate(token: token).userID
        return try await call { try await domain.pendingIdentityReset(token: token, endpointID: try endpointID(), userID: user) }
    }

    func cancelIdentityReset() async throws {
        let (domain, token) = try await requireSession()
        try await call { try await domain.cancelIdentityReset(token: token, endpointID: try endpointID()) }
    }

    func changePasscode(from old: String, to new: String) async throws {
        guard machine.setupState == .success, let keyManager, let token, let userID else {
            throw SetupError(.wrongState, "the passcode can be changed once setup has succeeded")
        }
        let caller = BBMKeyManager.Caller(token: token, userID: userID, endpointID: try store.registration().endpointID)
        do {
            try await keyManager.changePasscode(from: old, to: new, caller: caller)
        } catch let error as KeyManagementError where error.domainCode == .endpointRemoved {
            await perform(machine.endpointRemoved(reason: error.reason))
            throw error
        }
    }

    func checkIn() async {
        guard machine.setupState == .success, let domain, token != nil else { return }
        do {
            let token = try await currentToken()
            _ = try await domain.checkIn(token: token, endpointID: try store.registration().endpointID)
            updateConnectivity(true)
        } catch let error as DomainError where error.code == .unavailable || error.code == .storageFailure {
            // An outage is not a failed setup: the endpoint stays set up, reports itself
            // disconnected, and the next heartbeat looks again.
            updateConnectivity(false)
        } catch {
            await perform(handle(error, retrying: nil))
        }
    }

    /// The domain and a token for a call of the app's: pulled fresh from the token manager
    /// when one is set, so that a call after the token expired works without the app's help.
    private func requireSession() async throws -> (any DomainService, String) {
        guard let domain else { throw SetupError(.notStarted, "the service is not started") }
        guard token != nil else { throw SetupError(.noToken, "no token was given yet") }
        return (domain, try await currentToken())
    }

    /// Runs a domain call for the app; a removed endpoint learns it here too.
    private func call<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as DomainError {
            if error.code == .endpointRemoved { await perform(machine.endpointRemoved(reason: error.reason)) }
            throw SetupError(.refused, error.reason, domainCode: error.code)
        }
    }

    // MARK: Publishing

    private func publish() {
        let state = ServiceAuthState(
            authTokenState: machine.authTokenState, setupState: machine.setupState, regId: machine.regID,
            syncPasscodeState: machine.passcodeState, syncError: machine.syncError, removalReason: machine.removalReason,
            setupError: machine.setupError, passcodeAttemptsLeft: machine.attemptsLeft)
        guard state != published else { return }
        // The block fires on changes of what Spark's block carried (token state, setup state,
        // registration id) and of the passcode prompt; the flow carries every detail.
        let blockChanged =
            state.authTokenState != published.authTokenState || state.setupState != published.setupState
            || state.regId != published.regId || state.syncPasscodeState != published.syncPasscodeState
            || state.syncError != published.syncError
        published = state
        publishState(state)
        if blockChanged { block?(state) }
    }

    /// Connected and set up, with the mailbox long-poll live once messaging runs.
    private var isStrict: Bool { isConnected && machine.setupState == .success && mailboxLive != false }

    private func updateConnectivity(_ connected: Bool) {
        isConnected = connected
        setConnected(connected)
        let strict = isStrict
        listeners.removeAll { $0.listener == nil }
        if let told, told == (connected, strict) { return }
        told = (connected, strict)
        for entry in listeners { entry.listener?.connectivityStateChange(connected: connected, strict: strict) }
    }

    /// The messenger's mailbox read reached the domain, or failed to.
    private func mailboxReached(_ reached: Bool) {
        mailboxLive = reached
        updateConnectivity(reached)
    }

    private func startHeartbeat() {
        heartbeat?.cancel()
        let interval = checkInInterval
        heartbeat = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard !Task.isCancelled else { return }
                await self?.checkIn()
            }
        }
    }
}
