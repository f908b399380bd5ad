import Foundation
import SparkDomain
import SparkDomainEngine
import SparkObservable
import SparkSDK

/// A one-line failure that ends the quick start.
struct QuickStartExit: Error {
    let message: String
}

/// The interactive quick start: sign in, set up, chat.
struct QuickStart {
    let options: Options
    let console: Console

    func run() async throws {
        let settings = try ConfigSettings.load(from: URL(fileURLWithPath: options.config))
        let dataDirectory = options.dataDirectory.map { URL(fileURLWithPath: $0) }
        let controller = try BBMAuthController.fromConfigFile(
            URL(fileURLWithPath: options.config), dataDirectory: dataDirectory,
            customTokenRefresh: { _ in throw QuickStartExit(message: "paste a fresh token: start the quick start again") },
            oidcPresenter: { [console] prompt in
                switch prompt {
                case .enterCode(let code, let uri, let complete):
                    console.say("To sign in, open \(uri.absoluteString) and enter the code \(code)")
                    if let complete { console.say("(or open \(complete.absoluteString))") }
                    console.say("waiting for you to sign in…")
                case .openBrowser(let url):
                    console.say("Sign in in your browser: \(url.absoluteString)")
                    await BBMOIDCTokenManager.defaultPresenter(prompt)
                }
            })
        console.say(
            "SparkSDK quick start: domain \(settings.domain) (\(settings.authProvider.rawValue)), data in \((dataDirectory ?? settings.dataDirectory).path)"
        )

        // Follow the service with an ObservableMonitor: the example of how to use one. It runs on
        // its own queue and prints each change of connectivity, account and setup.
        let service = controller.service
        let printer = DispatchQueue(label: "quickstart.monitor")
        let lastLine = Box("")
        let monitor = ObservableMonitor(activatedWithName: "quickstart.state", executor: .queue(printer)) { [console] in
            let state = controller.authState.value
            let line =
                "[state] \(service.connected.value ? "connected" : "offline") · \(state.account?.accountId ?? "signed out") · token \(state.authTokenState) · setup \(state.setupState)"
            guard line != lastLine.value else { return }
            lastLine.value = line
            console.say(line)
        }
        defer { monitor.deactivate() }

        // However it ends, the service stops before the process exits: its poll loop and
        // heartbeat must not be using OpenSSL or SQLite while the process tears them down.
        do {
            try await controller.startBBMEnterpriseService()
            if try await controller.signInSilently() == nil {
                try await signIn(controller, settings: settings)
            }
            try await Setup(console: console, service: service).run()
            try await ChatShell(console: console, controller: controller).run()
        } catch {
            await service.stop()
            throw error
        }
        await service.stop()
    }

    /// Signs in with the configured provider, asking what it needs.
    private func signIn(_ controller: BBMAuthController, settings: ConfigSettings) async throws {
        switch controller.tokenManager {
        case let manager as BBMTestTokenManager:
            guard let user = options.user ?? console.ask("user id: "), !user.isEmpty else {
                throw QuickStartExit(message: "no user id given")
            }
            manager.userIdentifier = user
            do {
                try await controller.signIn()
            } catch let error as AuthError {
                throw QuickStartExit(message: "sign-in failed: \(error.reason)")
            }
        case let manager as BBMAccountsTokenManager:
            let sandbox = controller.domain is EmbeddedDomain && settings.provider.environment == .sandbox
            try await Accounts(console: console, manager: manager, domain: controller.domain, showsOutbox: sandbox).run()
            _ = try await controller.signInSilently()
        case let manager as BBMCustomTokenManager:
            guard let token = console.askSecret("JWT from your identity provider: "), !token.isEmpty else {
                throw QuickStartExit(message: "no token given")
            }
            do {
                _ = try await manager.signIn(jwtToken: token)
            } catch let error as AuthError {
                throw QuickStartExit(message: "the token was refused: \(error.reason)")
            }
            _ = try await controller.signInSilently()
        case is BBMOIDCTokenManager:
            do {
                let account = try await controller.signInWithOpenID()
                console.say("signed in as \(account.accountId)\(account.name.map { " (\($0))" } ?? "")")
            } catch let error as AuthError {
                throw QuickStartExit(message: "sign-in failed: \(error.reason)")
            }
        default:
            throw QuickStartExit(message: "unsupported token manager")
        }
    }
}

/// A thread-safe box for the monitor's last line.
final class Box<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
