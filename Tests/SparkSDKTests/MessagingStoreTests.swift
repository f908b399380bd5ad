import Foundation
import SparkCrypto
import SparkDomain
import SparkMLS
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkSDK

/// One suite, run against both messaging stores (the SQLite store of the endpoint store, and the
/// in-memory store): what the messenger and the core rely on holds whichever keeps the state.
@Suite("Messaging: one store, two kinds")
struct MessagingStoreTests {
    enum Kind: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case sqlite, memory
        var testDescription: String { rawValue }
    }

    /// A store of one kind, and its transactions.
    final class Harness: Sendable {
        let kind: Kind
        let directory: URL
        let endpoint: EndpointStore?
        let memory = MemoryMessagingStore()

        init(_ kind: Kind) throws {
            self.kind = kind
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-store-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            endpoint =
                kind == .sqlite ? try EndpointStore(directory: directory, key: .provided(SymmetricKey(size: .bits256))) : nil
        }

        deinit { try? FileManager.default.removeItem(at: directory) }

        func write<T: Sendable>(_ body: (any MessagingStore) throws -> T) throws -> T {
            guard let endpoint else { return try memory.write { try body($0) } }
            let sealer = endpoint.sealer
            return try SQLiteMessagingStore.write(endpoint.queue, sealer: sealer) { store in try body(store) }
        }

        /// The sealed bytes each message keeps, read under the store's interface.
        func sealedBytes() throws -> [String: Data] {
            guard let endpoint else {
                return memory.read { $0.state.messages.compactMapValues(\.sealed) }
            }
            return try endpoint.queue.read { db in
                var kept: [String: Data] = [:]
                for row in try db.rows("SELECT local_id, sealed FROM messages WHERE sealed IS NOT NULL") {
                    kept[try row.get(0)] = try row.get(1, as: Data.self)
                }
                return kept
            }
        }

        func read<T: Sendable>(_ body: (any MessagingStore) throws -> T) throws -> T {
            guard let endpoint else { return try memory.read { try body($0) } }
            let sealer = endpoint.sealer
            return try endpoint.queue.read { db in try body(SQLiteMessagingStore(db: db, sealer: sealer)) }
        }
    }

    static let time = Date(timeIntervalSince1970: 1_790_000_000)

    static func received(_ id: String, _ number: Int64, from sender: String = "bob", state: MessageState = .delivered)
        -> ChatHistory.Record
    {
        ChatHistory.Record(
            id: id, number: number, sender: sender, content: "text \(id)", tag: "Text", data: "{\"n\":\(number)}", ref: nil,
            state: state, timestamp: time.addingTimeInterval(TimeInterval(number)))
    }

    static func outgoing(_ id: String, at offset: TimeInterval, chat: String = "c1") -> OutgoingMessage {
        OutgoingMessage(
            id: id, chatID: chat, sender: "alice", content: "mine \(id)", tag: "Text", data: nil, ref: 1,
            timestamp: time.addingTimeInterval(offset))
    }

    // MARK: Messages

    /// A chat's row carries its count of unread messages (the SQLite store keeps it with
    /// triggers rather than counting): it follows every change of what is unread, in random
    /// order, and agrees with the messages counted one by one, also for a chat whose row is made
    /// after its first messages.
    @Test(arguments: Kind.allCases)
    func aChatsUnreadCountFollowsItsMessages(_ kind: Kind) throws {
        let store = try Harness(kind)
        var random = SplitMix64(seed: 19)
        var unread: [String: Set<String>] = ["c1": [], "c2": []]
        var received: [String: [(id: String, number: Int64)]] = ["c1": [], "c2": []]
        try store.write { s in try s.setMembership(chatID: "c1", participants: [], active: true, at: Self.time) }
        for step in 0..<300 {
            let chat = Bool.random(using: &random) ? "c1" : "c2"
            if step == 150 {
                try store.write { s in try s.setMembership(chatID: "c2", participants: [], active: true, at: Self.time) }
            }
            try store.write { s in
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<4:
                    let number = Int64(received[chat]!.count + 1)
                    let id = "\(chat)-r\(number)"
                    let state: MessageState = Int.random(in: 0..<5, using: &random) == 0 ? .read : .delivered
                    try s.insertReceived(
                        Self.received(id, number, state: state), chatID: chat, incoming: true, ignoringTaken: false)
                    received[chat]!.append((id, number))
                    if state != .read { unread[chat]!.insert(id) }
                case 4:
                    try s.insertOutgoing(Self.outgoing("\(chat)-o\(step)", at: TimeInterval(step), chat: chat), sealed: Data([1]))
                case 5:
                    guard let last = received[chat]!.randomElement(using: &random) else { return }
                    try s.readReceived(chatID: chat, upTo: last.number)
                    for message in received[chat]! where message.number <= last.number { unread[chat]!.remove(message.id) }
                case 6, 7:
                    let some = Array(received[chat]!.shuffled(using: &random).prefix(3).map(\.id))
                    try s.readReceived(chatID: chat, ids: some)
                    unread[chat]!.subtract(some)
                default:
                    guard let message = received[chat]!.randomElement(using: &random) else { return }
                    try s.recall(message.id)
                    unread[chat]!.remove(message.id)
                }
            }
            let (rows, counted) = try store.read { s in
                (
                    Dictionary(uniqueKeysWithValues: try s.chats(only: nil).map { ($0.chatID, $0.unreadCount) }),
                    try ["c1", "c2"].map { try s.unreadCount(chatID: $0) }
                )
            }
            #expect(counted == [unread["c1"]!.count, unread["c2"]!.count], "step \(step)")
            #expect(rows["c1"] == unread["c1"]!.count, "step \(step)")
            #expect(rows["c2"] == (step >= 150 ? unread["c2"]!.count : nil), "step \(step)")
        }
    }

    @Test(arguments: Kind.allCases)
    func messagesPageByNumberThenThoseWithoutOne(_ kind: Kind) throws {
        let store = try Harness(kind)
        try store.write { s in
            for n in [3, 1, 2] as [Int64] {
                try s.insertReceived(Self.received("r\(n)", n), chatID: "c1", incoming: true, ignoringTaken: false)
            }
            try s.insertReceived(Self.received("other", 1), chatID: "c2", incoming: true, ignoringTaken: false)
            try s.insertOutgoing(Self.outgoing("held", at: 20), sealed: nil)
            try s.insertOutgoing(Self.outgoing("sending", at: 10), sealed: Data([1]))
        }
        let page = try store.read { s in try s.page(chatID: "c1", before: nil, limit: 10).map(\.id) }
        #expect(page == ["r1", "r2", "r3", "sending", "held"])
        #expect(try store.read { s in try s.page(chatID: "c1", before: nil, limit: 3).map(\.id) } == ["r3", "sending", "held"])
        #expect(try store.read { s in try s.page(chatID: "c1", before: 3, limit: 1).map(\.id) } == ["r2"])
        #expect(try store.read { s in try s.numbered(chatID: "c1").map(\.id) } == ["r1", "r2", "r3"])
        let first = try #require(try store.read { s in try s.message("r1") })
        #expect(first.content == "text r1" && first.data == "{\"n\":1}" && first.isIncoming && first.state == .delivered)
        #expect(try store.read { s in try s.messageID(chatID: "c1", number: 2) } == "r2")
        #expect(try store.read { s in try s.messageID(chatID: "c2", number: 2) } == nil)
        #expect(try store.read { s in try s.known(chatID: "c2", id: "r1") } == nil, "a message is known in its own chat only")
        #expect(try store.read { s in try s.known(chatID: "c1", id: "r1") } == .init(number: 1, sender: "bob"))
        #expect(try store.read { s in try s.newestReceived(chatID: "c1") } == 3)
        #expect(try store.read { s in try s.unreadCount(chatID: "c1") } == 3)
        #expect(try store.read { s in try s.messages(chatID: "c1", ids: ["r2", "other", "gone"]).map(\.id) } == ["r2"])
        let mine = try #require(try store.read { s in try s.outgoing("held") })
        #expect(mine == Self.outgoing("held", at: 20))
        #expect(try store.read { s in try s.outgoing("r1") } == nil, "a received message is not this user's to send")
    }

    @Test(arguments: Kind.allCases)
    func anIdOrANumberTakenIsAConflictAndChangesNothing(_ kind: Kind) throws {
        let store = try Harness(kind)
        try store.write { s in try s.insertReceived(Self.received("m1", 1), chatID: "c1", incoming: true, ignoringTaken: false) }
        var replay = Self.received("m1", 2)
        replay.content = "replayed"
        var renumbered = Self.received("m9", 1)
        renumbered.content = "renumbered"
        for forged in [replay, renumbered] {
            #expect {
                try store.write { s in try s.insertReceived(forged, chatID: "c1", incoming: true, ignoringTaken: false) }
            } throws: { ($0 as? MessagingError)?.code == .conflict }
            // A history transfer leaves out what is taken, and goes on.
            try store.write { s in try s.insertReceived(forged, chatID: "c1", incoming: true, ignoringTaken: true) }
        }
        #expect(try store.read { s in try s.numbered(chatID: "c1").map(\.content) } == ["text m1"])
        #expect(try store.read { s in try s.message("m9") } == nil)
        // The same number in another chat is no conflict.
        try store.write { s in try s.insertReceived(Self.received("n1", 1), chatID: "c2", incoming: true, ignoringTaken: false) }
        // Nor is accepting a message under a number taken: it is refused.
        try store.write { s in try s.insertOutgoing(Self.outgoing("mine", at: 5), sealed: Data([1])) }
        #expect {
            try store.write { s in try s.accept("mine", number: 1, at: nil) }
        } throws: { ($0 as? MessagingError)?.code == .conflict }
        #expect(try store.read { s in try s.message("mine")?.state } == .sending)
    }

    /// A chat's timer as one transaction changes it (the SQLite store keeps what it read of it
    /// for the transaction's next messages): a message stored after a change, or after a change
    /// rolled back with its savepoint, counts down under the timer then in force.
    @Test(arguments: Kind.allCases)
    func aTimerChangedInATransactionRulesItsNextMessages(_ kind: Kind) throws {
        let store = try Harness(kind)
        struct Refused: Error {}
        try store.write { s in
            try s.setMembership(
                chatID: "c1", participants: [ChatMember(userID: "alice", isAdmin: true)], active: true, at: Self.time)
            try s.insertReceived(
                Self.received("before", 1, from: "alice", state: .sent), chatID: "c1", incoming: false, ignoringTaken: false)
            try s.setTimer(60, chatID: "c1")
            try s.insertReceived(
                Self.received("after", 2, from: "alice", state: .sent), chatID: "c1", incoming: false, ignoringTaken: false)
            _ = try? s.savepoint {
                try s.setTimer(600, chatID: "c1")
                _ = try s.timer(chatID: "c1")
                throw Refused()
            }
            try s.insertReceived(
                Self.received("rolled", 3, from: "alice", state: .sent), chatID: "c1", incoming: false, ignoringTaken: false)
        }
        let expiry = try store.read { s in
            try ["before", "after", "rolled"].map { id in try s.message(id)?.expiresAt?.timeIntervalSince(Self.time) }
        }
        #expect(expiry == [nil, 62, 63])
        #expect(try store.read { s in try s.timer(chatID: "c1") } == 60)
    }

    @Test(arguments: Kind.allCases)
    func statesMoveOnlyByStepsFromTheirSources(_ kind: Kind) throws {
        let store = try Harness(kind)
        try store.write { s in
            for (id, offset) in [("a", 1.0), ("b", 2.0), ("c", 3.0)] {
                try s.insertOutgoing(Self.outgoing(id, at: offset), sealed: Data([7]))
            }
        }
        #expect(try store.read { s in try s.sending(chatID: "c1").map(\.id) } == ["a", "b", "c"])
        #expect(try store.read { s in try s.chatsSending() } == ["c1"])
        // Accepted once: the step and its event; the echo's second accept moves nothing.
        let accepted = try store.write { s in try s.accept("a", number: 1, at: Self.time) }
        #expect(accepted == [MessageEvent(messageID: "a", chatID: "c1", number: 1, state: .sent)])
        #expect(try store.write { s in try s.accept("a", number: 1, at: nil) } == [])
        #expect(try store.read { s in try s.message("a")?.timestamp } == Self.time)
        // Refused only while sending.
        #expect(try store.write { s in try s.refuse("a", reason: "late") } == false)
        #expect(try store.write { s in try s.refuse("c", reason: "too large") } == true)
        #expect(try store.read { s in try s.message("c")?.state } == .failed(reason: "too large"))
        #expect(try store.write { s in try s.accept("c", number: 9, at: nil) } == [], "a failed message stays failed")
        // Held: its bytes forgotten, no longer sending; released: sending with new bytes.
        try store.write { s in try s.hold("b") }
        #expect(try store.read { s in try s.held(chatID: "c1") } == ["b"])
        #expect(try store.read { s in try s.chatsHolding() } == ["c1"])
        #expect(try store.read { s in try s.sending(chatID: "c1").map(\.id) } == [])
        try store.write { s in try s.setSealed("b", Data([8])) }
        #expect(try store.read { s in try s.sending(chatID: "c1").map(\.sealed) } == [Data([8])])
        _ = try store.write { s in try s.accept("b", number: 2, at: nil) }
        // Read before delivered: a receipt moves what it names, each step from its sources.
        #expect(try store.write { s in try s.advanceSent(chatID: "c1", ids: ["a", "b"], .read) } == [])
        let delivered = try store.write { s in try s.advanceSent(chatID: "c1", ids: ["b", "a", "c"], .deliver) }
        #expect(delivered.map(\.messageID) == ["a", "b"] && delivered.allSatisfy { $0.state == .delivered })
        #expect(try store.write { s in try s.advanceSent(chatID: "c1", ids: ["a"], .read) }.map(\.messageID) == ["a"])
        #expect(try store.read { s in try s.message("b")?.state } == .delivered)
        #expect(try store.write { s in try s.advanceSent(chatID: "c2", ids: ["b"], .read) } == [], "another chat's")
        // Received messages are read by this user, and only up to the number.
        try store.write { s in
            try s.insertReceived(Self.received("r3", 3), chatID: "c1", incoming: true, ignoringTaken: false)
            try s.insertReceived(Self.received("r4", 4), chatID: "c1", incoming: true, ignoringTaken: false)
            try s.readReceived(chatID: "c1", upTo: 3)
        }
        #expect(try store.read { s in try s.unreadCount(chatID: "c1") } == 1)
        #expect(try store.read { s in try s.unreadReceived(chatID: "c1", upTo: 9) } == [CoveredMessage(id: "r4", number: 4)])
        #expect(
            try store.write { s in try s.advanceSent(chatID: "c1", ids: ["r4", "b"], .read) }.map(\.messageID) == ["b"],
            "not a received one")
        try store.write { s in try s.readReceived(chatID: "c1", ids: ["r4", "b"]) }
        #expect(try store.read { s in try s.unreadCount(chatID: "c1") } == 0)
        #expect(try store.read { s in try s.message("b")?.state } == .read, "this user's own stays where it was")
        try store.write { s in try s.setContent("r4", content: "edited") }
        #expect(try store.read { s in try s.message("r4")?.content } == "edited")
        #expect(try store.read { s in try s.chatOfNumbered(id: "b", sender: "alice") } == "c1")
        #expect(try store.read { s in try s.chatOfNumbered(id: "r4", sender: "alice") } == nil, "not alice's")
    }

    /// A device keeps no ciphertext of what it sent once the domain answered: an attacker with
    /// the store later finds no MLS message of this device to replay or to match against traffic.
    @Test(arguments: Kind.allCases)
    func noSealedBytesAreKeptOnceTheDomainAnswered(_ kind: Kind) throws {
        let store = try Harness(kind)
        try store.write { s in
            try s.insertOutgoing(Self.outgoing("accepted", at: 1), sealed: Data("ciphertext one".utf8))
            try s.insertOutgoing(Self.outgoing("refused", at: 2), sealed: Data("ciphertext two".utf8))
            try s.insertOutgoing(Self.outgoing("waiting", at: 3), sealed: Data("ciphertext three".utf8))
        }
        _ = try store.write { s in try s.accept("accepted", number: 1, at: nil) }
        _ = try store.write { s in try s.refuse("refused", reason: "banned") }
        #expect(try store.sealedBytes() == ["waiting": Data("ciphertext three".utf8)], "only what still waits for an answer")
    }

    @Test(arguments: Kind.allCases)
    func aTransactionThatThrowsChangesNothing(_ kind: Kind) throws {
        struct Abort: Error {}
        let store = try Harness(kind)
        #expect(throws: Abort.self) {
            try store.write { s -> Void in
                try s.insertReceived(Self.received("m1", 1), chatID: "c1", incoming: true, ignoringTaken: false)
                try s.setMailboxCursor(40)
                try s.recordSent(chatID: "c1", payload: Data([1]), localID: "m1")
                throw Abort()
            }
        }
        #expect(try store.read { s in try s.message("m1") } == nil)
        #expect(try store.read { s in try s.mailboxCursor() } == 0)
        #expect(try store.read { s in try s.sent(payload: Data([1])) } == nil)
    }

    // MARK: Chats

    @Test(arguments: Kind.allCases)
    func chatsListTheirMembersSubjectAndActivity(_ kind: Kind) throws {
        let store = try Harness(kind)
        let members = [ChatMember(userID: "alice", isAdmin: true), ChatMember(userID: "bob", isAdmin: false)]
        try store.write { s in
            try s.setMembership(chatID: "c1", participants: members, active: true, at: Self.time)
            try s.setMembership(chatID: "c2", participants: members, active: true, at: Self.time.addingTimeInterval(5))
            try s.setSubject("Plans", chatID: "c1", at: Self.time.addingTimeInterval(10))
            try s.touchChat("c2", at: Self.time)  // never back
            try s.insertReceived(Self.received("m1", 1), chatID: "c1", incoming: true, ignoringTaken: false)
        }
        let chats = try store.read { s in try s.chats(only: nil) }
        #expect(chats.map(\.chatID) == ["c1", "c2"], "most recent activity first")
        #expect(chats[0].subject == "Plans" && chats[0].participants == members && chats[0].unreadCount == 1)
        #expect(chats[1].lastActivity == Self.time.addingTimeInterval(5) && chats[1].subject == "")
        #expect(try store.read { s in try s.participants(chatID: "c1") } == ["alice", "bob"])
        #expect(try store.read { s in try s.subject(chatID: "c1") } == "Plans")
        #expect(try store.read { s in try s.chats(only: "c9") }.isEmpty)
        // Membership replaced, not added to.
        try store.write { s in
            try s.setMembership(chatID: "c1", participants: [members[0]], active: true, at: Self.time)
        }
        #expect(try store.read { s in try s.participants(chatID: "c1") } == ["alice"])
    }

    @Test(arguments: Kind.allCases)
    func leavingAChatForgetsItsGroupAndPendingWorkAndKeepsItListed(_ kind: Kind) throws {
        let store = try Harness(kind)
        try store.write { s in
            try s.setMembership(chatID: "c1", participants: [], active: true, at: Self.time)
            try s.saveGroup(Self.group("c1", epoch: 1), epochState: Data([1]))
            try s.setPendingCommit(chatID: "c1", digest: Data([9]), epoch: 1, group: Data([2]))
            try s.deferEntry(Self.entry(5, chat: "c1"))
            try s.noteDeparted(chatID: "c1", users: ["carol"])
            try s.saveGroup(Self.group("c2", epoch: 1), epochState: Data([1]))
            try s.deferEntry(Self.entry(6, chat: "c2"))
        }
        #expect(try store.read { s in try s.leftEpoch(chatID: "c1") } == nil)
        try store.write { s in try s.leaveChat("c1", epoch: 1) }
        #expect(try store.read { s in try s.leftEpoch(chatID: "c1") } == 1, "a Welcome at or before it is a replay")
        try store.write { s in try s.leaveChat("c1", epoch: nil) }
        #expect(try store.read { s in try s.leftEpoch(chatID: "c1") } == 1, "leaving again without a group keeps it")
        #expect(try store.read { s in try s.groupChats() } == ["c2"])
        #expect(try store.read { s in try s.pendingCommit(chatID: "c1", digest: Data([9])) } == nil)
        #expect(try store.read { s in try s.deferred(chatID: "c1") }.isEmpty)
        #expect(try store.read { s in try s.deferred(chatID: "c2") }.map(\.sequence) == [6])
        #expect(try store.read { s in try s.departed(chatID: "c1") }.isEmpty)
        #expect(try store.read { s in try s.chats(only: "c1") }.map(\.isActive) == [false])
    }

    // MARK: Groups

    static func group(_ chat: String, epoch: UInt64, version: UInt8 = 1, ratchets: UInt8 = 1) -> GroupRecord {
        GroupRecord(
            chatID: chat, epoch: epoch, ratchets: Data([ratchets]), sentSinceUpdate: 2, updatedAt: time, lastNumber: 4,
            version: Data(repeating: version, count: 16))
    }

    static func entry(_ sequence: Int64, chat: String) -> MailboxEntry {
        MailboxEntry(
            sequence: sequence, chatID: chat, sender: "bob", kind: .message, messageNumber: sequence, payload: Data([1, 2]),
            members: nil, postedAt: time)
    }

    @Test(arguments: Kind.allCases)
    func aGroupsRatchetsAreReplacedOnlyAtTheVersionAndEpochNamed(_ kind: Kind) throws {
        let store = try Harness(kind)
        try store.write { s in try s.saveGroup(Self.group("c1", epoch: 3), epochState: Data([0xEE])) }
        let saved = try #require(try store.read { s in try s.group(chatID: "c1") })
        #expect(
            saved.epochState == Data([0xEE]) && saved.ratchets == Data([1]) && saved.lastNumber == 4 && saved.sentSinceUpdate == 2
        )
        #expect(try store.read { s in try s.groupVersion(chatID: "c1") } == Data(repeating: 1, count: 16))
        // Another writer moved the row (its version is not the one named): refused.
        let moved = Self.group("c1", epoch: 3, version: 2, ratchets: 2)
        #expect(try store.write { s in try s.saveRatchets(moved, expected: Data(repeating: 9, count: 16)) } == false)
        // Another epoch's ratchets: refused.
        #expect(
            try store.write { s in try s.saveRatchets(Self.group("c1", epoch: 4, version: 2), expected: saved.version) } == false)
        #expect(try store.write { s in try s.saveRatchets(moved, expected: saved.version) } == true)
        let now = try #require(try store.read { s in try s.group(chatID: "c1") })
        #expect(now.ratchets == Data([2]) && now.version == moved.version && now.epochState == Data([0xEE]))
        // A number seen moves the version, and never back.
        try store.write { s in try s.noteNumber(chatID: "c1", number: 9, version: Data(repeating: 3, count: 16)) }
        try store.write { s in try s.noteNumber(chatID: "c1", number: 7, version: Data(repeating: 4, count: 16)) }
        #expect(
            try store.read { s in try s.group(chatID: "c1") }.map { ($0.lastNumber, $0.version) } ?? (0, Data()) == (
                9, Data(repeating: 4, count: 16)
            ))
    }

    @Test(arguments: Kind.allCases)
    func pendingCommitsLastUntilTheEpochMoves(_ kind: Kind) throws {
        let store = try Harness(kind)
        try store.write { s in
            try s.saveGroup(Self.group("c1", epoch: 1), epochState: Data([1]))
            try s.setPendingCommit(chatID: "c1", digest: Data([1]), epoch: 1, group: Data([0xA1]))
            try s.setPendingCommit(chatID: "c1", digest: Data([2]), epoch: 1, group: Data([0xA2]))
        }
        #expect(try store.read { s in try s.pendingCommit(chatID: "c1", digest: Data([1])) } == Data([0xA1]))
        #expect(try store.read { s in try s.pendingCommit(chatID: "c2", digest: Data([1])) } == nil, "another chat's")
        try store.write { s in try s.clearPendingCommit(chatID: "c1", digest: Data([1])) }
        #expect(try store.read { s in try s.pendingCommit(chatID: "c1", digest: Data([1])) } == nil)
        // Saved again in the same epoch: kept. In the next: forgotten.
        try store.write { s in try s.saveGroup(Self.group("c1", epoch: 1, version: 2), epochState: Data([1])) }
        #expect(try store.read { s in try s.pendingCommit(chatID: "c1", digest: Data([2])) } == Data([0xA2]))
        // A review that forgets the departed runs beside a commit whose answer was lost: kept.
        try store.write { s in
            try s.noteDeparted(chatID: "c1", users: ["carol"])
            try s.forgetDeparted(chatID: "c1")
        }
        #expect(try store.read { s in try s.pendingCommit(chatID: "c1", digest: Data([2])) } == Data([0xA2]))
        try store.write { s in try s.saveGroup(Self.group("c1", epoch: 2, version: 3), epochState: Data([2])) }
        #expect(try store.read { s in try s.pendingCommit(chatID: "c1", digest: Data([2])) } == nil)
    }

    @Test(arguments: Kind.allCases)
    func waitingEntriesDepartedMembersAndOwnPosts(_ kind: Kind) throws {
        let store = try Harness(kind)
        try store.write { s in
            for sequence in [9, 3, 5] as [Int64] { try s.deferEntry(Self.entry(sequence, chat: "c1")) }
            try s.noteDeparted(chatID: "c1", users: ["carol", "dave"])
            try s.noteDeparted(chatID: "c1", users: ["carol"])
            try s.recordSent(chatID: "c1", payload: Data("message".utf8), localID: "m1")
            try s.recordSent(chatID: "c1", payload: Data("commit".utf8), localID: nil)
            try s.setMailboxCursor(12)
        }
        #expect(try store.read { s in try s.deferred(chatID: "c1") } == [3, 5, 9].map { Self.entry($0, chat: "c1") })
        #expect(try store.read { s in try s.deferredCount(chatID: "c1") } == 3)
        try store.write { s in try s.forgetDeferred(sequence: 5) }
        #expect(try store.read { s in try s.deferred(chatID: "c1") }.map(\.sequence) == [3, 9])
        #expect(try store.read { s in try s.departed(chatID: "c1") } == ["carol", "dave"])
        try store.write { s in try s.forgetDeparted(chatID: "c1") }
        #expect(try store.read { s in try s.departed(chatID: "c1") }.isEmpty)
        #expect(try store.read { s in try s.sent(payload: Data("message".utf8)) } == SentPost(localID: "m1"))
        #expect(try store.read { s in try s.sent(payload: Data("commit".utf8)) } == SentPost(localID: nil))
        #expect(try store.read { s in try s.sent(payload: Data("other".utf8)) } == nil)
        try store.write { s in try s.forgetSent(payload: Data("message".utf8)) }
        #expect(try store.read { s in try s.sent(payload: Data("message".utf8)) } == nil)
        #expect(try store.read { s in try s.mailboxCursor() } == 12)
    }

    // MARK: Above the store

    /// The group layer and the messaging core work the same over either store: a chat's group
    /// kept live, each message sealed once (bob opens every one), and the core's lookups.
    @Test(arguments: Kind.allCases)
    func groupsAndTheCoreRunOnEitherStore(_ kind: Kind) throws {
        let store = try Harness(kind)
        let world = try ChatGroupTests.World()
        var bob = try #require(world.groups["bob"])
        let alice = try #require(world.groups["alice"])
        let validator = MLSAcceptAnyCredential()
        let groups = GroupStore(cache: GroupCache(capacity: 4))
        try store.write { s in
            try groups.save(s, GroupStore.Stored(group: alice, sentSinceUpdate: 0, updatedAt: Self.time, lastNumber: 0))
        }
        for number in 1...3 as ClosedRange<Int64> {
            let sealed = try store.write { s -> Data in
                var stored = try #require(try groups.load(s, chatID: "c1", validator: validator))
                var random = MLSSystemRandom()
                let sealed = try stored.group.seal(
                    ChatPayload(kind: .text, id: "m\(number)", content: "hi \(number)"), random: &random)
                stored.sentSinceUpdate += 1
                try groups.save(s, stored)
                return sealed
            }
            let entry = MailboxEntry(
                sequence: number, chatID: "c1", sender: "alice", kind: .message, messageNumber: number, payload: sealed,
                members: nil, postedAt: Self.time)
            guard case .message(let payload, _, _) = bob.receive(entry, now: Self.time) else {
                Issue.record("bob refused message \(number)")
                return
            }
            #expect(payload.content == "hi \(number)")
        }
        // Loaded fresh (no live session), the group is where the last save left it.
        let fresh = try store.read { s in
            try GroupStore(cache: GroupCache(capacity: 1)).load(s, chatID: "c1", validator: validator)
        }
        #expect(fresh?.sentSinceUpdate == 3 && fresh?.group.group.epochAuthenticator == alice.group.epochAuthenticator)
        // The core decides by what the store holds: a replayed id is dropped.
        let core = MessagingCore(user: "bob", endpointID: "bob-phone")
        try store.write { s in
            try s.insertReceived(Self.received("m1", 1, from: "alice"), chatID: "c1", incoming: true, ignoringTaken: false)
        }
        let entry = MailboxEntry(
            sequence: 4, chatID: "c1", sender: "alice", kind: .message, messageNumber: 4, payload: Data(), members: nil,
            postedAt: Self.time)
        let outcome = try store.read { s in
            try core.apply(
                ChatPayload(kind: .text, id: "m1", content: "again"), from: "alice", entry: entry, lastNumber: 3, lookup: s.lookup
            )
        }
        #expect(outcome.actions.count == 1 && { if case .drop = outcome.actions[0] { true } else { false } }())
    }

    /// What only the SQLite store promises: every secret value is sealed at rest.
    @Test func theSQLiteStoreKeepsNoSecretInTheClear() throws {
        let store = try Harness(.sqlite)
        try store.write { s in
            try s.insertReceived(Self.received("m1", 1), chatID: "c1", incoming: true, ignoringTaken: false)
            try s.setMembership(chatID: "c1", participants: [], active: true, at: Self.time)
            try s.setSubject("secret subject", chatID: "c1", at: Self.time)
            try s.saveGroup(Self.group("c1", epoch: 1, ratchets: 0x5A), epochState: Data("secret epoch state".utf8))
            try s.setPendingCommit(chatID: "c1", digest: Data([1]), epoch: 1, group: Data("secret pending group".utf8))
        }
        // The database and its write-ahead log, whichever holds the rows now.
        var bytes = Data()
        for file in try FileManager.default.contentsOfDirectory(atPath: store.directory.path) {
            bytes += (try? Data(contentsOf: store.directory.appendingPathComponent(file))) ?? Data()
        }
        for secret in ["text m1", "secret subject", "secret epoch state", "secret pending group", "{\"n\":1}"] {
            #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(secret) is in the clear")
        }
    }
}
