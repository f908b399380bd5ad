import Foundation
import SparkDomain
import Testing

@testable import SparkSDK

/// The messaging core's rules for opened payloads, each tried by an attacker with no store and
/// no domain: the core gets the payload, its entry, the sender the group authenticated and what
/// a dictionary says of the messages named, and returns what to do.
@Suite("Messaging: the sans-I/O core")
struct MessagingCoreTests {
    struct Lookup: MessageLookup {
        var messages: [String: MessagingCore.KnownMessage] = [:]
        func message(_ id: String, in chatID: String) throws -> MessagingCore.KnownMessage? { messages[id] }
    }

    let core = MessagingCore(user: "alice", endpointID: "alice-laptop")
    let time = Date(timeIntervalSince1970: 1_790_000_000)

    func entry(_ kind: MailboxKind, number: Int64? = nil, from sender: String = "bob") -> MailboxEntry {
        MailboxEntry(
            sequence: 1, chatID: "c1", sender: sender, kind: kind, messageNumber: number, payload: Data(), members: nil,
            postedAt: time)
    }

    func text(_ id: String, ref: String? = nil) -> ChatPayload {
        ChatPayload(kind: .text, id: id, content: "hello", tag: "Text", ref: ref)
    }

    @Test func aTextIsKeptNumberedAndAcknowledged() throws {
        let lookup = Lookup(messages: ["m0": .init(number: 3, sender: "alice")])
        let outcome = try core.apply(
            text("m1", ref: "m0"), from: "bob", entry: entry(.message, number: 4), lastNumber: 3, lookup: lookup)
        #expect(outcome.lastNumber == 4)
        #expect(
            outcome.actions == [
                .insert(
                    .init(
                        id: "m1", number: 4, sender: "bob", content: "hello", tag: "Text", data: nil, ref: 3,
                        state: .delivered, timestamp: time)),
                .touchChat(at: time), .acknowledge(number: 4),
            ])
        // From another of this user's devices: a step of this user's message, not a receipt due.
        let mine = try core.apply(text("m2"), from: "alice", entry: entry(.message, number: 5), lastNumber: 4, lookup: lookup)
        #expect(mine.actions.last == .reportSent(messageID: "m2", number: 5))
    }

    @Test func aRenumberedMessageIsDropped() throws {
        for number: Int64? in [3, 2, nil] {
            let outcome = try core.apply(
                text("m1"), from: "bob", entry: entry(.message, number: number), lastNumber: 3, lookup: Lookup())
            #expect(outcome.lastNumber == 3)
            guard case .drop(let reason) = outcome.actions.first, outcome.actions.count == 1 else {
                Issue.record("kept message numbered \(String(describing: number)) after 3")
                continue
            }
            #expect(reason.contains("renumbered"))
        }
    }

    @Test func aReplayedIdUnderAnotherNumberIsDroppedAndAHistoryCopyIsKeptOnce() throws {
        let lookup = Lookup(messages: ["m1": .init(number: 2, sender: "bob")])
        let replay = try core.apply(text("m1"), from: "bob", entry: entry(.message, number: 7), lastNumber: 6, lookup: lookup)
        #expect(replay.actions.count == 1 && replay.actions.first.map { if case .drop = $0 { true } else { false } } == true)
        let copy = try core.apply(text("m1"), from: "bob", entry: entry(.message, number: 2), lastNumber: 1, lookup: lookup)
        #expect(copy == .init(lastNumber: 2, actions: []))
    }

    @Test func onlyTheSenderEditsAMessage() throws {
        let lookup = Lookup(messages: ["m1": .init(number: 1, sender: "bob")])
        let edit = ChatPayload(kind: .edit, id: "e1", content: "changed", ref: "m1")
        #expect(
            try core.apply(edit, from: "bob", entry: entry(.event), lastNumber: 1, lookup: lookup).actions == [
                .setContent(messageID: "m1", content: "changed")
            ])
        for (sender, ref) in [("mallory", "m1"), ("bob", "unknown")] {
            let forged = ChatPayload(kind: .edit, id: "e2", content: "forged", ref: ref)
            let outcome = try core.apply(forged, from: sender, entry: entry(.event, from: sender), lastNumber: 1, lookup: lookup)
            #expect(outcome.actions == [.drop("an edit of a message that is not its sender's")], "\(sender) editing \(ref)")
        }
    }

    @Test func historyComesOnlyFromThisUsersDevicesForThisDevice() throws {
        let history = ChatPayload(kind: .history, id: "h1", data: "records", ref: "alice-laptop")
        #expect(
            try core.apply(history, from: "bob", entry: entry(.event), lastNumber: 1, lookup: Lookup()).actions == [
                .drop("a history transfer from another user")
            ])
        #expect(
            try core.apply(history, from: "alice", entry: entry(.event), lastNumber: 1, lookup: Lookup()).actions == [
                .openHistory(history)
            ])
        let forAnother = ChatPayload(kind: .history, id: "h2", data: "records", ref: "alice-phone")
        #expect(try core.apply(forAnother, from: "alice", entry: entry(.event), lastNumber: 1, lookup: Lookup()).actions == [])
    }

    @Test func aReceiptMovesWhatThisDeviceNumberedNotWhatItSays() throws {
        let lookup = Lookup(messages: ["m1": .init(number: 5, sender: "alice")])
        let read = ChatPayload(kind: .receipt, id: "r1", ref: "m1", receipt: .read, upTo: 99)
        #expect(
            try core.apply(read, from: "bob", entry: entry(.receipt), lastNumber: 5, lookup: lookup).actions == [
                .advanceSent(upTo: 5, .deliver), .advanceSent(upTo: 5, .read),
            ])
        let delivered = ChatPayload(kind: .receipt, id: "r2", ref: "m1", receipt: .delivered, upTo: 5)
        #expect(
            try core.apply(delivered, from: "bob", entry: entry(.receipt), lastNumber: 5, lookup: lookup).actions == [
                .advanceSent(upTo: 5, .deliver)
            ])
        // Read on another of this user's devices: this user's received messages are read.
        #expect(
            try core.apply(read, from: "alice", entry: entry(.receipt, from: "alice"), lastNumber: 5, lookup: lookup).actions == [
                .readReceived(upTo: 5)
            ])
        let unknown = ChatPayload(kind: .receipt, id: "r3", ref: "m9", receipt: .read, upTo: 5)
        #expect(
            try core.apply(unknown, from: "bob", entry: entry(.receipt), lastNumber: 5, lookup: lookup).actions == [
                .drop("a receipt for a message this device does not have")
            ])
    }

    @Test func aPayloadInTheWrongKindOfEntryIsDropped() throws {
        let receipt = ChatPayload(kind: .receipt, id: "r1", ref: "m1", receipt: .read, upTo: 1)
        for (kind, payload) in [(MailboxKind.message, receipt), (.receipt, text("m1")), (.event, text("m2"))] {
            let outcome = try core.apply(payload, from: "bob", entry: entry(kind, number: 9), lastNumber: 1, lookup: Lookup())
            #expect(outcome.lastNumber == 1 && outcome.actions.count == 1, "\(payload.kind) in \(kind)")
            if case .drop = outcome.actions.first {} else { Issue.record("\(payload.kind) in a \(kind) entry was applied") }
        }
    }
}
