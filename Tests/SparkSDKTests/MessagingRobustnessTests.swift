import Foundation
import SparkCrypto
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkDomain
@testable import SparkDomainEngine
@testable import SparkSDK

/// Entries and memberships that once stopped a device's mailbox or a whole chat: each is now
/// dropped with an event, or skipped, and messaging goes on.
@Suite("Messaging: what once stopped a mailbox or a chat")
struct MessagingRobustnessTests {
    /// Puts an entry into `user`'s mailbox as the domain would (the embedded domain's file is no
    /// trust boundary: any local process can write it).
    static func inject(
        _ world: ChatWorld, to user: String, chatID: String, sender: String, kind: MailboxKind, number: Int64? = nil,
        payload: Data = Data(), members: [ChatMember]? = nil
    ) throws {
        try world.domain.store.blockingWrite { db in
            try EmbeddedDomain.append(
                db, to: [user], chatID: chatID, sender: sender, kind: kind, messageNumber: number, payload: payload,
                members: members, now: Date().timeIntervalSince1970)
        }
    }

    @Test func aMembershipEntryListingAMemberTwiceIsDroppedAndTheMailboxGoesOn() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let events = EventRecorder(bob)
            let chat = try await alice.startChat(with: ["bob"], subject: "Plans")
            try Self.inject(
                world, to: "bob", chatID: chat.chatID, sender: "alice", kind: .membership,
                members: [
                    ChatMember(userID: "alice", isAdmin: true), ChatMember(userID: "bob", isAdmin: false),
                    ChatMember(userID: "bob", isAdmin: true),
                ])
            try await alice.sendMessage("after the bad entry", to: chat.chatID)
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("the next message arrives") { messages.value.map(\.content) == ["after the bad entry"] })
            #expect(
                await waitFor("dropped") {
                    events.value.contains { if case .dropped(chat.chatID, _) = $0 { true } else { false } }
                })
            #expect(try await bob.participants(of: chat.chatID).map(\.userID).sorted() == ["alice", "bob"], "nothing of it kept")
        }
    }

    @Test func anEchoWhoseNumberIsTakenIsDroppedAndTheMailboxGoesOn() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            #expect(await waitFor("bob knows the chat") { bob.chats.value.count == 1 })
            let mine = try await bob.sendMessage("bob's first", to: chat.chatID)
            try await alice.sendMessage("alice's second", to: chat.chatID)
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has both") { messages.value.count == 2 })
            // The echo of bob's own message again, claiming alice's number.
            let token = try await world.domain.testToken(userID: "bob").token
            let entries = try await world.domain.readMailbox(
                token: token, endpointID: try await bobService.endpointID, after: 0, limit: 100)
            let echo = try #require(entries.first { $0.kind == .message && $0.sender == "bob" })
            let events = EventRecorder(bob)
            try Self.inject(
                world, to: "bob", chatID: chat.chatID, sender: "bob", kind: .message, number: 2, payload: echo.payload)
            try await alice.sendMessage("alice's third", to: chat.chatID)
            #expect(await waitFor("the next message arrives") { messages.value.count == 3 })
            #expect(messages.value.map(\.content) == ["bob's first", "alice's second", "alice's third"])
            #expect(messages.value.first { $0.id == mine.id }?.number == 1, "bob's message keeps its number")
            #expect(
                await waitFor("dropped") {
                    events.value.contains { if case .dropped(chat.chatID, _) = $0 { true } else { false } }
                })
        }
    }

    /// A member's device that seals a second message under an id it used already (a buggy or
    /// hostile client): the messaging core refuses it, it is dropped with an event, and the
    /// mailbox goes on.
    @Test func aMessageReusingAnIdIsDroppedAndTheMailboxGoesOn() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (aliceService, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            let first = try await alice.sendMessage("one", to: chat.chatID)
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { messages.value.count == 1 })
            let events = EventRecorder(bob)
            let again = try await alice.messenger.outbox.seal(
                ChatPayload(kind: .text, id: first.id, content: "not one", tag: "Text"), in: chat.chatID)
            _ = try await world.domain.post(
                token: try await world.domain.testToken(userID: "alice").token, endpointID: try await aliceService.endpointID,
                chatID: chat.chatID, kind: .message, payload: again, recipient: nil, clientID: nil)
            try await alice.sendMessage("two", to: chat.chatID)
            #expect(await waitFor("the next message arrives") { messages.value.count == 2 })
            #expect(messages.value.map(\.content) == ["one", "two"])
            #expect(
                await waitFor("dropped") {
                    events.value.contains { if case .dropped(chat.chatID, _) = $0 { true } else { false } }
                })
        }
    }

    /// A message numbered with a number the store holds already (a history transfer handed over
    /// a message under it): the store refuses it as a conflict, it is dropped with an event, its
    /// A flow's observer runs on the messaging storage's thread once the read it shows is over: an
    /// observer that calls the synchronous API there (``BBMAccess/saveAttachment(of:to:)`` reads
    /// the store at once) is answered, not deadlocked.
    @Test func anObserverCallingTheSynchronousAPIIsAnswered() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            #expect(await waitFor("bob has the chat") { bob.chats.value.count == 1 })
            let answers = Box<[String]>([])
            let target = directory.appendingPathComponent("saved").path
            let subscription = try await bob.messages(in: chat.chatID).subscribe { window in
                for message in window {
                    do {
                        _ = try bob.saveAttachment(of: message.id, to: target)
                    } catch {
                        answers.update { $0.append(message.content) }
                    }
                }
            }
            defer { subscription.cancel() }
            try await alice.sendMessage("no file", to: chat.chatID)
            #expect(await waitFor("the observer was answered") { answers.value.contains("no file") })
        }
    }

    /// changes rolled back, and the mailbox goes on.
    @Test func aMessageWhoseNumberIsTakenIsDroppedAndTheMailboxGoesOn() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            try await alice.sendMessage("one", to: chat.chatID)
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { messages.value.count == 1 })
            let messenger = bob.messenger
            try await messenger.write { store in
                try store.insertReceived(
                    ChatHistory.Record(
                        id: "handed-over", number: 2, sender: "alice", content: "copy", tag: "Text", data: nil, ref: nil,
                        state: .delivered, timestamp: Date()),
                    chatID: chat.chatID, incoming: true, ignoringTaken: false)
            }
            let events = EventRecorder(bob)
            try await alice.sendMessage("two", to: chat.chatID)
            try await alice.sendMessage("three", to: chat.chatID)
            // Twenty seconds at most (under a sanitizer too): a mailbox that stopped at the
            // conflict never gets there, and the test ends at once.
            try #require(
                await eventuallyAwaiting(seconds: 20) {
                    (try? await bob.messages(in: chat.chatID, before: nil, limit: 10).map(\.content)) == ["one", "copy", "three"]
                }, "the next message arrives")
            #expect(
                await waitFor("dropped") {
                    events.value.contains { if case .dropped(chat.chatID, _) = $0 { true } else { false } }
                })
        }
    }

    @Test func concurrentSendsAllArriveInOneEpoch() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            async let first = alice.sendMessage("one", to: chat.chatID)
            async let second = alice.sendMessage("two", to: chat.chatID)
            async let third = alice.sendMessage("three", to: chat.chatID)
            _ = try await (first, second, third)
            try await alice.sendMessage("four", to: chat.chatID)
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob reads every one") { messages.value.count == 4 }, "\(messages.value.map(\.content))")
            #expect(Set(messages.value.map(\.content)) == ["one", "two", "three", "four"])
            let commits = try await world.domain.store.read { db in
                try db.scalar("SELECT count(*) FROM mailbox WHERE user_id = 'bob' AND kind = 'commit'", as: Int.self)
            }
            #expect(commits == 1, "the commit that made the chat, and none for sending")
        }
    }

    /// The group, not the domain's member list, is who is in a chat: a user the domain alone
    /// adds (another client of alice's, or the domain itself) is no participant and reads
    /// nothing; a user with no device cannot be invited; once set up, an invitation brings them
    /// in and they read what follows.
    @Test func aUserTheDomainAloneAddsIsNoParticipantUntilInvited() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (aliceService, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            await #expect(throws: MessagingError(.unknownUser, "")) { try await alice.invite(["dana"], to: chat.chatID) }
            // Nor can the domain list her while she has no endpoint.
            let adminToken = try await world.domain.testToken(userID: "alice").token
            await #expect(throws: DomainError(.notFound, "")) {
                try await world.domain.updateMembers(
                    token: adminToken, endpointID: try await aliceService.endpointID, chatID: chat.chatID, add: ["dana"],
                    remove: [])
            }
            let (_, dana) = try await world.endpoint("dana", "dana-phone")
            _ = try await world.domain.updateMembers(
                token: try await world.domain.testToken(userID: "alice").token, endpointID: try await aliceService.endpointID,
                chatID: chat.chatID, add: ["dana"], remove: [])
            try await alice.refresh()
            #expect(try await alice.participants(of: chat.chatID).map(\.userID).sorted() == ["alice", "bob"])
            let sent = try await alice.sendMessage("before dana", to: chat.chatID)
            #expect(sent.state.isAccepted, "\(sent.state)")
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob reads it") { messages.value.map(\.content) == ["before dana"] })
            try await dana.refresh()
            #expect(dana.chats.value.isEmpty, "the domain's list alone lets dana into nothing")
            // The domain lists dana already, so she is invited back through it.
            _ = try await world.domain.updateMembers(
                token: try await world.domain.testToken(userID: "alice").token, endpointID: try await aliceService.endpointID,
                chatID: chat.chatID, add: [], remove: ["dana"])
            try await alice.invite(["dana"], to: chat.chatID)
            try await alice.sendMessage("hello dana", to: chat.chatID)
            let danaMessages = try await dana.messages(in: chat.chatID)
            #expect(await waitFor("dana reads it") { danaMessages.value.map(\.content) == ["hello dana"] })
            #expect(try await alice.participants(of: chat.chatID).map(\.userID).sorted() == ["alice", "bob", "dana"])
        }
    }
}
