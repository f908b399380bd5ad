import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkLock
import SparkTestSupport
import Testing

@testable import SparkSDK

typealias OpenIDProviderFixture = OpenIDTestProvider

extension OpenIDTestProvider {
    func configuration(flow: BBMOIDCTokenManager.Flow, userClaim: String = "email") -> BBMOIDCTokenManager.Configuration {
        .init(
            issuer: issuer, clientID: clientID, scopes: ["openid"], userClaim: userClaim,
            trust: .certificateAuthority(pem: caPEM), flow: flow, timeout: .seconds(240))
    }

    /// A presenter that plays the person: registers the redirect, then signs in with Chromium.
    var person: BBMOIDCTokenManager.Presenter {
        { prompt in
            do {
                switch prompt {
                case .openBrowser(let url):
                    let redirect =
                        URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?
                        .first { $0.name == "redirect_uri" }?.value ?? ""
                    try await register(redirectURI: redirect)
                    // Not awaited by the sign-in: the browser's redirect is what it waits for.
                    Task {
                        do { _ = try await browser(url, device: false) } catch { Issue.record("the browser failed: \(error)") }
                    }
                case .enterCode(_, _, let complete):
                    let url = try #require(complete)
                    Task {
                        do { _ = try await browser(url, device: true) } catch { Issue.record("the browser failed: \(error)") }
                    }
                }
            } catch {
                Issue.record("the person could not act: \(error)")
            }
        }
    }
}

@Suite("OpenID Connect against a real provider", .serialized)
struct OpenIDConnectTests {
    /// A sandboxed embedded domain with user authentication on.
    static func domain(_ directory: URL) throws -> EmbeddedDomain {
        try EmbeddedDomain.openOrCreate(
            at: directory.appendingPathComponent("domain.sqlite").path, domainID: "oidc.test",
            policy: DomainPolicy(userAuthenticationEnabled: true))
    }

    @Test func aPersonSignsInInTheBrowserAndTheDomainTrustsTheProviderByDiscovery() async throws {
        try await OpenIDProviderFixture.with { provider in
            try await Fixtures.withTemporaryDirectory { directory in
                let domain = try Self.domain(directory)
                let trusted = try await domain.discoverIssuer(
                    provider.issuer, audience: provider.clientID, userClaim: "email", caPEM: provider.caPEM)
                #expect(trusted.jwksURI == provider.issuer + "/jwks")
                let store = try EndpointStore(directory: directory.appendingPathComponent("device"), )
                let manager = try BBMOIDCTokenManager(
                    configuration: provider.configuration(flow: .browser), store: store, presenter: provider.person)
                let account = try await manager.signIn()
                #expect(account.accountId == "alice@example.org")
                #expect(account.name == "Alice Example")
                #expect(account.email == "alice@example.org")
                #expect(account.idToken != account.accessToken)
                // The domain verifies the same ID token with the keys it fetched itself.
                let identity = try await domain.validate(token: account.idToken)
                #expect(identity.userID == "alice@example.org")
                #expect(identity.issuer == provider.issuer)
                // The refresh token is sealed in the store: no byte of it on disk in the clear.
                let secret = try #require(await manager.core.refreshSecret)
                for file in try FileManager.default.contentsOfDirectory(
                    at: directory.appendingPathComponent("device"), includingPropertiesForKeys: nil)
                {
                    let bytes = try Data(contentsOf: file)
                    #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(file.lastPathComponent) holds the refresh token")
                }
                // A second manager on the same store signs in silently from the cache.
                let again = try BBMOIDCTokenManager(
                    configuration: provider.configuration(flow: .browser), store: store, presenter: { _ in })
                #expect(try await again.signInSilently()?.accountId == "alice@example.org")
                // Sign-out revokes the refresh token at the provider: it refreshes nothing after.
                let client = try OpenIDClient(trust: .certificateAuthority(pem: provider.caPEM))
                func refresh() async throws -> Int {
                    try await client.postForm(
                        provider.issuer + "/token",
                        [("grant_type", "refresh_token"), ("refresh_token", secret), ("client_id", provider.clientID)],
                        what: "the token endpoint"
                    ).status
                }
                #expect(try await refresh() == 200)
                await again.signOut()
                #expect(try await refresh() != 200)
                #expect(try await again.signInSilently() == nil)
            }
        }
    }

    @Test func theDeviceCodeIsApprovedOnTheProvidersPagesAndARotatedKeyNeedsNoOperator() async throws {
        try await OpenIDProviderFixture.with { provider in
            try await Fixtures.withTemporaryDirectory { directory in
                let domain = try Self.domain(directory)
                _ = try await domain.discoverIssuer(
                    provider.issuer, audience: provider.clientID, userClaim: "sub", caPEM: provider.caPEM)
                let store = try EndpointStore(directory: directory.appendingPathComponent("device"), )
                let shown = Locked<[BBMOIDCTokenManager.Prompt]>([])
                let person = provider.person
                let manager = try BBMOIDCTokenManager(
                    configuration: provider.configuration(flow: .device, userClaim: "sub"), store: store,
                    presenter: { prompt in
                        shown.withLock { $0.append(prompt) }
                        await person(prompt)
                    })
                let first = try await manager.signIn()
                guard case .enterCode(let code, let uri, _) = try #require(shown.withLock { $0.first }) else {
                    Issue.record("the device flow showed no code")
                    return
                }
                #expect(!code.isEmpty)
                #expect(uri.absoluteString == provider.issuer + "/device")
                #expect(try JWS.unverifiedHeader(of: first.idToken).keyID == "key-1")
                _ = try await domain.validate(token: first.idToken)

                // The provider rotates its key mid-test; nobody tells the domain or the device.
                let kid = try await provider.rotateKey()
                await manager.signOut()
                let second = try await manager.signIn()
                #expect(try JWS.unverifiedHeader(of: second.idToken).keyID == kid)
                #expect(second.accountId == first.accountId)
                let identity = try await domain.validate(token: second.idToken)
                #expect(identity.userID == first.accountId)
                // The token under the old key still verifies (the provider still publishes it).
                _ = try await domain.validate(token: first.idToken)
                let stored = try #require(try domain.externalIssuers().first)
                #expect(stored.lastFetchError == nil)
            }
        }
    }

    @Test func aRedirectWithAnotherStateIsRefused() async throws {
        try await OpenIDProviderFixture.with { provider in
            try await Fixtures.withTemporaryDirectory { directory in
                let store = try EndpointStore(directory: directory.appendingPathComponent("device"), )
                // An attacker's page sends the browser to the loopback with a code of its own.
                let manager = try BBMOIDCTokenManager(
                    configuration: provider.configuration(flow: .browser), store: store,
                    presenter: { prompt in
                        guard case .openBrowser(let url) = prompt,
                            let redirect = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?
                                .first(where: { $0.name == "redirect_uri" })?.value
                        else { return }
                        _ = try? await Fixtures.run(
                            URL(fileURLWithPath: "/usr/bin/curl"), ["-s", "\(redirect)?code=stolen&state=forged"])
                    })
                let error = await #expect(throws: AuthError.self) { try await manager.signIn() }
                #expect(error?.code == .providerError)
                #expect(error?.reason.contains("state") == true)
                #expect(await manager.account == nil)
            }
        }
    }

    @Test func keysAreFetchedAtMostOnceAMinuteAndAProviderDownKeepsTheLastGoodOnes() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock(Date())
            let domain = try EmbeddedDomain.openOrCreate(
                at: directory.appendingPathComponent("domain.sqlite").path, domainID: "oidc.test",
                policy: DomainPolicy(userAuthenticationEnabled: true), clock: clock.wallClock)
            let (token, issuer) = try await OpenIDProviderFixture.with { provider in
                _ = try await domain.discoverIssuer(
                    provider.issuer, audience: provider.clientID, userClaim: "sub", caPEM: provider.caPEM)
                let store = try EndpointStore(directory: directory.appendingPathComponent("device"))
                let manager = try BBMOIDCTokenManager(
                    configuration: provider.configuration(flow: .device, userClaim: "sub"), store: store,
                    presenter: provider.person)
                let token = try await manager.signIn().idToken
                // Fetched again when asked, then not within the minute, whoever asks.
                #expect(await domain.refreshDiscoveredKeys(provider.issuer) == true)
                #expect(await domain.refreshDiscoveredKeys(provider.issuer) == false)
                clock.advance(by: 61)
                #expect(await domain.refreshDiscoveredKeys(provider.issuer) == true)
                // Keys older than their freshness (Glewlwyd sends no-store: 5 minutes) are fetched
                // again in the background after a request, which went on with the keys in hand.
                let before = try #require(try domain.externalIssuers().first?.keysFreshUntil)
                clock.advance(by: 301)
                _ = try await domain.validate(token: token)
                #expect(
                    await eventually {
                        ((try? domain.externalIssuers().first?.keysFreshUntil) ?? nil).map { $0 > before } ?? false
                    })
                // Glewlwyd answers a refresh with no new ID token (Core §12.2 allows it): the
                // manager says so and signs out, rather than keep an expired token.
                let later = TestClock(Date().addingTimeInterval(7200))
                let expired = try BBMOIDCTokenManager(
                    configuration: provider.configuration(flow: .device, userClaim: "sub"), store: store,
                    clock: later.wallClock, presenter: { _ in })
                let error = await #expect(throws: AuthError.self) { try await expired.signInSilently() }
                #expect(
                    error?.code == .refreshFailed && error?.reason.contains("no new ID token") == true,
                    "\(String(describing: error))")
                #expect(await expired.account == nil)
                return (token, provider.issuer)
            }
            // The provider is gone: the fetch fails, and the last good keys stay in use.
            clock.advance(by: 61)
            #expect(await domain.refreshDiscoveredKeys(issuer) == false)
            let stored = try #require(try domain.externalIssuers().first)
            #expect(stored.lastFetchError?.contains("cannot be reached") == true)
            #expect(try await domain.validate(token: token).issuer == issuer)
        }
    }
}
