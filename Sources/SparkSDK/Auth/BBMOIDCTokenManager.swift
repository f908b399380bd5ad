public import Foundation
import SparkCrypto
public import SparkDomain
import SparkLock

#if canImport(Glibc)
    import Glibc
#endif

/// Signs the user in through the organisation's OpenID Connect provider (Google, Microsoft
/// Entra ID, Okta, Keycloak…), as Spark's `BBMGoogleTokenManager` did through Google alone.
///
/// - **Browser** (the default for apps with a screen): the authorization code flow with PKCE
///   (S256) and a loopback redirect on `127.0.0.1` (RFC 8252 §7.3); `state` and `nonce` checked.
/// - **Device code** (RFC 8628, for headless apps, bots and the quick start): the user opens a
///   URL on another device and enters a code; the manager polls, honouring `slow_down`.
///
/// Every ID token is validated on the device (signature against the provider's discovered keys,
/// `iss`, `aud`/`azp`, `exp`/`iat`, `nonce`) before it is kept or sent. The refresh token is
/// sealed in the endpoint store; silent sign-in refreshes once for all callers; sign-out revokes
/// it (RFC 7009) where the provider offers revocation. The domain must trust the provider
/// (`spark-admin issuer add --discover ISSUER --audience CLIENT_ID`).
///
/// ```swift
/// let manager = BBMOIDCTokenManager(
///     configuration: .init(issuer: "https://accounts.google.com", clientID: "…apps.googleusercontent.com"),
///     store: store)
/// let account = try await manager.signIn()
/// ```
public final class BBMOIDCTokenManager: BBMTokenManager {
    /// How the user signs in.
    public enum Flow: String, Sendable, CaseIterable {
        /// The system browser, back through a loopback redirect.
        case browser
        /// A code entered on another device.
        case device
    }

    /// What the user must be shown to sign in.
    public enum Prompt: Sendable, Equatable {
        /// Open this URL in a browser (the manager listens for its redirect).
        case openBrowser(URL)
        /// Visit `verificationURI` and enter `userCode` (or open `verificationURIComplete`,
        /// which carries the code).
        case enterCode(userCode: String, verificationURI: URL, verificationURIComplete: URL?)
    }

    /// Shows a ``Prompt`` to the user.
    public typealias Presenter = @Sendable (Prompt) async -> Void

    /// The provider and this client's registration with it (the plist's `oidc` dictionary).
    public struct Configuration: Sendable, Equatable {
        /// The issuer identifier; its discovery document is at
        /// `ISSUER/.well-known/openid-configuration`.
        public var issuer: String
        /// This app's client id at the provider (also the domain's `--audience`).
        public var clientID: String
        /// A client secret, for providers that give desktop clients one (it is not secret in a
        /// distributed app; PKCE is what protects the code).
        public var clientSecret: String?
        /// The scopes requested; `openid` is always among them.
        public var scopes: [String]
        /// The ID token claim that is the user id (`sub`, `email`, `preferred_username`): the
        /// same as the domain's `--user-claim`.
        public var userClaim: String
        /// How the provider's TLS certificate is trusted.
        public var trust: ProviderTrust
        /// How ``BBMOIDCTokenManager/signIn()`` signs in.
        public var flow: Flow
        /// How long a browser sign-in or a device code is waited for.
        public var timeout: Duration

        /// A configuration; scopes default to `openid profile email`.
        public init(
            issuer: String, clientID: String, clientSecret: String? = nil, scopes: [String] = ["openid", "profile", "email"],
            userClaim: String = "sub", trust: ProviderTrust = .systemStore, flow: Flow = .browser,
            timeout: Duration = .seconds(300)
        ) {
            self.issuer = issuer
            self.clientID = clientID
            self.clientSecret = clientSecret
            self.scopes = scopes.contains("openid") ? scopes : ["openid"] + scopes
            self.userClaim = userClaim
            self.trust = trust
            self.flow = flow
            self.timeout = timeout
        }
    }

    /// The configuration.
    public let configuration: Configuration
    let core: TokenManagerCore
    private let provider: Provider
    private let clock: WallClock
    private let leeway: TimeInterval
    private let presenter: Presenter

    /// A manager caching credentials in `store`.
    ///
    /// - Parameters:
    ///   - configuration: the provider and this client's registration with it.
    ///   - store: where the credential (the refresh token among it) is kept, sealed.
    ///   - providerKey: the credential's name in the store.
    ///   - leeway: refresh this long before the ID token expires; also the clock skew tolerated.
    ///   - clock: the time source.
    ///   - presenter: shows the browser URL or the device code; by default
    ///     ``defaultPresenter`` (opens the browser with `xdg-open` and prints to standard error).
    public init(
        configuration: Configuration, store: EndpointStore, providerKey: String = "oidc", leeway: TimeInterval = 60,
        clock: WallClock = .system, presenter: @escaping Presenter = BBMOIDCTokenManager.defaultPresenter
    ) throws {
        guard JWTClaims.userClaims.contains(configuration.userClaim) else {
            throw AuthError(
                .providerError,
                "the user claim must be one of \(JWTClaims.userClaims.joined(separator: ", ")), not \(configuration.userClaim)")
        }
        let provider = try Provider(configuration: configuration, clock: clock, leeway: leeway)
        self.configuration = configuration
        self.provider = provider
        self.clock = clock
        self.leeway = leeway
        self.presenter = presenter
        core = TokenManagerCore(providerKey: providerKey, store: store, clock: clock, leeway: leeway, source: provider)
    }

    /// Opens the browser with `xdg-open` when there is a display, and prints what to do on
    /// standard error.
    public static let defaultPresenter: Presenter = { prompt in
        switch prompt {
        case .openBrowser(let url):
            let environment = ProcessInfo.processInfo.environment
            if environment["DISPLAY"] != nil || environment["WAYLAND_DISPLAY"] != nil { openInBrowser(url) }
            FileHandle.standardError.write(Data("Sign in at: \(url.absoluteString)\n".utf8))
        case .enterCode(let code, let uri, let complete):
            FileHandle.standardError.write(
                Data("To sign in, open \(complete?.absoluteString ?? uri.absoluteString) and enter the code \(code)\n".utf8))
        }
    }

    /// Told whenever the account changes; held weakly.
    public var delegate: (any BBMTokenManagerDelegate)? {
        get { core.delegates.delegate }
        set { core.delegates.delegate = newValue }
    }

    /// The signed-in account, if any.
    public var account: BBMAuthenticatedAccount? { get async { await core.account } }

    /// Signs in with the configured flow.
    public func signIn() async throws -> BBMAuthenticatedAccount {
        switch configuration.flow {
        case .browser: try await signInWithBrowser()
        case .device: try await signInWithDeviceCode()
        }
    }

    /// The authorization code flow with PKCE and a loopback redirect.
    ///
    /// - Throws: ``AuthError/Code/providerError`` when the provider refuses, the redirect's
    ///   `state` is not this sign-in's, or the ID token fails a check; `CancellationError`.
    public func signInWithBrowser() async throws -> BBMAuthenticatedAccount {
        let metadata = try await provider.metadata()
        if let methods = metadata.codeChallengeMethodsSupported, !methods.contains("S256") {
            throw AuthError(.providerError, "the provider does not support PKCE with S256")
        }
        let verifier = SystemRandom.bytes(count: 32).base64URLEncodedString()
        let state = SystemRandom.bytes(count: 16).base64URLEncodedString()
        let redirect = try LoopbackRedirect(state: state)
        defer { redirect.close() }
        let nonce = SystemRandom.bytes(count: 16).base64URLEncodedString()
        let query: [(String, String)] = [
            ("response_type", "code"), ("client_id", configuration.clientID), ("redirect_uri", redirect.redirectURI),
            ("scope", configuration.scopes.joined(separator: " ")), ("state", state), ("nonce", nonce),
            ("code_challenge", SHA256.hash(Data(verifier.utf8)).base64URLEncodedString()),
            ("code_challenge_method", "S256"),
        ]
        let separator = metadata.authorizationEndpoint.contains("?") ? "&" : "?"
        let address =
            metadata.authorizationEndpoint + separator
            + query.map { OpenIDClient.formEncode($0.0) + "=" + OpenIDClient.formEncode($0.1) }.joined(separator: "&")
        guard let url = URL(string: address) else { throw AuthError(.providerError, "the authorization URL is malformed") }
        await presenter(.openBrowser(url))
        let answer = try await withTimeout(configuration.timeout, "the browser sign-in") { try await redirect.answer() }
        // RFC 6749 §10.12: a redirect that is not this request's answer is refused.
        guard let returned = answer["state"], IDTokenCheck.constantTimeEqual(returned, state) else {
            throw AuthError(.providerError, "the redirect's state is not this sign-in's (a forged or stale redirect)")
        }
        if let error = answer["error"] {
            throw AuthError(
                .providerError,
                "the provider refused the sign-in: \(error.prefix(64)) \(answer["error_description"]?.prefix(200) ?? "")")
        }
        guard let code = answer["code"], !code.isEmpty else { throw AuthError(.providerError, "the redirect carries no code") }
        let response = try await provider.token([
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect.redirectURI),
            ("client_id", configuration.clientID), ("code_verifier", verifier),
        ])
        return try await core.signedIn(try await provider.credential(from: response, nonce: nonce, previous: nil))
    }

    /// The device authorization grant (RFC 8628): shows the code, then polls until the user
    /// approved it on another device, honouring `interval` and `slow_down`.
    ///
    /// - Throws: ``AuthError/Code/providerError`` when the user denies it, the code expires, or
    ///   the provider has no device endpoint.
    public func signInWithDeviceCode() async throws -> BBMAuthenticatedAccount {
        let metadata = try await provider.metadata()
        guard let endpoint = metadata.deviceAuthorizationEndpoint else {
            throw AuthError(.providerError, "the provider offers no device authorization endpoint")
        }
        let authorization = try await provider.deviceAuthorization(endpoint, scopes: configuration.scopes)
        guard let uri = URL(string: authorization.verificationURI) else {
            throw AuthError(.providerError, "the provider's verification_uri is not a URL")
        }
        await presenter(
            .enterCode(
                userCode: authorization.userCode, verificationURI: uri,
                verificationURIComplete: authorization.verificationURIComplete.flatMap(URL.init(string:))))
        var interval = max(1, min(authorization.interval ?? 5, 60))
        let lifetime = min(TimeInterval(authorization.expiresIn), configuration.timeout.seconds)
        let deadline = ContinuousClock.now + .seconds(lifetime)
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .seconds(interval))
            let outcome = try await provider.tokenOutcome([
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", authorization.deviceCode), ("client_id", configuration.clientID),
            ])
            switch outcome {
            case .tokens(let response):
                return try await core.signedIn(try await provider.credential(from: response, nonce: nil, previous: nil))
            case .error("authorization_pending", _): continue
            case .error("slow_down", _): interval += 5  // RFC 8628 §3.5
            case .error(let code, let description):
                throw AuthError(.providerError, "the device sign-in ended: \(code.prefix(64)) \(description?.prefix(200) ?? "")")
            }
        }
        throw AuthError(.providerError, "the device code expired before the user approved it")
    }

    /// Signs in from the cached credential, refreshing it at the provider if it is due.
    public func signInSilently() async throws -> BBMAuthenticatedAccount? { try await core.signInSilently() }

    /// Revokes the refresh token at the provider where it offers revocation (best effort), then
    /// signs out and forgets the cached credential.
    public func signOut() async {
        if let refreshToken = await core.refreshSecret {
            await provider.revoke(refreshToken, accessToken: await core.account?.accessToken)
        }
        await core.signOut()
    }

    /// An account whose ID token outlives the leeway, refreshed once for all callers if needed.
    public func validAccount() async throws -> BBMAuthenticatedAccount { try await core.validAccount() }

    /// Refreshes after the domain rejected `token`.
    public func tokenRejected(_ token: String) async throws -> BBMAuthenticatedAccount { try await core.tokenRejected(token) }

    /// Runs `body`, failing with ``AuthError/Code/providerError`` after `timeout`.
    private func withTimeout<T: Sendable>(
        _ timeout: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw AuthError(.providerError, "\(what) was not completed within \(timeout.seconds) seconds")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }
}

/// Opens `url` with `xdg-open`, without waiting and without passing this process's descriptors.
private func openInBrowser(_ url: URL) {
    var pid = pid_t()
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for descriptor in Int32(0)...2 { posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", O_RDWR, 0) }
    guard closeFrom(&actions, 3) == 0 else { return }
    let arguments = ["xdg-open", url.absoluteString]
    let argv = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    if posix_spawnp(&pid, "xdg-open", &actions, nil, argv, environ) == 0 {
        // Reaped on a thread of its own so that it never becomes a zombie.
        let child = pid
        Thread.detachNewThread {
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), declared by its header only under
/// `_GNU_SOURCE`.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func closeFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32

extension Duration {
    fileprivate var seconds: TimeInterval {
        TimeInterval(components.seconds) + TimeInterval(components.attoseconds) / 1e18
    }
}
