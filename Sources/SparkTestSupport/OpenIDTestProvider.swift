public import Foundation

/// A real OpenID provider for the tests (Glewlwyd, Debian's package, over HTTPS with a CA of
/// the test's own), started by `scripts/openid-provider.py` in a directory of the test's, with
/// the test user `alice`. Headless Chromium (through Selenium) plays the person at its pages.
public struct OpenIDTestProvider: Sendable {
    /// The provider's directory (its database, log, keys and CA).
    public let directory: URL
    /// The issuer identifier (`https://127.0.0.1:PORT/api/oidc`).
    public let issuer: String
    /// The CA that signed its certificate, as PEM text.
    public let caPEM: String
    /// The CA's file.
    public let caFile: String
    /// The test user's name and password at the provider.
    public let user = "alice"
    /// The test user's password.
    public let password = "correct horse"
    /// The public client registered for the tests.
    public let clientID = "spark-test"

    static let script = "scripts/openid-provider.py"

    /// Starts a provider in `directory` with the test client registered (no redirect URI yet).
    public static func start(in directory: URL) async throws -> OpenIDTestProvider {
        let path = directory.appendingPathComponent("provider").path
        let line = try await Fixtures.python(script, ["start", path])
        guard let state = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            let issuer = state["issuer"] as? String, let caFile = state["ca"] as? String
        else { throw DaemonError("the provider script printed \(line)") }
        let provider = OpenIDTestProvider(
            directory: URL(fileURLWithPath: path), issuer: issuer,
            caPEM: try String(contentsOfFile: caFile, encoding: .utf8), caFile: caFile)
        _ = try await provider.admin(["client", path, provider.clientID])
        return provider
    }

    /// Runs a provider for `body`, stopping it after.
    public static func with<T>(_ body: (OpenIDTestProvider) async throws -> T) async throws -> T {
        try await Fixtures.withTemporaryDirectory { directory in
            let provider = try await start(in: directory)
            do {
                let result = try await body(provider)
                await provider.stop()
                return result
            } catch {
                await provider.stop()
                throw error
            }
        }
    }

    func admin(_ arguments: [String]) async throws -> String { try await Fixtures.python(Self.script, arguments) }

    /// Stops the provider.
    public func stop() async { _ = try? await admin(["stop", directory.path]) }

    /// Registers `redirectURI` for the test client (the provider matches redirect URIs exactly,
    /// port included).
    public func register(redirectURI: String) async throws {
        _ = try await admin(["client", directory.path, clientID, redirectURI])
    }

    /// A new signing key at the provider, newest first (tokens under the old one still verify);
    /// returns its `kid`.
    public func rotateKey() async throws -> String {
        let answer = try await admin(["rotate", directory.path])
        return (try JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: String])?["kid"] ?? ""
    }

    /// Headless Chromium at `url` as the test user: the login form, then the consent (for a
    /// device code, the provider's own approval pages). Returns the address it ended at.
    public func browser(_ url: URL, device: Bool) async throws -> String {
        try await admin([device ? "browser-device" : "browser-login", url.absoluteString, user, password])
    }
}
