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
        func isTaken(_ number: Int64, in chatID: String) throws -> Bool { messages.values.contains { $0.number == number } }
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
                .touchChat(at: time), .acknowledge(CoveredMessage(id: "m1", number: 4)),
            ])
        // From another of this user's devices: a step of this user's message, not a receipt due.
        let mine = try core.apply(text("m2"), from: "alice", entry: entry(.message, number: 5), lastNumber: 4, lookup: lookup)
        #expect(mine.actions.last == .reportSent(messageID: "m2", number: 5))
    }

    /// Security review 6: a text its sender's sequence says was missing arrives late, below the
    /// newest number, and is taken (unless its number is taken); one that was not missing is
    /// still a renumbering.
    @Test func aMissingTextIsTakenLateAndNothingElseIs() throws {
        let lookup = Lookup(messages: ["m3": .init(number: 3, sender: "bob")])
        let late = try core.apply(
            text("m2"), from: "bob", entry: entry(.message, number: 2), lastNumber: 3, late: true, lookup: lookup)
        #expect(late.lastNumber == 3)
        guard case .insert(let record) = late.actions.first else {
            Issue.record("a late text was not kept: \(late.actions)")
            return
        }
        #expect(record.number == 2)
        for (number, isLate) in [(2 as Int64, false), (3, true), (0, true)] {
            let outcome = try core.apply(
                text("m9"), from: "bob", entry: entry(.message, number: number), lastNumber: 3, late: isLate, lookup: lookup)
            guard case .drop(let reason) = outcome.actions.first else {
                Issue.record("kept number \(number), late \(isLate)")
                continue
            }
            #expect(reason.contains("renumbered"))
        }
    }

    /// The gaps in a device's sequences: missing until they arrive or are withdrawn; the first
    /// text sets where counting starts; a far jump keeps the newest 256.
    @Test func textSequencesTrackWhatIsMissing() {
        func note(_ state: TextSequences?, _ sequence: UInt64, withdrawn: [UInt64] = []) -> TextSequences {
            TextSequences.noting(state, chatID: "c1", user: "bob", device: "phone", sequence: sequence, withdrawn: withdrawn)
        }
        var state = note(nil, 4)
        #expect(state.highest == 4 && state.missing.isEmpty)
        state = note(state, 5)
        state = note(state, 8)
        #expect(state.missing == [6, 7] && state.awaits(7) && !state.awaits(5))
        state = note(state, 7)
        #expect(state.missing == [6] && state.highest == 8)
        state = note(state, 10, withdrawn: [6, 9])
        #expect(state.missing.isEmpty && state.highest == 10)
        state = note(state, 10_000)
        #expect(state.missing.count == TextSequences.maximumMissing && state.missing.first == 10_000 - 256)
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

    /// Only the sender recalls, once; a recalled message takes no edit and no reaction; a
    /// reaction is its sender's and names a message this device has.
    @Test func recallsAndReactionsFollowTheirRules() throws {
        let lookup = Lookup(messages: [
            "m1": .init(number: 1, sender: "alice"), "m2": .init(number: 2, sender: "bob", recalled: true),
            "m3": .init(number: nil, sender: "bob"),
        ])
        func run(_ kind: ChatPayload.Kind, _ ref: String, content: String = "", from sender: String = "bob") throws
            -> [MessagingCore.Action]
        {
            try core.apply(
                ChatPayload(kind: kind, id: "x", content: content, ref: ref), from: sender, entry: entry(.event, from: sender),
                lastNumber: 2, lookup: lookup
            ).actions
        }
        #expect(try run(.recall, "m1", from: "alice") == [.recall(messageID: "m1")])
        #expect(try run(.recall, "m1").first.map { if case .drop = $0 { true } else { false } } == true, "bob recalls alice's")
        #expect(try run(.recall, "m2").first.map { if case .drop = $0 { true } else { false } } == true, "recalled twice")
        #expect(try run(.edit, "m2").first.map { if case .drop = $0 { true } else { false } } == true, "an edit after a recall")
        #expect(try run(.reaction, "m1", content: "👍") == [.react(messageID: "m1", user: "bob", emoji: "👍", added: true)])
        #expect(try run(.unreaction, "m1", content: "👍") == [.react(messageID: "m1", user: "bob", emoji: "👍", added: false)])
        for ref in ["m2", "m3", "unknown"] {
            #expect(
                try run(.reaction, ref, content: "👍").first.map { if case .drop = $0 { true } else { false } } == true,
                "a reaction to \(ref)")
        }
    }

    /// One of each emoji per user, removal only of the user's own, and the limits.
    @Test func reactionsAreOnePerUserPerEmojiAndBounded() {
        var list: [Reaction] = []
        list = Reaction.applying(list, user: "alice", emoji: "👍", added: true) ?? []
        #expect(Reaction.applying(list, user: "alice", emoji: "👍", added: true) == nil, "added twice")
        list = Reaction.applying(list, user: "bob", emoji: "👍", added: true) ?? []
        #expect(list == [Reaction(emoji: "👍", userIDs: ["alice", "bob"])])
        #expect(Reaction.applying(list, user: "carol", emoji: "👍", added: false) == nil, "carol removes what she has not")
        list = Reaction.applying(list, user: "alice", emoji: "👍", added: false) ?? []
        #expect(list == [Reaction(emoji: "👍", userIDs: ["bob"])])
        var many: [Reaction] = []
        for scalar in 0x1F600..<(0x1F600 + Reaction.maximumPerUser) {
            many = Reaction.applying(many, user: "bob", emoji: String(Unicode.Scalar(scalar)!), added: true) ?? many
        }
        #expect(many.count == Reaction.maximumPerUser)
        #expect(Reaction.applying(many, user: "bob", emoji: "🦀", added: true) == nil, "past the limit")
        #expect(ChatPayload.isReaction("👍🏽") && ChatPayload.isReaction("❤️") && ChatPayload.isReaction("🏳️‍🌈"))
        #expect(!ChatPayload.isReaction("a") && !ChatPayload.isReaction("1") && !ChatPayload.isReaction("👍👍"))
        #expect(!ChatPayload.isReaction("") && !ChatPayload.isReaction("#"))
        // A reaction or recall payload round-trips, and one carrying anything else is refused.
        let reaction = ChatPayload(kind: .reaction, id: "r", content: "👍", ref: "m1")
        #expect((try? ChatPayload(encoded: reaction.encoded)) == reaction)
        var bad = reaction
        bad.content = "thumbs up"
        #expect(throws: MessagingError(.forged, "")) { try ChatPayload(encoded: bad.encoded) }
        var recall = ChatPayload(kind: .recall, id: "r", ref: "m1")
        #expect((try? ChatPayload(encoded: recall.encoded)) == recall)
        recall.data = "smuggled"
        #expect(throws: MessagingError(.forged, "")) { try ChatPayload(encoded: recall.encoded) }
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

    @Test func aReceiptMovesExactlyTheMessagesItNames() throws {
        let lookup = Lookup(messages: [
            "m1": .init(number: 5, sender: "alice"), "m2": .init(number: 6, sender: "alice"),
            "b1": .init(number: 7, sender: "bob"), "m3": .init(number: nil, sender: "alice"),
        ])
        // Version 1: the receipt covers its `ref` alone, whatever number it says.
        let read = ChatPayload(kind: .receipt, id: "r1", ref: "m1", receipt: .read, upTo: 99)
        #expect(
            try core.apply(read, from: "bob", entry: entry(.receipt), lastNumber: 7, lookup: lookup).actions == [
                .advanceSent(ids: ["m1"], .deliver), .advanceSent(ids: ["m1"], .read),
            ])
        // Version 2: what it names, of this user's and numbered; bob's own message and one this
        // device has not numbered yet are not moved by it.
        let named = ChatPayload(
            kind: .receipt, id: "r2", ref: "m2", receipt: .delivered, upTo: 7, covers: ["m1", "m2", "b1", "m3", "gone"])
        #expect(
            try core.apply(named, from: "bob", entry: entry(.receipt), lastNumber: 7, lookup: lookup).actions == [
                .advanceSent(ids: ["m1", "m2"], .deliver)
            ])
        // Read on another of this user's devices: the received messages it names.
        let mine = ChatPayload(kind: .receipt, id: "r3", ref: "b1", receipt: .read, upTo: 7, covers: ["b1", "m2"])
        #expect(
            try core.apply(mine, from: "alice", entry: entry(.receipt, from: "alice"), lastNumber: 7, lookup: lookup).actions
                == [.readReceived(ids: ["b1"])])
        let unknown = ChatPayload(kind: .receipt, id: "r4", ref: "m9", receipt: .read, upTo: 5)
        #expect(
            try core.apply(unknown, from: "bob", entry: entry(.receipt), lastNumber: 5, lookup: lookup).actions == [
                .drop("a receipt for messages this device does not have")
            ])
    }

    /// The domain withholds alice's #5 from bob and delivers #6: bob's receipt names #6, and #5
    /// stays sent on alice's side (under the old rule, a receipt covered every number up to its own).
    @Test func aWithheldMessageIsNotCountedByTheReceiptForALaterOne() throws {
        let lookup = Lookup(messages: ["m5": .init(number: 5, sender: "alice"), "m6": .init(number: 6, sender: "alice")])
        let receipt = ChatPayload(kind: .receipt, id: "r1", ref: "m6", receipt: .read, upTo: 6, covers: ["m6"])
        let actions = try core.apply(receipt, from: "bob", entry: entry(.receipt), lastNumber: 6, lookup: lookup).actions
        #expect(actions == [.advanceSent(ids: ["m6"], .deliver), .advanceSent(ids: ["m6"], .read)])
    }

    @Test func aReceiptsListIsBoundedAndStrict() throws {
        let many = ChatPayload(
            kind: .receipt, id: "r1", ref: "m0", receipt: .read, upTo: 1,
            covers: (0...ChatPayload.maximumCovered).map { "m\($0)" })
        #expect(throws: MessagingError.self) { try many.validate() }
        let twice = ChatPayload(kind: .receipt, id: "r1", ref: "m0", receipt: .read, upTo: 1, covers: ["m0", "m0"])
        #expect(throws: MessagingError.self) { try twice.validate() }
        let text = ChatPayload(kind: .text, id: "t1", content: "hi", covers: ["m0"])
        #expect(throws: MessagingError.self) { try text.validate() }
        // Round trip, and the version byte says which layout follows.
        let named = ChatPayload(kind: .receipt, id: "r2", ref: "m1", receipt: .delivered, upTo: 3, covers: ["m0", "m1"])
        #expect(try ChatPayload(encoded: named.encoded) == named)
        #expect(named.encoded.first == 2)
        var empty = named.encoded
        empty[0] = 1
        #expect(throws: MessagingError.self) { try ChatPayload(encoded: empty) }  // trailing bytes for version 1
    }

    @Test func aPayloadInTheWrongKindOfEntryIsDropped() throws {
        let receipt = ChatPayload(kind: .receipt, id: "r1", ref: "m1", receipt: .read, upTo: 1)
        for (kind, payload) in [(MailboxKind.message, receipt), (.receipt, text("m1")), (.event, text("m2"))] {
            let outcome = try core.apply(payload, from: "bob", entry: entry(kind, number: 9), lastNumber: 1, lookup: Lookup())
            #expect(outcome.lastNumber == 1 && outcome.actions.count == 1, "\(payload.kind) in \(kind)")
            if case .drop = outcome.actions.first {} else { Issue.record("\(payload.kind) in a \(kind) entry was applied") }
        }
    }

    // MARK: Keeping a chat's group right

    typealias Device = ChatGroup.Device

    /// A group of alice's laptop and phone, bob's phone and carol's phone, as alice's laptop
    /// reviews it: every key trusted, nothing departed, no update due.
    func review(admins: Set<String> = ["alice"]) -> MessagingCore.GroupReview {
        MessagingCore.GroupReview(
            devices: [
                Device(user: "alice", device: "alice-laptop"), Device(user: "alice", device: "alice-phone"),
                Device(user: "bob", device: "bob-phone"), Device(user: "carol", device: "carol-phone"),
            ], admins: admins, refused: [], mine: ["alice-laptop", "alice-phone"],
            approved: ["alice-laptop", "alice-phone", "alice-tablet"], departed: [], listed: nil,
            trusted: ["bob", "carol"], sentSinceUpdate: 0, updatedAt: time)
    }

    @Test func aGroupInLineNeedsNoCommit() {
        #expect(core.plan(review(), now: time).isEmpty)
    }

    @Test func thisUsersDevicesFollowTheDomainsListAndTheIdentity() {
        var gone = review()
        gone.mine = ["alice-laptop", "alice-tablet"]
        let plan = core.plan(gone, now: time)
        #expect(plan.remove == [Device(user: "alice", device: "alice-phone")])
        #expect(plan.addMine == [Device(user: "alice", device: "alice-tablet")])
        // A device of a previous identity of this user goes, listed or not; this device never.
        var previous = review()
        previous.refused = [Device(user: "alice", device: "alice-phone"), Device(user: "alice", device: "alice-laptop")]
        #expect(core.plan(previous, now: time).remove == [Device(user: "alice", device: "alice-phone")])
        // A listed device this device does not trust is added by none of the user's devices
        // (security review 1), nor removed (a chat admin may have added it).
        var unapproved = gone
        unapproved.approved = ["alice-laptop", "alice-phone"]
        #expect(core.plan(unapproved, now: time).addMine.isEmpty)
        unapproved.mine.insert("alice-phone")
        #expect(core.plan(unapproved, now: time).isEmpty)
        // Nor is this device added to itself.
        previous.mine = ["alice-laptop"]
        previous.devices.removeAll { $0.device == "alice-laptop" }
        #expect(core.plan(previous, now: time).addMine.isEmpty)
    }

    @Test func onlyAnAdminRemovesOthersAndOnlyThoseTheDomainNoLongerLists() {
        var left = review()
        left.departed = ["carol", "bob"]
        #expect(core.needsMemberList(left))
        left.listed = ["alice", "bob"]  // bob came back: the noted departure was older than the list
        #expect(core.plan(left, now: time).remove == [Device(user: "carol", device: "carol-phone")])
        // A member who is no admin removes no one else, whatever the domain says.
        var member = left
        member.admins = ["bob"]
        #expect(!core.needsMemberList(member))
        #expect(core.plan(member, now: time).isEmpty)
        // Without the domain's list nobody is taken for gone.
        left.listed = nil
        #expect(core.plan(left, now: time).remove.isEmpty)
    }

    @Test func aContactsDevicesOfAnIdentityNoLongerTrustedAreReplacedByAnAdmin() {
        var reset = review()
        reset.refused = [Device(user: "bob", device: "bob-phone"), Device(user: "carol", device: "carol-phone")]
        reset.trusted = ["bob"]  // carol's new identity is not trusted yet: her devices stay (held) for now
        let plan = core.plan(reset, now: time)
        #expect(plan.remove == [Device(user: "bob", device: "bob-phone")] && plan.replace == ["bob"])
        var member = reset
        member.admins = ["carol"]
        #expect(core.plan(member, now: time).isEmpty, "a member who is no admin replaces no one")
    }

    @Test func aKeyUpdateIsDueAfterAThousandMessagesOrAWeek() {
        var busy = review()
        busy.sentSinceUpdate = MessagingCore.updateAfterMessages - 1
        #expect(!core.plan(busy, now: time).updateDue)
        busy.sentSinceUpdate += 1
        #expect(core.plan(busy, now: time).updateDue)
        #expect(core.plan(review(), now: time.addingTimeInterval(MessagingCore.updateAfterInterval)).updateDue)
        // A device of this user removed by another: this one updates at once; removed by itself, no.
        let phone = Device(user: "alice", device: "alice-phone")
        let laptop = Device(user: "alice", device: "alice-laptop")
        #expect(core.sentAfterCommit(3, removed: [phone], by: phone) == MessagingCore.updateAfterMessages)
        #expect(core.sentAfterCommit(3, removed: [phone], by: laptop) == 3)
        #expect(core.sentAfterCommit(3, removed: [Device(user: "bob", device: "bob-phone")], by: phone) == 3)
    }

    @Test func historyGoesToThisUsersDevicesThatJoinedAndNoOneElse() {
        let before = review().devices
        let after =
            before + [
                Device(user: "alice", device: "alice-tablet"), Device(user: "bob", device: "bob-laptop"),
            ]
        #expect(core.historyRecipients(before: before, after: after) == [Device(user: "alice", device: "alice-tablet")])
        #expect(core.historyRecipients(before: before, after: before).isEmpty)
    }

    @Test func historyIsHandedOverInChunksOfNumberedMessagesOnly() throws {
        func message(_ number: Int64?, size: Int) -> ChatMessage {
            ChatMessage(
                id: "m\(number ?? 0)", chatID: "c1", number: number, sender: "bob", isIncoming: true,
                content: String(repeating: "x", count: size), tag: "Text", data: nil, ref: nil, state: .read, timestamp: time)
        }
        let messages = [
            message(1, size: 20_000), message(2, size: 20_000), message(3, size: 20_000), message(nil, size: 10),
            message(4, size: ChatHistory.maximumChunk), message(5, size: 10),
        ]
        let chunks = ChatHistory.chunks(of: messages)
        #expect(chunks.map { $0.records.map(\.number) } == [[1, 2], [3, 5]], "unnumbered and oversized left out")
        #expect(chunks.allSatisfy { $0.encoded.count <= ChatHistory.maximumChunk + 16 })
        let decoded = try ChatHistory(encoded: chunks[1].encoded)
        #expect(decoded == chunks[1])
    }
}
