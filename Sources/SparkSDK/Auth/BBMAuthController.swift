public import Foundation
public import SparkDomain
public import SparkObservable
import Synchronization

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
    private let account = Mutex<BBMAuthenticatedAccount?>(nil)
    private let delegates = Mutex<[WeakDelegate]>([])
    private let subscriptions = Mutex<[FlowSubscription]>([])

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
    ///   - customTokenRefresh: for `authProvider` = `custom`: fetches the app's JWTs.
    ///   - keyStorage: required when `useBlackBerryKMS` is false.
    public static func fromConfigFile(
        _ url: URL, dataDirectory: URL? = nil, customTokenRefresh: BBMCustomTokenManager.Refresh? = nil,
        keyStorage: (any BBMKeyStorageProvider)? = nil
    ) throws -> BBMAuthController {
        let settings = try ConfigSettings.load(from: url)
        let store = try EndpointStore(directory: dataDirectory ?? settings.dataDirectory)
        let domain = try EmbeddedDomain.openOrCreate(
            at: settings.embeddedDomainPath.path, domainID: settings.domain,
            policy: DomainPolicy(userAuthenticationEnabled: settings.authProvider != .testAuth))
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
        }
        if !settings.useBlackBerryKMS, keyStorage == nil {
            throw ConfigError(
                .outOfRange, file: url.path, keyPath: "useBlackBerryKMS", "is false, so the app must pass a keyStorage provider")
        }
        let service = BBMEnterpriseService(
            store: store, endpointDescription: settings.endpointDescription,
            keyStorage: settings.useBlackBerryKMS ? nil : keyStorage,
            passcodeIterations: settings.passcodeIterations)
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
        guard let account = try await tokenManager.signInSilently() else { return nil }
        await send(account)
        return account
    }

    /// Signs in interactively with the token manager's `signIn()`.
    @discardableResult
    public func signIn() async throws -> BBMAuthenticatedAccount {
        let account = try await tokenManager.signIn()
        await send(account)
        return account
    }

    /// Signs out: the token manager forgets its credentials and setup returns to the start.
    public func signOut(wipeKeys: Bool = false) async {
        await tokenManager.signOut()
        await service.signOut(wipeKeys: wipeKeys)
        account.withLock { $0 = nil }
        refresh(service.authState.value)
    }

    /// From the token manager: a new account (or token) goes to the service; nil signs out.
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
        if previous?.idToken != account.idToken { Task { await send(account) } }
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
