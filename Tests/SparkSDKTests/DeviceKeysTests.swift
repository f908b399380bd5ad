import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkMLS
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkSDK

/// Each device's own MLS key, its cross-signed credential and its KeyPackages in the domain,
/// used end to end: a member adds a device from the KeyPackage the domain hands out, and the
/// device joins with the private half it kept.
@Suite("Devices: MLS credentials and KeyPackages")
struct DeviceKeysTests {
    /// Waits until `endpoint` has `count` one-time KeyPackages in the domain.
    static func waitForKeyPackages(_ count: Int, _ domain: any DomainService, user: String, endpoint: String) async throws
        -> Bool
    {
        let token = try await domain.testToken(userID: user).token
        for _ in 0..<3000 {
            if try await domain.keyPackageCount(token: token, endpointID: endpoint) == count { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    @Test func aDeviceIsAddedFromItsKeyPackageAndJoinsWithWhatItKept() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (aliceService, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
            let bobEndpoint = try await bobService.endpointID
            #expect(try await Self.waitForKeyPackages(DeviceKeys.oneTimeTarget, world.real, user: "bob", endpoint: bobEndpoint))

            // The device's key is its own, kept, and its credential is signed by bob's identity.
            let signer = try await bob.messenger.identities.deviceSigner()
            #expect(try await bob.messenger.identities.deviceSigner().signatureKey == signer.signatureKey)
            #expect(signer.signatureKey != bob.messenger.keys.signing.publicKey.rawRepresentation)

            let aliceToken = try await world.real.testToken(userID: "alice").token
            let aliceEndpoint = try await aliceService.endpointID
            let claimed = try await world.real.claimKeyPackages(token: aliceToken, endpointID: aliceEndpoint, userID: "bob")
            try #require(claimed.count == 1 && claimed[0].endpointID == bobEndpoint && !claimed[0].lastResort)
            let summary = try MLSKeyPackageSummary(claimed[0].keyPackage)
            let credential = try DeviceCredential(encoded: summary.credential.identity)
            #expect(
                credential.userID == "bob" && credential.deviceID == bobEndpoint
                    && credential.signatureKey == summary.signatureKey)
            let bobIdentity = try #require(
                try await world.real.identity(token: aliceToken, endpointID: aliceEndpoint, userID: "bob"))
            let aliceIdentity = try #require(
                try await world.real.identity(token: aliceToken, endpointID: aliceEndpoint, userID: "alice"))
            #expect(credential.isSigned(by: try Ed25519.PublicKey(rawRepresentation: bobIdentity.signingKey)))
            #expect(
                try await world.real.keyPackageCount(token: world.real.testToken(userID: "bob").token, endpointID: bobEndpoint)
                    == DeviceKeys.oneTimeTarget - 1)

            // Alice's device makes a group and adds bob's device; bob's device joins.
            let validator = DeviceCredentialValidator(identityKeys: [
                "alice": aliceIdentity.signingKey, "bob": bobIdentity.signingKey,
            ])
            var random = MLSSystemRandom()
            let group = try MLSGroup.create(
                groupID: Data("chat".utf8), signer: try await alice.messenger.identities.deviceSigner(), validator: validator,
                random: &random)
            let added = try group.commit(adding: [claimed[0].keyPackage], now: Date(), random: &random)
            let welcome = try #require(added.welcome)
            let references = try MLSGroup.keyPackageReferences(inWelcome: welcome)
            #expect(references == [summary.reference])
            let bundle = try #require(try await bob.messenger.identities.keyPackageBundle(reference: references[0]))
            let joined = try MLSGroup.join(welcome: welcome, bundle: bundle, validator: validator)
            #expect(joined.epochAuthenticator == added.group.epochAuthenticator && joined.memberCount == 2)
            // A reference this device never published has no bundle.
            #expect(try await bob.messenger.identities.keyPackageBundle(reference: Data(repeating: 1, count: 32)) == nil)
        }
    }

    @Test func keyPackagesAreToppedUpAndAWipeForgetsTheDeviceKey() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (aliceService, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, _) = try await world.endpoint("bob", "bob-phone")
            let bobEndpoint = try await bobService.endpointID
            let aliceEndpoint = try await aliceService.endpointID
            #expect(try await Self.waitForKeyPackages(DeviceKeys.oneTimeTarget, world.real, user: "bob", endpoint: bobEndpoint))
            // Below the low-water mark: claimed by alice, and by bob's own user (each claimer gets
            // a limited number of one-time KeyPackages an hour, then the last-resort one).
            let aliceToken = try await world.real.testToken(userID: "alice").token
            let bobToken = try await world.real.testToken(userID: "bob").token
            for index in 0..<(DeviceKeys.oneTimeTarget - DeviceKeys.lowWater + 1) {
                let (token, endpoint) =
                    index < DomainEngine.oneTimeClaimsPerUserPerHour
                    ? (aliceToken, aliceEndpoint) : (bobToken, bobEndpoint)
                _ = try await world.real.claimKeyPackages(token: token, endpointID: endpoint, userID: "bob")
            }
            #expect(try await Self.waitForKeyPackages(DeviceKeys.lowWater - 1, world.real, user: "bob", endpoint: bobEndpoint))
            // Below the low-water mark, the device tops up to the target at its next check.
            let bob = try await bobService.messaging()
            try await bob.messenger.identities.ensureKeyPackages()
            #expect(try await Self.waitForKeyPackages(DeviceKeys.oneTimeTarget, world.real, user: "bob", endpoint: bobEndpoint))

            // Signing out with a wipe forgets the device key and its KeyPackages' private halves.
            _ = try await alice.messenger.identities.deviceSigner()
            let store = try EndpointStore(directory: directory.appendingPathComponent("alice-laptop"))
            let rows = try store.queue.read { db in try db.scalar("SELECT count(*) FROM key_package_bundles", as: Int.self) }
            #expect(rows == (DeviceKeys.oneTimeTarget + 1) * 2, "one-time and last-resort ones of both suites")
            await aliceService.signOut(wipeKeys: true)
            let left = try store.queue.read { db in
                (
                    try db.scalar("SELECT count(*) FROM key_package_bundles", as: Int.self),
                    try db.scalar("SELECT count(*) FROM device_signer", as: Int.self)
                )
            }
            #expect(left.0 == 0 && left.1 == 0)
        }
    }

    // MARK: Security review 8

    /// A device up but idle for a month (its first KeyPackages past their 30 days) is still
    /// invited: the domain hands out no one-time KeyPackage older than two weeks, nor counts it,
    /// so the device's timer tops up, and rotates its last-resort one.
    @Test func aDeviceIdleForAMonthIsStillInvitable() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock(Date().addingTimeInterval(-31 * 86400))
            let world = try ChatWorld(directory, clock: clock.wallClock)
            let (aliceService, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
            let store = try EndpointStore(directory: directory.appendingPathComponent("bob-phone"))
            func lastResorts() throws -> [Date?] {
                try store.queue.read { db in
                    let store = SQLiteMessagingStore(db: db, sealer: store.sealer)
                    return [try store.lastResortMadeAt(suite: 1), try store.lastResortMadeAt(suite: 0xF768)]
                }
            }
            let firstLastResort = try lastResorts()
            #expect(!firstLastResort.contains(nil), "a last-resort KeyPackage of each suite from the start")
            func pass(_ days: Double) async throws {
                clock.advance(by: days * 86400)
                for (service, user) in [(aliceService, "alice"), (bobService, "bob")] {
                    await service.sendAuthToken(try await world.domain.testToken(userID: user).token, userIdentifier: user)
                }
                // Bob's device looks at its KeyPackages on its timer.
                try await bob.messenger.identities.ensureKeyPackages()
            }
            // A week on, the last-resort KeyPackage is replaced (before it could expire).
            try await pass(8)
            let rotated = try lastResorts()
            #expect(
                !rotated.contains(nil) && zip(rotated, firstLastResort).allSatisfy { $0 != $1 },
                "the last-resort KeyPackage of each suite was replaced")
            try await pass(23)
            let bobToken = try await world.domain.testToken(userID: "bob").token
            let bobEndpoint = try await bobService.endpointID
            for suite: UInt16 in [1, 0xF768] {
                let fresh = try await world.domain.keyPackageCount(token: bobToken, endpointID: bobEndpoint, suite: suite)
                #expect(fresh == DeviceKeys.oneTimeTarget, "the one-time ones of suite \(suite) were topped up with fresh ones")
            }
            let chat = try await alice.startChat(with: ["bob"], subject: "A month later")
            #expect(await waitFor("bob is in it") { bob.chats.value.map(\.chatID) == [chat.chatID] })
        }
    }

    /// One user claiming another's KeyPackages again and again gets one-time ones only up to a
    /// limit, then the last-resort one: the victim's one-time KeyPackages are not drained, and
    /// another claimer still gets them.
    @Test func noOneDrainsAnothersOneTimeKeyPackages() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (aliceService, _) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, _) = try await world.endpoint("bob", "bob-phone")
            let (carolService, _) = try await world.endpoint("carol", "carol-phone")
            let bobEndpoint = try await bobService.endpointID
            #expect(try await Self.waitForKeyPackages(DeviceKeys.oneTimeTarget, world.real, user: "bob", endpoint: bobEndpoint))
            let carol = try await world.real.testToken(userID: "carol").token
            let carolEndpoint = try await carolService.endpointID
            var oneTime = 0
            for _ in 0..<(DomainEngine.oneTimeClaimsPerUserPerHour + 5) {
                let claimed = try await world.real.claimKeyPackages(token: carol, endpointID: carolEndpoint, userID: "bob")
                oneTime += claimed.filter { !$0.lastResort }.count
            }
            #expect(oneTime == DomainEngine.oneTimeClaimsPerUserPerHour, "then the last-resort one")
            #expect(DomainEngine.oneTimeClaimsPerUserPerHour < DeviceKeys.oneTimeTarget)
            // Another claimer still gets a one-time KeyPackage.
            let aliceToken = try await world.real.testToken(userID: "alice").token
            let claimed = try await world.real.claimKeyPackages(
                token: aliceToken, endpointID: try await aliceService.endpointID, userID: "bob")
            #expect(claimed.map(\.lastResort) == [false])
        }
    }

    /// After a device leaves a chat, a replay of the Welcome that added it (through its
    /// last-resort KeyPackage, which it keeps) does not bring it back at the old epoch.
    @Test func aReplayedWelcomeDoesNotRejoinALeftChat() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (aliceService, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
            // Bob's one-time KeyPackages are gone: the chat adds him with his last-resort one.
            let aliceToken = try await world.real.testToken(userID: "alice").token
            let aliceEndpoint = try await aliceService.endpointID
            while try await world.real.claimKeyPackages(token: aliceToken, endpointID: aliceEndpoint, userID: "bob")
                .contains(where: { !$0.lastResort })
            {}
            let events = EventRecorder(bob)
            let chat = try await alice.startChat(with: ["bob"], subject: "Plans")
            #expect(await waitFor("bob joins") { bob.chats.value.first?.isActive == true })
            try await bob.leaveChat(chat.chatID)
            let welcome = try #require(
                try await HostileDomainTests.mailbox(world, bobService, "bob").first {
                    $0.kind == .welcome && $0.chatID == chat.chatID
                })
            try HostileDomainTests.inject(world, welcome, to: "bob")
            try await bob.refresh()
            #expect(
                await waitFor("the replay is dropped") {
                    events.value.contains { if case .dropped(chat.chatID, _) = $0 { true } else { false } }
                })
            #expect(bob.chats.value.first?.isActive == false)
            #expect(try await bob.messenger.chats.storedGroup(chat.chatID) == nil)
        }
    }
}
