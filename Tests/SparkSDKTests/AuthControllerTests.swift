import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkLock
import SparkObservable
import SparkSDK
import SparkTestSupport
import Testing

final class RecordingControllerDelegate: BBMAuthControllerDelegate {
    let states = Locked<[String]>([])
    let started = Locked<[Bool]>([])
    func authStateChanged(_ state: BBMAuthState) {
        states.withLock { $0.append("\(state.account?.accountId ?? "-"):\(state.setupState)") }
    }
    func serviceStateChanged(started: Bool) { self.started.withLock { $0.append(started) } }
}

/// Answers setup's questions from a script, recording each request it was given.
final class ScriptedHandler: SetupHandler {
    let passcodes: Locked<[String]>
    let reset: Bool
    let confirm: Bool
    let requests = Locked<[PasscodeRequest]>([])
    /// Which endpoint to remove when the list is full (the first listed by default).
    let remove: String?
    init(passcodes: [String], reset: Bool = false, confirm: Bool = true, remove: String? = nil) {
        self.passcodes = Locked(passcodes)
        self.reset = reset
        self.confirm = confirm
        self.remove = remove
    }
    func passcode(for request: PasscodeRequest) async -> PasscodeAnswer? {
        requests.withLock { $0.append(request) }
        guard let next = passcodes.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { return nil }
        return reset && request.kind == .existing ? .reset(newPasscode: next) : .passcode(next)
    }
    func confirmDeviceSwitch(active endpoints: [EndpointInfo]) async -> Bool { confirm }
    func endpointToRemove(from endpoints: [EndpointInfo]) async -> String? { remove ?? endpoints.first?.endpointID }
}

@Suite("BBMAuthController and LoginManager")
struct AuthControllerTests {
    static func plist(_ directory: URL, provider: String = "testAuth") throws -> URL {
        let url = directory.appendingPathComponent("ConfigSettings.plist")
        let dictionary = provider == "custom" ? "custom" : provider
        let extra = provider == "custom" ? "<key>issuer</key><string>https://app.example</string>" : ""
        try Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict>
            <key>authProvider</key><string>\(provider)</string>
            <key>\(dictionary)</key><dict><key>domain</key><string>ctl</string><key>environment</key><string>sandbox</string>\(extra)</dict>
            <key>dataDirectory</key><string>device</string>
            <key>embeddedDomainPath</key><string>domain.sqlite</string>
            </dict></plist>
            """.utf8
        ).write(to: url)
        return url
    }

    @Test func fromConfigFileSignInSetupAndSilentRestart() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let controller = try BBMAuthController.fromConfigFile(try Self.plist(directory))
            let delegate = RecordingControllerDelegate()
            controller.addDelegate(delegate)
            try await controller.startBBMEnterpriseService()
            #expect(controller.serviceStarted.value && !controller.startedAndAuthenticated.value)
            let manager = try #require(controller.tokenManager as? BBMTestTokenManager)
            manager.userIdentifier = "alice"
            try await controller.signIn()
            var state = await controller.service.waitForSettledState()
            #expect(state.setupState == .syncRequired && controller.authState.value.account?.accountId == "alice")
            // Key sync at OWASP's 600,000 iterations: the plist's floor.
            try await controller.service.syncStart(passcode: "first-passcode", action: .new)
            state = await controller.service.waitForSettledState()
            #expect(state.setupState == .success)
            #expect(controller.startedAndAuthenticated.value)
            #expect(delegate.states.withLock { $0 }.last == "alice:Success")
            #expect(delegate.started.withLock { $0 }.last == true)
            await controller.service.stop()

            // A new process: silent sign-in with cached credentials and keys, no passcode.
            let again = try BBMAuthController.fromConfigFile(try Self.plist(directory))
            try await again.startBBMEnterpriseService()
            #expect(try await again.signInSilently()?.accountId == "alice")
            #expect(await again.service.waitForSettledState().setupState == .success)
            #expect(again.startedAndAuthenticated.value)
            await again.signOut()
            #expect(again.authState.value.account == nil && again.authState.value.setupState == .notRequested)
            #expect(!again.startedAndAuthenticated.value)
        }
    }

    @Test func configProblemsSurfaceAsConfigErrors() async throws {
        await Fixtures.withTemporaryDirectory { directory in
            #expect(throws: ConfigError(.missingKey, file: "", keyPath: "custom", "")) {
                try BBMAuthController.fromConfigFile(try Self.plist(directory, provider: "custom"))
            }
            #expect(throws: ConfigError(.missingFile, file: "", keyPath: "", "")) {
                try BBMAuthController.fromConfigFile(directory.appendingPathComponent("none.plist"))
            }
        }
    }

    /// An opener of the app's that records what it was asked and says what the domain is.
    final class RecordingOpener: EmbeddedDomainOpener {
        let asked = Locked<[String]>([])
        let sandbox: Bool
        init(sandbox: Bool) { self.sandbox = sandbox }
        func open(at path: String, domainID: String, sandbox: Bool) throws -> (domain: any DomainService, isSandbox: Bool) {
            asked.withLock { $0.append("\((path as NSString).lastPathComponent) \(domainID) sandbox=\(sandbox)") }
            return (try EmbeddedDomainFile().open(at: path, domainID: domainID, sandbox: sandbox).domain, self.sandbox)
        }
    }

    /// The configuration and auth code choose the embedded mode through an opener the app can
    /// replace; only SparkSDK's `Embedded` folder reaches the domain engine.
    @Test func theEmbeddedDomainIsOpenedByTheAppsOpener() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let opener = RecordingOpener(sandbox: false)
            _ = try BBMAuthController.fromConfigFile(try Self.plist(directory, provider: "accounts"), embeddedDomain: opener)
            #expect(opener.asked.withLock { $0 } == ["domain.sqlite ctl sandbox=false"])
            // What the opener says of the domain is what the sandbox check reads.
            let lying = RecordingOpener(sandbox: true)
            #expect(throws: ConfigError(.domainMismatch, file: "", keyPath: "authProvider", "")) {
                try BBMAuthController.fromConfigFile(try Self.plist(directory, provider: "accounts"), embeddedDomain: lying)
            }
            _ = try BBMAuthController.fromConfigFile(try Self.plist(directory), embeddedDomain: lying)
            #expect(lying.asked.withLock { $0 } == ["domain.sqlite ctl sandbox=false", "domain.sqlite ctl sandbox=true"])
        }
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources/SparkSDK")
            .standardizedFileURL
        let files = try #require(FileManager.default.enumerator(atPath: sources.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") }
        #expect(files.count > 50)
        let reaching = try files.filter { file in
            try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8).split(separator: "\n")
                .contains { $0.hasSuffix("import SparkDomainEngine") }
        }
        #expect(reaching == ["Embedded/EmbeddedDomainFile.swift"])
    }

    @Test func realAccountsOnASandboxDomainAreRefusedWithTheFix() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            // The domain was made a sandbox (by a testAuth app, or spark-admin create).
            _ = try EmbeddedDomain.create(
                at: directory.appendingPathComponent("domain.sqlite").path, domainID: "ctl",
                policy: DomainPolicy(userAuthenticationEnabled: false))
            for provider in ["accounts", "custom"] {
                do {
                    _ = try BBMAuthController.fromConfigFile(
                        try Self.plist(directory, provider: provider), customTokenRefresh: { _ in "" })
                    Issue.record("\(provider) on a sandbox was accepted")
                } catch let error as ConfigError {
                    #expect(error.code == .domainMismatch && error.keyPath == "authProvider")
                    #expect(error.description.contains("spark-admin policy set --user-auth on"), "\(error)")
                    #expect(error.description.contains("user authentication off"))
                }
            }
            // Once the operator turns user authentication on, the same plist works.
            try EmbeddedDomain.open(at: directory.appendingPathComponent("domain.sqlite").path).setPolicy(
                DomainPolicy(userAuthenticationEnabled: true))
            _ = try BBMAuthController.fromConfigFile(try Self.plist(directory, provider: "accounts"))
            // Test auth on a sandbox is what a sandbox is for.
            _ = try BBMAuthController.fromConfigFile(try Self.plist(directory))
        }
    }

    static func loginSetup(_ directory: URL) throws -> (BBMAuthController, TokenIssuer) {
        let plist = try Self.plist(directory, provider: "custom")
        let key = try Ed25519.PrivateKey()
        let issuer = TokenIssuer(issuer: "https://app.example", key: key, keyID: "app")
        let controller = try BBMAuthController.fromConfigFile(
            plist,
            customTokenRefresh: { account in
                try issuer.issue(subject: account?.accountId ?? "kim", audience: "ctl", lifetime: 600, now: Date()).token
            })
        let jwks = directory.appendingPathComponent("jwks.json")
        try issuer.jwks.jsonData().write(to: jwks)
        try (controller.domain as! EmbeddedDomain).addExternalIssuer(
            .init(issuer: "https://app.example", audience: "ctl", jwksPath: jwks.path))
        return (controller, issuer)
    }

    @Test func loginManagerDrivesSetupThroughItsHandler() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (controller, issuer) = try Self.loginSetup(directory)
            let login = LoginManager(controller: controller, handler: ScriptedHandler(passcodes: ["first-passcode"]))
            let states = Box<[LoginState]>([])
            let subscription = login.loginState.subscribe { state in states.update { $0.append(state) } }
            await login.login(jwtToken: try issuer.issue(subject: "kim", audience: "ctl", lifetime: 600, now: Date()).token)
            #expect(login.loginState.value == .loggedIn)
            #expect(states.value == [.loggedOut, .loading, .loggedIn])
            await login.logOut()
            #expect(login.loginState.value == .loggedOut)
            await login.login(jwtToken: "not-a-jwt")
            guard case .error(let error) = login.loginState.value else {
                Issue.record("expected an error")
                return
            }
            #expect(error.code == .invalidToken)
            subscription.cancel()
        }
    }

    @Test func withoutAHandlerSetupThatNeedsTheUserIsAnError() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let (controller, issuer) = try Self.loginSetup(directory)
            let login = LoginManager(controller: controller, handler: nil)
            await login.login(jwtToken: try issuer.issue(subject: "lee", audience: "ctl", lifetime: 600, now: Date()).token)
            #expect(
                login.loginState.value
                    == .error(
                        LoginError(.setupNeedsUser, "setup needs the user (no passcode was given) and no handler was given")))
        }
    }
}
