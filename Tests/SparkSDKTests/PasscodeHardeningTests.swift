import Foundation
import SparkCrypto
import SparkLock
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkDomain
@testable import SparkDomainEngine
@testable import SparkSDK

/// The guarantees of the passcode's OPRF hardening and of identity resets, each attacked: a
/// database copy with the right passcode but without the OPRF secret opens nothing; every guess
/// is a counted request; an old copy stays useless after a passcode change; a stolen token can
/// start a reset but never skip its delay, and cannot take the profile over.
@Suite("Passcodes and resets under attack")
struct PasscodeHardeningTests {
    /// Opens a management blob the way `docs/FORMATS.md` says, with the evaluation computed
    /// directly from `domain`'s secret (what only the domain, or its operator, can do).
    static func managementKey(of blob: Data, passcode: String, userID: String, domain: DomainEngine) throws -> SymmetricKey {
        try managementKey(of: blob, passcode: passcode, userID: userID, keys: domain.passcodeKeys)
    }

    static func managementKey(of blob: Data, passcode: String, userID: String, keys: PasscodeKeys) throws -> SymmetricKey {
        let parameters = try #require(try JWE.header(of: blob).oprf)
        let salt = try Data(base64URLEncoded: parameters.salt)
        let stretched = try PasscodeProtection.stretch(passcode, salt: salt, iterations: parameters.iterations)
        let output = try OPRF.passcodeHardening.evaluate(stretched, key: try keys.userKey(parameters.keyID, userID: userID))
        let kek = try PasscodeProtection.keyEncryptionKey(output: output, stretched: stretched, salt: salt, userID: userID)
        return try JWK(json: JWE.decrypt(blob, keyEncryptionKey: kek).unsafeData()).symmetricKey()
    }

    /// A thief with the user's token registers an endpoint (active at once under the default
    /// policy) and overwrites the backup with its management key zeroed, which would make the
    /// right passcode read as wrong everywhere: refused without the identity key's proof, and
    /// refused with a proof by any other key. A backup damaged anyway (an app's storage that took
    /// the write) is restored by a device that holds the keys: no reset, no new identity.
    @Test func aStolenTokenCannotReplaceTheBackup() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let domain = keys.harness.domain
            let (laptop, laptopCaller) = try await keys.device("laptop")
            let created = try await laptop.createKeys(passcode: "right passcode", caller: laptopCaller)
            _ = try await domain.registerEndpoint(token: keys.token, registration: .init(endpointID: "thief", description: "x"))
            let management = try await keys.blob(KeyBlob.managementName, endpoint: "thief")
            var object = try JSONSerialization.jsonObject(with: management.data) as! [String: Any]
            let encryptedKey = try Data(base64URLEncoded: object["encrypted_key"] as! String)
            object["encrypted_key"] = Data(count: encryptedKey.count).base64URLEncodedString()
            let zeroed = try JSONSerialization.data(withJSONObject: object)
            let refused = await #expect(throws: DomainError.self) {
                try await domain.putKeyBlob(
                    token: keys.token, endpointID: "thief", name: KeyBlob.managementName, data: zeroed,
                    expectedVersion: management.version)
            }
            #expect(refused?.code == .invalidProof, "\(String(describing: refused))")
            // Signed by the thief's own key, with the challenge of the thief's own attempt.
            let blinded = try OPRF.passcodeHardening.blind(SecureBytes(randomCount: 32))
            let attempt = try await domain.evaluatePasscode(
                token: keys.token, endpointID: "thief", blindedElement: blinded.element, keyID: nil)
            let write = [KeyBlobWrite(name: KeyBlob.managementName, data: zeroed, expectedVersion: management.version)]
            let forged = KeyBlobProof(
                challenge: attempt.challenge,
                signature: try Ed25519.PrivateKey().signature(
                    for: keyBlobWriteMessage(userID: "alice", endpointID: "thief", challenge: attempt.challenge, writes: write)))
            let alsoRefused = await #expect(throws: DomainError.self) {
                try await domain.putKeyBlobs(token: keys.token, endpointID: "thief", writes: write, proof: forged)
            }
            #expect(alsoRefused?.code == .invalidProof)
            #expect(try await keys.blob(KeyBlob.managementName, endpoint: "thief") == management, "nothing was written")
            let (phone, phoneCaller) = try await keys.device("phone")
            #expect(
                try await phone.unlock(passcode: "right passcode", caller: phoneCaller).signing.publicKey
                    == created.signing.publicKey)

            // Damaged anyway: the right passcode reads as wrong until the laptop restores the backup.
            try keys.overwrite(KeyBlob.managementName, with: zeroed)
            let (tablet, tabletCaller) = try await keys.device("tablet")
            await #expect(throws: KeyManagementError(.incorrectPasscode, "")) {
                try await tablet.unlock(passcode: "right passcode", caller: tabletCaller)
            }
            try await laptop.restoreBackup(passcode: "right passcode", caller: laptopCaller)
            #expect(
                try await tablet.unlock(passcode: "right passcode", caller: tabletCaller).signing.publicKey
                    == created.signing.publicKey)
            #expect(try domain.publishedIdentity(of: "alice")?.keyVersion == 1, "no reset, no new identity")
            // A device without the keys restores nothing.
            try phone.wipeLocalKeys()
            await #expect(throws: KeyManagementError(.noKeys, "")) {
                try await phone.restoreBackup(passcode: "right passcode", caller: phoneCaller)
            }
        }
    }

    @Test func aDatabaseCopyAndTheRightPasscodeOpenNothingWithoutTheSecret() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let (manager, caller) = try await keys.device("laptop")
            _ = try await manager.createKeys(passcode: "correct horse battery", caller: caller)
            let blob = try await keys.blob(KeyBlob.managementName, endpoint: "laptop").data
            // With the domain's secret (the domain itself, or its operator) the blob opens...
            _ = try Self.managementKey(of: blob, passcode: "correct horse battery", userID: "alice", domain: keys.harness.domain)
            // ...with any other secret, the right passcode opens nothing.
            #expect(throws: CryptoError(.authenticationFailure, "")) {
                try Self.managementKey(of: blob, passcode: "correct horse battery", userID: "alice", keys: .generate())
            }
            // A thief who copies the database file and serves it with secrets of their own finds
            // the device refusing their evaluations before the passcode is even judged.
            let copy = directory.appendingPathComponent("stolen.sqlite")
            let path = copy.path
            try DatabaseQueue(path: keys.harness.domain.path).withConnection { db in try db.execute("VACUUM INTO '\(path)'") }
            let stolen = try EmbeddedDomain.open(at: copy.path, passcodeKeys: .generate())
            let thief = BBMKeyManager(
                domain: stolen, store: try EndpointStore(directory: directory.appendingPathComponent("thief")),
                unsafePasscodeIterations: 1000)
            await #expect(throws: KeyManagementError(.domainKeyMismatch, "")) {
                try await thief.unlock(passcode: "correct horse battery", caller: caller)
            }
        }
    }

    @Test func theBackupOpensInPythonWithThePasscodeAndOneEvaluationOnly() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let (manager, caller) = try await keys.device("laptop")
            let created = try await manager.createKeys(passcode: "interop-passcode", caller: caller)
            let managementBlob = try await keys.blob(KeyBlob.managementName, endpoint: "laptop").data
            let management = directory.appendingPathComponent("management.jwe")
            let profile = directory.appendingPathComponent("profile.jwe")
            try managementBlob.write(to: management)
            try await keys.blob(KeyBlob.profileName, endpoint: "laptop").data.write(to: profile)
            // One evaluation, asked of the domain the way a device does (blinded, counted).
            let parameters = try #require(try JWE.header(of: managementBlob).oprf)
            let stretched = try PasscodeProtection.stretch(
                "interop-passcode", salt: try Data(base64URLEncoded: parameters.salt), iterations: parameters.iterations)
            let blinded = try OPRF.passcodeHardening.blind(stretched)
            let answer = try await keys.harness.domain.evaluatePasscode(
                token: keys.token, endpointID: "laptop", blindedElement: blinded.element, keyID: parameters.keyID)
            let output = try OPRF.passcodeHardening.finalize(
                [blinded], .init(elements: [answer.requested.element], proof: answer.requested.proof),
                publicKey: try Data(base64URLEncoded: parameters.publicKey))[0]
            let script = Fixtures.repositoryRoot.appendingPathComponent("Tests/SparkSDKTests/Python/open_backup.py").path
            func open(_ evaluation: Data) async throws -> (status: Int32, stdout: String, stderr: String) {
                try await Fixtures.run(
                    URL(fileURLWithPath: "/usr/bin/env"),
                    ["python3", script, "interop-passcode", "alice", evaluation.hexString, management.path, profile.path])
            }
            let result = try await open(output.unsafeData())
            #expect(result.status == 0, "\(result.stderr)")
            let opened = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: String] ?? [:]
            #expect(opened["sig"] == created.signing.publicKey.rawRepresentation.base64URLEncodedString())
            #expect(opened["enc"] == created.encryption.publicKey.rawRepresentation.base64URLEncodedString())
            // Without the evaluation (here: one by a key that is not the domain's, or none), no.
            let foreign = try OPRF.passcodeHardening.evaluate(
                stretched, key: try PasscodeKeys.generate().userKey("k1", userID: "alice"))
            #expect(try await open(foreign.unsafeData()).status == 1)
            #expect(try await open(Data(count: 32)).status == 1)
        }
    }

    @Test func everyGuessIsACountedRequestThroughTheDaemon() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let daemon = try await DomainDaemon.start(in: directory, domainID: "guesses")
            defer { Task { await daemon.stop() } }
            try await daemon.administration().setPolicy(DomainPolicy(unlockAttemptsPerHour: 3))
            let domain = try daemon.client()
            let token = try await domain.testToken(userID: "alice").token
            func device(_ name: String) async throws -> (BBMKeyManager, BBMKeyManager.Caller) {
                _ = try await domain.registerEndpoint(token: token, registration: .init(endpointID: name, description: name))
                let store = try EndpointStore(directory: directory.appendingPathComponent(name))
                return (
                    BBMKeyManager(domain: domain, store: store, unsafePasscodeIterations: 1000),
                    .init(token: token, userID: "alice", endpointID: name)
                )
            }
            let (laptop, laptopCaller) = try await device("laptop")
            _ = try await laptop.createKeys(passcode: "the real passcode", caller: laptopCaller)
            let (thief, thiefCaller) = try await device("thief")
            var left: [Int?] = []
            for guess in ["guess one!", "guess two!", "guess three"] {
                do {
                    _ = try await thief.unlock(passcode: guess, caller: thiefCaller)
                    Issue.record("a wrong guess opened the keys")
                } catch let error as KeyManagementError {
                    #expect(error.code == .incorrectPasscode)
                    left.append(error.attemptsLeft)
                }
            }
            #expect(left == [2, 1, 0])
            // The limit stops the next attempt, even with the right passcode, and says when.
            do {
                _ = try await thief.unlock(passcode: "the real passcode", caller: thiefCaller)
                Issue.record("the limit did not stop the fourth attempt")
            } catch let error as KeyManagementError {
                #expect(error.code == .tooManyAttempts && (1...3600).contains(error.retryAfter ?? 0), "\(error)")
            }
            #expect(try thief.localKeys(userID: "alice") == nil)
        }
    }

    @Test func commonAndWeakPasscodesAreRefusedWithTheReason() {
        for (passcode, reason) in [
            ("password", "most common"), ("PassWord1", "most common"), ("iloveyou", "most common"), ("qwertyuiop", "most common"),
            ("short", "at least 8"), ("aaaaaaaaaa", "repeat"), ("alice-the-user", "user id"),
        ] {
            do {
                try BBMKeyManager.checkPasscode(passcode, userID: "alice-the-user")
                Issue.record("\(passcode) was accepted")
            } catch let error as KeyManagementError {
                #expect(error.code == .passcodeTooWeak && error.reason.contains(reason), "\(passcode): \(error.reason)")
            } catch {
                Issue.record("\(error)")
            }
        }
        #expect(BBMKeyManager.commonPasscodes.count == 11_611)
        #expect(throws: Never.self) { try BBMKeyManager.checkPasscode("violet staple 42 moon", userID: "alice") }
    }

    @Test func aRotatedDomainKeyIsAdoptedAtTheNextUnlockAndAPreOPRFBlobIsUpgraded() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let (laptop, laptopCaller) = try await keys.device("laptop")
            let created = try await laptop.createKeys(passcode: "rotate me please", caller: laptopCaller)
            // The operator rotates: k2 becomes current, k1 is kept for the blobs still under it.
            let path = EmbeddedDomain.passcodeKeysPath(forDatabase: keys.harness.domain.path)
            try keys.harness.domain.passcodeKeys.rotated().write(to: path)
            let rotated = try EmbeddedDomain.open(at: keys.harness.domain.path)
            #expect(rotated.passcodeKeys.currentKeyID == "k2")
            let phone = BBMKeyManager(
                domain: rotated, store: try keys.harness.store("phone"), unsafePasscodeIterations: 1000)
            _ = try await rotated.registerEndpoint(token: keys.token, registration: .init(endpointID: "phone", description: "p"))
            let phoneCaller = BBMKeyManager.Caller(token: keys.token, userID: "alice", endpointID: "phone")
            #expect(
                try await phone.unlock(passcode: "rotate me please", caller: phoneCaller).signing.publicKey
                    == created.signing.publicKey)
            let header = try JWE.header(of: try await keys.blob(KeyBlob.managementName, endpoint: "phone").data)
            #expect(header.oprf?.keyID == "k2", "re-wrapped under the current key")
            // Once everyone moved, k1 can go; the keys still open.
            try rotated.passcodeKeys.retiring("k1").write(to: path)
            let retired = try EmbeddedDomain.open(at: keys.harness.domain.path)
            #expect(throws: DomainError(.conflict, "")) { try retired.passcodeKeys.retiring("k2") }
            let tablet = BBMKeyManager(domain: retired, store: try keys.harness.store("tablet"), unsafePasscodeIterations: 1000)
            _ = try await retired.registerEndpoint(token: keys.token, registration: .init(endpointID: "tablet", description: "t"))
            let tabletCaller = BBMKeyManager.Caller(token: keys.token, userID: "alice", endpointID: "tablet")
            #expect(try await tablet.unlock(passcode: "rotate me please", caller: tabletCaller).keyVersion == 1)

            // A blob from before the OPRF (PBES2 alone) still opens once, counted, and is upgraded.
            let managementKey = try Self.managementKey(
                of: try await keys.blob(KeyBlob.managementName, endpoint: "tablet").data, passcode: "rotate me please",
                userID: "alice", keys: retired.passcodeKeys)
            var jwk = JWK(keyType: .oct)
            jwk.k = managementKey.secureBytes
            jwk.keyID = "management"
            let legacy = try JWE.encrypt(
                try jwk.jsonData(), password: Data("rotate me please".utf8), unsafeUncheckedIterations: 1000,
                contentType: "jwk+json")
            try keys.overwrite(KeyBlob.managementName, with: legacy)
            try tablet.wipeLocalKeys()
            #expect(try await tablet.unlock(passcode: "rotate me please", caller: tabletCaller).keyVersion == 1)
            let upgraded = try JWE.header(of: try await keys.blob(KeyBlob.managementName, endpoint: "tablet").data)
            #expect(upgraded.algorithm == "A256KW" && upgraded.oprf?.keyID == "k2")
        }
    }

    @Test func hostileOPRFParametersAreRefusedBeforeAnyAttempt() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory, policy: DomainPolicy(passwordIterations: 1000, unlockAttemptsPerHour: 2))
            let (laptop, laptopCaller) = try await keys.device("laptop")
            _ = try await laptop.createKeys(passcode: "hostile params", caller: laptopCaller)
            let (phone, phoneCaller) = try await keys.device("phone")
            let original = try await keys.blob(KeyBlob.managementName, endpoint: "laptop")
            var object = try JSONSerialization.jsonObject(with: original.data) as! [String: Any]
            var protected =
                try JSONSerialization.jsonObject(
                    with: Data(base64URLEncoded: object["protected"] as! String)) as! [String: Any]
            let parameters = protected["spark-oprf"] as! [String: Any]
            for (field, value) in [
                ("p2c", 900_000_000 as Any), ("suite", "VOPRF-ristretto255-SHA512"), ("pk", "AAAA"), ("p2s", ""),
            ] {
                var hostile = parameters
                hostile[field] = value
                protected["spark-oprf"] = hostile
                object["protected"] = try JSONSerialization.data(withJSONObject: protected).base64URLEncodedString()
                try keys.overwrite(KeyBlob.managementName, with: try JSONSerialization.data(withJSONObject: object))
                await #expect(throws: KeyManagementError(.corruptKeys, ""), "\(field)") {
                    try await phone.unlock(passcode: "hostile params", caller: phoneCaller)
                }
            }
            // None of those spent an attempt: the two allowed are still there.
            try keys.overwrite(KeyBlob.managementName, with: original.data)
            await #expect(throws: KeyManagementError(.incorrectPasscode, "")) {
                try await phone.unlock(passcode: "not the passcode", caller: phoneCaller)
            }
            #expect(try await phone.unlock(passcode: "hostile params", caller: phoneCaller).userID == "alice")
        }
    }

    // MARK: Identity resets

    @Test func aStolenTokenStartsADelayTheOtherDeviceSeesAndCancels() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let (laptop, laptopCaller) = try await keys.device("laptop")
            let created = try await laptop.createKeys(passcode: "the owner's passcode", caller: laptopCaller)
            // The thief holds a token of alice's and registers a device of their own.
            let (thief, thiefCaller) = try await keys.device("thief")
            do {
                _ = try await thief.resetKeys(newPasscode: "the thief's passcode", caller: thiefCaller)
                Issue.record("a token alone reset the identity")
            } catch let error as KeyManagementError {
                #expect(error.code == .resetPending && error.reason.contains("takes effect at"), "\(error)")
            }
            // Nor can it publish keys of its own over the identity.
            let impostor = try UnlockedKeys.generate(userID: "alice", keyVersion: 2)
            await #expect(throws: DomainError(.conflict, "")) {
                try await keys.harness.domain.publishIdentity(
                    token: keys.token, endpointID: "thief", identity: impostor.publishedIdentity())
            }
            #expect(
                try keys.harness.domain.publishedIdentity(of: "alice")?.signingKey == created.signing.publicKey.rawRepresentation)
            // The owner's device sees the reset it did not ask for, and cancels it.
            let pending = try #require(try await laptop.pendingReset(caller: laptopCaller))
            #expect(pending.endpointID == "thief")
            #expect(pending.effectiveAt.timeIntervalSince(pending.requestedAt) == 7 * 86400)
            try await laptop.cancelReset(caller: laptopCaller)
            #expect(try await laptop.pendingReset(caller: laptopCaller) == nil)
            // A week later the thief's request is long gone: asking again starts a new wait.
            keys.harness.clock.advance(by: 7 * 86400 + 1)
            let fresh = try await keys.harness.domain.testToken(userID: "alice").token
            let later = BBMKeyManager.Caller(token: fresh, userID: "alice", endpointID: "thief")
            await #expect(throws: KeyManagementError(.resetPending, "")) {
                try await thief.resetKeys(newPasscode: "the thief's passcode", caller: later)
            }
            #expect(try keys.harness.domain.publishedIdentity(of: "alice")?.keyVersion == 1)
            _ = try await keys.harness.domain.checkIn(token: fresh, endpointID: "laptop")
        }
    }

    @Test func anUncancelledResetCompletesAfterTheDelay() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let (laptop, laptopCaller) = try await keys.device("laptop")
            _ = try await laptop.createKeys(passcode: "forgotten soon", caller: laptopCaller)
            let (phone, phoneCaller) = try await keys.device("phone")
            await #expect(throws: KeyManagementError(.resetPending, "")) {
                try await phone.resetKeys(newPasscode: "remembered now", caller: phoneCaller)
            }
            keys.harness.clock.advance(by: 7 * 86400)
            let fresh = try await keys.harness.domain.testToken(userID: "alice").token
            let renewed = try await phone.resetKeys(
                newPasscode: "remembered now", caller: .init(token: fresh, userID: "alice", endpointID: "phone"))
            #expect(renewed.keyVersion == 2)
            await #expect(throws: DomainError(.endpointRemoved, "")) {
                try await keys.harness.domain.checkIn(token: fresh, endpointID: "laptop")
            }
        }
    }

    @Test func aTakeOverCompletesOnlyForADeviceThatUnlocksTheKeys() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(
                directory, policy: DomainPolicy(multipleActiveEndpoints: false, passwordIterations: 1000))
            let (laptop, laptopCaller) = try await keys.device("laptop")
            _ = try await laptop.createKeys(passcode: "only the owner", caller: laptopCaller)
            let domain = keys.harness.domain
            // A stolen token takes over: registered, but not active, and the laptop stays.
            let asked = try await domain.registerEndpoint(
                token: keys.token, registration: .init(endpointID: "thief", description: "t"))
            guard case .deviceSwitchRequired = asked else {
                Issue.record("a second device must ask for the switch: \(asked)")
                return
            }
            let taken = try await domain.registerEndpoint(
                token: keys.token, registration: .init(endpointID: "thief", description: "t", takeOver: true))
            guard case .registered(let thief) = taken else {
                Issue.record("the take-over registers the device: \(taken)")
                return
            }
            #expect(!thief.isActive)
            #expect(try await domain.checkIn(token: keys.token, endpointID: "laptop").isActive)
            let thiefManager = BBMKeyManager(
                domain: domain, store: try keys.harness.store("thief"), unsafePasscodeIterations: 1000)
            let thiefCaller = BBMKeyManager.Caller(token: keys.token, userID: "alice", endpointID: "thief")
            await #expect(throws: KeyManagementError(.incorrectPasscode, "")) {
                try await thiefManager.unlock(passcode: "a good guess", caller: thiefCaller)
            }
            #expect(try await domain.checkIn(token: keys.token, endpointID: "laptop").isActive)
            // The owner's new device takes over and unlocks: then it is the active one.
            _ = try await domain.registerEndpoint(
                token: keys.token, registration: .init(endpointID: "new-laptop", description: "n", takeOver: true))
            let owner = BBMKeyManager(domain: domain, store: try keys.harness.store("new-laptop"), unsafePasscodeIterations: 1000)
            _ = try await owner.unlock(
                passcode: "only the owner", caller: .init(token: keys.token, userID: "alice", endpointID: "new-laptop"))
            #expect(try await domain.checkIn(token: keys.token, endpointID: "new-laptop").isActive)
            await #expect(throws: DomainError(.endpointRemoved, "")) {
                try await domain.checkIn(token: keys.token, endpointID: "laptop")
            }
        }
    }

    @Test func thePendingResetIsToldToTheUsersDevicesAndContacts() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (laptopService, aliceLaptop) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            _ = try await aliceLaptop.startChat(with: ["bob"])
            #expect(await waitFor("bob knows the chat") { bob.chats.value.count == 1 })
            let laptopEvents = EventRecorder(aliceLaptop)
            let bobEvents = EventRecorder(bob)
            // A token of alice's, on a device of the thief's, asks for a reset.
            let token = try await world.domain.testToken(userID: "alice").token
            _ = try await world.domain.registerEndpoint(token: token, registration: .init(endpointID: "thief", description: "t"))
            let outcome = try await world.domain.resetIdentity(token: token, endpointID: "thief", signature: nil)
            guard case .pending(let pending) = outcome else {
                Issue.record("the reset did not wait: \(outcome)")
                return
            }
            let told = MessagingEvent.identityResetPending(userID: "alice", effectiveAt: pending.effectiveAt)
            #expect(await waitFor("alice's laptop is told") { laptopEvents.value.contains(told) })
            #expect(await waitFor("bob is told") { bobEvents.value.contains(told) })
            #expect(try await laptopService.pendingIdentityReset() == pending)
            try await laptopService.cancelIdentityReset()
            #expect(try await laptopService.pendingIdentityReset() == nil)
            #expect(
                await waitFor("the cancel reaches bob") { bobEvents.value.contains(.identityResetCancelled(userID: "alice")) })
            // Nobody can post such a notice themselves.
            await #expect(throws: DomainError(.invalidRequest, "")) {
                try await world.domain.post(
                    token: token, endpointID: "thief", chatID: "x", kind: .identityReset, payload: Data("{}".utf8),
                    recipient: nil,
                    clientID: nil)
            }
        }
    }
}
