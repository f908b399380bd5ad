import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkLock
import SparkMLS
import SparkTestSupport
import Testing

@testable import SparkSDK

/// Endpoints on a domain that lies where the test tells it to (``HostileDomain``).
struct HostileWorld {
    let directory: URL
    let real: EmbeddedDomain
    let domain: HostileDomain
    /// Where the devices keep their chats.
    let messaging: MessagingStoreKind
    let memoryStores = Locked<[String: MemoryMessagingStore]>([:])
    /// Everything posted through the domain, as the attacker sees it.
    var posted: Locked<[(chatID: String, kind: MailboxKind, payload: Data)]> { domain.posted }

    init(
        _ directory: URL, messaging: MessagingStoreKind = .sqlite, policy: DomainPolicy = DomainPolicy(passwordIterations: 1000)
    ) throws {
        self.directory = directory
        self.messaging = messaging
        real = try EmbeddedDomain.create(
            at: directory.appendingPathComponent("domain.sqlite").path, domainID: "hostile", policy: policy,
            allowUnsafePasswordHashing: true)
        domain = HostileDomain(real)
    }

    /// A device of `user`, set up with the user's passcode (`reset` makes a new identity, as a
    /// user who forgot it does).
    func endpoint(_ user: String, _ device: String, reset: Bool = false, auditor: Data? = nil) async throws -> (
        BBMEnterpriseService, BBMAccess
    ) {
        let store = try EndpointStore(directory: directory.appendingPathComponent(device))
        messaging.apply(to: store, device: device, stores: memoryStores)
        let service = BBMEnterpriseService(
            store: store, endpointDescription: device, unsafePasscodeIterations: 1000, checkInInterval: .milliseconds(50),
            transparencyAuditorKey: auditor)
        try await service.start(domain: domain, environment: .sandbox)
        await service.sendAuthToken(try await real.testToken(userID: user).token, userIdentifier: user)
        let state = await service.waitForSettledState()
        try await service.syncStart(
            passcode: "\(user)-passcode", action: reset ? .reset : state.syncPasscodeState == .new ? .new : .existing)
        let settled = await service.waitForSettledState()
        guard settled.setupState == .success else { throw MessagingError(.notReady, "setup of \(device) ended in \(settled)") }
        return (service, try await service.messaging())
    }

    /// An attacker's stand-in for `user`: identity keys of its own, the self-signed identity
    /// it publishes instead of theirs, and a device of that identity with a KeyPackage it hands
    /// out as theirs.
    struct Impostor {
        let keys: UnlockedKeys
        let identity: PublishedIdentity
        let bundle: MLSKeyPackageBundle
        var claimed: ClaimedKeyPackage {
            ClaimedKeyPackage(endpointID: "\(keys.userID)-impostor", keyPackage: bundle.keyPackage, lastResort: true)
        }
    }

    static func impostor(of user: String) throws -> Impostor {
        let keys = try UnlockedKeys.generate(userID: user, keyVersion: 1)
        let device = try Ed25519.PrivateKey()
        let credential = try DeviceCredential.issue(
            userID: user, deviceID: "\(user)-impostor", signatureKey: device.publicKey.rawRepresentation, identityKeyVersion: 1,
            identityKey: keys.signing)
        var random = MLSSystemRandom()
        // Of the post-quantum suite, as the chats it tries to get into are.
        let bundle = try MLSKeyPackageBundle(
            signer: MLSSigner(credential: credential.mlsCredential, key: device), suite: .xWingAES128GCMSHA256Ed25519,
            alsoSupported: [.x25519AES128GCMSHA256Ed25519], now: Date(), random: &random)
        return Impostor(keys: keys, identity: try keys.publishedIdentity(), bundle: bundle)
    }

    /// Has the domain hand out the impostor's identity and KeyPackage as `user`'s.
    func substitute(_ impostor: Impostor?, for user: String) {
        domain.substitutedIdentities.withLock { $0[user] = impostor?.identity }
        domain.substitutedKeyPackages.withLock { $0[user] = impostor.map { [$0.claimed] } }
    }

    /// How many Welcomes posted from `start` on admit the impostor's device (name its KeyPackage).
    func welcomesAdmitting(_ impostor: Impostor, from start: Int = 0) -> Int {
        posted.withLock { Array($0.dropFirst(start)) }.filter { post in
            post.kind == .welcome
                && ((try? MLSGroup.keyPackageReferences(inWelcome: post.payload)) ?? []).contains(impostor.bundle.reference)
        }.count
    }
}

@Suite("Identities: verification, changes held, a domain that substitutes keys")
struct IdentityVerificationTests {
    @Test func safetyNumbersAgreeAndConfirmingOneMarksTheContactVerified() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            let number = try await alice.safetyNumber(with: "bob")
            #expect(try await bob.safetyNumber(with: "alice") == number, "both sides show the same number")
            #expect(try await alice.contact("bob").verification == .unverified, "trusted on first use, not verified")

            // A misread number marks nothing.
            var digits = Array(number.digits)
            digits[7] = digits[7] == "0" ? "1" : "0"
            let misread = try #require(SafetyNumber(digits: String(digits)))
            await #expect(throws: MessagingError(.safetyNumberMismatch, "")) {
                try await alice.confirmSafetyNumber(misread, of: "bob")
            }
            #expect(try await alice.contact("bob").verification == .unverified)

            try await alice.confirmSafetyNumber(number, of: "bob")
            #expect(try await alice.contact("bob").verification == .verified)
            #expect(try await alice.participants(of: chat.chatID).first { $0.userID == "bob" }?.verification == .verified)
            // Accepting a verified contact again changes nothing.
            try await alice.acceptIdentityChange(of: "bob")
            #expect(try await alice.contact("bob").verification == .verified)
        }
    }

    /// The domain publishes its own key as bob's. Alice's device notices at the next key
    /// rotation, seals nothing to the substitute, holds what she sends, and the safety number no
    /// longer matches bob's. Once the domain publishes bob's key again, what was held goes to bob.
    @Test func aSubstitutedIdentityKeyGetsNothingAndHoldsSendingUntilTheDomainBehaves() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            _ = try await world.endpoint("carol", "carol-laptop")
            let chat = try await alice.startChat(with: ["bob"], subject: "plans")
            try await alice.sendMessage("before", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob reads it") { bobMessages.value.map(\.content) == ["before"] })
            let genuine = try await bob.safetyNumber(with: "alice")
            let aliceMessages = try await alice.messages(in: chat.chatID)
            #expect(await waitFor("bob's receipt came") { aliceMessages.value.first?.state == .delivered })

            let impostor = try HostileWorld.impostor(of: "bob")
            world.substitute(impostor, for: "bob")
            let start = world.posted.withLock { $0.count }
            let events = EventRecorder(alice)

            // A membership change looks every member up again: bob's key is now the impostor's,
            // so the invitation is refused before anything is posted.
            await #expect(throws: MessagingError(.identityUnconfirmed, "")) { try await alice.invite(["carol"], to: chat.chatID) }
            #expect(await waitFor("the change is reported") { events.value.contains(.identityChanged(userID: "bob")) })
            #expect(try await alice.contact("bob").verification == .changed)
            #expect(try await alice.chat(chat.chatID).unconfirmedParticipants == ["bob"])
            #expect(try await alice.safetyNumber(with: "bob") != genuine, "comparing numbers exposes the substitution")

            // Below the held state: nothing at all is sealed in a group holding a device this
            // device does not trust (a commit applied mid-send is caught there).
            await #expect(throws: MessagingError(.identityUnconfirmed, "")) {
                try await alice.messenger.outbox.seal(ChatPayload(kind: .text, id: "probe", content: "x"), in: chat.chatID)
            }
            // What alice sends now is held; a subject change is refused.
            let held = try await alice.sendMessage("during", to: chat.chatID)
            #expect(held.state == .held)
            await #expect(throws: MessagingError(.identityUnconfirmed, "")) {
                try await alice.updateChatSubject(chat.chatID, subject: "new plans")
            }
            // Confirming the number bob reads out does not trust the substitute.
            await #expect(throws: MessagingError(.safetyNumberMismatch, "")) {
                try await alice.confirmSafetyNumber(genuine, of: "bob")
            }
            #expect(world.posted.withLock { $0.count } == start, "nothing was posted while bob's key was substituted")
            #expect(world.welcomesAdmitting(impostor) == 0, "the attacker's device is in no Welcome ever posted")

            // The domain behaves again: alice's next send sees bob's key, and both messages go.
            world.substitute(nil, for: "bob")
            try await alice.sendMessage("after", to: chat.chatID)
            #expect(
                await waitFor("bob reads both, in order") { bobMessages.value.map(\.content) == ["before", "during", "after"] })
            #expect(try await alice.contact("bob").verification == .unverified)
            #expect(try await alice.messenger.message(id: held.id).state.isAccepted)
        }
    }

    /// Under the policy that holds first contacts, nothing is sealed to a new contact's key until
    /// the user accepts it; the policy is kept in the endpoint's store.
    @Test func aFirstContactIsHeldUnderThePolicyThatSaysSo() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            #expect(try await alice.identityTrustPolicy() == .trustOnFirstUse)
            try await alice.setIdentityTrustPolicy(.confirmFirstContact)
            #expect(try await alice.identityTrustPolicy() == .confirmFirstContact)
            await #expect(throws: MessagingError(.identityUnconfirmed, "")) { try await alice.startChat(with: ["bob"]) }
            #expect(try await alice.contact("bob").verification == .unconfirmed)
            #expect(alice.chats.value.isEmpty, "no chat was made")
            try await alice.confirmSafetyNumber(try await bob.safetyNumber(with: "alice"), of: "bob")
            let chat = try await alice.startChat(with: ["bob"])
            try await alice.sendMessage("hi", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob reads it") { bobMessages.value.map(\.content) == ["hi"] })
        }
    }

    /// The user accepts a changed key (a real reset, as far as they know: the log holds it, so
    /// only bob's own devices can tell it is not his): what was held is sealed to the new key and
    /// sent.
    @Test func acceptingAChangeSendsWhatWasHeld() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            _ = try await world.endpoint("carol", "carol-laptop")
            let chat = try await alice.startChat(with: ["bob"])
            let impostor = try HostileWorld.impostor(of: "bob")
            try await world.logForged(impostor.identity)
            world.domain.substitutedKeyPackages.withLock { $0["bob"] = [impostor.claimed] }
            await #expect(throws: MessagingError(.identityUnconfirmed, "")) { try await alice.invite(["carol"], to: chat.chatID) }
            let held = try await alice.sendMessage("held", to: chat.chatID)
            #expect(held.state == .held)
            let start = world.posted.withLock { $0.count }
            try await alice.acceptIdentityChange(of: "bob")
            #expect(try await alice.contact("bob").verification == .unverified)
            let aliceMessages = try await alice.messages(in: chat.chatID)
            #expect(await waitFor("sent") { aliceMessages.value.first { $0.id == held.id }?.state.isAccepted == true })
            // Accepting is the user's decision to trust the new key: alice (the chat's admin)
            // replaces bob's devices of the old identity with the new identity's device.
            #expect(world.welcomesAdmitting(impostor, from: start) == 1)
            let participants = try await alice.messenger.chats.groupDevices(of: chat.chatID)
            #expect(participants.filter { $0.user == "bob" }.map(\.device) == ["bob-impostor"])
        }
    }
}
