public import Foundation
public import SparkDomain
import SparkLock
public import SparkObservable

/// What ``BBMAuthController`` reports: the signed-in account and the service's setup.
public struct BBMAuthState: Sendable, Equatable, CustomStringConvertible {
    /// The signed-in account, if any.
    public var account: BBMAuthenticatedAccount?
    /// The token's state.
    public var authTokenState: AuthTokenState
    /// The setup state.
    public var setupState: SetupState
    /// This endpoint's registration id, once registered.
    public var regId: Int64?
    /// The service's full state (passcode prompt, errors).
    public var service: ServiceAuthState

    /// Signed out, nothing requested.
    public static let signedOut = BBMAuthState(
        account: nil, authTokenState: .needed, setupState: .notRequested, regId: nil, service: .initial)

    /// `<user or signed out>: <service state>`.
    public var description: String { "\(account?.accountId ?? "signed out"): \(service)" }
}

/// Told about auth and service changes (the delegate form; monitors on
/// ``BBMAuthController/authState`` are the other, equivalent form).
public protocol BBMAuthControllerDelegate: AnyObject, Sendable {
    /// The account or the setup state changed.
    func authStateChanged(_ state: BBMAuthState)
    /// The service started or stopped.
    func serviceStateChanged(started: Bool)
}

/// Coordinates a token manager and the ``BBMEnterpriseService``: when the token manager reports
/// an account, its token goes to the service, which walks the setup. Spark's `BBMAuthController`.
///
/// ```swift
/// let controller = try BBMAuthController.fromConfigFile(URL(fileURLWithPath: "ConfigSettings.plist"))
/// try await controller.startBBMEnterpriseService()
/// _ = try await controller.signInSilently()
/// ```
public final class BBMAuthController: BBMTokenManagerDelegate, Sendable {
    /// The token manager.
    public let tokenManager: any BBMTokenManager
    /// The service.
    public let service: BBMEnterpriseService
    /// The domain.
    public let domain: any DomainService
    /// The environment.
    public let environment: ConfigSettings.Environment
    /// The settings it was made from, when made from a file.
    public let settings: ConfigSettings?

    private let stateOwner = MutableStateFlow(BBMAuthState.signedOut, label: "BBMAuthController.authState")
    private let readyOwner = MutableStateFlow(false, label: "BBMAuthController.startedAndAuthenticated")
    private let account = Locked<BBMAuthenticatedAccount?>(nil)
    private let delegates = Locked<[WeakDelegate]>([])
    private let subscriptions = Locked<[FlowSubscription]>([])
    /// Sign-ins this controller is making: each hands its account to the service itself, so
    /// the token manager's report of it is not a second route.
    private let signInsInFlight = Locked(0)

    private struct WeakDelegate: Sendable { weak var delegate: (any BBMAuthControllerDelegate)? }

    /// The account and the setup state.
    public var authState: StateFlow<BBMAuthState> { stateOwner.flow }
    /// Whether the service is started.
    public var serviceStarted: StateFlow<Bool> { service.serviceStarted }
    /// Whether the service is started and setup has succeeded for a signed-in user.
    public var startedAndAuthenticated: StateFlow<Bool> { readyOwner.flow }

    /// A controller for an existing token manager, domain and service.
    public init(
        tokenManager: any BBMTokenManager, domain: any DomainService, environment: ConfigSettings.Environment,
        service: BBMEnterpriseService, settings: ConfigSettings? = nil
    ) {
        self.tokenManager = tokenManager
        self.domain = domain
        self.environment = environment
        self.service = service
        self.settings = settings
        tokenManager.delegate = self
        let serviceSubscription = service.authState.subscribe { [weak self] state in self?.serviceChanged(state) }
        let startedSubscription = service.serviceStarted.subscribe { [weak self] started in self?.startedChanged(started) }
        subscriptions.withLock { $0 = [serviceSubscription, startedSubscription] }
    }

    /// Builds everything from `ConfigSettings.plist`: the endpoint store in `dataDirectory`
    /// (or the plist's), the embedded domain (created on first use; user authentication on
    /// unless the provider is `testAuth`), the provider's token manager and the service.
    ///
    /// - Parameters:
    ///   - url: the plist file.
    ///   - dataDirectory: this device's data directory, instead of the plist's `dataDirectory`.
    ///   - customTokenRefresh: for `authProvider` = `custom`: fetches the app's JWTs.
    ///   - oidcPresenter: for `authProvider` = `oidc`: shows the sign-in URL or device code
    ///     (by default ``BBMOIDCTokenManager/defaultPresenter``).
    ///   - keyStorage: required when `useBlackBerryKMS` is false.
    ///   - storeKey: where the key that encrypts this device's store comes from (the Secret
    ///     Service, else a key file, by default).
    ///   - embeddedDomain: what opens the domain when the plist names no `domainURL` (the
    ///     embedded domain's file by default).
    public static func fromConfigFile(
        _ url: URL, dataDirectory: URL? = nil, customTokenRefresh: BBMCustomTokenManager.Refresh? = nil,
        oidcPresenter: BBMOIDCTokenManager.Presenter? = nil, keyStorage: (any BBMKeyStorageProvider)? = nil,
        storeKey: StoreKeySource = .automatic, embeddedDomain: any EmbeddedDomainOpener = EmbeddedDomainFile()
    ) throws -> BBMAuthController {
        let settings = try ConfigSettings.load(from: url)
        let store = try EndpointStore(directory: dataDirectory ?? settings.dataDirectory, key: storeKey)
        // An embedded sandbox is refused for real accounts (see `openDomain(configFile:embedded:)`).
        let domain = try settings.openDomain(configFile: url.path, embedded: embeddedDomain)
        let leeway = TimeInterval(settings.tokenLeeway)
        let manager: any BBMTokenManager
        switch settings.authProvider {
        case .testAuth: manager = BBMTestTokenManager(domain: domain, store: store, leeway: leeway)
        case .accounts: manager = BBMAccountsTokenManager(domain: domain, store: store, leeway: leeway)
        case .custom:
            guard let customTokenRefresh else {
                throw ConfigError(
                    .missingKey, file: url.path, keyPath: "custom",
                    "needs a token refresh closure from the app (customTokenRefresh:)")
            }
            manager = BBMCustomTokenManager(store: store, leeway: leeway, refresh: customTokenRefresh)
        case .oidc:
            manager = try BBMOIDCTokenManager(
                configuration: settings.provider.openID!, store: store, leeway: leeway,
                presenter: oidcPresenter ?? BBMOIDCTokenManager.defaultPresenter)
        }
        if !settings.useBlackBerryKMS, keyStorage == nil {
            throw ConfigError(
                .outOfRange, file: url.path, keyPath: "useBlackBerryKMS", "is false, so the app must pass a keyStorage provider")
        }
        let service = BBMEnterpriseService(
            store: store, endpointDescription: settings.endpointDescription,
            keyStorage: settings.useBlackBerryKMS ? nil : keyStorage,
            passcodeIterations: settings.passcodeIterations, ownDeviceApproval: settings.ownDeviceApproval,
            transparencyAuditorKey: settings.transparencyAuditorKey, postQuantumChats: settings.postQuantumChats)
        return BBMAuthController(
            tokenManager: manager, domain: domain, environment: settings.provider.environment, service: service,
            settings: settings)
    }

    /// Adds a delegate (held weakly); it is told the current state at once.
    public func addDelegate(_ delegate: any BBMAuthControllerDelegate) {
        delegates.withLock { $0.append(WeakDelegate(delegate: delegate)) }
        delegate.serviceStateChanged(started: service.serviceStarted.value)
        delegate.authStateChanged(authState.value)
    }

    /// Starts the service and lets it ask the token manager for fresh tokens.
    public func startBBMEnterpriseService() async throws {
        await service.setTokenManager(tokenManager)
        try await service.start(domain: domain, environment: environment)
    }

    /// Signs in from cached credentials; setup then continues by itself (a restart with keys on
    /// the endpoint reaches `success` without the passcode).
    @discardableResult
    public func signInSilently() async throws -> BBMAuthenticatedAccount? {
        guard let account = try await signingIn({ try await tokenManager.signInSilently() }) else { return nil }
        await send(account)
        return account
    }

    /// Signs in interactively with the token manager's `signIn()`.
    @discardableResult
    public func signIn() async throws -> BBMAuthenticatedAccount {
        let account = try await signingIn { try await tokenManager.signIn() }
        await send(account)
        return account
    }

    // MARK: Signing in, per provider

    /// Test auth (`authProvider` = `testAuth`): signs in as `userID`, which a sandbox domain
    /// accepts for any id, and hands the token to the service, which starts setup.
    ///
    /// - Throws: ``AuthError/Code/wrongProvider`` for another provider; the domain's refusal.
    @discardableResult
    public func signIn(userID: String) async throws -> BBMAuthenticatedAccount {
        let manager = try manager(BBMTestTokenManager.self, for: "signIn(userID:)")
        let account = try await signingIn { try await manager.signIn(userID: userID) }
        await send(account)
        return account
    }

    /// The app's own JWTs (`authProvider` = `custom`): signs in with `jwtToken` and hands it to
    /// the service. Later tokens come from the refresh closure given to
    /// ``fromConfigFile(_:dataDirectory:customTokenRefresh:oidcPresenter:keyStorage:storeKey:embeddedDomain:)``.
    ///
    /// - Throws: ``AuthError/Code/wrongProvider`` for another provider; ``AuthError/Code/malformedToken``.
    @discardableResult
    public func signIn(jwtToken: String) async throws -> BBMAuthenticatedAccount {
        let manager = try manager(BBMCustomTokenManager.self, for: "signIn(jwtToken:)")
        let account = try await signingIn { try await manager.signIn(jwtToken: jwtToken) }
        await send(account)
        return account
    }

    /// The organisation's OpenID provider (`authProvider` = `oidc`): signs in with the plist's
    /// flow (`oidc.flow`: the browser, or a device code), showing the URL or code through the
    /// presenter given to ``fromConfigFile(_:dataDirectory:customTokenRefresh:oidcPresenter:keyStorage:storeKey:embeddedDomain:)``,
    /// and hands the ID token to the service.
    ///
    /// - Throws: ``AuthError/Code/wrongProvider`` for another provider;
    ///   ``AuthError/Code/providerError`` when the provider refuses or a check fails.
    @discardableResult
    public func signInWithOpenID() async throws -> BBMAuthenticatedAccount {
        let manager = try manager(BBMOIDCTokenManager.self, for: "signInWithOpenID()")
        let account = try await signingIn { try await manager.signIn() }
        await send(account)
        return account
    }

    /// The accounts assistant (`authProvider` = `accounts`): logs in with a user name and
    /// password and hands the token to the service.
    ///
    /// - Throws: ``AuthError/Code/wrongProvider`` for another provider; ``AuthError/Code/refused``
    ///   with the domain's code (wrong password, not activated, locked for a while).
    @discardableResult
    public func logIn(userName: String, password: String) async throws -> BBMAuthenticatedAccount {
        let manager = try accounts("logIn(userName:password:)")
        let account = try await signingIn { try await manager.logIn(userName: userName, password: password) }
        await send(account)
        return account
    }

    /// The accounts assistant: creates an account and emails an activation code; then
    /// ``activate(userName:code:)`` and ``logIn(userName:password:)``.
    public func signUp(_ request: SignUpRequest) async throws { try await accounts("signUp(_:)").signUp(request) }

    /// The accounts assistant: activates an account with the emailed code.
    public func activate(userName: String, code: String) async throws {
        try await accounts("activate(userName:code:)").activate(userName: userName, code: code)
    }

    /// The accounts assistant: emails a new activation code.
    public func resendActivationCode(userName: String) async throws {
        try await accounts("resendActivationCode(userName:)").resendActivationCode(userName: userName)
    }

    /// The accounts assistant: emails a password-reset code if an account uses `email` (the
    /// answer is the same when none does).
    public func requestPasswordReset(email: String) async throws {
        try await accounts("requestPasswordReset(email:)").requestPasswordReset(email: email)
    }

    /// The accounts assistant: sets a new password with the emailed code.
    public func resetPassword(email: String, code: String, newPassword: String) async throws {
        try await accounts("resetPassword(email:code:newPassword:)").resetPassword(
            email: email, code: code, newPassword: newPassword)
    }

    /// Drives setup to success after a sign-in, asking `handler` what a person must answer;
    /// see ``BBMEnterpriseService/completeSetup(using:)``.
    @discardableResult
    public func completeSetup(using handler: any SetupHandler) async throws -> ServiceAuthState {
        try await service.completeSetup(using: handler)
    }

    private func accounts(_ call: String) throws -> BBMAccountsTokenManager {
        try manager(BBMAccountsTokenManager.self, for: call)
    }

    private func manager<Manager: BBMTokenManager>(_ type: Manager.Type, for call: String) throws -> Manager {
        guard let manager = tokenManager as? Manager else {
            throw AuthError(
                .wrongProvider,
                "\(call) needs \(Self.providerName(of: type)), but this controller signs in with \(Self.providerName(of: Swift.type(of: tokenManager)))"
            )
        }
        return manager
    }

    private static func providerName(of type: any BBMTokenManager.Type) -> String {
        switch type {
        case is BBMTestTokenManager.Type: "test auth (authProvider testAuth)"
        case is BBMAccountsTokenManager.Type: "the accounts assistant (authProvider accounts)"
        case is BBMCustomTokenManager.Type: "the app's own tokens (authProvider custom)"
        case is BBMOIDCTokenManager.Type: "an OpenID provider (authProvider oidc)"
        default: "\(type)"
        }
    }

    /// Signs out: the token manager forgets its credentials and setup returns to the start.
    public func signOut(wipeKeys: Bool = false) async {
        await tokenManager.signOut()
        await service.signOut(wipeKeys: wipeKeys)
        account.withLock { $0 = nil }
        refresh(service.authState.value)
    }

    /// From the token manager: nil signs out; another account (signed in on the token manager
    /// directly) goes to the service. A refreshed token of the same account does not: the
    /// service asks the token manager for a fresh token whenever it needs one, the one route.
    public func localAuthDataChanged(_ account: BBMAuthenticatedAccount?, error: (any Error)?) {
        let previous = self.account.withLock { stored -> BBMAuthenticatedAccount? in
            defer { stored = account }
            return stored
        }
        refresh(service.authState.value)
        guard let account else {
            if previous != nil { Task { await service.signOut(wipeKeys: false) } }
            return
        }
        guard previous?.accountId != account.accountId, signInsInFlight.withLock({ $0 }) == 0 else { return }
        Task { await send(account) }
    }

    /// Runs a sign-in of the token manager's; its delegate report is then not forwarded again.
    private func signingIn<Result>(_ body: () async throws -> Result) async throws -> Result {
        signInsInFlight.withLock { $0 += 1 }
        defer { signInsInFlight.withLock { $0 -= 1 } }
        return try await body()
    }

    private func send(_ account: BBMAuthenticatedAccount) async {
        self.account.withLock { $0 = account }
        await service.sendAuthToken(account.idToken, userIdentifier: account.accountId)
        refresh(service.authState.value)
    }

    private func serviceChanged(_ state: ServiceAuthState) { refresh(state) }

    private func startedChanged(_ started: Bool) {
        readyOwner.value = started && account.withLock { $0 } != nil && service.authState.value.setupState == .success
        for entry in delegates.withLock({ $0 }) { entry.delegate?.serviceStateChanged(started: started) }
    }

    private func refresh(_ state: ServiceAuthState) {
        let current = account.withLock { $0 }
        let combined = BBMAuthState(
            account: current, authTokenState: state.authTokenState, setupState: state.setupState, regId: state.regId,
            service: state)
        let changed = stateOwner.value != combined
        stateOwner.value = combined
        readyOwner.value = service.serviceStarted.value && current != nil && state.setupState == .success
        if changed {
            for entry in delegates.withLock({ $0 }) { entry.delegate?.authStateChanged(combined) }
        }
    }
}
