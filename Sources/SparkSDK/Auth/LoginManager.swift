import SparkDomain
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
    private let handler: (any SetupHandler)?
    private let stateOwner = MutableStateFlow(LoginState.loggedOut, label: "LoginManager.loginState")

    /// The login state.
    public var loginState: StateFlow<LoginState> { stateOwner.flow }

    /// A login manager; `handler` answers setup's questions (without one, a login that needs
    /// the user ends in ``LoginError/Code/setupNeedsUser``).
    public init(controller: BBMAuthController, handler: (any SetupHandler)?) {
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
        do {
            try await controller.service.completeSetup(using: handler ?? DecliningHandler())
            return .loggedIn
        } catch let error as SetupError {
            return .error(Self.loginError(error, handled: handler != nil))
        } catch {
            return .error(LoginError(.serviceFailure, "\(error)"))
        }
    }

    private static func loginError(_ error: SetupError, handled: Bool) -> LoginError {
        switch error.code {
        case .declined:
            LoginError(
                .setupNeedsUser, handled ? error.reason : "setup needs the user (\(error.reason)) and no handler was given")
        case .incorrectPasscode: LoginError(.incorrectPasscode, "the passcode was incorrect")
        case .tooManyAttempts: LoginError(.tooManyAttempts, "too many wrong passcodes; try again later")
        case .endpointRemoved: LoginError(.endpointRemoved, error.reason)
        case .tokenRejected, .noToken: LoginError(.invalidToken, error.reason)
        default: LoginError(.serviceFailure, error.reason)
        }
    }
}

/// The handler of a ``LoginManager`` given none: every question is declined.
private struct DecliningHandler: SetupHandler {
    func passcode(for request: PasscodeRequest) async -> PasscodeAnswer? { nil }
    func confirmDeviceSwitch(active endpoints: [EndpointInfo]) async -> Bool { false }
    func endpointToRemove(from endpoints: [EndpointInfo]) async -> String? { nil }
}
