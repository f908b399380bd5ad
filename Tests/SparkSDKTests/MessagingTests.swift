import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkMLS
import SparkObservable
import SparkStore
import SparkTestSupport
import Synchronization
import Testing

@testable import SparkSDK

/// Users with set-up endpoints on one embedded domain.
struct ChatWorld {
    let devices: Devices

    init(
        _ directory: URL, messaging: MessagingStoreKind = .sqlite, policy: DomainPolicy = DomainPolicy(passwordIterations: 1000),
        clock: WallClock = .system
    ) throws {
        devices = try Devices(directory, messaging: messaging, policy: policy, clock: clock)
    }

    var domain: EmbeddedDomain { devices.domain }

    /// A set-up endpoint of `user` named `device`; the first endpoint of a user creates keys.
    func endpoint(_ user: String, _ device: String, postQuantumChats: Bool = true) async throws -> (
        BBMEnterpriseService, BBMAccess
    ) {
        let service = try await devices.service(device, postQuantumChats: postQuantumChats)
        let state = try await devices.begin(service, user: user)
        try await service.syncStart(passcode: "\(user)-passcode", action: state.syncPasscodeState == .new ? .new : .existing)
        let settled = await service.waitForSettledState()
        guard settled.setupState == .success else { throw MessagingError(.notReady, "setup of \(device) ended in \(settled)") }
        return (service, try await service.messaging())
    }

    /// `user`'s endpoint `device` started again on what its data directory holds (after a
    /// crash, a kill or a power cut): a new store and service, signed in silently.
    func restart(_ device: String, user: String) async throws -> (BBMEnterpriseService, BBMAccess) {
        let store = try EndpointStore(directory: devices.directory.appendingPathComponent(device))
        let service = BBMEnterpriseService(store: store, endpointDescription: device, unsafePasscodeIterations: 1000)
        try await service.start(domain: domain, environment: .sandbox)
        let state = try await devices.begin(service, user: user).setupState
        guard state == .success else { throw MessagingError(.notReady, "\(device) started again in \(state)") }
        return (service, try await service.messaging())
    }
}

func waitFor(_ what: String, _ condition: @Sendable () -> Bool) async -> Bool { await eventually(condition) }

/// Approves the user's new `device` on `existing`, as the user does once both screens show the
/// same code: only then does it join the user's chats.
func approve(_ device: BBMAccess, on existing: BBMAccess) async throws {
    let existingID = try #require(try await existing.devices().first { $0.approval == .thisDevice }).endpointID
    let newID = try #require(try await device.devices().first { $0.approval == .thisDevice }).endpointID
    try await existing.approveDevice(newID, code: try await device.approvalCode(with: existingID))
}

/// Every messaging event of one endpoint, from the moment it is made until `stop()` or deinit.
final class EventRecorder: Sendable {
    private let box: Box<[MessagingEvent]>
    private let listener: Task<Void, Never>

    init(_ access: BBMAccess) {
        let stream = access.events  // subscribed now, before anything happens
        let box = Box<[MessagingEvent]>([])
        self.box = box
        listener = Task { for await event in stream { box.update { $0.append(event) } } }
    }

    deinit { listener.cancel() }

    /// The events so far.
    var value: [MessagingEvent] { box.value }

    /// Stops recording.
    func stop() { listener.cancel() }
}

@Suite("Messaging")
struct MessagingTests {
    @Test func aConversationWithStatesReceiptsAndUnreadCounts() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"], subject: "Lunch")
            #expect(chat.isOneToOne && chat.participants.map(\.userID).sorted() == ["alice", "bob"])
            let first = try await alice.sendMessage("12:30 at the usual place?", to: chat.chatID)
            #expect(first.state.isAccepted && first.number == 1)
            let second = try await alice.sendMessage("I'll book", tag: "Text", data: #"{"table":4}"#, to: chat.chatID)
            #expect(second.number == 2)

            #expect(await waitFor("bob gets the chat") { bob.chats.value.first?.unreadCount == 2 })
            let bobChat = try #require(bob.chats.value.first)
            #expect(bobChat.subject == "Lunch" && bobChat.chatID == chat.chatID)
            let received = try await bob.messages(in: chat.chatID).value
            #expect(received.map(\.content) == ["12:30 at the usual place?", "I'll book"])
            #expect(received.map(\.number) == [1, 2] && received.allSatisfy { $0.isIncoming && $0.state == .delivered })
            #expect(received[1].data == #"{"table":4}"#)

            let aliceMessages = try await alice.messages(in: chat.chatID)
            #expect(await waitFor("delivered receipts") { aliceMessages.value.allSatisfy { $0.state == .delivered } })
            try await bob.markMessagesRead(in: chat.chatID, upTo: 1)
            #expect(try await bob.chat(chat.chatID).unreadCount == 1)
            #expect(
                await waitFor("read receipt") {
                    aliceMessages.value.first?.state == .read && aliceMessages.value.last?.state == .delivered
                })
            try await bob.markMessagesRead(in: chat.chatID)
            #expect(await waitFor("all read") { aliceMessages.value.allSatisfy { $0.state == .read } })

            let reply = try await bob.sendMessage("Perfect", ref: 2, to: chat.chatID)
            #expect(reply.number == 3 && reply.ref == 2)
            #expect(await waitFor("alice gets the reply") { aliceMessages.value.count == 3 })
            #expect(try await alice.chat(chat.chatID).unreadCount == 1)
        }
    }

    @Test func everyEndpointOfAUserConverges() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let (_, alicePhone) = try await world.endpoint("alice", "alice-phone")
            try await approve(alicePhone, on: alice)
            let chat = try await alice.startChat(with: ["bob"], subject: "Plans")
            try await alice.sendMessage("from the laptop", to: chat.chatID)
            #expect(await waitFor("bob") { bob.chats.value.first?.unreadCount == 1 })
            try await bob.sendMessage("hi both", to: chat.chatID)
            let phoneMessages = try await alicePhone.messages(in: chat.chatID)
            #expect(await waitFor("alice's phone sees both") { phoneMessages.value.count == 2 })
            #expect(phoneMessages.value.map(\.content) == ["from the laptop", "hi both"])
            #expect(phoneMessages.value[0].isIncoming == false && phoneMessages.value[1].isIncoming)
            // Read on the laptop, read on the phone.
            #expect(await waitFor("laptop has bob's reply") { alice.chats.value.first?.unreadCount == 1 })
            try await alice.markMessagesRead(in: chat.chatID)
            #expect(await waitFor("phone converges") { alicePhone.chats.value.first?.unreadCount == 0 })
            #expect(alicePhone.chats.value.first?.subject == "Plans")
            // And the phone can send in the chat the laptop started.
            try await alicePhone.sendMessage("from the phone", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob gets the phone's message") { bobMessages.value.last?.content == "from the phone" })
        }
    }

    /// Alice edits her message: bob's device shows the new text. Only a message's sender edits
    /// it: bob's edit of alice's message is refused on his device and, forged, dropped on hers.
    @Test func aSenderEditsTheirMessageAndNoOneElseCan() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            let sent = try await alice.sendMessage("helo", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { bobMessages.value.map(\.content) == ["helo"] })
            try await alice.editMessage(sent.id, content: "hello")
            #expect(await waitFor("bob sees the edit") { bobMessages.value.map(\.content) == ["hello"] })
            #expect(try await alice.messages(in: chat.chatID).value.map(\.content) == ["hello"])
            await #expect(throws: MessagingError(.unknownChat, "")) { try await bob.editMessage(sent.id, content: "hacked") }
            let events = EventRecorder(alice)
            let forged = try await bob.messenger.outbox.seal(
                ChatPayload(kind: .edit, id: "e-forged", content: "hacked", ref: sent.id), in: chat.chatID)
            _ = try await world.domain.post(
                token: try await world.domain.testToken(userID: "bob").token, endpointID: try await bobService.endpointID,
                chatID: chat.chatID, kind: .event, payload: forged, recipient: nil, clientID: nil)
            #expect(await waitFor("dropped") { events.value.contains { if case .dropped = $0 { true } else { false } } })
            #expect(try await alice.messages(in: chat.chatID).value.map(\.content) == ["hello"])
        }
    }

    @Test func forgedReplayedAlteredAndCrossChatMessagesAreDropped() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
            let one = try await alice.startChat(with: ["bob"], subject: "one")
            let two = try await alice.startChat(with: ["bob"], subject: "two")
            #expect(await waitFor("bob knows both chats") { bob.chats.value.count == 2 })
            try await bob.sendMessage("genuine", to: one.chatID)
            let aliceOne = try await alice.messages(in: one.chatID)
            #expect(await waitFor("genuine arrives") { aliceOne.value.count == 1 })

            // Bob's own sealed message, read back from the domain as a tampering client would.
            let bobToken = try await world.domain.testToken(userID: "bob").token
            let bobEndpoint = try await bobService.endpointID
            let mailbox = try await world.domain.readMailbox(token: bobToken, endpointID: bobEndpoint, after: 0, limit: 100)
            let sealed = try #require(mailbox.last { $0.kind == .message && $0.chatID == one.chatID }?.payload)
            func post(_ payload: Data, to chat: String) async throws {
                _ = try await world.domain.post(
                    token: bobToken, endpointID: bobEndpoint, chatID: chat, kind: .message, payload: payload, recipient: nil,
                    clientID: nil)
            }
            let events = EventRecorder(alice)
            try await post(sealed, to: one.chatID)  // replayed
            try await post(sealed, to: two.chatID)  // cross-chat
            var altered = sealed
            altered[altered.count - 1] ^= 1
            try await post(altered, to: one.chatID)  // altered
            // Mallory, a member of neither chat, cannot post into them at all.
            let (malloryService, _) = try await world.endpoint("mallory", "mallory-pc")
            let malloryToken = try await world.domain.testToken(userID: "mallory").token
            await #expect(throws: DomainError(.notAMember, "")) {
                try await world.domain.post(
                    token: malloryToken, endpointID: try await malloryService.endpointID, chatID: one.chatID, kind: .message,
                    payload: sealed,
                    recipient: nil, clientID: nil)
            }
            #expect(await waitFor("three drops") { events.value.count >= 3 })
            events.stop()
            #expect(events.value.allSatisfy { if case .dropped = $0 { true } else { false } })
            try await alice.refresh()
            #expect(aliceOne.value.count == 1 && aliceOne.value[0].content == "genuine")
            #expect(try await alice.messages(in: two.chatID).value.isEmpty)
            #expect(try await alice.chat(one.chatID).unreadCount == 1, "nothing extra counted or marked")
        }
    }

    @Test func tooLargeAndModeratedMessagesFailWithAReason() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            try await alice.sendMessage("before", to: chat.chatID)
            await #expect(throws: MessagingError(.tooLarge, "")) {
                try await alice.sendMessage(String(repeating: "x", count: 70 * 1024 + 1), to: chat.chatID)
            }
            try world.domain.timeOut("alice", for: 300, reason: "spamming")
            let timedOut = try await alice.sendMessage("let me talk", to: chat.chatID)
            guard case .failed(let reason) = timedOut.state else {
                Issue.record("expected a failure")
                return
            }
            #expect(reason.contains("timed out") && reason.contains("spamming"))
            try world.domain.unban("alice")
            try world.domain.ban("alice", reason: "abuse")
            guard case .failed(let banned) = try await alice.sendMessage("again", to: chat.chatID).state else {
                Issue.record("expected a failure")
                return
            }
            #expect(banned.contains("banned"))
            try world.domain.unban("alice")
            #expect(try await alice.sendMessage("sorry", to: chat.chatID).state.isAccepted)
            // Numbers stay gapless: refused messages never got one.
            #expect(try await alice.messages(in: chat.chatID).value.compactMap(\.number) == [1, 2])
            // And bob's device knows the two refused ones were withdrawn, not withheld.
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has both") { bobMessages.value.map(\.content) == ["before", "sorry"] })
            #expect(bob.chats.value.first?.missingMessageCount == 0)
        }
    }

    @Test func aCrashAfterTheDomainAcceptedIsResentExactlyOnce() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (aliceService, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"], subject: "crash")
            let sent = try await alice.sendMessage("exactly once", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { bobMessages.value.count == 1 })
            // The crash: the domain accepted the post but the endpoint died before recording the
            // answer, so its store still says "sending", with the bytes it posted (the bytes are
            // the domain's copy: the store forgets its own once the answer is recorded).
            await aliceService.stop()
            // A stopped messenger does nothing more: what the app still holds of it refuses, and
            // nothing it had under way can overwrite what the next one records.
            await #expect(throws: MessagingError(.notReady, "")) { try await alice.sendMessage("late", to: chat.chatID) }
            await #expect(throws: MessagingError(.notReady, "")) { try await alice.refresh() }
            await #expect(throws: MessagingError(.notReady, "")) { try await alice.markMessagesRead(in: chat.chatID) }
            let posted = try DatabaseQueue(path: world.domain.path).read { db in
                try db.scalar(
                    "SELECT payload FROM mailbox WHERE user_id = 'bob' AND kind = 'message' AND message_number = 1", as: Data.self
                )
            }
            let file = directory.appendingPathComponent("alice-laptop/endpoint.sqlite").path
            try DatabaseQueue(path: file).write { db in
                try db.execute(
                    "UPDATE messages SET state = 'sending', number = NULL, sealed = ? WHERE local_id = ?",
                    [try #require(posted), sent.id])
            }
            let store = try EndpointStore(directory: directory.appendingPathComponent("alice-laptop"))
            let restarted = BBMEnterpriseService(
                store: store, endpointDescription: "alice-laptop", unsafePasscodeIterations: 1000)
            try await restarted.start(domain: world.domain, environment: .sandbox)
            #expect(try await world.devices.begin(restarted).setupState == .success)
            let again = try await restarted.messaging()
            let mine = try await again.messages(in: chat.chatID)
            #expect(
                await waitFor("resent and confirmed") { mine.value.first?.state != .sending && mine.value.first?.number == 1 })
            #expect(try await again.chat(chat.chatID).subject == "crash", "chats survive the restart")
            try await again.sendMessage("after the restart", to: chat.chatID)
            #expect(await waitFor("bob gets the next one") { bobMessages.value.count == 2 })
            try await bob.refresh()
            #expect(bobMessages.value.map(\.content) == ["exactly once", "after the restart"], "no duplicate")
            #expect(bobMessages.value.map(\.number) == [1, 2])
        }
    }

    @Test func refreshesDuringThePollApplyEachEntryOnce() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let events = EventRecorder(bob)
            let chat = try await alice.startChat(with: ["bob"], subject: "busy")
            for n in 1...20 { try await alice.sendMessage("message \(n)", to: chat.chatID) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<6 { group.addTask { try await bob.refresh() } }
                try await group.waitForAll()
            }
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("all twenty") { messages.value.count == 20 })
            #expect(messages.value.map(\.number) == Array(1...20))
            #expect(events.value.isEmpty, "nothing was dropped: \(events.value)")
        }
    }

    @Test func concurrentSendsAllArrive() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let events = EventRecorder(bob)
            let chat = try await alice.startChat(with: ["bob"], subject: "at once")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 1...12 { group.addTask { try await alice.sendMessage("message \(n)", to: chat.chatID) } }
                try await group.waitForAll()
            }
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("all twelve") { messages.value.count == 12 })
            #expect(Set(messages.value.map(\.content)) == Set((1...12).map { "message \($0)" }))
            #expect(messages.value.map(\.number) == Array(1...12))
            #expect(events.value.isEmpty, "nothing was dropped: \(events.value)")
        }
    }

    @Test func aMessageLeftSendingIsNeverOvertaken() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let events = EventRecorder(bob)
            let chat = try await alice.startChat(with: ["bob"], subject: "outage")
            // The domain's store fails for a while: the first message is left sending.
            let domainFile = try DatabaseQueue(path: world.domain.path)
            try domainFile.write { db in
                try db.execute("CREATE TRIGGER down BEFORE INSERT ON posted BEGIN SELECT RAISE(ABORT, 'down'); END")
            }
            let first = try await alice.sendMessage("first", to: chat.chatID)
            #expect(first.state == .sending && first.number == nil)
            // A rename is a commit: it moves the chat to its next epoch while the message waits.
            try await alice.updateChatSubject(chat.chatID, subject: "renamed")
            try domainFile.write { db in try db.execute("DROP TRIGGER down") }
            // The next message goes after the first, never before it.
            let second = try await alice.sendMessage("second", to: chat.chatID)
            #expect(second.number == 2)
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("both") { messages.value.count == 2 })
            #expect(messages.value.map(\.content) == ["first", "second"] && messages.value.map(\.number) == [1, 2])
            #expect(events.value.isEmpty, "nothing was dropped: \(events.value)")
        }
    }

    /// Bob's device, off while alice sends `texts` to their chat (so that its next read is one
    /// page of them): the world, the chat, bob's store file (to set triggers on before he comes
    /// back), and `back`, which starts his device again.
    struct OfflinePage {
        let world: ChatWorld
        let chat: Chat
        let bobFile: DatabaseQueue
        let back: @Sendable () async throws -> BBMAccess
    }

    static func offlinePage(_ directory: URL, subject: String, texts: [String]) async throws -> OfflinePage {
        let world = try ChatWorld(directory)
        let (_, alice) = try await world.endpoint("alice", "alice-laptop")
        let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
        let chat = try await alice.startChat(with: ["bob"], subject: subject)
        #expect(await waitFor("bob has the chat") { bob.chats.value.first?.chatID == chat.chatID })
        try await bob.refresh()
        await bobService.stop()
        for text in texts { try await alice.sendMessage(text, to: chat.chatID) }
        let bobFile = try DatabaseQueue(path: directory.appendingPathComponent("bob-phone/endpoint.sqlite").path)
        return OfflinePage(world: world, chat: chat, bobFile: bobFile) {
            let store = try EndpointStore(directory: directory.appendingPathComponent("bob-phone"))
            let restarted = BBMEnterpriseService(store: store, endpointDescription: "bob-phone", unsafePasscodeIterations: 1000)
            try await restarted.start(domain: world.domain, environment: .sandbox)
            #expect(try await world.devices.begin(restarted, user: "bob").setupState == .success)
            return try await restarted.messaging()
        }
    }

    /// A page of mailbox entries is applied with the cursor in one transaction: a store that
    /// fails on the page's third message leaves none of the page applied and the cursor where it
    /// was (not the first two kept and the rest lost, nor the cursor moved past them); once it
    /// recovers, the whole page arrives, each message once, in order.
    @Test func aPageIsAppliedWholeWithItsCursorOrNotAtAll() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let page = try await Self.offlinePage(directory, subject: "one page", texts: ["one", "two", "three"])
            let (chat, bobFile) = (page.chat, page.bobFile)
            try bobFile.write { db in
                try db.execute(
                    "CREATE TRIGGER full BEFORE INSERT ON messages WHEN NEW.number = 3 BEGIN SELECT RAISE(ABORT, 'disk full'); END"
                )
            }
            let cursor = try bobFile.read { db in try db.scalar("SELECT sequence FROM mailbox_cursor", as: Int64.self) }
            let again = try await page.back()
            let events = EventRecorder(again)
            let refused = await #expect(throws: MessagingError.self) { try await again.refresh() }
            #expect(refused?.code == .storageFailure)
            #expect(try await again.messages(in: chat.chatID, before: nil, limit: 10).isEmpty, "none of the page")
            #expect(
                try bobFile.read { db in try db.scalar("SELECT sequence FROM mailbox_cursor", as: Int64.self) } == cursor,
                "the cursor did not move")
            try bobFile.write { db in try db.execute("DROP TRIGGER full") }
            try await again.refresh()
            let messages = try await again.messages(in: chat.chatID)
            #expect(await waitFor("the page arrives") { messages.value.count == 3 })
            #expect(messages.value.map(\.content) == ["one", "two", "three"] && messages.value.map(\.number) == [1, 2, 3])
            #expect(events.value.isEmpty, "nothing was dropped: \(events.value)")
        }
    }

    /// A page's messages of one chat each move its group's ratchets; the group is written once
    /// for the page, at its end, not once a message (`GroupStore.deferringSaves`).
    @Test func aPageWritesEachChatsGroupOnce() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let page = try await Self.offlinePage(directory, subject: "one write", texts: (1...5).map { "m\($0)" })
            let (chat, bobFile) = (page.chat, page.bobFile)
            try bobFile.write { db in
                try db.execute("CREATE TABLE group_writes(chat_id TEXT)")
                try db.execute(
                    "CREATE TRIGGER counted AFTER UPDATE ON chat_groups BEGIN INSERT INTO group_writes VALUES (NEW.chat_id); END")
            }
            let again = try await page.back()
            try await again.refresh()
            let messages = try await again.messages(in: chat.chatID)
            #expect(await waitFor("the page arrives") { messages.value.count == 5 })
            #expect(messages.value.map(\.content) == (1...5).map { "m\($0)" }, "each opened, in order")
            let writes = try bobFile.read { db in
                try db.scalar("SELECT count(*) FROM group_writes WHERE chat_id = ?", [chat.chatID], as: Int.self)
            }
            // Once for the page of five, and once more when bob seals its delivery receipt (it may
            // not have yet); not once a message.
            #expect((1...2).contains(writes ?? 0), "the chat's group was written \(writes ?? 0) times")
            try bobFile.write { db in try db.execute("DROP TRIGGER counted") }
        }
    }

    @Test func aStorageFailureWhileReceivingLosesNothing() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"], subject: "disk full")
            #expect(await waitFor("bob has the chat") { bob.chats.value.first?.chatID == chat.chatID })
            let events = EventRecorder(bob)
            // Bob's disk refuses every new message row from now on.
            let file = directory.appendingPathComponent("bob-phone/endpoint.sqlite").path
            let bobFile = try DatabaseQueue(path: file)
            try bobFile.write { db in
                try db.execute("CREATE TRIGGER full BEFORE INSERT ON messages BEGIN SELECT RAISE(ABORT, 'disk full'); END")
            }
            try await alice.sendMessage("kept", to: chat.chatID)
            let refused = await #expect(throws: MessagingError.self) { try await bob.refresh() }
            #expect(refused?.code == .storageFailure)
            #expect(try await bob.messages(in: chat.chatID).value.isEmpty)
            // The disk recovers: the message was not consumed, and arrives once.
            try bobFile.write { db in try db.execute("DROP TRIGGER full") }
            try await bob.refresh()
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("kept arrives") { messages.value.count == 1 })
            #expect(messages.value.map(\.content) == ["kept"] && messages.value.first?.number == 1)
            #expect(events.value.isEmpty, "nothing was dropped: \(events.value)")
        }
    }
}

@Suite("Messaging: groups, rotation, identities")
struct GroupMessagingTests {
    @Test func aMemberWhoLeavesGetsNoKeyForWhatFollows() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
            let (carolService, carol) = try await world.endpoint("carol", "carol-pc")
            let group = try await alice.startChat(with: ["bob", "carol"], subject: "Trio")
            #expect(await waitFor("carol knows the chat") { carol.chats.value.count == 1 })
            try await alice.sendMessage("all three of us", to: group.chatID)
            let carolMessages = try await carol.messages(in: group.chatID)
            #expect(await waitFor("carol reads it") { carolMessages.value.count == 1 })

            try await carol.leaveChat(group.chatID)
            #expect(try await carol.chat(group.chatID).isActive == false)
            let aliceChat = try await alice.chat(group.chatID)
            #expect(await waitFor("alice sees carol leave") { alice.chats.value.first?.participants.count == 2 })
            _ = aliceChat
            try await alice.sendMessage("just us now", to: group.chatID)
            let bobMessages = try await bob.messages(in: group.chatID)
            #expect(await waitFor("bob reads it") { bobMessages.value.count == 2 })

            // Alice's device (the admin's) removed carol's device from the group by a commit
            // before "just us now", and the domain stopped routing to carol.
            #expect(try await alice.messenger.chats.groupDevices(of: group.chatID).map(\.user) == ["alice", "bob"])
            let token = try await world.domain.testToken(userID: "carol").token
            let mailbox = try await world.domain.readMailbox(
                token: token, endpointID: try await carolService.endpointID, after: 0, limit: 500)
            #expect(
                !mailbox.contains { $0.kind == .message && $0.postedAt > (carolMessages.value.first?.timestamp ?? .distantPast) })
            #expect(carolMessages.value.count == 1)
            let bobToken = try await world.domain.testToken(userID: "bob").token
            let bobMailbox = try await world.domain.readMailbox(
                token: bobToken, endpointID: try await bobService.endpointID, after: 0, limit: 500)
            #expect(bobMailbox.filter { $0.kind == .commit }.map(\.epoch) == [0, 1], "the chat's commit, then carol's removal")
        }
    }

    @Test func aGroupOfTwoHundredAndFiftyParticipants() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            // 248 more users with published identities and a device each (registered, keys and a
            // last-resort KeyPackage made directly: past 200 one-time claims an hour, a claimer
            // gets the last-resort ones).
            let others = (1...248).map { "user\($0)" }
            var random = MLSSystemRandom()
            for user in others {
                let token = try await world.domain.testToken(userID: user).token
                _ = try await world.domain.registerEndpoint(
                    token: token, registration: .init(endpointID: "e-\(user)", description: "x"))
                let keys = try UnlockedKeys.generate(userID: user, keyVersion: 1)
                try await world.domain.publishIdentity(token: token, endpointID: "e-\(user)", identity: keys.publishedIdentity())
                let device = try Ed25519.PrivateKey()
                let credential = try DeviceCredential.issue(
                    userID: user, deviceID: "e-\(user)", signatureKey: device.publicKey.rawRepresentation, identityKeyVersion: 1,
                    identityKey: keys.signing)
                // Each device runs both suites (as this release does).
                let signer = MLSSigner(credential: credential.mlsCredential, key: device)
                for (suite, other) in [(MLSCipherSuite.xWingAES128GCMSHA256Ed25519, MLSCipherSuite.x25519AES128GCMSHA256Ed25519)]
                    + [(.x25519AES128GCMSHA256Ed25519, .xWingAES128GCMSHA256Ed25519)]
                {
                    let bundle = try MLSKeyPackageBundle(
                        signer: signer, suite: suite, alsoSupported: [other], now: Date(), random: &random)
                    _ = try await world.domain.publishKeyPackages(
                        token: token, endpointID: "e-\(user)", keyPackages: [], lastResort: bundle.keyPackage)
                }
            }
            let group = try await alice.startChat(with: ["bob"] + others, subject: "Everyone")
            #expect(group.participants.count == 250)
            #expect(!group.postQuantum, "past \(GroupChanges.postQuantumDeviceLimit) devices a new chat is classic")
            try await alice.sendMessage("hello, all 250", to: group.chatID)
            let bobMessages = try await bob.messages(in: group.chatID)
            #expect(await waitFor("bob reads it") { bobMessages.value.first?.content == "hello, all 250" })
            let token = try await world.domain.testToken(userID: "user200").token
            let mailbox = try await world.domain.readMailbox(token: token, endpointID: "e-user200", after: 0, limit: 100)
            #expect(mailbox.contains { $0.kind == .message } && mailbox.contains { $0.kind == .welcome })
        }
    }

    @Test func aContactWhoseKeyChangesIsFlagged() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            // No reset delay here: the test is about what contacts see once the keys changed.
            let world = try ChatWorld(directory, policy: DomainPolicy(passwordIterations: 1000, identityResetDelay: 0))
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            #expect(try await alice.chat(chat.chatID).keyChanged == false)
            #expect(await waitFor("bob knows the chat") { bob.chats.value.count == 1 })
            // Bob forgets his passcode on a new phone: a new identity.
            let (_, _) = try await { () async throws -> (BBMEnterpriseService, BBMAccess) in
                let service = try await world.devices.service("bob-new-phone")
                _ = try await world.devices.begin(service, user: "bob")
                try await service.syncStart(passcode: "bob-new-passcode", action: .reset)
                #expect(await service.waitForSettledState().setupState == .success)
                return (service, try await service.messaging())
            }()
            await bobService.checkIn()
            let events = EventRecorder(alice)
            // The domain tells bob's contacts his identity was replaced: alice's device looks
            // the key up again and flags it.
            #expect(await eventuallyAwaiting { (try? await alice.chat(chat.chatID).keyChanged) == true })
            #expect(try await alice.sendMessage("are you still you?", to: chat.chatID).state == .held)
            #expect(await waitFor("event") { events.value.contains(.identityChanged(userID: "bob")) })
            events.stop()
            try await alice.acceptIdentityChange(of: "bob")
            #expect(try await alice.chat(chat.chatID).keyChanged == false)
        }
    }
}

@Suite("Messaging across processes")
struct CrossProcessMessagingTests {
    @Test func twoProcessesExchangeMessagesLive() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let peer = Fixtures.executable("sdk-peer")
            let domainPath = world.domain.path
            let bobDirectory = directory.appendingPathComponent("bob-process").path
            // Bob runs in another process and answers three messages.
            let bob = Task.detached {
                try await Fixtures.run(
                    peer, [domainPath, bobDirectory, "bob", "--serve", "3"], input: Data("bob-passcode\n".utf8))
            }
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            var bobReady = false
            for _ in 0..<2000 where !bobReady {
                bobReady = (try? world.domain.publishedIdentity(of: "bob")) != nil
                if !bobReady { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(bobReady, "bob's process set up its keys")
            // Its KeyPackages follow its identity (under ThreadSanitizer, by seconds): a chat
            // with bob waits for them.
            var started: Chat?
            for _ in 0..<1200 where started == nil {
                do {
                    started = try await alice.startChat(with: ["bob"], subject: "live")
                } catch let error as MessagingError where error.code == .unknownUser {
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            let chat = try #require(started, "bob's process published KeyPackages")
            for n in 1...3 { try await alice.sendMessage("ping \(n)", to: chat.chatID) }
            let messages = try await alice.messages(in: chat.chatID)
            #expect(await waitFor("three answers, live") { messages.value.filter(\.isIncoming).count == 3 })
            #expect(Set(messages.value.filter(\.isIncoming).map(\.content)) == ["ack: ping 1", "ack: ping 2", "ack: ping 3"])
            #expect(await waitFor("read by bob") { messages.value.filter { !$0.isIncoming }.allSatisfy { $0.state == .read } })
            #expect(messages.value.compactMap(\.number) == Array(1...6), "numbered without gaps across both processes")
            let result = try await bob.value
            #expect(result.status == 0 && result.stdout.contains("served 3"), "\(result.stderr)")
        }
    }
}

@Suite("Messaging: a receiving device killed mid-page")
struct KilledDeviceTests {
    /// Bob's device runs in a process of its own, killed (SIGKILL) at a random point again and
    /// again while alice sends: whatever page of his mailbox it was applying, the page and its
    /// cursor are committed together or not at all. When bob comes back for good, he has every
    /// message exactly once, in order, and nothing was dropped.
    @Test func aDeviceKilledAtRandomPointsLosesNothingAndAppliesNothingTwice() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"], subject: "kill -9")
            #expect(await waitFor("bob has the chat") { bob.chats.value.first?.chatID == chat.chatID })
            try await bob.refresh()
            await bobService.stop()
            let count = 150
            let sender = Task {
                for n in 1...count {
                    try await alice.sendMessage("m\(n)", to: chat.chatID)
                    if n % 10 == 0 { try await Task.sleep(for: .milliseconds(20)) }
                }
            }
            let peer = Fixtures.executable("sdk-peer")
            let arguments = [world.domain.path, directory.appendingPathComponent("bob-phone").path, "bob", "--listen", "60"]
            let bobFile = try DatabaseQueue(path: directory.appendingPathComponent("bob-phone/endpoint.sqlite").path)
            let cursor = { try bobFile.read { db in try db.scalar("SELECT sequence FROM mailbox_cursor", as: Int64.self) ?? 0 } }
            var cursors = [try cursor()]
            var kills = 0
            for _ in 0..<10 {
                let process = ChildProcess()
                process.executableURL = peer
                process.arguments = arguments
                let input = Pipe()
                let output = Pipe()
                process.standardInput = input
                process.standardOutput = output
                process.standardError = FileHandle.nullDevice
                try process.run()
                input.fileHandleForWriting.write(Data("bob-passcode\n".utf8))
                try input.fileHandleForWriting.close()
                // Killed at a random point once it is set up and receiving (however slow the
                // machine, or a sanitizer, makes its start).
                await Fixtures.onThread {
                    var said = Data()
                    while !String(decoding: said, as: UTF8.self).contains("listening") {
                        let chunk = output.fileHandleForReading.availableData
                        if chunk.isEmpty { return }
                        said += chunk
                    }
                }
                try await Task.sleep(for: .milliseconds(Int.random(in: 20...400)))
                process.signal(SIGKILL)
                await Fixtures.onThread { process.waitUntilExit() }
                kills += process.terminationStatus != 0 ? 1 : 0
                cursors.append(try cursor())
            }
            try await sender.value
            #expect(kills == 10, "every round ended in the kill, not on its own")
            #expect(Set(cursors).count >= 2, "the killed processes applied pages between the kills: \(cursors)")
            // Bob comes back for good.
            let (_, again) = try await world.restart("bob-phone", user: "bob")
            let events = EventRecorder(again)
            try await again.refresh()
            try #require(
                await eventuallyAwaiting(seconds: 60) {
                    (try? await again.messages(in: chat.chatID, before: nil, limit: 1000).count) == count
                }, "every message arrives")
            let messages = try await again.messages(in: chat.chatID, before: nil, limit: 1000)
            #expect(messages.map(\.content) == (1...count).map { "m\($0)" }, "each once, in order")
            #expect(messages.map(\.number) == (1...count).map { Int64($0) })
            #expect(events.value.isEmpty, "nothing was dropped: \(events.value)")
        }
    }
}

@Suite("Messaging: invitations, renames, offline recipients, enforcement")
struct MoreMessagingTests {
    @Test func anInviteeReadsWhatFollowsAndRenamesReachEveryone() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let (_, dave) = try await world.endpoint("dave", "dave-pc")
            let chat = try await alice.startChat(with: ["bob"], subject: "Before")
            try await alice.sendMessage("before dave", to: chat.chatID)
            try await alice.invite(["dave"], to: chat.chatID)
            #expect(try await alice.participants(of: chat.chatID).map(\.userID).sorted() == ["alice", "bob", "dave"])
            try await alice.updateChatSubject(chat.chatID, subject: "After")
            try await alice.sendMessage("welcome dave", to: chat.chatID)
            let daveMessages = try await dave.messages(in: chat.chatID)
            #expect(await waitFor("dave gets the new message") { daveMessages.value.map(\.content) == ["welcome dave"] })
            #expect(await waitFor("renamed for dave") { dave.chats.value.first?.subject == "After" })
            #expect(await waitFor("renamed for bob") { bob.chats.value.first?.subject == "After" })
            #expect(try await bob.participants(of: chat.chatID).count == 3)
            await #expect(throws: MessagingError(.refused, "")) { try await bob.invite(["dave"], to: chat.chatID) }
        }
    }

    @Test func anOfflineRecipientGetsEverythingLaterInOrder() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, _) = try await world.endpoint("bob", "bob-phone")
            await bobService.stop()
            let chat = try await alice.startChat(with: ["bob"], subject: "While you were out")
            for n in 1...5 { try await alice.sendMessage("message \(n)", to: chat.chatID) }
            let restarted = try await world.devices.service("bob-phone")
            #expect(try await world.devices.begin(restarted, user: "bob").setupState == .success)
            let bob = try await restarted.messaging()
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("all five") { messages.value.count == 5 })
            #expect(messages.value.map(\.content) == (1...5).map { "message \($0)" })
            #expect(messages.value.map(\.number) == [1, 2, 3, 4, 5])
        }
    }

    @Test func aBannedUsersPostIsRefusedByTheDomainWhateverTheClientDoes() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (aliceService, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            try world.domain.ban("alice", reason: "abuse")
            // A modified client that skips every check still cannot get a message through.
            let token = try await world.domain.testToken(userID: "alice").token
            await #expect(throws: DomainError(.moderated, "")) {
                try await world.domain.post(
                    token: token, endpointID: try await aliceService.endpointID, chatID: chat.chatID, kind: .message,
                    payload: Data("anything".utf8), recipient: nil, clientID: nil)
            }
            let sent = try await alice.sendMessage("through the SDK", to: chat.chatID)
            #expect(sent.state == .failed(reason: "the user is banned: abuse"))
        }
    }
}
