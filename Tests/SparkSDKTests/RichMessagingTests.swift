import Foundation
import SparkDomain
import SparkTestSupport
import Testing

@testable import SparkSDK

/// Reactions and recall, end to end on an embedded domain, and each tried by a member who
/// forges them: a payload sealed by a real member of the chat, so MLS authenticates it, whose
/// only lie is what it claims about someone else's message or reaction.
@Suite("Messaging: reactions and recall")
struct RichMessagingTests {
    /// Posts `payload` into the chat as `user`'s device, sealed by its own group: what a
    /// modified client of a member would do.
    static func forge(
        _ payload: ChatPayload, as access: BBMAccess, _ service: BBMEnterpriseService, user: String, in chatID: String,
        world: ChatWorld
    ) async throws {
        let sealed = try await access.messenger.seal(payload, in: chatID)
        _ = try await world.domain.post(
            token: try await world.domain.testToken(userID: user).token, endpointID: try await service.endpointID,
            chatID: chatID, kind: .event, payload: sealed, recipient: nil, clientID: nil)
    }

    @Test func reactionsAreCountedPerMessageOnEveryDevice() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
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
                ChatPayload(kind: .unreaction, id: "forged-1", content: "👍", ref: sent.id), as: bob, bobService, user: "bob",
                in: chat.chatID, world: world)
            #expect(await waitFor("bob's own 👍 goes") { aliceMessages.value.first?.reactions.first?.userIDs == ["alice"] })
        }
    }

    @Test func onlyTheSenderRecallsAndEveryDeviceRemovesTheContent() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bobService, bob) = try await world.endpoint("bob", "bob-phone")
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
                ChatPayload(kind: .recall, id: "forged-2", ref: kept.id), as: bob, bobService, user: "bob", in: chat.chatID,
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
            let stored = try #require(try await bob.messenger.read { db in try bob.messenger.store(db).message(secret.id) })
            #expect(stored.content.isEmpty && stored.isRecalled, "the store keeps nothing of it")
            // Nothing more happens to a recalled message: no edit, no reaction, no second recall.
            await #expect(throws: MessagingError(.unknownChat, "")) { try await bob.react(to: secret.id, emoji: "👍") }
            await #expect(throws: MessagingError(.invalidArgument, "")) {
                try await alice.editMessage(secret.id, content: "the door code is 1234")
            }
            // Alice's modified client edits it all the same: bob's device drops the edit.
            let edit = ChatPayload(kind: .edit, id: "forged-3", content: "the door code is 1234", ref: secret.id)
            let sealed = try await alice.messenger.seal(edit, in: chat.chatID)
            _ = try await world.domain.post(
                token: try await world.domain.testToken(userID: "alice").token, endpointID: alice.messenger.endpointID,
                chatID: chat.chatID, kind: .event, payload: sealed, recipient: nil, clientID: nil)
            try await alice.sendMessage("after", to: chat.chatID)
            #expect(await waitFor("bob has the later message") { bobMessages.value.count == 3 })
            #expect(bobMessages.value.first?.content.isEmpty == true, "the edit of a recalled message is dropped")
        }
    }
}
