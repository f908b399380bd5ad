import Foundation
import SparkMLS
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkDomain
@testable import SparkDomainEngine
@_spi(Fuzzing) @testable import SparkSDK

/// Reactions and recall, end to end on an embedded domain, and each tried by a member who
/// forges them: a payload sealed by a real member of the chat, so MLS authenticates it, whose
/// only lie is what it claims about someone else's message or reaction.
@Suite("Messaging: reactions and recall")
struct RichMessagingTests {
    /// Posts `payload` into the chat as `user`'s device, sealed by its own group: what a
    /// modified client of a member would do.
    static func forge(_ payload: ChatPayload, as access: BBMAccess, user: String, in chatID: String, world: ChatWorld)
        async throws
    {
        let sealed = try await access.messenger.outbox.seal(payload, in: chatID)
        _ = try await world.domain.post(
            token: try await world.domain.testToken(userID: user).token, endpointID: access.messenger.endpointID,
            chatID: chatID, kind: .event, payload: sealed, recipient: nil, clientID: nil)
    }

    @Test func reactionsAreCountedPerMessageOnEveryDevice() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            let sent = try await alice.sendMessage("lunch?", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            let aliceMessages = try await alice.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { bobMessages.value.count == 1 })

            try await alice.react(to: sent.id, emoji: "👍")
            try await bob.react(to: sent.id, emoji: "👍")
            try await bob.react(to: sent.id, emoji: "🍕")
            try await bob.react(to: sent.id, emoji: "🍕")  // again: still one
            let both = [Reaction(emoji: "👍", userIDs: ["alice", "bob"]), Reaction(emoji: "🍕", userIDs: ["bob"])]
            #expect(await waitFor("alice counts both") { aliceMessages.value.first?.reactions == both })
            #expect(await waitFor("bob counts both") { bobMessages.value.first?.reactions == both })
            #expect(aliceMessages.value.first?.reactions.map(\.count) == [2, 1])

            try await bob.removeReaction(from: sent.id, emoji: "🍕")
            #expect(await waitFor("the removal reaches alice") { aliceMessages.value.first?.reactions.count == 1 })

            // Not an emoji, or a message that is not here: refused on the device, nothing sent.
            await #expect(throws: MessagingError(.invalidArgument, "")) { try await bob.react(to: sent.id, emoji: "ok") }
            await #expect(throws: MessagingError(.unknownChat, "")) { try await bob.react(to: "no-such", emoji: "👍") }

            // Bob's modified client removes alice's 👍: a reaction is its authenticated sender's,
            // so all it can remove is bob's own.
            try await Self.forge(
                ChatPayload(kind: .unreaction, id: "forged-1", content: "👍", ref: sent.id), as: bob, user: "bob",
                in: chat.chatID, world: world)
            #expect(await waitFor("bob's own 👍 goes") { aliceMessages.value.first?.reactions.first?.userIDs == ["alice"] })
        }
    }

    /// `messageChanges` names each message that changed after it arrived (an edit, a reaction, a
    /// recall), and never a message as it arrives: a bot or the C API reads the named ones again.
    @Test func messageChangesNameWhatChangedAfterItArrived() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let changes = Box<[MessageChange]>([])
            let stream = bob.messageChanges
            let listener = Task { for await change in stream { changes.update { $0.append(change) } } }
            defer { listener.cancel() }
            let chat = try await alice.startChat(with: ["bob"])
            let first = try await alice.sendMessage("first", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { bobMessages.value.count == 1 })
            try await alice.editMessage(first.id, content: "first, edited")
            try await alice.react(to: first.id, emoji: "👍")
            try await alice.recallMessage(first.id)
            let second = try await alice.sendMessage("second", to: chat.chatID)
            #expect(await waitFor("bob has the second") { bobMessages.value.last?.id == second.id })
            #expect(await waitFor("the recall reached bob") { bobMessages.value.first?.isRecalled == true })
            // What one mailbox read brought is one change: the three may come as one.
            #expect(await waitFor("bob is told the first changed") { changes.value.contains { $0.messageIDs == [first.id] } })
            let named = changes.value.flatMap { $0.messageIDs ?? ["(any)"] }
            #expect(changes.value.allSatisfy { $0.chatID == chat.chatID })
            #expect(Set(named) == [first.id], "an arrival is no change: \(named)")
            #expect(try await bob.message(first.id).isRecalled)
            await #expect(throws: MessagingError(.unknownChat, "")) { try await bob.message("no-such-message") }
        }
    }

    @Test func onlyTheSenderRecallsAndEveryDeviceRemovesTheContent() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            let secret = try await alice.sendMessage("the door code is 4711", to: chat.chatID)
            let kept = try await alice.sendMessage("see you", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has both") { bobMessages.value.count == 2 })
            try await bob.react(to: secret.id, emoji: "🔑")
            let events = EventRecorder(alice)

            // Bob may not recall alice's message: refused on his device, and forged, dropped on hers.
            await #expect(throws: MessagingError(.unknownChat, "")) { try await bob.recallMessage(kept.id) }
            try await Self.forge(
                ChatPayload(kind: .recall, id: "forged-2", ref: kept.id), as: bob, user: "bob", in: chat.chatID,
                world: world)
            #expect(
                await waitFor("the forged recall is dropped") {
                    events.value.contains { if case .dropped = $0 { true } else { false } }
                })
            #expect(try await alice.messages(in: chat.chatID).value.last?.isRecalled == false)

            try await alice.recallMessage(secret.id)
            #expect(await waitFor("bob's device removes it") { bobMessages.value.first?.isRecalled == true })
            let recalled = try #require(bobMessages.value.first)
            #expect(recalled.content.isEmpty && recalled.data == nil && recalled.reactions.isEmpty)
            #expect(bobMessages.value.last?.content == "see you", "the other message stays")
            let stored = try #require(try await bob.messenger.read { store in try store.message(secret.id) })
            #expect(stored.content.isEmpty && stored.isRecalled, "the store keeps nothing of it")
            // Nothing more happens to a recalled message: no edit, no reaction, no second recall.
            await #expect(throws: MessagingError(.unknownChat, "")) { try await bob.react(to: secret.id, emoji: "👍") }
            await #expect(throws: MessagingError(.invalidArgument, "")) {
                try await alice.editMessage(secret.id, content: "the door code is 1234")
            }
            // Alice's modified client edits it all the same: bob's device drops the edit.
            try await Self.forge(
                ChatPayload(kind: .edit, id: "forged-3", content: "the door code is 1234", ref: secret.id), as: alice,
                user: "alice", in: chat.chatID, world: world)
            try await alice.sendMessage("after", to: chat.chatID)
            #expect(await waitFor("bob has the later message") { bobMessages.value.count == 3 })
            #expect(bobMessages.value.first?.content.isEmpty == true, "the edit of a recalled message is dropped")
        }
    }

    /// Typing and an app's chat events reach the other member's device live, and nothing of
    /// them is stored: no message on either side. A notice the domain replays (at once, or a
    /// minute later under a new entry) shows nothing; one forged as another user's is dropped.
    @Test func typingAndChatEventsAreLiveAndNeverKept() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock(Date())
            let world = try ChatWorld(directory, clock: clock.wallClock)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            #expect(await waitFor("bob is in the chat") { bob.chats.value.count == 1 })
            let events = EventRecorder(bob)
            @Sendable func typing() -> [Bool] {
                events.value.compactMap { if case .typing(chat.chatID, "alice", let on) = $0 { on } else { nil } }
            }
            try await alice.sendTyping(in: chat.chatID)
            #expect(await waitFor("bob sees alice typing") { typing() == [true] })
            try await alice.sendChatEvent("whiteboard", data: #"{"x":1,"y":2}"#, to: chat.chatID)
            #expect(
                await waitFor("bob gets the chat event") {
                    events.value.contains(
                        .chatEvent(chatID: chat.chatID, userID: "alice", tag: "whiteboard", data: #"{"x":1,"y":2}"#))
                })
            try await alice.sendTyping(in: chat.chatID, isTyping: false)
            #expect(await waitFor("bob sees alice stop") { typing() == [true, false] })
            let (bobMessages, aliceMessages) = (
                try await bob.messages(in: chat.chatID), try await alice.messages(in: chat.chatID)
            )
            #expect(bobMessages.value.isEmpty && aliceMessages.value.isEmpty, "nothing of it is a message")
            await #expect(throws: MessagingError(.invalidArgument, "")) {
                try await alice.sendChatEvent("", data: nil, to: chat.chatID)
            }

            // The domain replays alice's typing notice: at once, then a minute later.
            let bobToken = try await world.domain.testToken(userID: "bob").token
            let mailbox = try await world.domain.readMailbox(
                token: bobToken, endpointID: try await bobService.endpointID, after: 0, limit: 100)
            let notice = try #require(mailbox.first { $0.kind == .ephemeral })
            let aliceToken = try await world.domain.testToken(userID: "alice").token
            func replay() async throws {
                _ = try await world.domain.post(
                    token: aliceToken, endpointID: alice.messenger.endpointID, chatID: chat.chatID, kind: .ephemeral,
                    payload: notice.payload, recipient: nil, clientID: nil)
                try await bob.refresh()
            }
            try await replay()
            clock.advance(by: 60)
            try await replay()
            // Events come in order: once this one is here, anything the replays raised is too.
            try await alice.sendChatEvent("after-replay", to: chat.chatID)
            #expect(
                await waitFor("the later event arrives") {
                    events.value.contains { if case .chatEvent(_, _, "after-replay", _) = $0 { true } else { false } }
                })
            #expect(typing() == [true, false], "a replay shows nothing: \(typing())")

            // Bob's modified client sends a notice that the domain passes off as alice's.
            let messenger = bob.messenger
            let now = clock.now
            let forged = try await messenger.read { store in
                var random = MLSSystemRandom()
                let stored = try #require(
                    try messenger.session(chat.chatID, in: store))
                return try stored.group.sealEphemeral(
                    ChatPayload(kind: .typing, id: "t-forged", upTo: Int64(now.timeIntervalSince1970 * 1000)),
                    random: &random)
            }
            let aliceEvents = EventRecorder(alice)
            try await world.domain.store.write { db in
                try EmbeddedDomain.append(
                    db, to: ["alice"], chatID: chat.chatID, sender: "carol", kind: .ephemeral, messageNumber: nil,
                    payload: forged, members: nil, now: clock.now.timeIntervalSince1970, epoch: nil)
            }
            try await alice.refresh()
            #expect(
                await waitFor("alice's device drops it") {
                    aliceEvents.value.contains { if case .dropped = $0 { true } else { false } }
                })
            #expect(!aliceEvents.value.contains { if case .typing = $0 { true } else { false } })
        }
    }

    /// The group's side of an ephemeral entry, without a domain: it opens only as the user who
    /// signed it, only near its own time, and only in its epoch.
    @Test func anEphemeralEntryOpensOnlyAsItsSignerNearItsTime() throws {
        let fixture = try ChatProbe.fixture()
        let sent = Date(timeIntervalSince1970: 1_790_000_000)
        func entry(_ sender: String, _ payload: Data) -> MailboxEntry {
            MailboxEntry(
                sequence: 1, chatID: "c1", sender: sender, kind: .ephemeral, messageNumber: nil, payload: payload, members: nil,
                postedAt: sent)
        }
        guard case .event(let payload, let sender, _) = fixture.bob.receiveEphemeral(entry("alice", fixture.ephemeral), now: sent)
        else {
            Issue.record("alice's typing notice did not open")
            return
        }
        #expect(payload.kind == .typing && sender.user == "alice")
        let relabelled = fixture.bob.receiveEphemeral(entry("bob", fixture.ephemeral), now: sent)
        #expect(relabelled == .drop("signed by a device of another user than the domain names (bob)"))
        #expect(fixture.bob.receiveEphemeral(entry("alice", fixture.ephemeral), now: sent + 60) == .ignore, "a minute old")
        #expect(fixture.bob.receiveEphemeral(entry("alice", fixture.ephemeral), now: sent - 60) == .ignore, "from the future")
        var altered = fixture.ephemeral
        altered[altered.count - 1] ^= 1
        guard case .drop = fixture.bob.receiveEphemeral(entry("alice", altered), now: sent) else {
            Issue.record("an altered notice opened")
            return
        }
        // After a commit, the epoch's key is another: the notice is not news, and nothing breaks.
        var bob = fixture.bob
        let commit = MailboxEntry(
            sequence: 2, chatID: "c1", sender: "alice", kind: .commit, messageNumber: nil, payload: fixture.commit, members: nil,
            postedAt: sent, epoch: fixture.epoch)
        guard case .commit = bob.receive(commit, now: sent) else {
            Issue.record("the commit did not apply")
            return
        }
        #expect(bob.receiveEphemeral(entry("alice", fixture.ephemeral), now: sent) == .ignore)
    }

    /// A chat's timer is in its group: set by one member, applied by every device. A message
    /// sent after it disappears from the sender's devices its time after it was sent, and from a
    /// recipient's its time after it was read; nothing of it is left in the store's files.
    @Test func disappearingMessagesLeaveNothingBehind() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock(Date())
            let world = try ChatWorld(directory, clock: clock.wallClock)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            let before = try await alice.sendMessage("before the timer", to: chat.chatID)
            await #expect(throws: MessagingError(.invalidArgument, "")) {
                try await alice.setDisappearingTimer(.seconds(2), in: chat.chatID)
            }
            try await alice.setDisappearingTimer(.seconds(60), in: chat.chatID)
            #expect(try await alice.chat(chat.chatID).disappearingTimer == .seconds(60))
            #expect(await waitFor("bob's device applies it") { bob.chats.value.first?.disappearingTimer == .seconds(60) })

            let secret = try await alice.sendMessage("this message will self-destruct", to: chat.chatID)
            let sentAt = try #require(secret.expiresAt).timeIntervalSince1970 - 60
            #expect(abs(sentAt - secret.timestamp.timeIntervalSince1970) < 1, "counted from when it was sent")
            let bobMessages = try await bob.messages(in: chat.chatID)
            let aliceMessages = try await alice.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { bobMessages.value.count == 2 })
            #expect(bobMessages.value.last?.expiresAt == nil, "unread: its clock has not started")
            clock.advance(by: 30)
            try await bob.markMessagesRead(in: chat.chatID)
            #expect(await waitFor("read: bob's clock starts") { bobMessages.value.last?.expiresAt != nil })
            let bobQueue = try #require(bob.messenger.storage.sqliteQueue)
            let sealed = try #require(
                try bobQueue.read { db in
                    try db.scalar("SELECT content FROM messages WHERE local_id = ?", [secret.id], as: Data.self)
                })

            clock.advance(by: 31)  // 61 s after sending: gone from alice's devices, not from bob's yet
            #expect(await waitFor("alice's device removes it") { aliceMessages.value.map(\.id) == [before.id] })
            #expect(bobMessages.value.count == 2, "bob read it 31 s ago")
            clock.advance(by: 30)
            #expect(await waitFor("bob's device removes it") { bobMessages.value.map(\.id) == [before.id] })
            // Not in the store, its write-ahead log or anywhere in the files.
            let bobDirectory = directory.appendingPathComponent("bob-phone")
            for file in ["endpoint.sqlite", "endpoint.sqlite-wal"] {
                let bytes = (try? Data(contentsOf: bobDirectory.appendingPathComponent(file))) ?? Data()
                #expect(bytes.range(of: sealed) == nil, "the sealed content is gone from \(file)")
            }
            // Off again: what is sent next stays.
            try await alice.setDisappearingTimer(nil, in: chat.chatID)
            let kept = try await alice.sendMessage("this one stays", to: chat.chatID)
            #expect(kept.expiresAt == nil)
        }
    }

    /// A receipt that comes after its message expired (bob read late, on a loaded machine) moves
    /// the hidden row's state, and the flow stays without the message: it once came back, since
    /// a flow updated by ids read the expired row as any other, and then stayed there.
    @Test func anExpiredMessageStaysGoneWhenItsReceiptComesLate() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let clock = TestClock(Date())
            let world = try ChatWorld(directory, clock: clock.wallClock)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            let before = try await alice.sendMessage("before the timer", to: chat.chatID)
            try await alice.setDisappearingTimer(.seconds(60), in: chat.chatID)
            #expect(await waitFor("bob's device applies it") { bob.chats.value.first?.disappearingTimer == .seconds(60) })
            let secret = try await alice.sendMessage("gone in a minute", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            let aliceMessages = try await alice.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { bobMessages.value.count == 2 })
            clock.advance(by: 61)
            #expect(await waitFor("alice's device removes it") { aliceMessages.value.map(\.id) == [before.id] })
            // Only now does bob read both: his receipt reaches alice after her copy expired.
            try await bob.markMessagesRead(in: chat.chatID)
            #expect(await waitFor("alice sees bob read the first") { aliceMessages.value.first?.state == .read })
            #expect(aliceMessages.value.map(\.id) == [before.id], "the expired one stays gone: \(aliceMessages.value)")
            #expect(try await alice.messages(in: chat.chatID).value.map(\.id) == [before.id])
            #expect(secret.expiresAt != nil)
        }
    }

    /// Alice reports bob with his message: the operator reads what she revealed, as her device
    /// holds it; she cannot reveal her own message as his, nor report someone outside the chat.
    @Test func aReportRevealsTheChosenMessagesToTheOperator() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            let own = try await alice.sendMessage("hi", to: chat.chatID)
            #expect(await waitFor("bob is in the chat") { bob.chats.value.count == 1 })
            try await bob.sendMessage("something abusive", to: chat.chatID)
            let aliceMessages = try await alice.messages(in: chat.chatID)
            #expect(await waitFor("alice has it") { aliceMessages.value.count == 2 })
            let abusive = try #require(aliceMessages.value.last)
            var altered = abusive
            altered.content = "something worse"
            try await alice.report("bob", in: chat.chatID, messages: [altered], reason: "abuse")
            let reports = try world.domain.reports(limit: 10)
            #expect(reports.count == 1 && reports.first?.reported == "bob" && reports.first?.reporter == "alice")
            #expect(reports.first?.messages.map(\.content) == ["something abusive"], "what arrived, not what the app passed")
            await #expect(throws: MessagingError(.invalidArgument, "")) {
                try await alice.report("bob", in: chat.chatID, messages: [own], reason: "framing bob")
            }
            await #expect(throws: MessagingError(.invalidArgument, "")) {
                try await alice.report("bob", in: chat.chatID, messages: [], reason: "nothing")
            }
            #expect(try world.domain.reports(limit: 10).count == 1)
            let listed = try await SparkAdminTests.admin(
                ["--domain", directory.appendingPathComponent("domain.sqlite").path, "reports"])
            #expect(
                listed.stdout.contains("alice reports bob") && listed.stdout.contains("bob: something abusive"),
                "\(listed.stdout)")
        }
    }
}
