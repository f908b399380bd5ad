import Foundation
import SparkDomain
import SparkDomainEngine
import SparkLock
import SparkSDK
import SparkTestSupport
import Synchronization
import Testing

/// Every step of one endpoint's messages, from the moment it is made until `stop()` or deinit.
final class MessageEventRecorder: Sendable {
    private let box = Box<[MessageEvent]>([])
    private let listener: Task<Void, Never>

    init(_ access: BBMAccess) {
        let stream = access.messageEvents  // subscribed now, before anything happens
        let box = box
        listener = Task { for await event in stream { box.update { $0.append(event) } } }
    }

    deinit { listener.cancel() }

    /// The steps so far.
    var value: [MessageEvent] { box.value }

    /// The steps of one message, as `<state>` strings.
    func states(of messageID: String) -> [String] { value.filter { $0.messageID == messageID }.map { "\($0.state)" } }
}

@Suite("Messaging: what happened to each message")
struct MessageEventTests {
    @Test func everyStepOfAMessageIsReportedOnceAndInOrder() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let events = MessageEventRecorder(alice)
            let chat = try await alice.startChat(with: ["bob"], subject: "Lunch")
            let message = try await alice.sendMessage("12:30?", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { bobMessages.value.count == 1 })
            try await bob.markMessagesRead(in: chat.chatID)
            #expect(await waitFor("read") { events.states(of: message.id).last == "read" })
            try await alice.refresh()
            #expect(events.states(of: message.id) == ["sent", "delivered", "read"])
            #expect(events.value.allSatisfy { $0.chatID == chat.chatID && $0.number == 1 })
        }
    }

    @Test func aReadReceiptWithoutADeliveryReceiptStillReportsDelivered() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            // Alice's mailbox loses bob's delivery receipt, as when both arrive in one read.
            let world = try HostileWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let losing = Locked(true)
            world.domain.mailboxRewrite.withLock {
                $0 = { user, entries in
                    guard user == "alice", losing.withLock({ $0 }) else { return entries }
                    return entries.filter { $0.kind != .receipt }
                }
            }
            let events = MessageEventRecorder(alice)
            let chat = try await alice.startChat(with: ["bob"])
            let message = try await alice.sendMessage("quick", to: chat.chatID)
            let bobMessages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { bobMessages.value.count == 1 })
            #expect(
                await waitFor("bob's delivery receipt is posted") {
                    world.posted.withLock { $0.contains { $0.kind == .receipt } }
                })
            try await alice.refresh()
            losing.withLock { $0 = false }
            try await bob.markMessagesRead(in: chat.chatID)
            #expect(await waitFor("read") { events.states(of: message.id).last == "read" })
            #expect(events.states(of: message.id) == ["sent", "delivered", "read"], "the skipped step is reported too")
            #expect(try await alice.messages(in: chat.chatID).value.first?.state == .read)
        }
    }

    @Test func aServiceStartedAgainAfterAStopMessagesAgain() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (aliceService, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await alice.startChat(with: ["bob"])
            #expect(!alice.isStopped)
            await aliceService.stop()
            #expect(alice.isStopped, "an access kept by the app says its messaging stopped")
            await #expect(throws: MessagingError(.notReady, "")) { try await alice.sendMessage("stopped", to: chat.chatID) }
            try await aliceService.start(domain: world.domain, environment: .sandbox)
            let again = try await aliceService.messaging()
            #expect(!again.isStopped && alice.isStopped)
            #expect(try await again.sendMessage("back again", to: chat.chatID).state.isAccepted)
            let messages = try await bob.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { messages.value.map(\.content) == ["back again"] })
        }
    }

    @Test func aRefusedMessageReportsWhy() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            let events = MessageEventRecorder(alice)
            let chat = try await alice.startChat(with: ["bob"])
            try world.domain.ban("alice", reason: "abuse")
            let message = try await alice.sendMessage("let me in", to: chat.chatID)
            #expect(message.state == .failed(reason: "the user is banned: abuse"))
            #expect(await waitFor("failed") { !events.states(of: message.id).isEmpty })
            #expect(
                events.value == [
                    MessageEvent(
                        messageID: message.id, chatID: chat.chatID, number: nil,
                        state: .failed(reason: "the user is banned: abuse"))
                ])
        }
    }

    @Test func eachConsumerGetsEveryStep() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, _) = try await world.endpoint("bob", "bob-phone")  // kept: bob's endpoint answers
            let first = MessageEventRecorder(alice)
            let second = MessageEventRecorder(alice)
            let chat = try await alice.startChat(with: ["bob"])
            let message = try await alice.sendMessage("hi", to: chat.chatID)
            #expect(
                await waitFor("both saw it delivered") { [first, second].allSatisfy { $0.states(of: message.id).count == 2 } })
            #expect(
                first.states(of: message.id) == ["sent", "delivered"] && second.states(of: message.id) == ["sent", "delivered"])
            await bobService.stop()
        }
    }

    /// Alice's endpoint on a domain wrapper that reads `reader`'s mailbox for the chat right
    /// after each membership change returns, before alice's endpoint goes on.
    static func watchedAlice(
        _ world: ChatWorld, _ directory: URL, reader: BBMEnterpriseService, user: String
    ) async throws -> (BBMAccess, Box<[[MailboxKind]]>) {
        let domain = CountingDomain(world.domain)
        let seen = Box<[[MailboxKind]]>([])
        let readerID = try await reader.endpointID
        domain.afterMembershipChange.withLock {
            $0 = { chatID in
                let token = try? await world.domain.testToken(userID: user).token
                let entries =
                    (try? await world.domain.readMailbox(token: token ?? "", endpointID: readerID, after: 0, limit: 100)) ?? []
                seen.update { $0.append(entries.filter { $0.chatID == chatID }.map(\.kind)) }
            }
        }
        let service = BBMEnterpriseService(
            store: try EndpointStore(directory: directory.appendingPathComponent("alice-watched")), endpointDescription: "alice",
            unsafePasscodeIterations: 1000)
        try await service.start(domain: domain, environment: .sandbox)
        await service.sendAuthToken(try await world.domain.testToken(userID: "alice").token, userIdentifier: "alice")
        try await service.completeSetup(using: ScriptedHandler(passcodes: ["alice-passcode"]))
        return (try await service.messaging(), seen)
    }

    @Test func aNewChatReachesItsMembersWithItsKeyAndSubjectInOneStep() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
            let subjects = Box<[String]>([])
            let subscription = bob.chats.subscribe { chats in subjects.update { $0 += chats.map(\.subject) } }
            let (alice, seen) = try await Self.watchedAlice(world, directory, reader: bobService, user: "bob")
            let chat = try await alice.startChat(with: ["bob"], subject: "Lunch")
            #expect(seen.value == [[], [.membership, .commit, .welcome]], "bob joins, with the subject, in one step")
            #expect(await waitFor("bob lists it") { bob.chats.value.first?.chatID == chat.chatID })
            #expect(subjects.value == ["Lunch"], "bob never listed the chat without its subject")
            subscription.cancel()
        }
    }

    @Test func anInviteeMeetsTheChatWithItsSubjectAndCanReadWhatFollows() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            _ = try await world.endpoint("bob", "bob-phone")
            let (carolService, carol) = try await world.endpoint("carol", "carol-phone")
            let subjects = Box<[String]>([])
            let subscription = carol.chats.subscribe { chats in subjects.update { $0 += chats.map(\.subject) } }
            let (alice, seen) = try await Self.watchedAlice(world, directory, reader: carolService, user: "carol")
            let chat = try await alice.startChat(with: ["bob"], subject: "Plans")
            try await alice.invite(["carol"], to: chat.chatID)
            #expect(seen.value == [[], [], [.membership, .commit, .welcome]], "carol joins, with the subject, in one step")
            try await alice.sendMessage("welcome, carol", to: chat.chatID)
            let messages = try await carol.messages(in: chat.chatID)
            #expect(await waitFor("carol reads it") { messages.value.map(\.content) == ["welcome, carol"] })
            #expect(subjects.value.allSatisfy { $0 == "Plans" } && !subjects.value.isEmpty)
            subscription.cancel()
        }
    }
}
