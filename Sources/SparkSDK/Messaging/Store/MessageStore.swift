import Foundation
import SparkStore

/// The endpoint store's statements on messages: every one of them is here, and this file alone
/// reads and writes the `messages` table. Content and data are sealed per value
/// (`StoreSealer`, bound to the column and the message's id); states move only by
/// ``MessageStep``s, from their sources.
struct MessageStore: Sendable {
    let sealer: StoreSealer

    private static let columns =
        "SELECT local_id, chat_id, number, sender, incoming, content, tag, data, ref, state, failure, timestamp FROM messages"

    private func message(_ row: Row) throws -> ChatMessage {
        let id = try row.get(0, as: String.self)
        return ChatMessage(
            id: id, chatID: try row.get(1), number: try row.get(2), sender: try row.get(3), isIncoming: try row.get(4),
            content: try sealer.openText(try row.get(5), EndpointStore.Seal.content(id)), tag: try row.get(6),
            data: try row.get(7, as: Data?.self).map { try sealer.openText($0, EndpointStore.Seal.data(id)) },
            ref: try row.get(8),
            state: MessageState(storedName: try row.get(9), failure: try row.get(10)),
            timestamp: Date(timeIntervalSince1970: try row.get(11)))
    }

    // MARK: Reading

    func message(_ db: Database, id: String) throws -> ChatMessage? {
        try db.row("\(Self.columns) WHERE local_id = ?", [id]).map(message)
    }

    /// The chat's messages of these ids (those that exist).
    func messages(_ db: Database, chatID: String, ids: [String]) throws -> [ChatMessage] {
        guard !ids.isEmpty else { return [] }
        return try db.rows(
            "\(Self.columns) WHERE chat_id = ? AND local_id IN (\(ids.map { _ in "?" }.joined(separator: ", ")))",
            [chatID] + ids
        ).map(message)
    }

    /// The latest `limit` messages before `number` (or the newest), oldest first. Numbered
    /// messages come through the (chat, number) index, so a chat of a million messages loads its
    /// latest page as fast as a small one; messages without a number yet (sending, held, failed)
    /// follow the newest page.
    func page(_ db: Database, chatID: String, before number: Int64?, limit: Int) throws -> [ChatMessage] {
        let numbered =
            if let number {
                try db.rows(
                    "\(Self.columns) WHERE chat_id = ? AND number < ? ORDER BY number DESC LIMIT ?", [chatID, number, limit])
            } else {
                try db.rows(
                    "\(Self.columns) WHERE chat_id = ? AND number IS NOT NULL ORDER BY number DESC LIMIT ?", [chatID, limit])
            }
        var page = try numbered.reversed().map(message)
        if number == nil {
            let pending = try db.rows("\(Self.columns) WHERE chat_id = ? AND number IS NULL ORDER BY timestamp", [chatID])
                .map(message)
            page = Array((page + pending).suffix(limit))
        }
        return page
    }

    /// The chat's numbered messages, oldest first (what a history transfer hands over).
    func numbered(_ db: Database, chatID: String) throws -> [ChatMessage] {
        try db.rows("\(Self.columns) WHERE chat_id = ? AND number IS NOT NULL ORDER BY number", [chatID]).map(message)
    }

    /// The id of the chat's message numbered `number`.
    static func id(_ db: Database, chatID: String, number: Int64) throws -> String? {
        try db.scalar("SELECT local_id FROM messages WHERE chat_id = ? AND number = ?", [chatID, number], as: String.self)
    }

    /// The chat's message `id` as the messaging core asks for it: its number and sender.
    static func known(_ db: Database, chatID: String, id: String) throws -> MessagingCore.KnownMessage? {
        try db.row("SELECT number, sender FROM messages WHERE local_id = ? AND chat_id = ?", [id, chatID]).map {
            MessagingCore.KnownMessage(number: try $0.get(0), sender: try $0.get(1))
        }
    }

    /// The messaging core's lookups, answered in a transaction.
    struct Lookup: MessageLookup {
        let db: Database
        func message(_ id: String, in chatID: String) throws -> MessagingCore.KnownMessage? {
            try MessageStore.known(db, chatID: chatID, id: id)
        }
    }

    /// The number of the chat's message `id`, if it has one.
    static func number(_ db: Database, chatID: String, id: String) throws -> Int64? {
        try db.scalar("SELECT number FROM messages WHERE local_id = ? AND chat_id = ?", [id, chatID], as: Int64.self)
    }

    /// Whether the chat has message `id` numbered `number` (a message handed over in a history
    /// transfer arrives again from the mailbox).
    static func has(_ db: Database, chatID: String, id: String, number: Int64?) throws -> Bool {
        try db.scalar(
            "SELECT 1 FROM messages WHERE local_id = ? AND chat_id = ? AND number IS ?", [id, chatID, number], as: Int.self)
            != nil
    }

    /// Whether `sender` sent the chat's message `id`.
    static func isSent(_ db: Database, chatID: String, id: String, by sender: String) throws -> Bool {
        try db.scalar(
            "SELECT 1 FROM messages WHERE local_id = ? AND chat_id = ? AND sender = ?", [id, chatID, sender], as: Int.self)
            != nil
    }

    /// The chat of `sender`'s numbered message `id` (what may be edited).
    static func chatOfNumbered(_ db: Database, id: String, sender: String) throws -> String? {
        try db.scalar(
            "SELECT chat_id FROM messages WHERE local_id = ? AND sender = ? AND number IS NOT NULL", [id, sender],
            as: String.self)
    }

    /// The newest number of a received message of the chat.
    static func newestReceived(_ db: Database, chatID: String) throws -> Int64? {
        try db.scalar("SELECT max(number) FROM messages WHERE chat_id = ? AND incoming = 1", [chatID], as: Int64.self)
    }

    /// The chat's newest message numbered `upTo` or less: its number and id.
    static func newest(_ db: Database, chatID: String, upTo: Int64) throws -> (number: Int64, id: String)? {
        try db.row(
            "SELECT number, local_id FROM messages WHERE chat_id = ? AND number <= ? ORDER BY number DESC LIMIT 1",
            [chatID, upTo]
        ).map { (try $0.get(0, as: Int64.self), try $0.get(1, as: String.self)) }
    }

    /// How many received messages of the chat are not read.
    static func unreadCount(_ db: Database, chatID: String) throws -> Int {
        try db.scalar(
            "SELECT count(*) FROM messages WHERE chat_id = ? AND incoming = 1 AND state != ?",
            [chatID, MessageState.read.storedName], as: Int.self) ?? 0
    }

    // MARK: Sending

    /// What this user sends, stored before anything leaves: sealed (`sending`, with its bytes)
    /// or held (no bytes).
    func insertOutgoing(
        _ db: Database, id: String, chatID: String, sender: String, content: String, tag: String, data: String?, ref: Int64?,
        timestamp: Date, sealed: Data?
    ) throws {
        try db.execute(
            """
            INSERT INTO messages(local_id, chat_id, sender, incoming, content, tag, data, ref, state, timestamp, sealed)
            VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                id, chatID, sender, try sealer.seal(content, EndpointStore.Seal.content(id)), tag,
                try data.map { try sealer.seal($0, EndpointStore.Seal.data(id)) }, ref,
                (sealed == nil ? MessageState.held : .sending).storedName, timestamp.timeIntervalSince1970, sealed,
            ])
    }

    /// The text of one of this user's messages, to seal it (again, or for the first time once
    /// released): its chat, content, tag, data and the number it refers to.
    func outgoing(_ db: Database, id: String) throws -> (
        chatID: String, content: String, tag: String, data: String?, ref: Int64?
    )? {
        try db.row("SELECT chat_id, content, tag, data, ref FROM messages WHERE local_id = ? AND incoming = 0", [id]).map { row in
            (
                try row.get(0), try sealer.openText(try row.get(1), EndpointStore.Seal.content(id)), try row.get(2),
                try row.get(3, as: Data?.self).map { try sealer.openText($0, EndpointStore.Seal.data(id)) }, try row.get(4)
            )
        }
    }

    /// The chat's messages sealed and not yet accepted, oldest first, with their bytes.
    static func sending(_ db: Database, chatID: String) throws -> [(id: String, sealed: Data)] {
        try db.rows(
            "SELECT local_id, sealed FROM messages WHERE chat_id = ? AND state = ? AND sealed IS NOT NULL ORDER BY rowid",
            [chatID, MessageState.sending.storedName]
        ).map { (try $0.get(0, as: String.self), try $0.get(1, as: Data.self)) }
    }

    /// The chats with messages sealed and not yet accepted.
    static func chatsSending(_ db: Database) throws -> [String] {
        try db.rows(
            "SELECT DISTINCT chat_id FROM messages WHERE state = ? AND sealed IS NOT NULL", [MessageState.sending.storedName]
        ).map { try $0.get(0, as: String.self) }
    }

    /// The chat's held messages, oldest first (every chat's when nil: their chats).
    static func held(_ db: Database, chatID: String) throws -> [String] {
        try db.rows(
            "SELECT local_id FROM messages WHERE chat_id = ? AND state = ? ORDER BY rowid",
            [chatID, MessageState.held.storedName]
        ).map { try $0.get(0, as: String.self) }
    }

    static func chatsHolding(_ db: Database) throws -> [String] {
        try db.rows("SELECT DISTINCT chat_id FROM messages WHERE state = ?", [MessageState.held.storedName]).map {
            try $0.get(0, as: String.self)
        }
    }

    /// `.release` with the bytes it was sealed to, or sealed again (a commit overtook it) while sending.
    static func sealed(_ db: Database, id: String, _ sealed: Data) throws {
        try db.execute(
            "UPDATE messages SET state = ?, sealed = ? WHERE local_id = ? AND state IN (?, ?)",
            [MessageState.sending.storedName, sealed, id, MessageState.held.storedName, MessageState.sending.storedName])
    }

    /// `.hold`: a message still sending waits, its bytes forgotten.
    static func hold(_ db: Database, id: String) throws {
        try step(db, .hold, where: "local_id = ?", [id], extra: "sealed = NULL")
    }

    /// `.accept`: the domain's number and time for one of this user's messages; returns the step
    /// when it moved (a message already accepted, by an echo, keeps its state).
    static func accept(_ db: Database, id: String, number: Int64?, at time: Date?) throws -> [MessageEvent] {
        guard
            let (chatID, name) = try db.row("SELECT chat_id, state FROM messages WHERE local_id = ?", [id]).map({
                (try $0.get(0, as: String.self), try $0.get(1, as: String.self))
            })
        else { return [] }
        try db.execute(
            "UPDATE messages SET number = ?, timestamp = coalesce(?, timestamp) WHERE local_id = ?",
            [number, time?.timeIntervalSince1970, id])
        guard MessageState(storedName: name, failure: nil).after(.accept) != nil else { return [] }
        try step(db, .accept, where: "local_id = ?", [id])
        return [MessageEvent(messageID: id, chatID: chatID, number: number, state: .sent)]
    }

    /// `.refuse`: the domain refused a message still sending; returns whether it moved.
    static func refuse(_ db: Database, id: String, reason: String) throws -> Bool {
        try step(db, .refuse(reason: reason), where: "local_id = ?", [id], extra: "failure = ?", [reason]) > 0
    }

    // MARK: Receiving

    /// A numbered message received from the chat, `incoming` unless this user sent it (or handed
    /// over in a history transfer: `ignoringTaken` keeps the copy already here).
    func insertReceived(
        _ db: Database, _ message: ChatHistory.Record, chatID: String, incoming: Bool, ignoringTaken: Bool = false
    ) throws {
        let (id, state) = (message.id, message.state)
        let failure: String? = if case .failed(let reason) = state { reason } else { nil }
        try db.execute(
            """
            INSERT \(ignoringTaken ? "OR IGNORE " : "")INTO messages(local_id, chat_id, number, sender, incoming, content, tag,
                data, ref, state, failure, timestamp)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                id, chatID, message.number, message.sender, incoming,
                try sealer.seal(message.content, EndpointStore.Seal.content(id)), message.tag,
                try message.data.map { try sealer.seal($0, EndpointStore.Seal.data(id)) }, message.ref, state.storedName, failure,
                message.timestamp.timeIntervalSince1970,
            ])
    }

    /// An edit: the message's new text.
    func setContent(_ db: Database, id: String, content: String) throws {
        try db.execute(
            "UPDATE messages SET content = ? WHERE local_id = ?", [try sealer.seal(content, EndpointStore.Seal.content(id)), id])
    }

    /// Applies `step` to this user's messages of the chat numbered up to `number` that it
    /// applies to, and returns those steps, oldest first.
    static func advanceSent(_ db: Database, chatID: String, upTo number: Int64, _ step: MessageStep) throws -> [MessageEvent] {
        let sources = step.sources.map(\.storedName)
        let moved = try db.rows(
            """
            SELECT local_id, number FROM messages WHERE chat_id = ? AND incoming = 0 AND number <= ?
                AND state IN (\(sources.map { _ in "?" }.joined(separator: ", "))) ORDER BY number
            """,
            [chatID, number] + sources
        ).map { MessageEvent(messageID: try $0.get(0), chatID: chatID, number: try $0.get(1), state: step.target) }
        guard !moved.isEmpty else { return [] }
        try Self.step(db, step, where: "chat_id = ? AND incoming = 0 AND number <= ?", [chatID, number])
        return moved
    }

    /// Marks the chat's received messages numbered up to `number` read.
    static func readReceived(_ db: Database, chatID: String, upTo number: Int64) throws {
        try step(db, .read, where: "chat_id = ? AND incoming = 1 AND number <= ?", [chatID, number])
    }

    /// Applies `step` to the messages matching `condition` that it applies to (and `extra`
    /// assignments with their arguments); returns how many moved.
    @discardableResult
    private static func step(
        _ db: Database, _ step: MessageStep, where condition: String, _ arguments: [any DatabaseValueConvertible],
        extra: String? = nil, _ extraArguments: [any DatabaseValueConvertible] = []
    ) throws -> Int {
        let sources = step.sources.map(\.storedName)
        return try db.execute(
            """
            UPDATE messages SET state = ?\(extra.map { ", \($0)" } ?? "")
            WHERE \(condition) AND state IN (\(sources.map { _ in "?" }.joined(separator: ", ")))
            """,
            [step.target.storedName] + extraArguments + arguments + sources)
    }
}
