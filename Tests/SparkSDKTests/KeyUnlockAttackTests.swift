import Foundation
import SparkCrypto
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkDomain
@testable import SparkDomainEngine
@testable import SparkSDK

/// Unlocking checks that the keys in the backup are the user's published identity: a profile
/// blob that opens with the right management key but holds other keys is refused, and nothing
/// of it is kept.
@Suite("Keys: a substituted profile")
struct KeyUnlockAttackTests {
    @Test func aProfileThatOpensButHoldsOtherKeysIsRefused() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (laptop, _) = try await world.endpoint("alice", "alice-laptop")
            let published = try #require(await laptop.keys).publishedIdentity()
            // Whoever holds the management key (here the test, from the passcode) re-encrypts a
            // profile of other keys under it: the blob then opens without any error.
            let blobs = try await world.domain.store.read { db in
                try db.rows("SELECT name, data FROM key_blobs WHERE user_id = 'alice'").map {
                    (try $0.get(0, as: String.self), try $0.get(1, as: Data.self))
                }
            }
            let management = try #require(blobs.first { $0.0 == KeyBlob.managementName }?.1)
            let managementKey = try PasscodeHardeningTests.managementKey(
                of: management, passcode: "alice-passcode", userID: "alice", domain: world.domain)
            let impostor = try UnlockedKeys.generate(userID: "alice", keyVersion: 1)
            let substituted = try JWE.encrypt(
                impostor.profileJWKSet().jsonData(), keyEncryptionKey: managementKey, keyID: "management",
                contentType: "jwk-set+json")
            try await world.domain.store.write { db in
                try db.execute(
                    "UPDATE key_blobs SET data = ? WHERE user_id = 'alice' AND name = ?", [substituted, KeyBlob.profileName])
            }
            let phone = try await world.devices.service("alice-phone")
            let store = try EndpointStore(directory: directory.appendingPathComponent("alice-phone-manager"))
            let manager = BBMKeyManager(domain: world.domain, store: store, unsafePasscodeIterations: 1000)
            _ = try await world.devices.begin(phone)
            let caller = BBMKeyManager.Caller(
                token: try await world.domain.testToken(userID: "alice").token, userID: "alice",
                endpointID: try await phone.endpointID)
            do {
                _ = try await manager.unlock(passcode: "alice-passcode", caller: caller)
                Issue.record("a profile of other keys was accepted")
            } catch let error as KeyManagementError {
                #expect(error.code == .corruptKeys && error.reason.contains("published identity"), "\(error)")
            }
            #expect(try manager.localKeys(userID: "alice") == nil, "nothing was kept")
            // The published identity is untouched, and the real profile still unlocks.
            try await world.domain.store.write { db in
                let original = try #require(blobs.first { $0.0 == KeyBlob.profileName }?.1)
                try db.execute(
                    "UPDATE key_blobs SET data = ? WHERE user_id = 'alice' AND name = ?", [original, KeyBlob.profileName])
            }
            let keys = try await manager.unlock(passcode: "alice-passcode", caller: caller)
            #expect(keys.signing.publicKey.rawRepresentation == published.signingKey)
        }
    }
}
