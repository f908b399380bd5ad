import Foundation
import SparkDomain
import SparkLock
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

    /// A flow's window changed in place (each change put where it sorts) is the window the
    /// changes applied and the whole list sorted again would be, over many random windows and
    /// deltas: replacements that keep or move a message (a number given, an older or newer one),
    /// new messages, removals, a message both changed and removed, and a window out of order.
    @Test func aChangeInPlaceEqualsTheWholeListSortedAgain() {
        var random = SplitMix64(seed: 42)
        let order = { (a: ChatMessage, b: ChatMessage) -> Bool in
            switch (a.number, b.number) {
            case (let x?, let y?): x < y
            case (.some, .none): true
            case (.none, .some): false
            case (.none, .none): a.timestamp < b.timestamp
            }
        }
        for round in 0..<500 {
            // Distinct numbers and times: no two messages tie.
            var keys = Array(0..<60).shuffled(using: &random)
            func key() -> Int { keys.popLast() ?? 0 }
            func made(_ id: String) -> ChatMessage {
                Bool.random(using: &random)
                    ? Self.message(id, Int64(key()), "\(round)") : Self.message(id, nil, "\(round)", at: Double(key()))
            }
            var window = (0..<Int.random(in: 0...12, using: &random)).map { made("w\($0)") }
            window.sort(by: order)
            if round % 50 == 0 { window.shuffle(using: &random) }
            let changed =
                window.filter { _ in Int.random(in: 0..<4, using: &random) == 0 }.map { message in
                    Bool.random(using: &random)
                        ? made(message.id)
                        : Self.message(message.id, message.number, "edited", at: message.timestamp.timeIntervalSince1970)
                } + (0..<Int.random(in: 0...3, using: &random)).map { made("n\($0)") }
            var removed = Set(window.filter { _ in Int.random(in: 0..<5, using: &random) == 0 }.map(\.id))
            if let both = changed.first, Bool.random(using: &random) { removed.insert(both.id) }
            var inPlace = window
            MessageFlows.replace(changed, removing: removed, in: &inPlace, sortedBy: order)
            let sorted = MessageFlows.replacing(changed, removing: removed, in: window, sortedBy: order)
            #expect(inPlace == sorted, "round \(round)")
        }
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

    /// A page of the mailbox is shown in the flows by the storage job that wrote it, before the
    /// app hears of what it brought: each message `incomingMessages` gives is already in the
    /// chat's flow, and counted unread in the chat list, when the app reads them.
    @Test(arguments: MessagingStoreKind.allCases)
    func anArrivalIsInTheFlowsWhenTheAppHearsOfIt(_ messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await HostileDomainTests.chat(directory, messaging: messaging)
            let flow = try await chat.bob.messages(in: chat.chatID)
            let unreadBefore = chat.bob.chats.value.first { $0.chatID == chat.chatID }?.unreadCount ?? 0
            let arrivals = chat.bob.incomingMessages
            let checked = Task {
                var seen: [(id: String, inFlow: Bool, unread: Int?)] = []
                // The chat's first message (its flow showed it before the app heard of it) may
                // come first: only those sent below are counted.
                for await message in arrivals where message.content.hasPrefix("alice ") {
                    let unread = chat.bob.chats.value.first { $0.chatID == chat.chatID }?.unreadCount
                    seen.append((message.id, flow.value.contains { $0.id == message.id }, unread))
                    if seen.count == 6 { break }
                }
                return seen
            }
            for index in 0..<6 {
                try await chat.alice.sendMessage("alice \(index)", to: chat.chatID)
                if index % 2 == 1 { try await Task.sleep(for: .milliseconds(50)) }
            }
            let seen = await checked.value
            #expect(seen.count == 6)
            for (index, arrival) in seen.enumerated() {
                #expect(arrival.inFlow, "arrival \(index) was not in the flow yet")
                #expect((arrival.unread ?? 0) >= unreadBefore + index + 1, "arrival \(index) was not counted unread yet")
            }
        }
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

    /// A message's state in a flow only moves forward (sending, sent, delivered, read), however
    /// its sender's writes and the receipts that arrive interleave: every write's messages are
    /// shown by the job of the write itself, in the storage's order, never later from another
    /// actor. Alice queues messages as fast as she can while bob's device reads and marks them
    /// read; every snapshot alice's flow goes through is recorded and each message's states are
    /// checked in order.
    @Test func aMessagesStateInAFlowNeverStepsBack() async throws {
        @Sendable func rank(_ state: MessageState) -> Int {
            switch state {
            case .sending, .held: 0
            case .sent: 1
            case .delivered: 2
            case .read: 3
            case .failed: 4
            }
        }
        try await Fixtures.withTemporaryDirectory { directory in
            let chat = try await HostileDomainTests.chat(directory, messaging: .sqlite)
            let aliceFlow = try await chat.alice.messages(in: chat.chatID)
            let bobFlow = try await chat.bob.messages(in: chat.chatID)
            let seen = Locked<[String: [Int]]>([:])
            let subscription = aliceFlow.subscribe { messages in
                seen.withLock { seen in
                    for message in messages where !message.isIncoming {
                        let rank = rank(message.state)
                        if seen[message.id]?.last != rank { seen[message.id, default: []].append(rank) }
                    }
                }
            }
            let reader = Task {
                while !Task.isCancelled {
                    try? await chat.bob.markMessagesRead(in: chat.chatID)
                    try? await Task.sleep(for: .milliseconds(100))
                }
            }
            for index in 0..<30 { _ = try await chat.alice.queueMessage("alice \(index)", to: chat.chatID) }
            let arrived = await waitFor("bob has every message") { bobFlow.value.filter(\.isIncoming).count == 31 }
            #expect(arrived, "bob has \(bobFlow.value.count): \(bobFlow.value.map(\.content))")
            #expect(
                await waitFor("alice sees every message read") {
                    let mine = aliceFlow.value.filter { !$0.isIncoming }
                    return mine.count == 31 && mine.allSatisfy { $0.state == .read }
                })
            reader.cancel()
            subscription.cancel()
            let stepsBack = seen.withLock { $0 }.filter { _, ranks in zip(ranks, ranks.dropFirst()).contains { $0 > $1 } }
            #expect(stepsBack.isEmpty, "states that stepped back: \(stepsBack)")
        }
    }
}
