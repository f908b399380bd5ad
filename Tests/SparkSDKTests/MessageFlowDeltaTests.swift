import Foundation
import SparkDomain
import SparkTestSupport
import Testing

@testable import SparkSDK

/// The message flows change by deltas: what a message, its echo, a receipt or an edit changed is
/// read again by id and put in its place, not the whole window reread and decrypted. A delta
/// that went wrong would show a flow that differs from the store, so each test compares the flow
/// with the window read afresh.
@Suite("Messaging: flows change by deltas")
struct MessageFlowDeltaTests {
    static func message(_ id: String, _ number: Int64?, _ content: String = "", at time: Double = 0) -> ChatMessage {
        ChatMessage(
            id: id, chatID: "c", number: number, sender: "alice", isIncoming: false, content: content, tag: "Text", data: nil,
            ref: nil, state: number == nil ? .sending : .sent, timestamp: Date(timeIntervalSince1970: time))
    }

    @Test func aMergeReplacesInsertsMovesTrimsAndRemoves() {
        let window = [Self.message("a", 1), Self.message("b", 2), Self.message("p", nil, at: 5)]
        // A new numbered message goes before the one still sending; a changed one is replaced.
        var merged = MessageFlows.merge(
            [Self.message("c", 3), Self.message("a", 1, "edited")], removing: [], into: window, limit: 10)
        #expect(merged.map(\.id) == ["a", "b", "c", "p"])
        #expect(merged.first?.content == "edited")
        // The one sending gets its number: it moves among the numbered ones.
        merged = MessageFlows.merge([Self.message("p", 4)], removing: [], into: merged, limit: 10)
        #expect(merged.map(\.id) == ["a", "b", "c", "p"] && merged.last?.number == 4)
        // Past the limit, the oldest leave the window.
        merged = MessageFlows.merge([Self.message("d", 5), Self.message("e", 6)], removing: [], into: merged, limit: 4)
        #expect(merged.map(\.id) == ["c", "p", "d", "e"])
        // A change to a message outside the window does not bring it back.
        merged = MessageFlows.merge([Self.message("a", 1, "again")], removing: [], into: merged, limit: 4)
        #expect(merged.map(\.id) == ["c", "p", "d", "e"])
        // Messages still sending keep their order by time, after the numbered ones.
        merged = MessageFlows.merge(
            [Self.message("y", nil, at: 9), Self.message("x", nil, at: 8)], removing: ["d"], into: merged, limit: 10)
        #expect(merged.map(\.id) == ["c", "p", "e", "x", "y"])
    }

    @Test func changesOfOneMessageComeTogether() {
        var changes = MessageChanges.none
        changes.formUnion(.some(["a"]))
        changes.formUnion(.none)
        changes.formUnion(.some(["b"]))
        #expect(changes == .some(["a", "b"]))
        changes.formUnion(.all)
        changes.formUnion(.some(["c"]))
        #expect(changes == .all)
    }

    @Test func theFlowsMatchTheStoreAfterAConversation() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await HostileDomainTests.chat(directory, messaging: .sqlite)
            let aliceFlow = try await chat.alice.messages(in: chat.chatID)
            let bobFlow = try await chat.bob.messages(in: chat.chatID)
            var sent: [ChatMessage] = []
            for index in 0..<5 {
                sent.append(try await chat.alice.sendMessage("alice \(index)", to: chat.chatID))
                _ = try await chat.bob.sendMessage("bob \(index)", to: chat.chatID)
            }
            try await chat.alice.editMessage(sent[2].id, content: "alice 2, edited")
            #expect(await waitFor("bob has every message") { bobFlow.value.count == 11 })
            try await chat.bob.markMessagesRead(in: chat.chatID)
            #expect(
                await waitFor("alice sees her messages read and bob sees the edit") {
                    aliceFlow.value.filter { !$0.isIncoming }.allSatisfy { $0.state == .read }
                        && bobFlow.value.contains { $0.content == "alice 2, edited" }
                })
            for (access, flow) in [(chat.alice, aliceFlow), (chat.bob, bobFlow)] {
                try await access.refresh()
                let fresh = try await access.messages(in: chat.chatID, before: nil, limit: MessageFlows.flowWindow)
                #expect(flow.value == fresh)
            }
            let chats = chat.bob.chats.value
            #expect(chats.count == 1 && chats.first?.unreadCount == 0)
        }
    }
}
