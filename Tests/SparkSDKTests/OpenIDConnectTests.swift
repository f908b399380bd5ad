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

    /// A local process finds the loopback port before the browser comes back: it holds a
    /// connection open, trickling nothing, and sends its own code with a forged state and with
    /// none. Neither ends the sign-in or holds the listener: the person's own redirect, which
    /// comes after, signs in.
    @Test func aRedirectWithAnotherStateIsIgnoredAndASlowConnectionHoldsNothing() async throws {
        try await OpenIDProviderFixture.with { provider in
            try await Fixtures.withTemporaryDirectory { directory in
                let store = try EndpointStore(directory: directory.appendingPathComponent("device"), )
                let told = Locked<[String]>([])
                let held = Locked<Int32>(-1)
                let manager = try BBMOIDCTokenManager(
                    configuration: provider.configuration(flow: .browser), store: store,
                    presenter: { prompt in
                        guard case .openBrowser(let url) = prompt,
                            let redirect = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?
                                .first(where: { $0.name == "redirect_uri" })?.value,
                            let port = URLComponents(string: redirect)?.port
                        else { return }
                        held.withLock { $0 = RawHTTP.connect(port: port) }
                        _ = RawHTTP.write(held.withLock { $0 }, Array("G".utf8))
                        for query in ["code=stolen&state=forged", "code=stolen"] {
                            let answer = try? await Fixtures.run(
                                URL(fileURLWithPath: "/usr/bin/curl"), ["-s", "-m", "10", "\(redirect)?\(query)"])
                            told.withLock { $0.append(answer?.stdout ?? "") }
                        }
                        await provider.person(prompt)
                    })
                let account = try await manager.signIn()
                #expect(!account.idToken.isEmpty)
                #expect(
                    told.withLock { $0 }.allSatisfy { $0.contains("not the answer to this sign-in") }, "\(told.withLock { $0 })")
                let descriptor = held.withLock { $0 }
                if descriptor >= 0 { close(descriptor) }
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

/// What a provider can make the domain (or a device) read: an oversized discovery document is
/// read no further than the cap, whether its length is declared or not, and a failed connection
/// is told without the port it tried (the operator's error texts are no port scanner).
@Suite("OpenID fetches: the cap and the error texts")
struct OpenIDFetchLimitTests {
    /// Serves one answer of `megabytes` MiB (declaring its length or not), and prints how many
    /// bytes it managed to send before the client went away.
    static let server = """
        import socket, sys
        megabytes, declared, port_file = int(sys.argv[1]), sys.argv[2] == "declared", sys.argv[3]
        listener = socket.socket(); listener.bind(("127.0.0.1", 0)); listener.listen(1)
        open(port_file, "w").write(str(listener.getsockname()[1]))
        connection, _ = listener.accept(); connection.recv(65536)
        total = megabytes << 20
        head = "HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\n"
        head += ("Content-Length: %d\\r\\n" % total) if declared else "Connection: close\\r\\n"
        sent = 0
        try:
            connection.sendall((head + "\\r\\n").encode())
            chunk = b" " * 65536
            while sent < total:
                connection.sendall(chunk); sent += len(chunk)
        except OSError:
            pass
        print(sent)
        """

    @Test(arguments: [false, true]) func anOversizedDocumentIsReadNoFurtherThanTheCap(declared: Bool) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let script = directory.appendingPathComponent("server.py")
            try Data(Self.server.utf8).write(to: script)
            let portFile = directory.appendingPathComponent("port").path
            let output = directory.appendingPathComponent("sent")
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script.path, "60", declared ? "declared" : "streamed", portFile]
            process.standardOutput = try FileHandle(forWritingTo: output)
            try process.run()
            var port: String?
            for _ in 0..<500 where port == nil {
                port = (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { $0.isEmpty ? nil : $0 }
                if port == nil { try await Task.sleep(for: .milliseconds(10)) }
            }
            let client = try OpenIDClient(trust: .plainLoopback)
            let refused = await #expect(throws: DomainError.self) {
                try await client.discover(issuer: "http://127.0.0.1:\(try #require(port))")
            }
            #expect(
                refused?.reason.contains("larger than \(OpenIDClient.maximumDocumentSize) bytes") == true,
                "\(String(describing: refused))")
            process.waitUntilExit()
            let sent = Int(try String(contentsOf: output, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
            // The cap and what the sockets' buffers hold between the two ends, not 60 MiB.
            #expect(sent >= 0 && sent < 16 << 20, "the server sent \(sent) bytes before the client went away")
        }
    }

    @Test func aFailedConnectionIsToldWithoutItsPort() async throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        close(listener)  // bound, never listening: the port is closed
        let port = Int(UInt16(bigEndian: address.sin_port))
        let client = try OpenIDClient(trust: .plainLoopback)
        let refused = await #expect(throws: DomainError.self) { try await client.discover(issuer: "http://127.0.0.1:\(port)") }
        let reason = refused?.reason ?? ""
        #expect(reason.contains("cannot be reached") && !reason.contains("\(port)") && !reason.contains("port"), "\(reason)")
    }
}
