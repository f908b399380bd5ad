import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkObservable
import SparkSDK
import SparkTestSupport
import Testing

/// `spark-admin`, run as a binary.
@Suite("spark-admin")
struct SparkAdminTests {
    static let binary = Fixtures.executable("spark-admin")

    static func admin(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await Fixtures.run(binary, arguments)
    }

    @Test func helpAndUsageErrors() async throws {
        let help = try await Self.admin(["--help"])
        #expect(help.status == 0 && help.stdout.contains("usage: spark-admin") && help.stdout.contains("outbox"))
        let unknown = try await Self.admin(["--domain", "/tmp/x.sqlite", "frobnicate"])
        #expect(unknown.status == 64 && unknown.stderr.hasPrefix("spark-admin: unknown command 'frobnicate'"))
        let badFlag = try await Self.admin(["--domain", "/tmp/x.sqlite", "users", "--verbose"])
        #expect(badFlag.status == 64 && badFlag.stderr.contains("unknown option --verbose"))
        let badValue = try await Self.admin(["--domain", "/tmp/x.sqlite", "create", "d", "--max-endpoints", "lots"])
        #expect(badValue.status == 64 && badValue.stderr.contains("--max-endpoints must be a whole number"))
        let missingValue = try await Self.admin(["--domain"])
        #expect(missingValue.status == 64)
        let badConfig = try await Self.admin(["--config", "/nonexistent/ConfigSettings.plist", "users"])
        #expect(
            badConfig.status == 1
                && badConfig.stderr == "spark-admin: /nonexistent/ConfigSettings.plist: cannot be read (does the file exist?)\n")
    }

    @Test func operatingAServedDomainTakesTheOperatorCredential() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let daemon = try await DomainDaemon.start(in: directory, domainID: "ops-remote")
            let plist: [String: Any] = [
                "authProvider": "testAuth", "testAuth": ["domain": "ops-remote", "environment": "sandbox"],
                "domainURL": daemon.url.absoluteString, "domainCAFile": daemon.directory.appendingPathComponent("ca.pem").path,
            ]
            let config = directory.appendingPathComponent("remote.plist").path
            try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0).write(
                to: URL(fileURLWithPath: config))
            let credential = daemon.directory.appendingPathComponent("operator.credential").path
            let without = try await Self.admin(["--config", config, "users"])
            #expect(without.status == 64 && without.stderr.contains("pass --operator FILE"))
            let token = try await Self.admin(["--config", config, "--operator", credential, "token", "alice"])
            #expect(token.status == 0, "\(token.stderr)")
            let domain = try daemon.client()
            let aliceToken = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try await domain.validate(token: aliceToken).userID == "alice")
            _ = try await domain.registerEndpoint(token: aliceToken, registration: .init(endpointID: "a1", description: "laptop"))
            let users = try await Self.admin(["--config", config, "--operator", credential, "users"])
            #expect(users.stdout.contains("alice\t1 endpoint"), "\(users.stdout)")
            let timeout = try await Self.admin(["--config", config, "--operator", credential, "timeout", "alice", "60", "spam"])
            #expect(timeout.status == 0)
            let status = try await Self.admin(["--config", config, "--operator", credential, "status", "alice"])
            #expect(status.stdout.contains("alice: timed out until"), "\(status.stdout)")
            let policy = try await Self.admin([
                "--config", config, "--operator", credential, "policy", "set", "--max-endpoints", "3",
            ])
            #expect(policy.status == 0 && policy.stdout.contains("maximum endpoints per user: 3"))
            let key = try Ed25519.PrivateKey()
            let issuer = TokenIssuer(issuer: "https://idp.example", key: key, keyID: "k")
            let jwks = directory.appendingPathComponent("jwks.json")
            try issuer.jwks.jsonData().write(to: jwks)
            let added = try await Self.admin(
                ["--config", config, "--operator", credential, "issuer", "add", "https://idp.example", "app", jwks.path])
            #expect(added.status == 0 && added.stdout.contains("sent to the domain"), "\(added.stderr)")
            let external = try issuer.issue(subject: "zed", audience: "app", lifetime: 600, now: Date()).token
            #expect(try await domain.validate(token: external).userID == "zed")
            // A user's token is no operator credential, and a wrong credential is refused.
            let forged = directory.appendingPathComponent("forged.credential")
            try Data(aliceToken.utf8).write(to: forged)
            let refused = try await Self.admin(["--config", config, "--operator", forged.path, "unban", "alice"])
            #expect(refused.status == 1 && refused.stderr.contains("operator credential"), "\(refused.stderr)")
            #expect(try await Self.admin(["--config", config, "--operator", credential, "create", "x"]).status == 64)
            await daemon.stop()
        }
    }

    @Test func createPolicyTokenAndIssuers() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("d.sqlite").path
            let created = try await Self.admin(["--domain", path, "create", "ops", "--max-endpoints", "2", "--single-endpoint"])
            #expect(created.status == 0, "\(created.stderr)")
            #expect(
                created.stdout.contains("maximum endpoints per user: 2")
                    && created.stdout.contains("active endpoints per user: one"))
            #expect(try await Self.admin(["--domain", path, "create", "ops"]).status == 1, "a domain is created once")

            let token = try await Self.admin(["--domain", path, "token", "alice"])
            #expect(token.status == 0)
            let domain = try EmbeddedDomain.open(at: path)
            #expect(
                try await domain.validate(token: token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)).userID == "alice")

            #expect(try await Self.admin(["--domain", path, "policy", "set", "--user-auth", "on"]).status == 0)
            #expect(try await domain.policy().userAuthenticationEnabled)
            let refused = try await Self.admin(["--domain", path, "token", "bob"])
            #expect(refused.status == 1 && refused.stderr.contains("userAuthenticationRequired"))
            #expect(try await Self.admin(["--domain", path, "policy"]).stdout.contains("user authentication: on"))

            let key = try Ed25519.PrivateKey()
            let issuer = TokenIssuer(issuer: "https://idp.example", key: key, keyID: "k")
            let jwks = directory.appendingPathComponent("jwks.json")
            try issuer.jwks.jsonData().write(to: jwks)
            let added = try await Self.admin(["--domain", path, "issuer", "add", "https://idp.example", "app", jwks.path])
            #expect(added.status == 0, "\(added.stderr)")
            #expect(
                try await Self.admin(["--domain", path, "issuer", "list"]).stdout.contains("https://idp.example\taudience app"))
            let external = try issuer.issue(subject: "carol", audience: "app", lifetime: 60, now: Date())
            #expect(try await domain.validate(token: external.token).userID == "carol")
            #expect(try await Self.admin(["--domain", path, "issuer", "remove", "https://idp.example"]).status == 0)
            #expect(try await Self.admin(["--domain", path, "issuer", "remove", "https://idp.example"]).status == 1)

            let published = try await Self.admin(["--domain", path, "jwks", "test"])
            let set = try JWKSet(json: Data(published.stdout.utf8))
            #expect(set.keys.count == 1 && set.keys[0].curve == "Ed25519")
        }
    }

    @Test func usersAndOutboxShowTheAssistantsWork() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("d.sqlite").path
            #expect(
                try await Self.admin(["--domain", path, "create", "mail", "--unsafe-password-iterations", "1000"]).status == 0)
            #expect(try await Self.admin(["--domain", path, "outbox"]).stdout.contains("the outbox is empty"))
            let domain = try EmbeddedDomain.open(at: path)
            try await domain.signUp(
                SignUpRequest(userName: "judy", password: "Violet-Sky-314", email: "judy@example.com", country: "FR", age: 27))
            let outbox = try await Self.admin(["--domain", path, "outbox", "--to", "judy@example.com"])
            #expect(
                outbox.status == 0 && outbox.stdout.contains("to judy@example.com")
                    && outbox.stdout.contains("activation code is"))
            #expect(
                try await Self.admin(["--domain", path, "users"]).stdout.contains(
                    "judy\tjudy@example.com\tFR\tage 27\tnot activated"))
            // Changing other settings keeps the domain's (test) password cost.
            #expect(try await Self.admin(["--domain", path, "policy", "set", "--max-endpoints", "4"]).status == 0)
            // The write limits: a minute's bytes and what one sender may leave unread for one user.
            let limited = try await Self.admin([
                "--domain", path, "policy", "set", "--posted-bytes-per-minute", "2097152", "--unread-bytes-per-sender", "1048576",
            ])
            #expect(
                limited.stdout.contains("2097152 bytes a minute into mailboxes, 1048576 bytes left unread for one user"),
                "\(limited.stdout)")
            #expect(try await Self.admin(["--domain", path, "policy", "set", "--unread-bytes-per-sender", "5"]).status == 64)
        }
    }
}

@Suite("spark-admin: endpoints and moderation")
struct SparkAdminModerationTests {
    @Test func moderationAndEndpointsFromTheCommandLine() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (service, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            let path = world.domain.path
            let chat = try await alice.startChat(with: ["bob"])
            func cli(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
                try await SparkAdminTests.admin(["--domain", path] + arguments)
            }
            #expect(try await cli(["users"]).stdout.contains("alice\t1 endpoint"))
            let endpoints = try await cli(["endpoints", "alice"])
            #expect(endpoints.stdout.contains("regId 1\talice-laptop\tactive"))

            #expect(try await cli(["infraction", "alice", "be nice"]).status == 0)
            #expect(try await cli(["timeout", "alice", "60", "flooding"]).stdout.contains("timed out for 60 s"))
            #expect(try await cli(["status", "alice"]).stdout.contains("timed out until"))
            let refused = try await alice.sendMessage("let me in", to: chat.chatID)
            guard case .failed(let reason) = refused.state else {
                Issue.record("expected the domain to refuse: \(refused.state)")
                return
            }
            #expect(reason.contains("flooding"))
            #expect(try await cli(["ban", "alice", "spam"]).status == 0)
            #expect(try await cli(["status", "alice"]).stdout.contains("banned (spam)"))
            #expect(try await cli(["unban", "alice"]).status == 0)
            #expect(try await alice.sendMessage("back", to: chat.chatID).state.isAccepted)
            #expect(try await cli(["timeout", "alice", "soon", "x"]).status == 64)

            let endpointID = try await service.endpointID
            #expect(try await cli(["deregister", endpointID]).status == 0)
            await service.checkIn()
            #expect(service.authState.value.removalReason == "removed by the domain's operator")
            #expect(try await cli(["deregister", endpointID]).status == 1)
        }
    }
}
