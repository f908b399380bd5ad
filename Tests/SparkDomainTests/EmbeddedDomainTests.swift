import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkTestSupport
import Testing

/// A fast password hash for tests: the OWASP default is exercised separately.
let testPolicy = DomainPolicy(passwordIterations: 1000)

func makeDomain(_ directory: URL, clock: TestClock? = nil, policy: DomainPolicy = testPolicy) throws -> EmbeddedDomain {
    try EmbeddedDomain.create(
        at: directory.appendingPathComponent("domain.sqlite").path, domainID: "test-domain", policy: policy,
        clock: clock?.wallClock ?? .system, allowUnsafePasswordHashing: true)
}

/// The code in the newest mail to `email`.
func latestCode(_ domain: EmbeddedDomain, _ email: String) throws -> String {
    let body = try #require(try domain.outbox(recipient: email).last?.body)
    let match = try #require(body.firstMatch(of: /code is (\d{6})/))
    return String(match.1)
}

@Suite("Embedded domain: test auth and issuers")
struct TestAuthTests {
    @Test func testTokensWhileSandboxedAndRefusedOnceAuthIsRequired() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let token = try await domain.testToken(userID: "alice")
            let identity = try await domain.validate(token: token.token)
            #expect(identity.userID == "alice" && identity.issuerKind == .test)
            #expect(try JWS.unverifiedHeader(of: token.token).algorithm == "EdDSA")
            await #expect(throws: DomainError(.invalidRequest, "")) { try await domain.testToken(userID: "") }

            var policy = try await domain.policy()
            policy.userAuthenticationEnabled = true
            try domain.setPolicy(policy)
            await #expect(throws: DomainError(.userAuthenticationRequired, "")) { try await domain.testToken(userID: "bob") }
            await #expect(throws: DomainError(.userAuthenticationRequired, "")) { try await domain.validate(token: token.token) }
            // Another handle on the same file sees the change.
            await #expect(throws: DomainError(.userAuthenticationRequired, "")) {
                try await EmbeddedDomain.open(at: domain.path).testToken(userID: "carol")
            }
        }
    }

    /// The policy and the validator are kept between requests, keyed by the stored rows: a change
    /// made through another handle (another process, another instance) counts at the next request.
    @Test func aChangeMadeElsewhereCountsAtTheNextRequest() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let token = try await domain.testToken(userID: "alice").token
            let idp = TokenIssuer(issuer: "https://idp.example", key: try Ed25519.PrivateKey(), keyID: "k1")
            try domain.trustIssuer(idp.issuer, audience: "my-app", jwks: try idp.jwks.jsonData())
            let external = try idp.issue(subject: "carol", audience: "my-app", lifetime: 300, now: Date()).token
            #expect(try await domain.validate(token: token).userID == "alice")
            #expect(try await domain.validate(token: external).userID == "carol")
            // Elsewhere: the issuer is dropped, then test tokens are turned off.
            let elsewhere = try EmbeddedDomain.open(at: domain.path)
            try elsewhere.removeExternalIssuer(idp.issuer)
            await #expect(throws: DomainError(.invalidToken, "")) { try await domain.validate(token: external) }
            #expect(try await domain.validate(token: token).userID == "alice")
            var policy = try await elsewhere.policy()
            policy.userAuthenticationEnabled = true
            try elsewhere.setPolicy(policy)
            await #expect(throws: DomainError(.userAuthenticationRequired, "")) { try await domain.validate(token: token) }
        }
    }

    @Test func aVerifiedTokenStillExpiresAndStillNeedsItsIssuer() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock()
            let domain = try makeDomain(directory, clock: clock)
            let token = try await domain.testToken(userID: "alice").token
            #expect(try await domain.validate(token: token).userID == "alice")
            #expect(try await domain.validate(token: token).userID == "alice", "the second time from the cache")
            clock.advance(by: Double(testPolicy.tokenLifetime) + 31)
            await #expect(throws: DomainError(.tokenExpired, "")) { try await domain.validate(token: token) }
            // A forged token never gets in through the cache: it is keyed by the whole token.
            let forged = String(token.dropLast(2)) + (token.hasSuffix("AA") ? "BA" : "AA")
            await #expect(throws: DomainError(.invalidToken, "")) { try await domain.validate(token: forged) }
        }
    }

    @Test func domainsAreCreatedOnceAndCheckTheirPolicy() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("d.sqlite").path
            _ = try EmbeddedDomain.create(at: path, domainID: "one")
            #expect(throws: DomainError(.conflict, "")) { try EmbeddedDomain.create(at: path, domainID: "two") }
            #expect(throws: DomainError(.conflict, "")) { try EmbeddedDomain.openOrCreate(at: path, domainID: "two") }
            #expect(try EmbeddedDomain.openOrCreate(at: path, domainID: "one").domainID == "one")
            #expect(throws: DomainError(.unavailable, "")) {
                try EmbeddedDomain.open(at: directory.appendingPathComponent("none").path)
            }
            #expect(throws: DomainError(.invalidRequest, "")) {
                try EmbeddedDomain.create(
                    at: directory.appendingPathComponent("w.sqlite").path, domainID: "w",
                    policy: DomainPolicy(passwordIterations: 1000))
            }
            #expect(throws: DomainError(.invalidRequest, "")) {
                try EmbeddedDomain.create(at: directory.appendingPathComponent("s.sqlite").path, domainID: "has space")
            }
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
        }
    }

    @Test func externalIssuerWithAJWKSFile() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let key = try Ed25519.PrivateKey()
            let external = TokenIssuer(issuer: "https://idp.example", key: key, keyID: "ext-1")
            let jwksPath = directory.appendingPathComponent("jwks.json").path
            try external.jwks.jsonData().write(to: URL(fileURLWithPath: jwksPath))
            try domain.addExternalIssuer(.init(issuer: "https://idp.example", audience: "my-app", jwksPath: jwksPath))
            let token = try external.issue(subject: "carol", audience: "my-app", lifetime: 300, now: Date())
            let identity = try await domain.validate(token: token.token)
            #expect(identity.userID == "carol" && identity.issuerKind == .external)
            // Rotating the key in the file takes effect without a restart.
            let rotated = TokenIssuer(issuer: "https://idp.example", key: try Ed25519.PrivateKey(), keyID: "ext-2")
            try rotated.jwks.jsonData().write(to: URL(fileURLWithPath: jwksPath))
            await #expect(throws: DomainError(.invalidToken, "")) { try await domain.validate(token: token.token) }
            let fresh = try rotated.issue(subject: "carol", audience: "my-app", lifetime: 300, now: Date())
            #expect(try await domain.validate(token: fresh.token).userID == "carol")
            // A file without signature keys is refused when configuring.
            let badPath = directory.appendingPathComponent("bad.json").path
            try Data(#"{"keys":[{"kty":"OKP","crv":"X25519","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}"#.utf8).write(
                to: URL(fileURLWithPath: badPath))
            #expect(throws: DomainError(.invalidRequest, "")) {
                try domain.addExternalIssuer(.init(issuer: "https://other", audience: "x", jwksPath: badPath))
            }
            #expect(throws: DomainError(.conflict, "")) {
                try domain.addExternalIssuer(.init(issuer: domain.testIssuerName, audience: "x", jwksPath: jwksPath))
            }
            try domain.removeExternalIssuer("https://idp.example")
            await #expect(throws: DomainError(.invalidToken, "")) { try await domain.validate(token: fresh.token) }
        }
    }

    @Test func anIssuerWhoseJWKSFileIsGoneFailsOnlyItsOwnTokens() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let working = TokenIssuer(issuer: "https://works.example", key: try Ed25519.PrivateKey(), keyID: "w")
            let broken = TokenIssuer(issuer: "https://gone.example", key: try Ed25519.PrivateKey(), keyID: "g")
            for (issuer, name) in [(working, "works"), (broken, "gone")] {
                let path = directory.appendingPathComponent("\(name).json").path
                try issuer.jwks.jsonData().write(to: URL(fileURLWithPath: path))
                try domain.addExternalIssuer(.init(issuer: issuer.issuer, audience: "my-app", jwksPath: path))
            }
            try FileManager.default.removeItem(at: directory.appendingPathComponent("gone.json"))
            let good = try working.issue(subject: "carol", audience: "my-app", lifetime: 300, now: Date())
            #expect(try await domain.validate(token: good.token).userID == "carol", "another issuer's file is not this one's")
            let test = try await domain.testToken(userID: "dave")
            #expect(try await domain.validate(token: test.token).userID == "dave", "nor the domain's own issuers'")
            let orphan = try broken.issue(subject: "erin", audience: "my-app", lifetime: 300, now: Date())
            do {
                _ = try await domain.validate(token: orphan.token)
                Issue.record("a token of an issuer without keys was accepted")
            } catch let error as DomainError {
                #expect(error.code == .unavailable && error.reason.contains("https://gone.example"), "\(error)")
                #expect(error.reason.contains("gone.json"), "the reason names the missing file")
            }
        }
    }
}

@Suite("Embedded domain: sign-up and login assistant")
struct AccountAssistantTests {
    static let good = SignUpRequest(
        userName: "alice", password: "Correct-Horse-7", email: "Alice@Example.com", country: "CA", age: 30)

    @Test func eachFieldHasItsOwnError() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            func attempt(_ change: (inout SignUpRequest) -> Void) async -> DomainError.Code? {
                var request = Self.good
                change(&request)
                do {
                    try await domain.signUp(request)
                    return nil
                } catch let error as DomainError {
                    return error.code
                } catch {
                    return .storageFailure
                }
            }
            #expect(await attempt { $0.userName = "al" } == .nameInvalid)
            #expect(await attempt { $0.userName = "Alice!" } == .nameInvalid)
            #expect(await attempt { $0.email = "alice.example.com" } == .emailMalformed)
            #expect(await attempt { $0.email = "alice@localhost" } == .emailMalformed)
            #expect(await attempt { $0.password = "short1A!" } == .passwordTooWeak)
            #expect(await attempt { $0.password = "alllowercaseletters" } == nil, "a long passphrase needs no symbols")
            #expect(
                await attempt {
                    $0.userName = "bob"
                    $0.password = "bob-Secret-99"
                } == .passwordTooWeak)
            #expect(await attempt { $0.password = "abcdefghij" } == .passwordTooWeak)
            #expect(await attempt { $0.password = "Password123" } == .passwordTooWeak)
            #expect(await attempt { $0.country = "XX" } == .countryInvalid)
            #expect(await attempt { $0.age = 12 } == .ageOutOfRange)
            #expect(await attempt { $0.age = 121 } == .ageOutOfRange)
            #expect(try domain.accounts().map(\.userName) == ["alice"], "only the passphrase attempt created an account")
        }
    }

    @Test func namesAreUniqueAndATakenEmailIsNotRevealed() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            try await domain.signUp(Self.good)
            var sameName = Self.good
            sameName.email = "other@example.com"
            await #expect(throws: DomainError(.nameTaken, "")) { try await domain.signUp(sameName) }
            // The same answer as a new address; no account; the owner is told by mail.
            var sameEmail = Self.good
            sameEmail.userName = "alice2"
            sameEmail.email = "ALICE@example.com"
            try await domain.signUp(sameEmail)
            #expect(try domain.accounts().map(\.userName) == ["alice"])
            let notice = try #require(try domain.outbox(recipient: "alice@example.com").last)
            #expect(notice.subject.contains("tried to sign up") && !notice.body.contains("alice2"))
        }
    }

    @Test func activationThenLoginThenRefresh() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock()
            let domain = try makeDomain(directory, clock: clock)
            try await domain.signUp(Self.good)
            let mail = try #require(try domain.outbox(recipient: "alice@example.com").last)
            #expect(mail.subject.contains("Activate"))
            await #expect(throws: DomainError(.notActivated, "")) {
                try await domain.logIn(userName: "alice", password: "Correct-Horse-7")
            }
            // A wrong password on an inactive account says nothing about activation.
            await #expect(throws: DomainError(.invalidCredentials, "")) {
                try await domain.logIn(userName: "alice", password: "Wrong-Horse-77")
            }
            let code = try latestCode(domain, "alice@example.com")
            let wrong = code == "000000" ? "111111" : "000000"
            await #expect(throws: DomainError(.codeInvalid, "")) { try await domain.activate(userName: "alice", code: wrong) }
            try await domain.activate(userName: "alice", code: code)
            await #expect(throws: DomainError(.codeInvalid, "")) { try await domain.activate(userName: "alice", code: code) }

            let tokens = try await domain.logIn(userName: "alice", password: "Correct-Horse-7")
            let identity = try await domain.validate(token: tokens.token)
            #expect(identity.userID == "alice" && identity.issuerKind == .accounts && identity.email == "alice@example.com")
            let refreshToken = try #require(tokens.refreshToken)
            clock.advance(by: 10)
            let refreshed = try await domain.refresh(refreshToken: refreshToken)
            #expect(refreshed.token != tokens.token && refreshed.refreshToken != refreshToken)
            await #expect(throws: DomainError(.invalidToken, "")) { try await domain.refresh(refreshToken: refreshToken) }
            try await domain.revoke(refreshToken: try #require(refreshed.refreshToken))
            await #expect(throws: DomainError(.invalidToken, "")) {
                try await domain.refresh(refreshToken: refreshed.refreshToken!)
            }
            // Errors never carry the secrets they are about.
            do {
                _ = try await domain.logIn(userName: "alice", password: "Wrong-Horse-77")
            } catch {
                #expect(!String(describing: error).contains("Wrong-Horse-77"))
            }
        }
    }

    @Test func activationCodesExpireAndRunOutOfTries() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock()
            let domain = try makeDomain(directory, clock: clock)
            try await domain.signUp(Self.good)
            let code = try latestCode(domain, "alice@example.com")
            clock.advance(by: Double(testPolicy.activationCodeLifetime + 1))
            await #expect(throws: DomainError(.codeInvalid, "")) { try await domain.activate(userName: "alice", code: code) }
            try await domain.resendActivationCode(userName: "alice")
            let second = try latestCode(domain, "alice@example.com")
            let wrong = second == "999999" ? "888888" : "999999"
            for _ in 1..<testPolicy.codeAttempts {
                await #expect(throws: DomainError(.codeInvalid, "")) { try await domain.activate(userName: "alice", code: wrong) }
            }
            await #expect(throws: DomainError(.codeInvalid, "")) { try await domain.activate(userName: "alice", code: wrong) }
            // Its tries spent, even the right code is refused, with the same answer.
            await #expect(throws: DomainError(.codeInvalid, "")) { try await domain.activate(userName: "alice", code: second) }
            try await domain.resendActivationCode(userName: "alice")
            try await domain.activate(userName: "alice", code: try latestCode(domain, "alice@example.com"))
        }
    }

    @Test func failedLoginsAreThrottledForKnownAndUnknownNamesAlike() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock()
            let domain = try makeDomain(directory, clock: clock)
            try await domain.signUp(Self.good)
            try await domain.activate(userName: "alice", code: try latestCode(domain, "alice@example.com"))
            for name in ["alice", "nobody"] {
                var errors: [DomainError] = []
                for _ in 0..<testPolicy.loginAttemptsBeforeThrottle {
                    do { _ = try await domain.logIn(userName: name, password: "Wrong-Horse-77") } catch let error as DomainError {
                        errors.append(error)
                    }
                }
                #expect(
                    errors.dropLast().allSatisfy {
                        $0.code == .invalidCredentials && $0.reason == "the user name or password is incorrect"
                    })
                #expect(errors.last?.code == .tooManyAttempts && errors.last?.retryAfter == 30)
                // Even the right password waits out the lock.
                await #expect(throws: DomainError(.tooManyAttempts, "")) {
                    try await domain.logIn(userName: name, password: "Correct-Horse-7")
                }
            }
            clock.advance(by: 31)
            #expect(try await domain.logIn(userName: "alice", password: "Correct-Horse-7").refreshToken != nil)
        }
    }

    @Test func passwordRecovery() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            try await domain.signUp(Self.good)
            try await domain.activate(userName: "alice", code: try latestCode(domain, "alice@example.com"))
            let session = try await domain.logIn(userName: "alice", password: "Correct-Horse-7")
            let mailsBefore = try domain.outbox().count
            try await domain.requestPasswordReset(email: "nobody@example.com")
            #expect(try domain.outbox().count == mailsBefore, "no account, no mail, same answer")
            try await domain.requestPasswordReset(email: "ALICE@example.com")
            let code = try latestCode(domain, "alice@example.com")
            await #expect(throws: DomainError(.passwordTooWeak, "")) {
                try await domain.resetPassword(email: "alice@example.com", code: code, newPassword: "weak")
            }
            try await domain.resetPassword(email: "alice@example.com", code: code, newPassword: "Battery-Staple-42")
            await #expect(throws: DomainError(.codeInvalid, "")) {
                try await domain.resetPassword(email: "alice@example.com", code: code, newPassword: "Battery-Staple-43")
            }
            await #expect(throws: DomainError(.invalidCredentials, "")) {
                try await domain.logIn(userName: "alice", password: "Correct-Horse-7")
            }
            #expect(try await domain.logIn(userName: "alice", password: "Battery-Staple-42").refreshToken != nil)
            await #expect(throws: DomainError(.invalidToken, "")) {
                try await domain.refresh(refreshToken: session.refreshToken!)
            }
        }
    }

    @Test func owaspHashingIsTheDefault() throws {
        let hasher = PasswordHasher()
        let record = try hasher.hash("Correct-Horse-7")
        #expect(record.hasPrefix("pbkdf2-sha256$600000$"))
        #expect(hasher.verify("Correct-Horse-7", against: record))
        #expect(!hasher.verify("Correct-Horse-8", against: record))
        #expect(!hasher.verify("Correct-Horse-7", against: "pbkdf2-sha256$0$AAAA$AAAA"))
        #expect(!hasher.verify("Correct-Horse-7", against: "garbage"))
        #expect(try hasher.hash("Correct-Horse-7") != record, "salted")
        #expect(DomainPolicy().passwordIterations == 600_000)
    }

    @Test func theWholeFlowAcrossTwoProcesses() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let peer = Fixtures.executable("domain-peer")
            let signUp = try await Fixtures.run(
                peer, [domain.path, "signup", "dave", "Correct-Horse-7", "dave@example.com", "DE", "41"])
            #expect(signUp.status == 0, "\(signUp.stderr)")
            // This process reads the code from the outbox the other process wrote.
            let code = try latestCode(domain, "dave@example.com")
            let activate = try await Fixtures.run(peer, [domain.path, "activate", "dave", code])
            #expect(activate.status == 0, "\(activate.stderr)")
            let login = try await Fixtures.run(peer, [domain.path, "login", "dave", "Correct-Horse-7"])
            #expect(login.status == 0, "\(login.stderr)")
            let token = login.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try await domain.validate(token: token).userID == "dave")
            let wrong = try await Fixtures.run(peer, [domain.path, "login", "dave", "nope"])
            #expect(wrong.status == 1 && wrong.stderr.hasPrefix("error invalidCredentials"))
            // And the other way: a token made here validates there.
            let here = try await domain.testToken(userID: "erin")
            let validate = try await Fixtures.run(peer, [domain.path, "validate", here.token])
            #expect(validate.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "erin")
        }
    }
}

@Suite("Embedded domain: off the cooperative pool")
struct EmbeddedDomainPoolTests {
    /// Another process holds the domain's file (a write transaction in Python's sqlite3) while
    /// the app makes twice as many calls into the embedded domain as the pool has threads: they
    /// wait in SQLite's busy handler on the store's own thread, and the app's other tasks (400
    /// of them) all run meanwhile. Only once they have does the test let the other process go;
    /// the calls then go through. With the transactions on the callers' threads the waiting calls
    /// hold every thread of the pool, the 400 tasks cannot run until the calls give up (busy,
    /// after ten seconds), and the calls fail. The holder lets go on its own after two minutes at
    /// most, a safety net only: the 400 tasks share the pool with every other test of the run,
    /// and under AddressSanitizer in a loaded full run twelve seconds were once not enough, under
    /// ThreadSanitizer thirty. (What tells the code right from wrong is whether the calls fail.)
    @Test func callsWaitingForTheFileLeaveThePoolToTheAppsOtherTasks() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            try await domain.signUp(AssistantAttackTests.alice)
            let (held, release) = (directory.appendingPathComponent("held"), directory.appendingPathComponent("release"))
            let script = """
                import os, sqlite3, sys, time
                path, held, release = sys.argv[1:4]
                db = sqlite3.connect(path, isolation_level=None, timeout=0)
                db.execute("BEGIN IMMEDIATE")
                db.execute("INSERT INTO outbox(recipient, subject, body, sent_at) VALUES ('x', 'x', 'x', 0)")
                open(held, "w").close()
                deadline = time.time() + 120
                while not os.path.exists(release) and time.time() < deadline:
                    time.sleep(0.005)
                db.execute("ROLLBACK")
                print("released" if os.path.exists(release) else "timed out")
                """
            let holder = Task {
                try await Fixtures.run(
                    URL(fileURLWithPath: "/usr/bin/env"),
                    ["python3", "-c", script, directory.appendingPathComponent("domain.sqlite").path, held.path, release.path])
            }
            while !FileManager.default.fileExists(atPath: held.path) { try await Task.sleep(for: .milliseconds(5)) }
            let threads = max(2, ProcessInfo.processInfo.activeProcessorCount)
            let calls = (0..<(2 * threads)).map { _ in
                Task { try await domain.requestPasswordReset(email: "alice@example.com") }
            }
            let ran = await withTaskGroup(of: Int.self) { group in
                for task in 0..<400 { group.addTask { (0..<1_000).reduce(task, &+) } }
                return await group.reduce(0) { count, _ in count + 1 }
            }
            // The other tasks ran while the file was held: only now does the holder let go.
            #expect(ran == 400)
            #expect(FileManager.default.createFile(atPath: release.path, contents: nil))
            let outcome = try await holder.value
            #expect(outcome.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "released", "\(outcome.stderr)")
            for call in calls { try await call.value }
            #expect(try domain.outbox(recipient: "alice@example.com").count == 1 + 2 * threads, "each call went through")
        }
    }
}
