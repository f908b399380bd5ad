import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkLock
import SparkSDK
import SparkStore
import SparkTestSupport
import Testing

/// Two or three endpoints of one user on one embedded domain.
struct KeyHarness {
    let harness: Harness
    let token: String

    init(_ directory: URL, policy: DomainPolicy = DomainPolicy(passwordIterations: 1000)) async throws {
        harness = try Harness(directory, policy: policy)
        token = try await harness.domain.testToken(userID: "alice").token
    }

    /// A key manager for a device, registered as an endpoint.
    func device(_ name: String, iterations: Int? = 1000) async throws -> (BBMKeyManager, BBMKeyManager.Caller) {
        _ = try await harness.domain.registerEndpoint(token: token, registration: .init(endpointID: name, description: name))
        let store = try harness.store(name)
        let manager =
            if let iterations {
                BBMKeyManager(domain: harness.domain, store: store, unsafePasscodeIterations: iterations)
            } else {
                BBMKeyManager(domain: harness.domain, store: store)
            }
        return (manager, BBMKeyManager.Caller(token: token, userID: "alice", endpointID: name))
    }

    func blob(_ name: String, endpoint: String) async throws -> KeyBlob {
        try #require(try await harness.domain.fetchKeyBlob(token: token, endpointID: endpoint, name: name).blob)
    }

    /// Replaces alice's blob `name` in the domain's file itself, one version on: what a hostile
    /// or damaged storage serves (the domain's API takes no such write without the identity key).
    func overwrite(_ name: String, with data: Data) throws {
        let queue = try DatabaseQueue(path: harness.directory.appendingPathComponent("domain.sqlite").path)
        let changed = try queue.write { db in
            try db.execute(
                "UPDATE key_blobs SET data = ?, version = version + 1 WHERE user_id = 'alice' AND name = ?", [data, name])
        }
        try #require(changed == 1)
    }
}

@Suite("BBMKeyManager")
struct KeyManagerTests {
    @Test func firstDeviceCreatesAndALaterDeviceUnlocks() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let (first, firstCaller) = try await keys.device("laptop")
            #expect(try await !first.keysExist(firstCaller))
            await #expect(throws: KeyManagementError(.passcodeTooWeak, "")) {
                try await first.createKeys(passcode: "short", caller: firstCaller)
            }
            await #expect(throws: KeyManagementError(.passcodeTooWeak, "")) {
                try await first.createKeys(passcode: "ALICE", caller: firstCaller)
            }
            let created = try await first.createKeys(passcode: "tr0ub4dor&3", caller: firstCaller)
            #expect(created.keyVersion == 1)
            let published = try #require(try keys.harness.domain.publishedIdentity(of: "alice"))
            #expect(created.matches(published))
            await #expect(throws: KeyManagementError(.keysExist, "")) {
                try await first.createKeys(passcode: "another-pass", caller: firstCaller)
            }

            let (second, secondCaller) = try await keys.device("phone")
            #expect(try await second.keysExist(secondCaller))
            let before = try await keys.blob(KeyBlob.managementName, endpoint: "phone")
            do {
                _ = try await second.unlock(passcode: "wrong passcode", caller: secondCaller)
                Issue.record("a wrong passcode must fail")
            } catch let error as KeyManagementError {
                #expect(error.code == .incorrectPasscode && error.attemptsLeft == 8)
                #expect(!error.description.contains("wrong passcode"))
            }
            #expect(try await keys.blob(KeyBlob.managementName, endpoint: "phone") == before, "nothing changed")
            #expect(try second.localKeys(userID: "alice") == nil)
            let unlocked = try await second.unlock(passcode: "tr0ub4dor&3", caller: secondCaller)
            #expect(
                unlocked.signing.publicKey == created.signing.publicKey
                    && unlocked.encryption.publicKey == created.encryption.publicKey)
            // A restart finds them on the endpoint without the passcode.
            let restarted = BBMKeyManager(
                domain: keys.harness.domain, store: try keys.harness.store("phone"), unsafePasscodeIterations: 1000)
            #expect(try restarted.localKeys(userID: "alice")?.signing.publicKey == created.signing.publicKey)
            try restarted.wipeLocalKeys()
            #expect(try restarted.localKeys(userID: "alice") == nil)
        }
    }

    @Test func defaultProtectionUsesSixHundredThousandIterations() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let (manager, caller) = try await keys.device("laptop", iterations: nil)
            #expect(manager.passcodeIterations == 600_000)
            _ = try await manager.createKeys(passcode: "tr0ub4dor&3", caller: caller)
            let header = try JWE.header(of: try await keys.blob(KeyBlob.managementName, endpoint: "laptop").data)
            #expect(header.algorithm == "A256KW" && header.encryption == "A256GCM" && header.pbes2Count == nil)
            let oprf = try #require(header.oprf)
            #expect(oprf.suite == "VOPRF-P256-SHA256" && oprf.iterations == 600_000 && oprf.keyID == "k1")
            #expect(try Data(base64URLEncoded: oprf.salt).count == 16 && Data(base64URLEncoded: oprf.publicKey).count == 33)
            let profileHeader = try JWE.header(of: try await keys.blob(KeyBlob.profileName, endpoint: "laptop").data)
            #expect(profileHeader.algorithm == "A256KW" && profileHeader.encryption == "A256GCM")
        }
    }

    @Test func changePasscodeMakesANewManagementKeyAndRacesSafely() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let (first, firstCaller) = try await keys.device("laptop")
            let created = try await first.createKeys(passcode: "first-passcode", caller: firstCaller)
            let profileBefore = try await keys.blob(KeyBlob.profileName, endpoint: "laptop")
            let managementBefore = try await keys.blob(KeyBlob.managementName, endpoint: "laptop")
            await #expect(throws: KeyManagementError(.incorrectPasscode, "")) {
                try await first.changePasscode(from: "not-it-at-all", to: "second-passcode", caller: firstCaller)
            }
            try await first.changePasscode(from: "first-passcode", to: "second-passcode", caller: firstCaller)
            let profileAfter = try await keys.blob(KeyBlob.profileName, endpoint: "laptop")
            #expect(profileAfter.version == profileBefore.version + 1, "the profile is re-wrapped under a new management key")
            // A copy of the old management blob opened with the old passcode gives the old
            // management key, which no longer opens the current profile.
            let oldKey = try PasscodeHardeningTests.managementKey(
                of: managementBefore.data, passcode: "first-passcode", userID: "alice", domain: keys.harness.domain)
            #expect(throws: CryptoError(.authenticationFailure, "")) {
                try JWE.decrypt(profileAfter.data, keyEncryptionKey: oldKey)
            }
            // What an old copy still opens with the operator's secret (docs/SECURITY.md, "What a
            // malicious operator can still do"): whoever holds passcode.keys derives the retired
            // key version too, and with the old passcode opens the identity keys as they were.
            // Through the domain it opens nothing (aPasscodeChangeRetiresTheOldBackup).
            let managementAfter = try await keys.blob(KeyBlob.managementName, endpoint: "laptop")
            let newKey = try PasscodeHardeningTests.managementKey(
                of: managementAfter.data, passcode: "second-passcode", userID: "alice", domain: keys.harness.domain)
            let openedOld = try JWE.decrypt(profileBefore.data, keyEncryptionKey: oldKey)
            let openedNew = try JWE.decrypt(profileAfter.data, keyEncryptionKey: newKey)
            #expect(openedOld.unsafeData() == openedNew.unsafeData(), "the old copy opens the current identity keys")

            let (second, secondCaller) = try await keys.device("phone")
            await #expect(throws: KeyManagementError(.incorrectPasscode, "")) {
                try await second.unlock(passcode: "first-passcode", caller: secondCaller)
            }
            #expect(
                try await second.unlock(passcode: "second-passcode", caller: secondCaller).signing.publicKey
                    == created.signing.publicKey)

            // Two devices change it at once: one wins, the other is told, and the keys survive.
            func attempt(_ body: @Sendable () async throws -> Void) async -> KeyManagementError? {
                do {
                    try await body()
                    return nil
                } catch {
                    return error as? KeyManagementError ?? KeyManagementError(.refused, "\(error)")
                }
            }
            async let a = attempt {
                try await first.changePasscode(from: "second-passcode", to: "passcode-from-a", caller: firstCaller)
            }
            async let b = attempt {
                try await second.changePasscode(from: "second-passcode", to: "passcode-from-b", caller: secondCaller)
            }
            let results = await [a, b]
            let failures = results.compactMap { $0 }
            #expect(failures.count <= 1 && failures.allSatisfy { $0.code == .conflict || $0.code == .incorrectPasscode })
            let winners = zip(["passcode-from-a", "passcode-from-b"], results).filter { $0.1 == nil }.map(\.0)
            let (third, thirdCaller) = try await keys.device("tablet")
            let opened = try await third.unlock(passcode: try #require(winners.last), caller: thirdCaller)
            #expect(opened.signing.publicKey == created.signing.publicKey)
        }
    }

    /// After a passcode change, a copy of both old blobs with the old passcode opens nothing: the
    /// domain evaluates no passcode under the key version they were made with. Only the identity
    /// key retires a version, so a stolen token cannot strand the user's backup.
    @Test func aPasscodeChangeRetiresTheOldBackup() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let domain = keys.harness.domain
            let (laptop, laptopCaller) = try await keys.device("laptop")
            let created = try await laptop.createKeys(passcode: "first-passcode", caller: laptopCaller)
            let profileBefore = try await keys.blob(KeyBlob.profileName, endpoint: "laptop")
            let managementBefore = try await keys.blob(KeyBlob.managementName, endpoint: "laptop")
            try await laptop.changePasscode(from: "first-passcode", to: "second-passcode", caller: laptopCaller)
            let profileAfter = try await keys.blob(KeyBlob.profileName, endpoint: "laptop")
            let managementAfter = try await keys.blob(KeyBlob.managementName, endpoint: "laptop")
            let oldKeyID = try #require(try JWE.header(of: managementBefore.data).oprf?.keyID)
            let newKeyID = try #require(try JWE.header(of: managementAfter.data).oprf?.keyID)
            #expect(PasscodeKeyID(oldKeyID)?.version == 1 && PasscodeKeyID(newKeyID)?.version == 2, "\(oldKeyID) → \(newKeyID)")

            // The old version is evaluated no more, and asking costs no attempt.
            let blinded = try OPRF.passcodeHardening.blind(SecureBytes(randomCount: 32))
            let refused = await #expect(throws: DomainError.self) {
                try await domain.evaluatePasscode(
                    token: keys.token, endpointID: "laptop", blindedElement: blinded.element, keyID: oldKeyID)
            }
            #expect(refused?.code == .notFound && refused?.reason.contains("retired") == true)

            // A thief with a copy of the old blobs (put back where a device reads them) and the old
            // passcode, through the SDK as any device: nothing opens.
            let (thief, thiefCaller) = try await keys.device("thief")
            try keys.overwrite(KeyBlob.profileName, with: profileBefore.data)
            try keys.overwrite(KeyBlob.managementName, with: managementBefore.data)
            let stolen = await #expect(throws: KeyManagementError.self) {
                try await thief.unlock(passcode: "first-passcode", caller: thiefCaller)
            }
            #expect(stolen?.domainCode == .notFound, "\(String(describing: stolen))")
            try keys.overwrite(KeyBlob.profileName, with: profileAfter.data)
            try keys.overwrite(KeyBlob.managementName, with: managementAfter.data)

            // A stolen token cannot retire a version: the identity key must sign it.
            let attempt = try await domain.evaluatePasscode(
                token: keys.token, endpointID: "thief", blindedElement: blinded.element, keyID: nil)
            #expect(attempt.requested.keyID == newKeyID)
            let forged = try Ed25519.PrivateKey().signature(
                for: passcodeRetireMessage(userID: "alice", endpointID: "thief", challenge: attempt.challenge, version: 3))
            await #expect(throws: DomainError.self) {
                try await domain.retirePasscodeKeys(
                    token: keys.token, endpointID: "thief", challenge: attempt.challenge, signature: forged, version: 3)
            }
            // Nor jump versions, even signed.
            let signed = try created.signing.signature(
                for: passcodeRetireMessage(userID: "alice", endpointID: "thief", challenge: attempt.challenge, version: 4))
            let jump = await #expect(throws: DomainError.self) {
                try await domain.retirePasscodeKeys(
                    token: keys.token, endpointID: "thief", challenge: attempt.challenge, signature: signed, version: 4)
            }
            #expect(jump?.code == .conflict)

            // The current backup and passcode open on a new device, and a second change retires again.
            let (phone, phoneCaller) = try await keys.device("phone")
            #expect(
                try await phone.unlock(passcode: "second-passcode", caller: phoneCaller).signing.publicKey
                    == created.signing.publicKey)
            try await phone.changePasscode(from: "second-passcode", to: "third-passcode", caller: phoneCaller)
            let third = try #require(try JWE.header(of: try await keys.blob(KeyBlob.managementName, endpoint: "phone").data).oprf)
            #expect(PasscodeKeyID(third.keyID)?.version == 3)
            await #expect(throws: KeyManagementError.self) {
                try await thief.unlock(passcode: "second-passcode", caller: thiefCaller)
            }
        }
    }

    @Test func forgottenPasscodeResetsTheIdentity() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            // No delay: the delay has its own tests (PasscodeHardeningTests).
            let keys = try await KeyHarness(directory, policy: DomainPolicy(passwordIterations: 1000, identityResetDelay: 0))
            let (first, firstCaller) = try await keys.device("laptop")
            let old = try await first.createKeys(passcode: "first-passcode", caller: firstCaller)
            let (second, secondCaller) = try await keys.device("phone")
            let fresh = try await second.resetKeys(newPasscode: "brand-new-passcode", caller: secondCaller)
            #expect(fresh.keyVersion == 2 && fresh.signing.publicKey != old.signing.publicKey)
            #expect(try keys.harness.domain.publishedIdentity(of: "alice")?.keyVersion == 2)
            await #expect(throws: DomainError(.endpointRemoved, "")) {
                try await keys.harness.domain.checkIn(token: keys.token, endpointID: "laptop")
            }
            let (third, thirdCaller) = try await keys.device("tablet")
            await #expect(throws: KeyManagementError(.incorrectPasscode, "")) {
                try await third.unlock(passcode: "first-passcode", caller: thirdCaller)
            }
            #expect(try await third.unlock(passcode: "brand-new-passcode", caller: thirdCaller).keyVersion == 2)
        }
    }

    @Test func hostileBlobsAreRefusedAndChangeNothing() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let (first, firstCaller) = try await keys.device("laptop")
            _ = try await first.createKeys(passcode: "first-passcode", caller: firstCaller)
            let (second, caller) = try await keys.device("phone")
            let original = try await keys.blob(KeyBlob.managementName, endpoint: "laptop")

            func replaceManagement(_ data: Data) async throws {
                try keys.overwrite(KeyBlob.managementName, with: data)
            }
            // A flipped tag bit reads as a wrong passcode (the domain cannot tell them apart either).
            var object = try JSONSerialization.jsonObject(with: original.data) as! [String: Any]
            var tag = try Data(base64URLEncoded: object["tag"] as! String)
            tag[0] ^= 1
            object["tag"] = tag.base64URLEncodedString()
            try await replaceManagement(try JSONSerialization.data(withJSONObject: object))
            await #expect(throws: KeyManagementError(.incorrectPasscode, "")) {
                try await second.unlock(passcode: "first-passcode", caller: caller)
            }
            // Truncated: malformed.
            try await replaceManagement(original.data.prefix(original.data.count / 2))
            await #expect(throws: KeyManagementError(.corruptKeys, "")) {
                try await second.unlock(passcode: "first-passcode", caller: caller)
            }
            // An absurd p2c is refused before any work.
            var absurd = try JSONSerialization.jsonObject(with: original.data) as! [String: Any]
            let header = #"{"alg":"PBES2-HS512+A256KW","enc":"A256GCM","p2c":900000000,"p2s":"AAAAAAAAAAAAAAAAAAAAAA"}"#
            absurd["protected"] = Data(header.utf8).base64URLEncodedString()
            try await replaceManagement(try JSONSerialization.data(withJSONObject: absurd))
            await #expect(throws: KeyManagementError(.corruptKeys, "")) {
                try await second.unlock(passcode: "first-passcode", caller: caller)
            }
            #expect(try second.localKeys(userID: "alice") == nil, "nothing was applied")
            // Restored, it works again.
            try await replaceManagement(original.data)
            #expect(try await second.unlock(passcode: "first-passcode", caller: caller).userID == "alice")

            // A profile blob swapped for keys that are not the published identity is refused.
            let profile = try await keys.blob(KeyBlob.profileName, endpoint: "laptop")
            var tampered = try JSONSerialization.jsonObject(with: profile.data) as! [String: Any]
            var ciphertext = try Data(base64URLEncoded: tampered["ciphertext"] as! String)
            ciphertext[3] ^= 0x40
            tampered["ciphertext"] = ciphertext.base64URLEncodedString()
            try keys.overwrite(KeyBlob.profileName, with: try JSONSerialization.data(withJSONObject: tampered))
            await #expect(throws: KeyManagementError(.corruptKeys, "")) {
                try await second.unlock(passcode: "first-passcode", caller: caller)
            }
        }
    }

    /// An app keeping the blobs itself (`useBlackBerryKMS` false).
    final class MemoryStorage: BBMKeyStorageProvider {
        let blobs = Locked<[String: KeyBlob]>([:])
        func fetch(name: String, token: String, endpointID: String) async throws -> BlobFetch {
            BlobFetch(blob: blobs.withLock { $0[name] })
        }
        func store(
            name: String, data: Data, expectedVersion: Int?, proof: KeyBlobProof?, token: String, endpointID: String
        ) async throws -> Int {
            try blobs.withLock { blobs in
                guard blobs[name]?.version == expectedVersion else { throw DomainError(.conflict, "version moved") }
                let next = (expectedVersion ?? 0) + 1
                blobs[name] = KeyBlob(name: name, data: data, version: next)
                return next
            }
        }
        func store(_ writes: [KeyBlobWrite], proof: KeyBlobProof?, token: String, endpointID: String) async throws {
            try blobs.withLock { blobs in
                guard writes.allSatisfy({ blobs[$0.name]?.version == $0.expectedVersion }) else {
                    throw DomainError(.conflict, "a version moved")
                }
                for write in writes {
                    blobs[write.name] = KeyBlob(name: write.name, data: write.data, version: (write.expectedVersion ?? 0) + 1)
                }
            }
        }
    }

    @Test func anAppCanKeepTheBlobsItself() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let storage = MemoryStorage()
            _ = try await keys.harness.domain.registerEndpoint(
                token: keys.token, registration: .init(endpointID: "x", description: "x"))
            let caller = BBMKeyManager.Caller(token: keys.token, userID: "alice", endpointID: "x")
            let manager = BBMKeyManager(
                domain: keys.harness.domain, store: try keys.harness.store("x"), storage: storage, unsafePasscodeIterations: 1000)
            let created = try await manager.createKeys(passcode: "app-side-passcode", caller: caller)
            #expect(storage.blobs.withLock { Set($0.keys) } == [KeyBlob.managementName, KeyBlob.profileName])
            #expect(
                try await keys.harness.domain.fetchKeyBlob(token: keys.token, endpointID: "x", name: KeyBlob.profileName).blob
                    == nil)
            try manager.wipeLocalKeys()
            #expect(
                try await manager.unlock(passcode: "app-side-passcode", caller: caller).signing.publicKey
                    == created.signing.publicKey)
        }
    }

    /// The domain's key store, with a hook run once: before the first read of the profile blob
    /// (after the passcode's attempt), or right after the first read of the management blob
    /// (before it).
    final class InterleavingStorage: BBMKeyStorageProvider {
        let inner: DomainKeyStorage
        let hook: Locked<(@Sendable () async throws -> Void)?>
        let afterManagementRead: Bool

        init(
            domain: any DomainService, afterManagementRead: Bool = false,
            beforeProfileRead hook: @escaping @Sendable () async throws -> Void
        ) {
            inner = DomainKeyStorage(domain: domain)
            self.hook = Locked(hook)
            self.afterManagementRead = afterManagementRead
        }
        private func takeHook() -> (@Sendable () async throws -> Void)? {
            hook.withLock { hook in
                defer { hook = nil }
                return hook
            }
        }
        func fetch(name: String, token: String, endpointID: String) async throws -> BlobFetch {
            if afterManagementRead {
                let fetched = try await inner.fetch(name: name, token: token, endpointID: endpointID)
                if name == KeyBlob.managementName, let hook = takeHook() { try await hook() }
                return fetched
            }
            if name == KeyBlob.profileName, let hook = takeHook() { try await hook() }
            return try await inner.fetch(name: name, token: token, endpointID: endpointID)
        }
        func store(
            name: String, data: Data, expectedVersion: Int?, proof: KeyBlobProof?, token: String, endpointID: String
        ) async throws -> Int {
            try await inner.store(
                name: name, data: data, expectedVersion: expectedVersion, proof: proof, token: token, endpointID: endpointID)
        }
        func store(_ writes: [KeyBlobWrite], proof: KeyBlobProof?, token: String, endpointID: String) async throws {
            try await inner.store(writes, proof: proof, token: token, endpointID: endpointID)
        }
    }

    /// Two devices change the passcode, the second's steps falling at each point of the
    /// first's: after the phone read the management blob (its attempt then meets a key the
    /// laptop's change retired) and after its attempt (its proof meets the retired key). Each
    /// time the phone is told `conflict`, not `refused`, and the laptop's change stands whole.
    @Test func aPasscodeChangedElsewhereDuringAChangeIsAConflict() async throws {
        for afterManagementRead in [true, false] {
            try await Fixtures.withTemporaryDirectory { directory in
                let keys = try await KeyHarness(directory)
                let (laptop, laptopCaller) = try await keys.device("laptop")
                let created = try await laptop.createKeys(passcode: "first-passcode", caller: laptopCaller)
                _ = try await keys.harness.domain.registerEndpoint(
                    token: keys.token, registration: .init(endpointID: "phone", description: "phone"))
                let storage = InterleavingStorage(domain: keys.harness.domain, afterManagementRead: afterManagementRead) {
                    try await laptop.changePasscode(from: "first-passcode", to: "second-passcode", caller: laptopCaller)
                }
                let phone = BBMKeyManager(
                    domain: keys.harness.domain, store: try keys.harness.store("phone"), storage: storage,
                    unsafePasscodeIterations: 1000)
                let phoneCaller = BBMKeyManager.Caller(token: keys.token, userID: "alice", endpointID: "phone")
                await #expect(
                    throws: KeyManagementError(.conflict, ""), "interleaved after the management read: \(afterManagementRead)"
                ) {
                    try await phone.changePasscode(from: "first-passcode", to: "phone-passcode", caller: phoneCaller)
                }
                let (tablet, tabletCaller) = try await keys.device("tablet")
                await #expect(throws: KeyManagementError(.incorrectPasscode, "")) {
                    try await tablet.unlock(passcode: "phone-passcode", caller: tabletCaller)
                }
                #expect(
                    try await tablet.unlock(passcode: "second-passcode", caller: tabletCaller).signing.publicKey
                        == created.signing.publicKey)
            }
        }
    }

    @Test func aPasscodeChangeBetweenTheTwoReadsIsAConflictNotCorruption() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let keys = try await KeyHarness(directory)
            let (laptop, laptopCaller) = try await keys.device("laptop")
            let created = try await laptop.createKeys(passcode: "first-passcode", caller: laptopCaller)
            _ = try await keys.harness.domain.registerEndpoint(
                token: keys.token, registration: .init(endpointID: "phone", description: "phone"))
            let storage = InterleavingStorage(domain: keys.harness.domain) {
                try await laptop.changePasscode(from: "first-passcode", to: "second-passcode", caller: laptopCaller)
            }
            let phone = BBMKeyManager(
                domain: keys.harness.domain, store: try keys.harness.store("phone"), storage: storage,
                unsafePasscodeIterations: 1000)
            let phoneCaller = BBMKeyManager.Caller(token: keys.token, userID: "alice", endpointID: "phone")
            await #expect(throws: KeyManagementError(.conflict, "")) {
                try await phone.unlock(passcode: "first-passcode", caller: phoneCaller)
            }
            #expect(try phone.localKeys(userID: "alice") == nil)
            #expect(
                try await phone.unlock(passcode: "second-passcode", caller: phoneCaller).signing.publicKey
                    == created.signing.publicKey)
        }
    }
}
