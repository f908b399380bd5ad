import Foundation
import SparkDomain
import SparkLock
import SparkTestSupport
import Testing

@testable import SparkSDK

/// `queueMessages`: several messages sealed and stored in one transaction, posted together, and
/// read by the chat's other devices in the order given, on both stores.
@Suite("Messaging: several messages queued at once")
struct QueuedBatchTests {
    /// Alice queues ten messages in one call (tags, data, and a reference among them): each comes
    /// back stored and sending, in order, all ten go to the domain in one request, and bob reads
    /// every one of them, in order, with what it carried. Each is sealed under its own place in
    /// the ratchet: a place used twice would open once and be dropped as a replay the next time.
    @Test(arguments: MessagingStoreKind.tested)
    func messagesQueuedAtOnceGoTogetherAndArriveInOrder(messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await HostileDomainTests.chat(directory, messaging: messaging)
            let domain = chat.world.domain
            let events = EventRecorder(chat.bob)
            domain.messageBatches.withLock { $0.removeAll() }
            let drafts = (0..<10).map { index in
                NewMessage(
                    "batched \(index)", tag: index.isMultiple(of: 2) ? "Text" : "Note", data: index == 3 ? #"{"n":3}"# : nil,
                    ref: index == 5 ? 1 : nil)
            }
            let queued = try await chat.alice.queueMessages(drafts, to: chat.chatID)
            #expect(queued.map(\.content) == drafts.map(\.content))
            #expect(queued.map(\.state) == Array(repeating: .sending, count: 10), "each returned once stored")
            #expect(Set(queued.map(\.id)).count == 10)
            let bobMessages = try await chat.bob.messages(in: chat.chatID)
            #expect(
                await waitFor("bob reads all ten") { bobMessages.value.filter { $0.content.hasPrefix("batched") }.count == 10 })
            let received = bobMessages.value.filter { $0.content.hasPrefix("batched") }
            #expect(received.map(\.id) == queued.map(\.id), "in the order alice gave them")
            #expect(received.map(\.tag) == drafts.map(\.tag))
            #expect(received.map(\.data) == drafts.map(\.data))
            #expect(received[5].ref == 1 && received[4].ref == nil)
            #expect(zip(received, received.dropFirst()).allSatisfy { ($0.number ?? 0) < ($1.number ?? 0) })
            #expect(domain.messageBatches.withLock { $0 } == [10], "posted as one request")
            #expect(HostileDomainTests.drops(events, chat.chatID).isEmpty, "\(HostileDomainTests.drops(events, chat.chatID))")
            let aliceMessages = try await chat.alice.messages(in: chat.chatID)
            #expect(
                await waitFor("all ten sent") {
                    aliceMessages.value.filter { $0.content.hasPrefix("batched") && $0.state != .sending }.count == 10
                })
            try await HostileDomainTests.expectOneGroup(chat, "after a batch")
        }
    }

    /// A call with one message the chat refuses (a reference to a number it does not have) is
    /// refused whole: none of it is stored or posted, and the chat goes on as if it never came.
    /// A call over the limit, or with one message too large, is refused before anything is done.
    @Test(arguments: MessagingStoreKind.tested)
    func aBatchWithOneRefusedMessageStoresNone(messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await HostileDomainTests.chat(directory, messaging: messaging)
            let domain = chat.world.domain
            domain.messageBatches.withLock { $0.removeAll() }
            let refused = [NewMessage("kept?"), NewMessage("refers to nothing", ref: 9999)]
            await #expect(throws: MessagingError.self) { try await chat.alice.queueMessages(refused, to: chat.chatID) }
            let tooLarge = [NewMessage("kept?"), NewMessage(String(repeating: "x", count: 80_000))]
            let error = await #expect(throws: MessagingError.self) {
                try await chat.alice.queueMessages(tooLarge, to: chat.chatID)
            }
            #expect(error?.code == .tooLarge)
            let tooMany = Array(repeating: NewMessage("x"), count: 257)
            let many = await #expect(throws: MessagingError.self) { try await chat.alice.queueMessages(tooMany, to: chat.chatID) }
            #expect(many?.code == .invalidArgument)
            #expect(try await chat.alice.queueMessages([], to: chat.chatID).isEmpty)
            let stored = try await chat.alice.messenger.messages(in: chat.chatID, before: nil, limit: 50)
            #expect(!stored.contains { $0.content == "kept?" || $0.content == "refers to nothing" }, "nothing of a refused call")
            #expect(domain.messageBatches.withLock { $0 }.isEmpty, "nothing posted")
            // The chat goes on: what follows reads, in order.
            try await chat.alice.queueMessages([NewMessage("after one"), NewMessage("after two")], to: chat.chatID)
            let bobMessages = try await chat.bob.messages(in: chat.chatID)
            #expect(
                await waitFor("bob reads what followed") {
                    bobMessages.value.map(\.content) == ["hi bob", "after one", "after two"]
                })
        }
    }

    /// Bob resets his identity: a batch alice queues is held whole (nothing goes to a key she has
    /// not accepted), and once she accepts it, the held messages go to his new device in order.
    @Test(arguments: MessagingStoreKind.tested)
    func aBatchInAHeldChatIsHeldWholeAndGoesInOrder(messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await HostileDomainTests.chat(
                directory, messaging: messaging, policy: DomainPolicy(passwordIterations: 1000, identityResetDelay: 0))
            await chat.bobService.stop()
            let (_, newPhone) = try await chat.world.endpoint("bob", "bob-new-phone", reset: true)
            #expect(await eventuallyAwaiting { (try? await chat.alice.contact("bob").verification) == .changed })
            let drafts = (0..<4).map { NewMessage("held \($0)") }
            let held = try await chat.alice.queueMessages(drafts, to: chat.chatID)
            #expect(held.map(\.state) == Array(repeating: .held, count: 4), "nothing sealed to an identity not accepted")
            try await chat.alice.acceptIdentityChange(of: "bob")
            let newMessages = try await newPhone.messages(in: chat.chatID)
            #expect(
                await waitFor("the new phone reads what was held, in order") {
                    newMessages.value.map(\.content) == drafts.map(\.content)
                })
        }
    }
}
