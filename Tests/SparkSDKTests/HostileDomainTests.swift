import Foundation
import SparkCrypto
import SparkLock
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkDomain
@testable import SparkDomainEngine
@testable import SparkMLS
@testable import SparkSDK

/// A domain that attacks its users (``HostileDomain``), over real chats on MLS. Each attack is
/// refused or detected with an event; the attacker decrypts nothing; no member's group is
/// corrupted or forked (the members stay in one epoch and keep talking); and the chat recovers
/// once the domain behaves. (The substitution of identity keys is in IdentityVerificationTests.)
@Suite("Hostile domain: chats on MLS")
struct HostileDomainTests {
    /// Alice and bob in a chat, each with one device, and a message each way.
    struct Chat {
        let world: HostileWorld
        let alice: BBMAccess
        let bob: BBMAccess
        let bobService: BBMEnterpriseService
        let chatID: String
    }

    static func chat(
        _ directory: URL, messaging: MessagingStoreKind, policy: DomainPolicy = DomainPolicy(passwordIterations: 1000)
    ) async throws -> Chat {
        let world = try HostileWorld(directory, messaging: messaging, policy: policy)
        let (_, alice) = try await world.endpoint("alice", "alice-laptop")
        let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
        let chat = try await alice.startChat(with: ["bob"], subject: "Plans")
        try await alice.sendMessage("hi bob", to: chat.chatID)
        let bobMessages = try await bob.messages(in: chat.chatID)
        #expect(await waitFor("bob reads it") { bobMessages.value.map(\.content) == ["hi bob"] })
        return Chat(world: world, alice: alice, bob: bob, bobService: bobService, chatID: chat.chatID)
    }

    /// Both sides hold the same group (no fork): the same epoch and devices, and a message each
    /// way still reads.
    static func expectOneGroup(_ chat: Chat, _ note: String) async throws {
        let aliceGroup = try #require(try await chat.alice.messenger.chats.storedGroup(chat.chatID))
        #expect(
            await eventuallyAwaiting {
                (try? await chat.bob.messenger.chats.storedGroup(chat.chatID))?.group.epoch == aliceGroup.group.epoch
            }, "bob is in alice's epoch (\(note))")
        let bobGroup = try #require(try await chat.bob.messenger.chats.storedGroup(chat.chatID))
        #expect(bobGroup.group.epochAuthenticator == aliceGroup.group.epochAuthenticator, "one group, not two (\(note))")
        let ping = "ping \(UUID().uuidString)"
        try await chat.alice.sendMessage(ping, to: chat.chatID)
        let bobMessages = try await chat.bob.messages(in: chat.chatID)
        #expect(await waitFor("bob reads alice (\(note))") { bobMessages.value.last?.content == ping })
        try await chat.bob.sendMessage("re: \(ping)", to: chat.chatID)
        let aliceMessages = try await chat.alice.messages(in: chat.chatID)
        #expect(await waitFor("alice reads bob (\(note))") { aliceMessages.value.last?.content == "re: \(ping)" })
    }

    /// Makes the domain's long-polls for `user` never wake (a domain slow to tell) and waits until
    /// the user's loop is in one.
    static func blindLongPolls(of user: String, on domain: HostileDomain) async {
        _ = domain.blindLongPolls.withLock { $0.insert(user) }
        #expect(
            await waitFor("\(user)'s loop is in a long-poll that will not wake") {
                domain.blindLongPollsBegun.withLock { $0 } > 0
            })
    }

    /// Dates the device's last commit in the chat 8 days back, so that its next look at the chat
    /// commits an update of its keys. (Whatever writes a group's row gives it a new version, so
    /// that a live session of it is read again.)
    static func makeUpdateDue(_ access: BBMAccess, in chatID: String) async throws {
        let messenger = access.messenger
        try await messenger.write { store in
            var stored = try #require(try messenger.groups.load(store, chatID: chatID, validator: MLSAcceptAnyCredential()))
            stored.updatedAt = Date() - 8 * 86400
            try messenger.groups.save(store, stored)
        }
    }

    /// Puts an entry into `user`'s mailbox as the domain would.
    static func inject(_ world: HostileWorld, _ entry: MailboxEntry, to user: String) throws {
        try world.real.store.blockingWrite { db in
            try EmbeddedDomain.append(
                db, to: [user], chatID: entry.chatID, sender: entry.sender, kind: entry.kind, messageNumber: entry.messageNumber,
                payload: entry.payload, members: entry.members, now: Date().timeIntervalSince1970, epoch: entry.epoch)
        }
    }

    static func mailbox(_ world: HostileWorld, _ service: BBMEnterpriseService, _ user: String) async throws -> [MailboxEntry] {
        try await world.real.readMailbox(
            token: try await world.real.testToken(userID: user).token, endpointID: try await service.endpointID, after: 0,
            limit: 1000)
    }

    static func drops(_ events: EventRecorder, _ chatID: String) -> [String] {
        events.value.compactMap { if case .dropped(chatID, let reason) = $0 { reason } else { nil } }
    }

    @Test(arguments: MessagingStoreKind.tested) func anInjectedMemberIsNoParticipantAndReadsNothing(
        messaging: MessagingStoreKind
    ) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(directory, messaging: messaging)
            let (malloryService, mallory) = try await chat.world.endpoint("mallory", "mallory-pc")
            let events = EventRecorder(chat.bob)
            // The domain lists mallory as a member and routes the chat to her from now on.
            _ = try await chat.world.real.updateMembers(
                token: try await chat.world.real.testToken(userID: "alice").token,
                endpointID: chat.alice.messenger.endpointID, chatID: chat.chatID, add: ["mallory"], remove: [])
            try await chat.alice.sendMessage("for bob only", to: chat.chatID)
            try await chat.bob.refresh()
            #expect(try await chat.bob.participants(of: chat.chatID).map(\.userID).sorted() == ["alice", "bob"])
            #expect(try await chat.alice.participants(of: chat.chatID).map(\.userID).sorted() == ["alice", "bob"])
            // Mallory's mailbox has the ciphertext; her device opens none of it.
            let routed = try await Self.mailbox(chat.world, malloryService, "mallory").filter { $0.chatID == chat.chatID }
            #expect(routed.contains { $0.kind == .message })
            try await mallory.refresh()
            #expect(mallory.chats.value.isEmpty, "mallory's device is in no chat")
            // A message the domain passes off as mallory's (alice's, re-signed by no one) is refused.
            let alicesMessage = try #require(routed.last { $0.kind == .message })
            try Self.inject(
                chat.world,
                MailboxEntry(
                    sequence: 0, chatID: chat.chatID, sender: "mallory", kind: .message, messageNumber: 99,
                    payload: alicesMessage.payload, members: nil, postedAt: Date()), to: "bob")
            try await chat.bob.refresh()
            #expect(await waitFor("the forgery is dropped") { !Self.drops(events, chat.chatID).isEmpty })
            #expect(try await chat.bob.messages(in: chat.chatID).value.map(\.sender).allSatisfy { $0 != "mallory" })
            try await Self.expectOneGroup(chat, "after an injected member")
        }
    }

    /// The domain hands out its own device's KeyPackage as bob's (bob's identity untouched): it
    /// is not signed by bob's identity key, so no one adds it, and there is no chat with a device
    /// alice does not accept.
    @Test(arguments: MessagingStoreKind.tested) func aKeyPackageTheDomainSubstitutesAddsNoOne(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            let impostor = try HostileWorld.impostor(of: "bob")
            world.domain.substitutedKeyPackages.withLock { $0["bob"] = [impostor.claimed] }
            await #expect(throws: MessagingError(.unknownUser, "")) { try await alice.startChat(with: ["bob"]) }
            #expect(world.welcomesAdmitting(impostor) == 0)
            #expect(try await alice.contact("bob").verification == .unverified, "bob's identity is as it was")
            // Beside bob's own, it is left out: the chat has bob's phone only.
            world.domain.substitutedKeyPackages.withLock { $0["bob"] = nil }
            let chat = try await alice.startChat(with: ["bob"])
            world.domain.substitutedKeyPackages.withLock { $0["carol"] = [impostor.claimed] }
            #expect(world.welcomesAdmitting(impostor) == 0)
            #expect(try await alice.messenger.chats.groupDevices(of: chat.chatID).map(\.user) == ["alice", "bob"])
        }
    }

    @Test(arguments: MessagingStoreKind.tested) func aReplayedOrReorderedCommitChangesNothingAndTheChatGoesOn(
        messaging: MessagingStoreKind
    ) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(directory, messaging: messaging)
            let events = EventRecorder(chat.bob)
            // Two commits in a row (two subject changes), delivered to bob in the wrong order.
            let swapping = Locked(true)
            chat.world.domain.mailboxRewrite.withLock {
                $0 = { user, entries in
                    guard user == "bob", swapping.withLock({ $0 }) else { return entries }
                    var entries = entries
                    let commits = entries.indices.filter { entries[$0].kind == .commit }
                    guard commits.count >= 2 else { return [] }  // wait until both are there
                    let (first, second) = (commits[0], commits[1])
                    (entries[first].payload, entries[second].payload) = (entries[second].payload, entries[first].payload)
                    (entries[first].epoch, entries[second].epoch) = (entries[second].epoch, entries[first].epoch)
                    swapping.withLock { $0 = false }
                    return entries
                }
            }
            try await chat.alice.updateChatSubject(chat.chatID, subject: "Plans, again")
            try await chat.alice.updateChatSubject(chat.chatID, subject: "Plans, final")
            #expect(await waitFor("bob applies both, in order") { chat.bob.chats.value.first?.subject == "Plans, final" })
            #expect(Self.drops(events, chat.chatID).isEmpty, "a later commit waits for the one before it")
            // The domain replays the first commit: it is for an epoch bob left.
            let commit = try #require(
                try await Self.mailbox(chat.world, chat.bobService, "bob").last { $0.kind == .commit && $0.chatID == chat.chatID }
            )
            try Self.inject(chat.world, commit, to: "bob")
            try await chat.bob.refresh()
            #expect(await waitFor("the replay is dropped") { Self.drops(events, chat.chatID).count == 1 })
            try await Self.expectOneGroup(chat, "after a reorder and a replay")
        }
    }

    @Test(arguments: MessagingStoreKind.tested) func aCommitWithheldFromOneMemberDelaysWhatFollowsUntilItComes(
        messaging: MessagingStoreKind
    ) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(directory, messaging: messaging)
            let withheld = Locked<[MailboxEntry]>([])
            let withholding = Locked(true)
            chat.world.domain.mailboxRewrite.withLock {
                $0 = { user, entries in
                    guard user == "bob", withholding.withLock({ $0 }) else { return entries }
                    withheld.withLock { $0 += entries.filter { $0.kind == .commit } }
                    return entries.filter { $0.kind != .commit }
                }
            }
            let before = try #require(try await chat.bob.messenger.chats.storedGroup(chat.chatID)).group.epoch
            try await chat.alice.updateChatSubject(chat.chatID, subject: "secret plans")
            try await chat.alice.sendMessage("after the commit", to: chat.chatID)
            let bobMessages = try await chat.bob.messages(in: chat.chatID)
            #expect(await waitFor("the commit was withheld") { !withheld.withLock { $0.isEmpty } })
            try await chat.bob.refresh()
            try await chat.bob.refresh()
            #expect(bobMessages.value.map(\.content) == ["hi bob"], "what follows the commit waits")
            #expect(try #require(try await chat.bob.messenger.chats.storedGroup(chat.chatID)).group.epoch == before)
            #expect(chat.bob.chats.value.first?.subject == "Plans")
            // The domain behaves: the commit comes (late), and what waited for it follows.
            withholding.withLock { $0 = false }
            for entry in withheld.withLock({ $0 }) { try Self.inject(chat.world, entry, to: "bob") }
            try await chat.bob.refresh()
            #expect(await waitFor("bob catches up") { bobMessages.value.map(\.content) == ["hi bob", "after the commit"] })
            #expect(chat.bob.chats.value.first?.subject == "secret plans")
            try await Self.expectOneGroup(chat, "after a withheld commit")
        }
    }

    /// The domain withholds alice's next message from bob and delivers the one after: bob's
    /// receipts name what he has, so alice sees the second delivered and read and the first
    /// still only sent (a receipt that covered every number up to its own would have counted it).
    @Test(arguments: MessagingStoreKind.tested) func aWithheldMessageIsNeverShownDeliveredOrRead(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(directory, messaging: messaging)
            let withheld = Locked<Int64?>(nil)
            chat.world.domain.mailboxRewrite.withLock {
                $0 = { user, entries in
                    guard user == "bob", let number = withheld.withLock({ $0 }) else { return entries }
                    return entries.filter { !($0.kind == .message && $0.messageNumber == number) }
                }
            }
            let aliceMessages = try await chat.alice.messages(in: chat.chatID)
            // The domain numbers alice's next message 2: that one bob never gets.
            withheld.withLock { $0 = 2 }
            let five = try await chat.alice.sendMessage("withheld", to: chat.chatID)
            let six = try await chat.alice.sendMessage("delivered", to: chat.chatID)
            #expect(five.number == 2 && six.number == 3)
            let bobMessages = try await chat.bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has the later one") { bobMessages.value.map(\.content) == ["hi bob", "delivered"] })
            try await chat.bob.markMessagesRead(in: chat.chatID)
            #expect(
                await waitFor("alice sees the later one read") {
                    aliceMessages.value.first { $0.id == six.id }?.state == .read
                })
            try await chat.alice.refresh()
            #expect(aliceMessages.value.first { $0.id == five.id }?.state == .sent, "never shown delivered or read")
        }
    }

    /// Security review 6: the domain withholds alice's next message from bob and delivers the
    /// one after. Bob's device sees by alice's authenticated sequence that one is missing (an
    /// event, and the chat's count) until the domain lets it through; then it shows in its place.
    @Test(arguments: MessagingStoreKind.tested) func aWithheldMessageIsSeenMissingUntilItArrives(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(directory, messaging: messaging)
            let events = EventRecorder(chat.bob)
            let withheld = Locked<[MailboxEntry]>([])
            let withholding = Locked(true)
            chat.world.domain.mailboxRewrite.withLock {
                $0 = { user, entries in
                    guard user == "bob", withholding.withLock({ $0 }) else { return entries }
                    return entries.filter { entry in
                        guard entry.kind == .message, entry.messageNumber == 2 else { return true }
                        withheld.withLock { kept in
                            if !kept.contains(where: { $0.sequence == entry.sequence }) { kept.append(entry) }
                        }
                        return false
                    }
                }
            }
            try await chat.alice.sendMessage("withheld", to: chat.chatID)
            try await chat.alice.sendMessage("delivered", to: chat.chatID)
            let bobMessages = try await chat.bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has the later one") { bobMessages.value.map(\.content) == ["hi bob", "delivered"] })
            #expect(await waitFor("one is missing") { chat.bob.chats.value.first?.missingMessageCount == 1 })
            #expect(
                await waitFor("the event") {
                    events.value.contains(.messagesMissing(chatID: chat.chatID, userID: "alice", count: 1))
                })
            // The domain lets it through, late.
            withholding.withLock { $0 = false }
            for entry in withheld.withLock({ $0 }) { try Self.inject(chat.world, entry, to: "bob") }
            try await chat.bob.refresh()
            #expect(
                await waitFor("it shows in its place") {
                    bobMessages.value.map(\.content) == ["hi bob", "withheld", "delivered"]
                })
            #expect(chat.bob.chats.value.first?.missingMessageCount == 0)
            #expect(
                await waitFor("the event") {
                    events.value.contains(.messagesMissing(chatID: chat.chatID, userID: "alice", count: 0))
                })
            #expect(Self.drops(events, chat.chatID).isEmpty, "\(Self.drops(events, chat.chatID))")
        }
    }

    /// The domain takes a commit and the answer is lost: the device's next change finds the
    /// epoch moved, applies its own commit from its echo (kept pending), and commits again.
    @Test(arguments: MessagingStoreKind.tested) func aCommitWhoseAnswerIsLostIsCompletedByItsEcho(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(directory, messaging: messaging)
            let epoch = try #require(try await chat.alice.messenger.chats.storedGroup(chat.chatID)).group.epoch
            chat.world.domain.loseCommitAnswers.withLock { $0 = 1 }
            await #expect(throws: MessagingError.self) { try await chat.alice.updateChatSubject(chat.chatID, subject: "lost") }
            // The domain took it; its echo, read from the mailbox, completes it on this device.
            #expect(
                await eventuallyAwaiting(seconds: 30) {
                    (try? await chat.alice.messenger.chats.storedGroup(chat.chatID))??.group.epoch == epoch + 1
                }, "the echo completes the commit whose answer was lost")
            try await chat.alice.updateChatSubject(chat.chatID, subject: "found")
            #expect(try #require(try await chat.alice.messenger.chats.storedGroup(chat.chatID)).group.epoch == epoch + 2)
            #expect(await waitFor("bob has the second subject") { chat.bob.chats.value.first?.subject == "found" })
            try await Self.expectOneGroup(chat, "after a lost answer")
        }
    }

    @Test(arguments: MessagingStoreKind.tested) func aRenumberedMessageIsDetected(messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(directory, messaging: messaging)
            let events = EventRecorder(chat.bob)
            let renumbering = Locked(true)
            chat.world.domain.mailboxRewrite.withLock {
                $0 = { user, entries in
                    guard user == "bob", renumbering.withLock({ $0 }) else { return entries }
                    var entries = entries
                    let messages = entries.indices.filter { entries[$0].kind == .message }
                    guard messages.count >= 2 else { return [] }  // wait until both are there
                    let (first, second) = (messages[0], messages[1])
                    (entries[first].messageNumber, entries[second].messageNumber) = (
                        entries[second].messageNumber, entries[first].messageNumber
                    )
                    renumbering.withLock { $0 = false }
                    return entries
                }
            }
            try await chat.alice.sendMessage("two", to: chat.chatID)
            try await chat.alice.sendMessage("three", to: chat.chatID)
            #expect(
                await waitFor("the swap is detected") { Self.drops(events, chat.chatID).contains { $0.contains("renumbered") } })
            let numbers = try await chat.bob.messages(in: chat.chatID).value.compactMap(\.number)
            #expect(numbers == numbers.sorted() && Set(numbers).count == numbers.count, "no number goes back: \(numbers)")
            try await Self.expectOneGroup(chat, "after renumbering")
        }
    }

    @Test(arguments: MessagingStoreKind.tested) func aForgedOrReplayedReceiptMarksNothing(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(directory, messaging: messaging)
            let aliceMessages = try await chat.alice.messages(in: chat.chatID)
            #expect(await waitFor("delivered") { aliceMessages.value.first?.state == .delivered })
            let events = EventRecorder(chat.alice)
            // Bob's delivery receipt, replayed as if bob had read a new message, and a receipt the
            // domain made up.
            let sent = try await chat.alice.sendMessage("unread", to: chat.chatID)
            let token = try await chat.world.real.testToken(userID: "alice").token
            let aliceEndpoint = chat.alice.messenger.endpointID
            let aliceMailbox = try await chat.world.real.readMailbox(
                token: token, endpointID: aliceEndpoint, after: 0, limit: 1000)
            let receipt = try #require(aliceMailbox.last { $0.kind == .receipt && $0.sender == "bob" })
            try Self.inject(chat.world, receipt, to: "alice")
            var forged = receipt
            forged.payload = Data(#"{"state":"read","number":2}"#.utf8)
            try Self.inject(chat.world, forged, to: "alice")
            try await chat.alice.refresh()
            #expect(await waitFor("both are dropped") { Self.drops(events, chat.chatID).count >= 2 })
            #expect(try await chat.alice.messenger.message(id: sent.id).state != .read, "nothing marked read")
            try await Self.expectOneGroup(chat, "after forged receipts")
        }
    }

    @Test(arguments: MessagingStoreKind.tested) func aReplayedWelcomeIsRefused(messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(directory, messaging: messaging)
            let events = EventRecorder(chat.bob)
            let welcome = try #require(
                try await Self.mailbox(chat.world, chat.bobService, "bob").first {
                    $0.kind == .welcome && $0.chatID == chat.chatID
                })
            let epoch = try #require(try await chat.bob.messenger.chats.storedGroup(chat.chatID)).group.epoch
            try await chat.alice.updateChatSubject(chat.chatID, subject: "later")
            #expect(await waitFor("bob is past the Welcome's epoch") { chat.bob.chats.value.first?.subject == "later" })
            try Self.inject(chat.world, welcome, to: "bob")
            try await chat.bob.refresh()
            // The one-time KeyPackage it names was used and is gone: the Welcome opens nothing,
            // and bob's group stays where it was (not back at the Welcome's epoch).
            #expect(try #require(try await chat.bob.messenger.chats.storedGroup(chat.chatID)).group.epoch == epoch + 1)
            #expect(chat.bob.chats.value.first?.subject == "later")
            #expect(Self.drops(events, chat.chatID).isEmpty, "\(events.value)")
            try await Self.expectOneGroup(chat, "after a replayed Welcome")
        }
    }

    /// The domain invites bob to a group of its own making, holding a device that calls itself
    /// alice's (its credential signed by a key that is not alice's identity key): bob opens the
    /// Welcome, looks alice up, and does not join; his chat with the real alice goes on.
    @Test(arguments: MessagingStoreKind.tested) func aWelcomeToAGroupHoldingADeviceBobDoesNotAcceptIsDropped(
        messaging: MessagingStoreKind
    ) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(directory, messaging: messaging)
            let events = EventRecorder(chat.bob)
            let (carolService, _) = try await chat.world.endpoint("carol", "carol-pc")
            let claimed = try #require(
                try await chat.world.real.claimKeyPackages(
                    token: try await chat.world.real.testToken(userID: "carol").token,
                    endpointID: try await carolService.endpointID,
                    userID: "bob"
                ).first)
            let forger = try UnlockedKeys.generate(userID: "alice", keyVersion: 1)
            let device = try Ed25519.PrivateKey()
            let credential = try DeviceCredential.issue(
                userID: "alice", deviceID: "alice-impostor", signatureKey: device.publicKey.rawRepresentation,
                identityKeyVersion: 1, identityKey: forger.signing)
            var random = MLSSystemRandom()
            let forged = "forged-chat"
            let group = try MLSGroup.create(
                groupID: ChatGroup.groupID(forged), signer: MLSSigner(credential: credential.mlsCredential, key: device),
                random: &random)
            let added = try group.commit(adding: [claimed.keyPackage], now: Date(), random: &random)
            try Self.inject(
                chat.world,
                MailboxEntry(
                    sequence: 0, chatID: forged, sender: "alice", kind: .welcome, messageNumber: nil,
                    payload: try #require(added.welcome), members: nil, postedAt: Date()), to: "bob")
            try await chat.bob.refresh()
            #expect(
                await waitFor("the Welcome is dropped") {
                    Self.drops(events, forged).contains { $0.contains("holds a device this device does not accept") }
                }, "\(events.value)")
            #expect(try await chat.bob.messenger.chats.storedGroup(forged) == nil)
            #expect(chat.bob.chats.value.map(\.chatID) == [chat.chatID])
            try await Self.expectOneGroup(chat, "after a Welcome to a forged group")
        }
    }

    /// A removed device keeps the group state it had: it opens nothing sent after its removal,
    /// whether it applies the removal or not.
    @Test(arguments: MessagingStoreKind.tested) func aRemovedDeviceWithItsOldStateReadsNothingAfterItsRemoval(
        messaging: MessagingStoreKind
    ) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(directory, messaging: messaging)
            let (carolService, carol) = try await chat.world.endpoint("carol", "carol-pc")
            try await chat.alice.invite(["carol"], to: chat.chatID)
            #expect(await waitFor("carol joins") { carol.chats.value.count == 1 })
            let kept = try #require(try await carol.messenger.chats.storedGroup(chat.chatID))
            try await chat.alice.removeParticipant("carol", from: chat.chatID)
            try await chat.alice.sendMessage("carol is gone", to: chat.chatID)
            let bobMessages = try await chat.bob.messages(in: chat.chatID)
            #expect(await waitFor("bob reads it") { bobMessages.value.last?.content == "carol is gone" })
            // What the domain holds for the chat after carol's removal, in bob's mailbox.
            let entries = try await Self.mailbox(chat.world, chat.bobService, "bob").filter { $0.chatID == chat.chatID }
            let removal = try #require(entries.last { $0.kind == .commit })
            let after = entries.filter { $0.kind == .message && $0.sequence > removal.sequence }
            #expect(!after.isEmpty)
            var applying = kept
            let aliceDevice = ChatGroup.Device(user: "alice", device: chat.alice.messenger.endpointID)
            #expect(applying.receive(removal, now: Date()) == .removed(by: aliceDevice))
            for entry in after {
                var stale = kept
                let decided = stale.receive(entry, now: Date())
                #expect(!Self.isMessage(decided), "the old state opens nothing: \(decided)")
                #expect(!Self.isMessage(applying.receive(entry, now: Date())))
            }
            _ = carolService
            try await Self.expectOneGroup(chat, "after carol's removal")
        }
    }

    static func isMessage(_ decision: ChatGroup.Decision) -> Bool {
        if case .message = decision { true } else { false }
    }

    /// Bob forgets his passcode and resets his identity on a new phone. Once alice accepts the
    /// change, her device (the admin's) evicts bob's old phone from the chat and adds the new
    /// one; the old phone's state reads nothing that follows.
    @Test(arguments: MessagingStoreKind.tested) func aDeviceOfAResetIdentityIsEvicted(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(
                directory, messaging: messaging, policy: DomainPolicy(passwordIterations: 1000, identityResetDelay: 0))
            let oldPhone = try await chat.bobService.endpointID
            let kept = try #require(try await chat.bob.messenger.chats.storedGroup(chat.chatID))
            await chat.bobService.stop()
            let (_, newPhone) = try await chat.world.endpoint("bob", "bob-new-phone", reset: true)
            let newPhoneID = newPhone.messenger.endpointID
            #expect(
                await eventuallyAwaiting { (try? await chat.alice.contact("bob").verification) == .changed },
                "alice sees the change")
            let held = try await chat.alice.sendMessage("is that you?", to: chat.chatID)
            #expect(held.state == .held, "nothing goes to bob's new identity before alice accepts it")
            try await chat.alice.acceptIdentityChange(of: "bob")
            #expect(
                await eventuallyAwaiting {
                    (try? await chat.alice.messenger.chats.groupDevices(of: chat.chatID).filter { $0.user == "bob" }.map(\.device))
                        == [newPhoneID]
                }, "the old phone is evicted, the new one added")
            let newMessages = try await newPhone.messages(in: chat.chatID)
            #expect(await waitFor("the new phone reads what was held") { newMessages.value.map(\.content) == ["is that you?"] })
            #expect(!(try await chat.alice.messenger.chats.groupDevices(of: chat.chatID).contains { $0.device == oldPhone }))
            // The old phone's state opens nothing sent after its eviction.
            let token = try await chat.world.real.testToken(userID: "bob").token
            let entries = try await chat.world.real.readMailbox(token: token, endpointID: newPhoneID, after: 0, limit: 1000)
                .filter { $0.chatID == chat.chatID && $0.kind == .message }
            #expect(!entries.isEmpty)
            for entry in entries {
                var stale = kept
                #expect(!Self.isMessage(stale.receive(entry, now: Date())))
            }
        }
    }

    /// Three devices of one user: the first chats, the other two come later; each is added to
    /// the chat by a device of the user already in it, gets the history, and all three show the
    /// same messages and unread count, whichever sends.
    @Test(arguments: MessagingStoreKind.tested) func threeDevicesOfOneUserConvergeWithTheirHistory(
        messaging: MessagingStoreKind
    ) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await Self.chat(directory, messaging: messaging)
            try await chat.bob.sendMessage("hi alice", to: chat.chatID)
            let aliceMessages = try await chat.alice.messages(in: chat.chatID)
            #expect(await waitFor("alice reads it") { aliceMessages.value.count == 2 })
            let (_, phone) = try await chat.world.endpoint("alice", "alice-phone")
            try await approve(phone, on: chat.alice)
            let (_, tablet) = try await chat.world.endpoint("alice", "alice-tablet")
            try await approve(tablet, on: phone)
            for (name, device) in [("phone", phone), ("tablet", tablet)] {
                #expect(await waitFor("the \(name) is in the chat") { device.chats.value.first?.subject == "Plans" })
                let messages = try await device.messages(in: chat.chatID)
                #expect(
                    await waitFor("the \(name) has the history") { messages.value.map(\.content) == ["hi bob", "hi alice"] })
            }
            try await tablet.sendMessage("from the tablet", to: chat.chatID)
            for device in [chat.alice, phone, tablet, chat.bob] {
                let messages = try await device.messages(in: chat.chatID)
                #expect(await waitFor("everyone has it") { messages.value.last?.content == "from the tablet" })
                #expect(messages.value.map(\.content) == ["hi bob", "hi alice", "from the tablet"])
            }
            try await phone.markMessagesRead(in: chat.chatID)
            for device in [chat.alice, phone, tablet] {
                #expect(await waitFor("read everywhere") { device.chats.value.first?.unreadCount == 0 })
            }
            let devices = try await chat.bob.messenger.chats.groupDevices(of: chat.chatID).filter { $0.user == "alice" }
            #expect(devices.count == 3, "\(devices)")
        }
    }
}

/// Keys over time: post-compromise updates, and a removed device removed from every chat.
@Suite("Chats on MLS: keys over time")
struct GroupKeysOverTimeTests {
    static func commits(_ chat: HostileDomainTests.Chat) async throws -> [MailboxEntry] {
        try await HostileDomainTests.mailbox(chat.world, chat.bobService, "bob").filter {
            $0.kind == .commit && $0.chatID == chat.chatID
        }
    }

    /// A device commits an update of its own keys 7 days after its last commit, and after 1,000
    /// messages it sent; the group moves to a new epoch and the chat goes on.
    @Test(arguments: MessagingStoreKind.tested)
    func aDeviceUpdatesItsKeysAfterSevenDaysAndAfterAThousandMessages(messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await HostileDomainTests.chat(directory, messaging: messaging)
            let start = try await Self.commits(chat).count
            let epoch = try #require(try await chat.alice.messenger.chats.storedGroup(chat.chatID)).group.epoch
            // Alice's last commit was 8 days ago.
            try await HostileDomainTests.makeUpdateDue(chat.alice, in: chat.chatID)
            let messenger = chat.alice.messenger
            let chatID = chat.chatID
            try await chat.alice.refresh()
            #expect(try #require(try await chat.alice.messenger.chats.storedGroup(chat.chatID)).group.epoch == epoch + 1)
            #expect(try await Self.commits(chat).count == start + 1, "one update commit")
            try await chat.alice.refresh()
            #expect(try await Self.commits(chat).count == start + 1, "and no second one: the clock starts again")
            // Alice has sent 999 messages since: the next one makes the update due.
            try await messenger.write { store in
                var stored = try #require(try messenger.groups.load(store, chatID: chatID, validator: MLSAcceptAnyCredential()))
                stored.sentSinceUpdate = 999
                try messenger.groups.save(store, stored)
            }
            try await chat.alice.sendMessage("the thousandth", to: chat.chatID)
            try await chat.alice.refresh()
            #expect(try #require(try await chat.alice.messenger.chats.storedGroup(chat.chatID)).group.epoch == epoch + 2)
            try await HostileDomainTests.expectOneGroup(chat, "after two updates")
        }
    }

    /// A post overtaken by a commit is a conflict the core catches up from at once: alice's
    /// long-polls never wake (a domain slow to tell), bob commits an update of his keys, and
    /// alice sends in the epoch she holds. The domain refuses the post; the outbox gives the
    /// conflict to the core, which reads the mailbox (ending the long-poll), and the message is
    /// sealed again in bob's epoch and sent before `sendMessage` returns.
    @Test(arguments: MessagingStoreKind.tested)
    func aPostOvertakenByACommitCatchesUpAtOnce(messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await HostileDomainTests.chat(directory, messaging: messaging)
            let domain = chat.world.domain
            await HostileDomainTests.blindLongPolls(of: "alice", on: domain)
            let epoch = try #require(try await chat.alice.messenger.chats.storedGroup(chat.chatID)).group.epoch
            // Bob's last commit was 8 days ago: his next look at the chat commits an update.
            try await HostileDomainTests.makeUpdateDue(chat.bob, in: chat.chatID)
            try await chat.bob.refresh()
            #expect(try #require(try await chat.bob.messenger.chats.storedGroup(chat.chatID)).group.epoch == epoch + 1)
            #expect(
                try #require(try await chat.alice.messenger.chats.storedGroup(chat.chatID)).group.epoch == epoch,
                "alice has not heard of bob's commit")
            let sent = try await chat.alice.sendMessage("after your update", to: chat.chatID)
            #expect(sent.state == .sent, "sent, not left sending behind a commit it could have caught up with: \(sent.state)")
            #expect(try #require(try await chat.alice.messenger.chats.storedGroup(chat.chatID)).group.epoch == epoch + 1)
            let bobMessages = try await chat.bob.messages(in: chat.chatID)
            #expect(await waitFor("bob reads it") { bobMessages.value.last?.content == "after your update" })
            domain.blindLongPolls.withLock { $0.removeAll() }
        }
    }

    /// A member that signs a message of alice's with a key other than her leaf's (alice's own
    /// group state with a stranger's key: what a member impersonating her would send), between
    /// her real messages in one page of bob's mailbox. The page's signatures are checked
    /// beside its transaction (`DeferredSignatures`), so the forged message is opened, its
    /// generation of alice's ratchet taken, and her next real message cannot open; the failed
    /// signature rolls the page back and it is applied again with each signature checked in
    /// line: the forgery is dropped, and every real message is kept, in order, once.
    @Test(arguments: MessagingStoreKind.tested)
    func aForgedSignatureInAPageIsDroppedAloneAndTheRestKept(messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await HostileDomainTests.chat(directory, messaging: messaging)
            let domain = chat.world.domain
            await HostileDomainTests.blindLongPolls(of: "bob", on: domain)
            let events = EventRecorder(chat.bob)
            // Enough entries in the page for its signatures to be checked beside it.
            var before: [ChatMessage] = []
            for text in ["one", "two", "three", "four"] { before.append(try await chat.alice.sendMessage(text, to: chat.chatID)) }
            var group = try #require(try await chat.alice.messenger.chats.storedGroup(chat.chatID)).group
            group.signer = MLSSigner(credential: group.signer.credential, key: try Ed25519.PrivateKey())
            var forger = ChatGroup(chatID: chat.chatID, group: group)
            var random = MLSSystemRandom()
            let forged = try forger.seal(ChatPayload(kind: .text, id: UUID().uuidString, content: "forged"), random: &random)
            try HostileDomainTests.inject(
                chat.world,
                MailboxEntry(
                    sequence: 0, chatID: chat.chatID, sender: "alice", kind: .message,
                    messageNumber: try #require(before.last?.number) + 1, payload: forged, members: nil, postedAt: Date()),
                to: "bob")
            for text in ["five", "six", "seven", "eight"] { _ = try await chat.alice.sendMessage(text, to: chat.chatID) }
            try await chat.bob.refresh()
            let bobMessages = try await chat.bob.messages(in: chat.chatID)
            #expect(
                bobMessages.value.map(\.content) == ["hi bob", "one", "two", "three", "four", "five", "six", "seven", "eight"])
            #expect(
                HostileDomainTests.drops(events, chat.chatID).contains { $0.contains("signature does not verify") },
                "dropped for its signature: \(HostileDomainTests.drops(events, chat.chatID))")
            domain.blindLongPolls.withLock { $0.removeAll() }
            try await HostileDomainTests.expectOneGroup(chat, "after a forged signature")
        }
    }

    /// Alice queues five messages while her first post is in flight, and bob commits an update
    /// of his keys meanwhile (alice's long-polls are blind to it). `queueMessage` returns each one
    /// stored, sending; the four behind the post in flight wait for it; the post is refused (its
    /// epoch is gone), the core catches up, every message still sending is sealed again in bob's
    /// epoch, and all five go in one batch, in the order alice sent them.
    @Test(arguments: MessagingStoreKind.tested)
    func queuedMessagesGoInOrderSeveralInOneRequest(messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await HostileDomainTests.chat(directory, messaging: messaging)
            let domain = chat.world.domain
            await HostileDomainTests.blindLongPolls(of: "alice", on: domain)
            domain.messageBatches.withLock { $0.removeAll() }
            domain.messageBatchesHeld.withLock { $0 = true }
            var queued: [ChatMessage] = []
            for index in 0..<5 { queued.append(try await chat.alice.queueMessage("queued \(index)", to: chat.chatID)) }
            #expect(queued.map(\.state) == Array(repeating: .sending, count: 5), "each returned once stored")
            #expect(await waitFor("the first post is in flight") { domain.messageBatches.withLock { $0 } == [1] })
            try await HostileDomainTests.makeUpdateDue(chat.bob, in: chat.chatID)
            try await chat.bob.refresh()
            domain.messageBatchesHeld.withLock { $0 = false }
            let aliceMessages = try await chat.alice.messages(in: chat.chatID)
            #expect(
                await waitFor("all five sent") {
                    aliceMessages.value.filter { $0.content.hasPrefix("queued") && $0.state == .sent }.count == 5
                })
            #expect(
                domain.messageBatches.withLock { $0 } == [1, 5],
                "the first refused alone (a left epoch), then all five sealed again and posted as one")
            let bobMessages = try await chat.bob.messages(in: chat.chatID)
            #expect(
                await waitFor("bob reads all five") { bobMessages.value.filter { $0.content.hasPrefix("queued") }.count == 5 })
            let received = bobMessages.value.filter { $0.content.hasPrefix("queued") }.sorted {
                ($0.number ?? 0) < ($1.number ?? 0)
            }
            #expect(received.map(\.content) == (0..<5).map { "queued \($0)" }, "numbered in the order alice sent them")
            domain.blindLongPolls.withLock { $0.removeAll() }
        }
    }

    /// The domain takes alice's message but answers her batch with no receipt and no refusal:
    /// the send returns with the message left sending (no loop posting it again and again), and
    /// once the domain answers properly, the message posted again is the same post: bob has it
    /// once, and alice's copy is numbered as his.
    @Test(arguments: MessagingStoreKind.tested)
    func aBatchAnsweredWithoutReceiptsIsLeftSendingAndSentOnce(messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await HostileDomainTests.chat(directory, messaging: messaging)
            let domain = chat.world.domain
            // Alice's loop does not read her copy of the post meanwhile (which would complete it).
            await HostileDomainTests.blindLongPolls(of: "alice", on: domain)
            domain.messageBatchAnswer.withLock { $0 = { _ in PostBatchReceipt(receipts: [], refusal: nil) } }
            let returned = Locked<ChatMessage?>(nil)
            let alice = chat.alice
            let send = Task {
                returned.withLock { $0 = nil }
                let message = try await alice.sendMessage("unanswered", to: chat.chatID)
                returned.withLock { $0 = message }
            }
            #expect(await waitFor("sendMessage returns") { returned.withLock { $0 } != nil })
            #expect(returned.withLock { $0 }?.state == .sending, "left sending")
            domain.messageBatchAnswer.withLock { $0 = nil }
            await chat.alice.messenger.outbox.resendPending()
            let aliceMessages = try await chat.alice.messages(in: chat.chatID)
            #expect(
                await waitFor("alice's copy is sent") {
                    aliceMessages.value.first { $0.content == "unanswered" }?.state == .sent
                }, "\(aliceMessages.value.map { ($0.content, $0.state, $0.number) })")
            let bobMessages = try await chat.bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { bobMessages.value.contains { $0.content == "unanswered" } })
            #expect(bobMessages.value.filter { $0.content == "unanswered" }.count == 1, "once")
            domain.blindLongPolls.withLock { $0.removeAll() }
            #expect(
                bobMessages.value.first { $0.content == "unanswered" }?.number
                    == aliceMessages.value.first { $0.content == "unanswered" }?.number)
            send.cancel()
        }
    }

    /// Alice removes her phone from her laptop: the laptop removes the phone from every chat at
    /// once (the domain's `devices` notice), and the phone's state opens nothing that follows.
    @Test(arguments: MessagingStoreKind.tested) func aRemovedDeviceIsRemovedFromEveryChat(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            let (laptopService, laptop) = try await world.endpoint("alice", "alice-laptop")
            let (phoneService, phone) = try await world.endpoint("alice", "alice-phone")
            try await approve(phone, on: laptop)
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
            let one = try await laptop.startChat(with: ["bob"], subject: "one")
            let two = try await bob.startChat(with: ["alice"], subject: "two")
            #expect(await waitFor("the phone is in both") { phone.chats.value.count == 2 })
            let phoneID = try await phoneService.endpointID
            let kept = try #require(try await phone.messenger.chats.storedGroup(two.chatID))
            try await laptopService.deregisterEndpoint(phoneID)
            for chatID in [one.chatID, two.chatID] {
                #expect(
                    await eventuallyAwaiting {
                        (try? await bob.messenger.chats.groupDevices(of: chatID).contains { $0.device == phoneID }) == false
                    }, "the phone is out of \(chatID)")
            }
            try await bob.sendMessage("after the phone", to: two.chatID)
            let laptopMessages = try await laptop.messages(in: two.chatID)
            #expect(await waitFor("the laptop reads it") { laptopMessages.value.last?.content == "after the phone" })
            let entries = try await world.real.readMailbox(
                token: try await world.real.testToken(userID: "bob").token, endpointID: try await bobService.endpointID, after: 0,
                limit: 1000
            ).filter { $0.chatID == two.chatID && $0.kind == .message }
            var stale = kept
            for entry in entries.suffix(1) { #expect(!HostileDomainTests.isMessage(stale.receive(entry, now: Date()))) }
        }
    }
}
