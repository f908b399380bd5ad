import Foundation
import SparkCrypto
import SparkDomain
import SparkMLS
import SparkTestSupport
import Testing

@_spi(Fuzzing) @testable import SparkSDK

/// The per-chat MLS core against a domain that misbehaves with the entries it routes: a forged
/// sender, replays, withheld and reordered commits, commits passed off as messages, a removed
/// device that keeps its old state. Each is dropped or waits, no group is changed by what it
/// drops, and the chat goes on once the domain behaves.
@Suite("Chats as MLS groups: the per-chat core")
struct ChatGroupTests {
    struct Member {
        let identity: Ed25519.PrivateKey
        let signer: MLSSigner
        let user: String

        init(_ user: String, _ device: String) throws {
            self.user = user
            identity = try Ed25519.PrivateKey()
            let key = try Ed25519.PrivateKey()
            let credential = try DeviceCredential.issue(
                userID: user, deviceID: device, signatureKey: key.publicKey.rawRepresentation, identityKeyVersion: 1,
                identityKey: identity)
            signer = MLSSigner(credential: credential.mlsCredential, key: key)
        }
    }

    /// Alice's laptop made the chat and added bob's phone and carol's tablet.
    struct World {
        var random = MLSSeededRandom(seed: "chat core")
        let now = Date()
        let alice: Member
        let bob: Member
        let carol: Member
        var groups: [String: ChatGroup] = [:]

        init() throws {
            alice = try Member("alice", "laptop")
            bob = try Member("bob", "phone")
            carol = try Member("carol", "tablet")
            let validator = DeviceCredentialValidator(identityKeys: [
                "alice": alice.identity.publicKey.rawRepresentation, "bob": bob.identity.publicKey.rawRepresentation,
                "carol": carol.identity.publicKey.rawRepresentation,
            ])
            let created = try ChatGroup.create(chatID: "c1", signer: alice.signer, validator: validator, random: &random)
            let bundles = try [bob, carol].map { try MLSKeyPackageBundle(signer: $0.signer, now: now, random: &random) }
            let added = try created.commit(adding: bundles.map(\.keyPackage), removingUsers: [], now: now, random: &random)
            groups["alice"] = added.next
            for (name, bundle) in zip(["bob", "carol"], bundles) {
                groups[name] = try ChatGroup.join(
                    chatID: "c1", welcome: try #require(added.welcome), bundle: bundle, validator: validator)
            }
        }

        static func entry(_ kind: MailboxKind, _ payload: Data, from sender: String, epoch: UInt64? = nil, chat: String = "c1")
            -> MailboxEntry
        {
            MailboxEntry(
                sequence: 1, chatID: chat, sender: sender, kind: kind, messageNumber: kind == .message ? 1 : nil,
                payload: payload,
                members: nil, postedAt: Date(), epoch: epoch.map { Int64($0) })
        }

        mutating func send(_ text: String, from name: String, id: String = UUID().uuidString) throws -> Data {
            try groups[name]!.seal(ChatPayload(kind: .text, id: id, content: text, tag: "Text"), random: &random)
        }

        mutating func receive(_ entry: MailboxEntry, at name: String) -> ChatGroup.Decision {
            groups[name]!.receive(entry, now: now)
        }

        func state(_ name: String) -> Data { groups[name]!.group.serialized().unsafeData() }
    }

    static func text(_ decision: ChatGroup.Decision) -> String? {
        if case .message(let payload, _, _) = decision { return payload.content }
        return nil
    }

    @Test func membersReadEachOtherAndTheSenderIsTheSigningDevice() throws {
        var world = try World()
        #expect(world.groups["bob"]!.devices.map(\.user) == ["alice", "bob", "carol"])
        let message = try world.send("hello", from: "alice", id: "m-1")
        let decision = world.receive(World.entry(.message, message, from: "alice"), at: "bob")
        #expect(
            decision
                == .message(
                    ChatPayload(kind: .text, id: "m-1", content: "hello", tag: "Text"),
                    sender: .init(user: "alice", device: "laptop"), gossip: Data()))
        #expect(Self.text(world.receive(World.entry(.message, message, from: "alice"), at: "carol")) == "hello")
    }

    @Test func aMessagePassedOffAsAnotherUsersIsDroppedAndStillReadableAsItself() throws {
        var world = try World()
        let message = try world.send("from alice", from: "alice")
        let before = world.state("bob")
        #expect(
            world.receive(World.entry(.message, message, from: "carol"), at: "bob")
                == .drop("signed by a device of another user than the domain names (carol)"))
        #expect(world.state("bob") == before, "a dropped entry changes nothing")
        #expect(Self.text(world.receive(World.entry(.message, message, from: "alice"), at: "bob")) == "from alice")
        // A replay of it is refused: its key is used and gone.
        guard case .drop = world.receive(World.entry(.message, message, from: "alice"), at: "bob") else {
            Issue.record("a replayed message was accepted")
            return
        }
    }

    @Test func aWithheldCommitMakesLaterMessagesWaitUntilItComes() throws {
        var world = try World()
        let update = try world.groups["alice"]!.commit(adding: [], removingUsers: [], now: world.now, random: &world.random)
        world.groups["alice"] = update.next
        let epoch = update.next.group.epoch - 1
        let message = try world.send("after the update", from: "alice")
        // The domain withholds the commit from bob and delivers the message first.
        #expect(
            world.receive(World.entry(.message, message, from: "alice"), at: "bob")
                == .retry("for epoch \(epoch + 1), the group is at \(epoch): a commit before it has not arrived"))
        // The commit passed off as a message, or ordered for another epoch, is refused.
        guard case .drop = world.receive(World.entry(.message, update.commit, from: "alice"), at: "bob") else {
            Issue.record("a commit numbered as a message was accepted")
            return
        }
        guard case .drop = world.receive(World.entry(.commit, update.commit, from: "alice", epoch: epoch + 3), at: "bob") else {
            Issue.record("a commit under another epoch was accepted")
            return
        }
        // The domain behaves: the commit, then the message.
        let commit = world.receive(World.entry(.commit, update.commit, from: "alice", epoch: epoch), at: "bob")
        #expect(commit == .commit(added: [], removed: [], by: .init(user: "alice", device: "laptop")))
        #expect(Self.text(world.receive(World.entry(.message, message, from: "alice"), at: "bob")) == "after the update")
        // A replay of the commit, and the committer's own echo, are for an epoch left behind.
        guard case .drop = world.receive(World.entry(.commit, update.commit, from: "alice", epoch: epoch), at: "bob"),
            case .drop = world.receive(World.entry(.commit, update.commit, from: "alice", epoch: epoch), at: "alice")
        else {
            Issue.record("a replayed commit was applied again")
            return
        }
        #expect(world.groups["bob"]!.group.epochAuthenticator == world.groups["alice"]!.group.epochAuthenticator)
    }

    /// Security review 4: a ReInit ends the group for every member, so only an admin's is
    /// applied; a member's is dropped and the group goes on.
    @Test func onlyAnAdminReInitializesTheGroup() throws {
        var world = try World()
        func reInit(by name: String) throws -> Data {
            try world.groups[name]!.group.commit(reInitializingAs: Data("new".utf8), now: world.now, random: &world.random).commit
        }
        let epoch = world.groups["bob"]!.group.epoch
        let byCarol = try reInit(by: "carol")
        #expect(
            world.receive(World.entry(.commit, byCarol, from: "carol", epoch: epoch), at: "bob")
                == .refuseCommit("carol is not an admin: only an admin re-initializes the chat's group"))
        #expect(world.groups["bob"]!.group.isActive && world.groups["bob"]!.group.epoch == epoch)
        let byAlice = try reInit(by: "alice")
        #expect(
            world.receive(World.entry(.commit, byAlice, from: "alice", epoch: epoch), at: "bob")
                == .commit(added: [], removed: [], by: .init(user: "alice", device: "laptop")))
        #expect(!world.groups["bob"]!.group.isActive)
    }

    /// Security review 4: a commit the domain ordered for the group's epoch that every member
    /// refuses is told apart (an admin's device replaces it) from one refused for another epoch
    /// (a replay: dropped), and from one this device refuses only because it does not trust a
    /// credential in it (other members may have applied it: dropped, never replaced).
    @Test func aCommitEveryMemberRefusesIsToldApart() throws {
        var world = try World()
        let epoch = world.groups["bob"]!.group.epoch
        let garbage = Data((0..<300).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        #expect(
            world.receive(World.entry(.commit, garbage, from: "carol", epoch: epoch), at: "bob")
                == .refuseCommit("not a message of this chat's group"))
        #expect(
            world.receive(World.entry(.commit, garbage, from: "carol", epoch: epoch + 1), at: "bob")
                == .drop("not a message of this chat's group"))
        // Carol, no admin, removes bob's phone from the group.
        let removal = try world.groups["carol"]!.commit(
            adding: [], removingUsers: ["bob"], now: world.now, random: &world.random)
        #expect(
            world.receive(World.entry(.commit, removal.commit, from: "carol", epoch: epoch), at: "alice")
                == .refuseCommit("carol is not an admin: only admins change who is in the chat or who the admins are"))
        // Alice adds dave, whom bob's device does not trust: bob drops it, and notes nothing.
        let dave = try Member("dave", "pc")
        let bundle = try MLSKeyPackageBundle(signer: dave.signer, now: world.now, random: &world.random)
        let adding = try world.groups["alice"]!.judged(by: MLSAcceptAnyCredential()).commit(
            adding: [bundle.keyPackage], removingUsers: [], now: world.now, random: &world.random)
        guard case .drop = world.receive(World.entry(.commit, adding.commit, from: "alice", epoch: epoch), at: "bob") else {
            Issue.record("a commit refused for trust alone was taken for one every member refuses")
            return
        }
        #expect(world.groups["bob"]!.group.epoch == epoch, "nothing refused changed the group")
    }

    @Test func aRemovedDeviceReadsNothingAfterItsRemovalEvenWithItsOldState() throws {
        var world = try World()
        let carolBefore = world.groups["carol"]!
        let removal = try world.groups["alice"]!.commit(
            adding: [], removingUsers: ["carol"], now: world.now, random: &world.random)
        world.groups["alice"] = removal.next
        let epoch = removal.next.group.epoch - 1
        let entry = World.entry(.commit, removal.commit, from: "alice", epoch: epoch)
        #expect(
            world.receive(entry, at: "bob")
                == .commit(
                    added: [], removed: [.init(user: "carol", device: "tablet")], by: .init(user: "alice", device: "laptop")))
        #expect(world.receive(entry, at: "carol") == .removed(by: .init(user: "alice", device: "laptop")))
        let secret = try world.send("carol is gone", from: "alice")
        #expect(Self.text(world.receive(World.entry(.message, secret, from: "alice"), at: "bob")) == "carol is gone")
        guard case .drop = world.receive(World.entry(.message, secret, from: "alice"), at: "carol") else {
            Issue.record("a removed device read a message")
            return
        }
        // Carol's device as it was before the removal (it ignored the commit) cannot read it either.
        var old = carolBefore
        #expect(
            old.receive(World.entry(.message, secret, from: "alice"), now: world.now)
                == .retry("for epoch \(epoch + 1), the group is at \(epoch): a commit before it has not arrived"))
        var raw = carolBefore.group
        #expect(throws: MLSError.self) { try raw.process(secret) }
        // And a commit forged in its old epoch by the removed device reaches no one.
        let forged = try carolBefore.commit(adding: [], removingUsers: [], now: world.now, random: &world.random)
        let forgedDecision = world.receive(World.entry(.commit, forged.commit, from: "carol", epoch: epoch), at: "bob")
        guard case .drop = forgedDecision else {
            Issue.record("the removed device's commit was applied: \(forgedDecision)")
            return
        }
    }

    /// Admins are the group's own agreement (a group context extension): a member who is not
    /// an admin cannot remove others or make themselves admin, whatever the domain lets through;
    /// an update needs no admin; once made admin, they can.
    @Test func onlyAnAdminChangesMembersOrAdmins() throws {
        var world = try World()
        #expect(world.groups["bob"]!.admins == ["alice"])
        let epoch = world.groups["bob"]!.group.epoch
        for (admins, removing) in [(nil as Set<String>?, ["carol"] as Set<String>), (["alice", "bob"], [])] {
            let attempt = try world.groups["bob"]!.commit(
                adding: [], removingUsers: removing, admins: admins, now: world.now, random: &world.random)
            for name in ["alice", "carol"] {
                let before = world.state(name)
                #expect(
                    world.receive(World.entry(.commit, attempt.commit, from: "bob", epoch: epoch), at: name)
                        == .refuseCommit("bob is not an admin: only admins change who is in the chat or who the admins are"))
                #expect(world.state(name) == before)
            }
        }
        // Alice makes bob an admin; then bob may remove carol.
        let promotion = try world.groups["alice"]!.commit(
            adding: [], removingUsers: [], admins: ["alice", "bob"], now: world.now, random: &world.random)
        world.groups["alice"] = promotion.next
        for name in ["bob", "carol"] {
            guard case .commit = world.receive(World.entry(.commit, promotion.commit, from: "alice", epoch: epoch), at: name)
            else {
                Issue.record("\(name) refused the admin's commit")
                return
            }
        }
        #expect(world.groups["carol"]!.admins == ["alice", "bob"])
        let removal = try world.groups["bob"]!.commit(adding: [], removingUsers: ["carol"], now: world.now, random: &world.random)
        #expect(
            world.receive(World.entry(.commit, removal.commit, from: "bob", epoch: epoch + 1), at: "alice")
                == .commit(added: [], removed: [.init(user: "carol", device: "tablet")], by: .init(user: "bob", device: "phone")))
    }

    @Test func entriesOfAnotherChatOrNotOfTheGroupAreDropped() throws {
        var world = try World()
        let message = try world.send("hi", from: "alice")
        #expect(
            world.receive(World.entry(.message, message, from: "alice", chat: "c2"), at: "bob")
                == .drop("an entry for another chat"))
        #expect(
            world.receive(World.entry(.message, Data("junk".utf8), from: "alice"), at: "bob")
                == .drop("not a message of this chat's group"))
        #expect(Self.text(world.receive(World.entry(.message, message, from: "alice"), at: "bob")) == "hi")
    }

    @Test func payloadsRoundTripAndAreDecodedStrictly() throws {
        let payloads = [
            ChatPayload(kind: .text, id: "m1", content: "hello", tag: "Text", data: "{}", ref: "m0"),
            ChatPayload(kind: .receipt, id: "r1", ref: "m1", receipt: .read, upTo: 42),
            ChatPayload(kind: .edit, id: "e1", content: "hello!", ref: "m1"),
            ChatPayload(kind: .text, id: "m2", content: "hi", tag: "Text", sequence: 7, withdrawn: [2, 5]),
        ]
        for payload in payloads { #expect(try ChatPayload(encoded: payload.encoded) == payload) }
        #expect(payloads[3].encoded.first == 3, "a text with a sequence is version 3")
        let encoded = payloads[0].encoded
        #expect(throws: MessagingError(.forged, "")) { try ChatPayload(encoded: encoded + Data([0])) }
        #expect(throws: MessagingError(.forged, "")) { try ChatPayload(encoded: encoded.dropLast()) }
        var version = encoded
        version[0] = 2
        #expect(throws: MessagingError(.forged, "")) { try ChatPayload(encoded: version) }
        var kind = encoded
        kind[1] = 9
        #expect(throws: MessagingError(.forged, "")) { try ChatPayload(encoded: kind) }
        // Rules: a receipt names what it covers; an edit names its message; only receipts carry one.
        for bad in [
            ChatPayload(kind: .receipt, id: "r", receipt: .read), ChatPayload(kind: .edit, id: "e", content: "x"),
            ChatPayload(kind: .text, id: "t", receipt: .delivered, upTo: 1), ChatPayload(kind: .text, id: ""),
            ChatPayload(kind: .text, id: String(repeating: "x", count: 65)),
            ChatPayload(kind: .text, id: "big", content: String(repeating: "x", count: ChatPayload.maximumContentSize + 1)),
            // A sequence only on a text; withdrawn ones before it, distinct, at most 64.
            ChatPayload(kind: .text, id: "s", sequence: 3, withdrawn: [3]),
            ChatPayload(kind: .text, id: "s", sequence: 3, withdrawn: [1, 1]),
            ChatPayload(kind: .text, id: "s", sequence: 100, withdrawn: Array(0..<65)),
        ] {
            #expect(throws: MessagingError(.forged, "")) { try bad.validate() }
            #expect(throws: MessagingError(.forged, "")) { try ChatPayload(encoded: bad.encoded) }
        }
        var invalidUTF8 = TLSWriter()
        invalidUTF8.u8(1)
        invalidUTF8.u8(1)
        invalidUTF8.opaque(Data([0xff, 0xfe]))
        #expect(throws: MessagingError(.forged, "")) { try ChatPayload(encoded: invalidUTF8.data) }
    }

    /// The fuzz harnesses' fixture (`ChatProbe`) is a group that accepts its seeds: a fuzzer
    /// started from them gets past the outer checks (a broken fixture would only ever exercise
    /// refusals).
    @Test func theFuzzFixtureAcceptsItsSeeds() throws {
        let fixture = try ChatProbe.fixture()
        #expect(
            ChatProbe.receive(fixture.message, kind: .message, sender: "alice", epoch: nil, in: fixture).hasPrefix("message("))
        #expect(
            ChatProbe.receive(fixture.commit, kind: .commit, sender: "alice", epoch: fixture.epoch, in: fixture).hasPrefix(
                "commit("))
        #expect(ChatProbe.receive(fixture.message, kind: .message, sender: "bob", epoch: nil, in: fixture).hasPrefix("drop("))
    }
}
