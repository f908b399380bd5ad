public import SparkDomain
public import SparkObservable

/// Why a login failed, in words an app can show.
public struct LoginError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: String, Sendable {
        /// The token is not a usable JWT, or the domain refused it.
        case invalidToken
        /// Setup needs the user (a passcode, a device switch, an endpoint to remove) and no
        /// handler was given, or the handler declined.
        case setupNeedsUser
        /// The passcode was wrong and the handler gave up.
        case incorrectPasscode
        /// Too many wrong passcodes this hour.
        case tooManyAttempts
        /// This endpoint was removed (from another device, or superseded).
        case endpointRemoved
        /// The service failed (the domain is unavailable, storage failed).
        case serviceFailure
    }

    /// What went wrong.
    public let code: Code
    /// A readable explanation.
    public let message: String

    /// An error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `<code>: <message>`.
    public var description: String { "\(code.rawValue): \(message)" }
}

/// Sportradar's login states.
public enum LoginState: Sendable, Equatable {
    /// Nobody is logged in.
    case loggedOut
    /// Logging in: the token is checked and the endpoint set up.
    case loading
    /// Logged in: setup succeeded.
    case loggedIn
    /// The last login failed.
    case error(LoginError)
}

/// What ``LoginManager`` asks the app when setup needs the user.
public protocol LoginSetupHandler: Sendable {
    /// A passcode: a new one (`state == .new`), the existing one, or a reset. `lastError` and
    /// `attemptsLeft` describe the previous try. Return nil to give up.
    func passcode(for state: SyncPasscodeState, lastError: SyncError, attemptsLeft: Int?) async -> (
        passcode: String, action: SyncAction
    )?
    /// Whether to take the profile over from the active endpoint(s).
    func confirmDeviceSwitch(active: [EndpointInfo]) async -> Bool
    /// Which endpoint to remove when the user has the maximum; nil to give up.
    func endpointToRemove(from endpoints: [EndpointInfo]) async -> String?
}

/// Login with a JWT from the app's identity provider, logout, and an observable login state:
/// the Sportradar-style layer over ``BBMAuthController``.
///
/// ```swift
/// let login = LoginManager(controller: controller, handler: myPrompts)
/// await login.login(jwtToken: jwt)
/// for await state in login.loginState.values { render(state) }
/// ```
public final class LoginManager: Sendable {
    /// The controller underneath; its token manager must be a ``BBMCustomTokenManager``.
    public let controller: BBMAuthController
    private let handler: (any LoginSetupHandler)?
    private let stateOwner = MutableStateFlow(LoginState.loggedOut, label: "LoginManager.loginState")

    /// The login state.
    public var loginState: StateFlow<LoginState> { stateOwner.flow }

    /// A login manager; `handler` answers setup's questions (without one, a login that needs
    /// the user ends in ``LoginError/Code/setupNeedsUser``).
    public init(controller: BBMAuthController, handler: (any LoginSetupHandler)?) {
        self.controller = controller
        self.handler = handler
    }

    /// Logs in with `jwtToken` and drives setup to the end, asking the handler when needed.
    public func login(jwtToken: String) async {
        stateOwner.value = .loading
        guard let manager = controller.tokenManager as? BBMCustomTokenManager else {
            stateOwner.value = .error(
                LoginError(.invalidToken, "login(jwtToken:) needs the custom token manager (authProvider custom)"))
            return
        }
        do {
            if !controller.service.serviceStarted.value { try await controller.startBBMEnterpriseService() }
            let account = try await manager.signIn(jwtToken: jwtToken)
            await controller.service.sendAuthToken(account.idToken, userIdentifier: account.accountId)
        } catch let error as AuthError {
            stateOwner.value = .error(LoginError(.invalidToken, error.reason))
            return
        } catch {
            stateOwner.value = .error(LoginError(.serviceFailure, "\(error)"))
            return
        }
        stateOwner.value = await driveSetup()
    }

    /// Logs out; keys stay on the endpoint for the next login of the same user.
    public func logOut() async {
        await controller.signOut()
        stateOwner.value = .loggedOut
    }

    private func driveSetup() async -> LoginState {
        let service = controller.service
        for _ in 0..<20 {
            let state = await service.waitForSettledState()
            switch state.setupState {
            case .success:
                return .loggedIn
            case .syncRequired:
                guard let handler else {
                    return .error(LoginError(.setupNeedsUser, "a passcode is needed and no handler was given"))
                }
                if state.setupError?.domainCode == .tooManyAttempts {
                    return .error(LoginError(.tooManyAttempts, "too many wrong passcodes; try again later"))
                }
                guard
                    let answer = await handler.passcode(
                        for: state.syncPasscodeState, lastError: state.syncError, attemptsLeft: state.passcodeAttemptsLeft)
                else {
                    return .error(
                        state.syncError == .incorrectPasscode
                            ? LoginError(.incorrectPasscode, "the passcode was incorrect")
                            : LoginError(.setupNeedsUser, "no passcode was given"))
                }
                await service.syncStart(passcode: answer.passcode, action: answer.action)
            case .deviceSwitchRequired:
                let active = (try? await service.endpointsGet()) ?? []
                guard let handler, await handler.confirmDeviceSwitch(active: active) else {
                    return .error(
                        LoginError(.setupNeedsUser, "another device holds the profile and the switch was not confirmed"))
                }
                await service.setupRetry()
            case .full:
                guard let handler, let endpoints = try? await service.endpointsGet(),
                    let victim = await handler.endpointToRemove(from: endpoints)
                else { return .error(LoginError(.setupNeedsUser, "the user has the maximum of endpoints and none was removed")) }
                do {
                    try await service.endpointDeregister(victim)
                } catch {
                    return .error(LoginError(.serviceFailure, "removing the endpoint failed: \(error)"))
                }
                await service.setupRetry()
            case .notRequested:
                if let reason = state.removalReason { return .error(LoginError(.endpointRemoved, reason)) }
                if state.authTokenState == .rejected {
                    return .error(LoginError(.invalidToken, state.setupError?.reason ?? "the domain refused the user"))
                }
                if state.authTokenState == .needed { return .error(LoginError(.invalidToken, "the domain needs a valid token")) }
                return .error(LoginError(.serviceFailure, state.setupError?.reason ?? "setup stopped"))
            case .ongoing, .syncStarted:
                continue
            }
        }
        return .error(LoginError(.setupNeedsUser, "setup did not finish after 20 steps"))
    }
}
