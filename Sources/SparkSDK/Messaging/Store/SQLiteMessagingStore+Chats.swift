import Foundation
import SparkCrypto
import SparkDomain
import SparkStore

/// The chat, group and pending-work statements of the SQLite messaging store: `chats`,
/// `participants`, `chat_groups`, `chat_epoch_states`, `pending_commits`, `deferred_entries`,
/// `departed_members`, `sent_posts` and `mailbox_cursor` (the messages' are in
/// `SQLiteMessagingStore.swift`, which holds the store's sealing and schema).
extension SQLiteMessagingStore {
    // MARK: Chats

    func chats(only chatID: String?) throws -> [StoredChat] {
        // `unread` is kept by the store's triggers (`EndpointStore`, v19): no count of messages.
        let columns = "SELECT chat_id, subject, active, last_activity, timer, unread, suite FROM chats"
        let rows =
            if let chatID {
                try db.rows("\(columns) WHERE chat_id = ?", [chatID])
            } else {
                try db.rows("\(columns) ORDER BY last_activity DESC")
            }
        return try rows.map { row in
            let id = try row.get(0, as: String.self)
            let participants = try db.rows("SELECT user_id, is_admin FROM participants WHERE chat_id = ? ORDER BY rowid", [id])
                .map { ChatMember(userID: try $0.get(0), isAdmin: try $0.get(1)) }
            return StoredChat(
                chatID: id, subject: try subject(row.values[1], chatID: id), isActive: try row.get(2),
                lastActivity: Date(timeIntervalSince1970: try row.get(3)), participants: participants,
                unreadCount: try row.get(5), timer: try row.get(4), suite: UInt16(clamping: try row.get(6, as: Int64.self)))
        }
    }

    /// A chat's subject: sealed once set; the empty default of a chat met before its subject.
    private func subject(_ value: DatabaseValue, chatID: String) throws -> String {
        switch value {
        case .blob(let sealed): try sealer.openText(sealed, EndpointStore.Seal.subject(chatID))
        case .text(""), .null: ""
        default: throw MessagingError(.storageFailure, "a chat's subject in the endpoint store is not sealed")
        }
    }

    func participants(chatID: String) throws -> [String] {
        try db.rows("SELECT user_id FROM participants WHERE chat_id = ? ORDER BY rowid", [chatID]).map {
            try $0.get(0, as: String.self)
        }
    }

    func setMembership(chatID: String, participants: [ChatMember], active: Bool, at date: Date) throws {
        chatsRead.live[chatID] = nil
        try db.execute(
            "INSERT INTO chats(chat_id, last_activity) VALUES (?, ?) ON CONFLICT(chat_id) DO NOTHING",
            [chatID, date.timeIntervalSince1970])
        try db.execute("DELETE FROM participants WHERE chat_id = ?", [chatID])
        for participant in participants {
            try db.execute(
                "INSERT INTO participants(chat_id, user_id, is_admin) VALUES (?, ?, ?)",
                [chatID, participant.userID, participant.isAdmin])
        }
        try db.execute(
            "UPDATE chats SET active = ?, last_activity = max(last_activity, ?) WHERE chat_id = ?",
            [active, date.timeIntervalSince1970, chatID])
    }

    func subject(chatID: String) throws -> String? {
        try db.row("SELECT subject FROM chats WHERE chat_id = ?", [chatID]).map { try subject($0.values[0], chatID: chatID) }
    }

    func setSubject(_ subject: String, chatID: String, at date: Date) throws {
        try db.execute(
            "UPDATE chats SET subject = ?, last_activity = max(last_activity, ?) WHERE chat_id = ?",
            [try sealer.seal(subject, EndpointStore.Seal.subject(chatID)), date.timeIntervalSince1970, chatID])
    }

    func touchChat(_ chatID: String, at date: Date) throws {
        try db.execute(
            "UPDATE chats SET last_activity = max(last_activity, ?) WHERE chat_id = ?", [date.timeIntervalSince1970, chatID])
    }

    /// The chat's messages stay to be read, but search no longer finds them.
    func leaveChat(_ chatID: String, epoch: UInt64?) throws {
        chatsRead.live[chatID] = nil
        try unindexChat(chatID)
        for table in [
            "chat_groups", "chat_epoch_states", "deferred_entries", "departed_members", "pending_commits", "refused_commits",
        ] {
            try db.execute("DELETE FROM \(table) WHERE chat_id = ?", [chatID])
        }
        try db.execute(
            "UPDATE chats SET active = 0, left_epoch = coalesce(?, left_epoch) WHERE chat_id = ?",
            [epoch.map { Int64(clamping: $0) }, chatID])
    }

    func leftEpoch(chatID: String) throws -> UInt64? {
        try db.scalar("SELECT left_epoch FROM chats WHERE chat_id = ?", [chatID], as: Int64?.self).flatMap { $0 }.map {
            UInt64(clamping: $0)
        }
    }

    // MARK: Groups

    func blockedUsers() throws -> [String] {
        try db.rows("SELECT user_id FROM blocked_users ORDER BY user_id").map { try $0.get(0, as: String.self) }
    }

    func replaceBlockedUsers(_ users: [String]) throws {
        try db.execute("DELETE FROM blocked_users")
        for user in Set(users) { try db.execute("INSERT INTO blocked_users(user_id) VALUES (?)", [user]) }
    }

    func groupChats() throws -> [String] {
        try db.rows("SELECT chat_id FROM chat_groups ORDER BY chat_id").map { try $0.get(0, as: String.self) }
    }

    func groupVersion(chatID: String) throws -> Data? {
        try db.scalar("SELECT version FROM chat_groups WHERE chat_id = ?", [chatID], as: Data.self)
    }

    func group(chatID: String) throws -> GroupRecord? {
        guard
            let row = try db.row(
                """
                SELECT g.state, g.ratchets, g.epoch, g.sent_since_update, g.updated_at, g.last_number, g.version, e.state
                FROM chat_groups g LEFT JOIN chat_epoch_states e USING (chat_id) WHERE g.chat_id = ? AND g.version IS NOT NULL
                """,
                [chatID])
        else { return nil }
        let epoch = UInt64(clamping: try row.get(2, as: Int64.self))
        let ratchets = try row.get(1, as: Data?.self)
        return GroupRecord(
            chatID: chatID, epoch: epoch, ratchets: try ratchets.map { try sealer.open($0, Seal.ratchets(chatID, epoch: epoch)) },
            epochState: try row.get(7, as: Data?.self).map { try sealer.open($0, Seal.state(chatID)) },
            whole: ratchets == nil ? try sealer.open(try row.get(0), Seal.state(chatID)) : nil,
            sentSinceUpdate: try row.get(3), updatedAt: Date(timeIntervalSince1970: try row.get(4)),
            lastNumber: try row.get(5), version: try row.get(6))
    }

    func saveGroup(_ record: GroupRecord, epochState: Data) throws {
        let chatID = record.chatID
        guard let ratchets = record.ratchets else {
            throw MessagingError(.storageFailure, "a group is stored with its ratchets")
        }
        try db.execute(
            "INSERT OR REPLACE INTO chat_epoch_states(chat_id, state) VALUES (?, ?)",
            [chatID, try sealer.seal(epochState, Seal.state(chatID))])
        // `chat_groups.state` held the whole state before it was stored in two parts; empty now.
        try db.execute(
            """
            INSERT INTO chat_groups(chat_id, state, ratchets, epoch, sent_since_update, updated_at, last_number, version)
            VALUES (?, x'', ?, ?, ?, ?, ?, ?)
            ON CONFLICT(chat_id) DO UPDATE SET state = excluded.state, ratchets = excluded.ratchets, epoch = excluded.epoch,
                sent_since_update = excluded.sent_since_update, updated_at = excluded.updated_at,
                last_number = excluded.last_number, version = excluded.version
            """,
            [
                chatID, try sealer.seal(ratchets, Seal.ratchets(chatID, epoch: record.epoch)), Int64(clamping: record.epoch),
                record.sentSinceUpdate, record.updatedAt.timeIntervalSince1970, record.lastNumber, record.version,
            ])
        try db.execute(
            "DELETE FROM pending_commits WHERE chat_id = ? AND epoch < ?", [chatID, Int64(clamping: record.epoch)])
    }

    func saveRatchets(_ record: GroupRecord, expected: Data) throws -> Bool {
        guard let ratchets = record.ratchets else { return false }
        return try db.execute(
            """
            UPDATE chat_groups SET ratchets = ?, version = ?, sent_since_update = ?, updated_at = ?, last_number = ?
            WHERE chat_id = ? AND version = ? AND epoch = ? AND ratchets IS NOT NULL
            """,
            [
                try sealer.seal(ratchets, Seal.ratchets(record.chatID, epoch: record.epoch)), record.version,
                record.sentSinceUpdate, record.updatedAt.timeIntervalSince1970, record.lastNumber, record.chatID, expected,
                Int64(clamping: record.epoch),
            ]) == 1
    }

    func noteNumber(chatID: String, number: Int64, version: Data) throws {
        try db.execute(
            "UPDATE chat_groups SET last_number = max(last_number, ?), version = ? WHERE chat_id = ?", [number, version, chatID])
    }

    func setPendingCommit(chatID: String, digest: Data, epoch: UInt64, group: Data) throws {
        try db.execute(
            "INSERT OR REPLACE INTO pending_commits(digest, chat_id, epoch, state) VALUES (?, ?, ?, ?)",
            [digest, chatID, Int64(clamping: epoch), try sealer.seal(group, Seal.pending(chatID, digest))])
    }

    func pendingCommit(chatID: String, digest: Data) throws -> Data? {
        try db.scalar("SELECT state FROM pending_commits WHERE chat_id = ? AND digest = ?", [chatID, digest], as: Data.self)
            .map { try sealer.open($0, Seal.pending(chatID, digest)) }
    }

    func clearPendingCommit(chatID: String, digest: Data) throws {
        try db.execute("DELETE FROM pending_commits WHERE chat_id = ? AND digest = ?", [chatID, digest])
    }

    // MARK: Pending work

    func deferEntry(_ entry: MailboxEntry) throws {
        try db.execute(
            "INSERT OR REPLACE INTO deferred_entries(sequence, chat_id, entry) VALUES (?, ?, ?)",
            [entry.sequence, entry.chatID, try JSONEncoder().encode(entry)])
    }

    func deferred(chatID: String) throws -> [MailboxEntry] {
        try db.rows("SELECT entry FROM deferred_entries WHERE chat_id = ? ORDER BY sequence", [chatID]).compactMap {
            try? JSONDecoder().decode(MailboxEntry.self, from: try $0.get(0, as: Data.self))
        }
    }

    func deferredCount(chatID: String) throws -> Int {
        try db.scalar("SELECT count(*) FROM deferred_entries WHERE chat_id = ?", [chatID], as: Int.self) ?? 0
    }

    func forgetDeferred(sequence: Int64) throws {
        try db.execute("DELETE FROM deferred_entries WHERE sequence = ?", [sequence])
    }

    func noteDeparted(chatID: String, users: [String]) throws {
        for user in users {
            try db.execute("INSERT OR IGNORE INTO departed_members(chat_id, user_id) VALUES (?, ?)", [chatID, user])
        }
    }

    func departed(chatID: String) throws -> Set<String> {
        Set(
            try db.rows("SELECT user_id FROM departed_members WHERE chat_id = ?", [chatID]).map { try $0.get(0, as: String.self) }
        )
    }

    func forgetDeparted(chatID: String) throws {
        try db.execute("DELETE FROM departed_members WHERE chat_id = ?", [chatID])
    }

    func sendingSequence(chatID: String, localID: String) throws -> UInt64 {
        if let given = try db.scalar("SELECT sequence FROM sent_sequences WHERE local_id = ?", [localID], as: Int64.self) {
            return UInt64(clamping: given)
        }
        let next = try db.scalar(
            """
            INSERT INTO sent_sequences(local_id, chat_id, sequence)
            SELECT ?, ?, coalesce(max(sequence) + 1, 0) FROM sent_sequences WHERE chat_id = ? RETURNING sequence
            """, [localID, chatID, chatID], as: Int64.self)
        return UInt64(clamping: next ?? 0)
    }

    func withdrawnSequences(chatID: String) throws -> [UInt64] {
        try db.rows(
            "SELECT sequence FROM sent_sequences WHERE chat_id = ? AND withdrawn = 1 ORDER BY sequence DESC LIMIT ?",
            [chatID, ChatPayload.maximumWithdrawn]
        ).map { UInt64(clamping: try $0.get(0, as: Int64.self)) }
    }

    func textSequences(chatID: String, device: String) throws -> TextSequences? {
        try db.row(
            "SELECT user_id, highest, missing FROM text_sequences WHERE chat_id = ? AND device_id = ?", [chatID, device]
        ).map { row in
            let packed = [UInt8](try row.get(2, as: Data.self))
            let missing = stride(from: 0, to: packed.count - packed.count % 8, by: 8).map { offset in
                packed[offset..<offset + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            }
            return TextSequences(
                chatID: chatID, user: try row.get(0), device: device, highest: UInt64(clamping: try row.get(1, as: Int64.self)),
                missing: missing)
        }
    }

    func saveTextSequences(_ sequences: TextSequences) throws {
        var packed = Data(capacity: sequences.missing.count * 8)
        for value in sequences.missing { withUnsafeBytes(of: value.bigEndian) { packed.append(contentsOf: $0) } }
        try db.execute(
            "INSERT OR REPLACE INTO text_sequences(chat_id, device_id, user_id, highest, missing) VALUES (?, ?, ?, ?, ?)",
            [sequences.chatID, sequences.device, sequences.user, Int64(clamping: sequences.highest), packed])
    }

    func missingTexts(chatID: String) throws -> [String: Int] {
        var missing: [String: Int] = [:]
        for row in try db.rows(
            "SELECT user_id, length(missing) / 8 FROM text_sequences WHERE chat_id = ? AND length(missing) > 0", [chatID])
        {
            missing[try row.get(0, as: String.self), default: 0] += try row.get(1, as: Int.self)
        }
        return missing
    }

    func noteRefusedCommit(chatID: String, epoch: UInt64, sender: String) throws {
        try db.execute(
            "INSERT OR REPLACE INTO refused_commits(chat_id, epoch, sender) VALUES (?, ?, ?)",
            [chatID, Int64(clamping: epoch), sender])
    }

    func refusedCommit(chatID: String) throws -> RefusedCommit? {
        try db.row("SELECT epoch, sender FROM refused_commits WHERE chat_id = ?", [chatID]).map {
            RefusedCommit(epoch: UInt64(clamping: try $0.get(0, as: Int64.self)), sender: try $0.get(1))
        }
    }

    func forgetRefusedCommit(chatID: String) throws {
        try db.execute("DELETE FROM refused_commits WHERE chat_id = ?", [chatID])
    }

    func recordSent(chatID: String, payload: Data, localID: String?) throws {
        try db.execute(
            "INSERT OR REPLACE INTO sent_posts(digest, chat_id, local_id) VALUES (?, ?, ?)",
            [SHA256.hash(payload), chatID, localID])
    }

    func sent(payload: Data) throws -> SentPost? {
        try db.row("SELECT local_id FROM sent_posts WHERE digest = ?", [SHA256.hash(payload)]).map {
            SentPost(localID: try $0.get(0, as: String?.self))
        }
    }

    func forgetSent(payload: Data) throws {
        try db.execute("DELETE FROM sent_posts WHERE digest = ?", [SHA256.hash(payload)])
    }

    func mailboxCursor() throws -> Int64 {
        try db.scalar("SELECT sequence FROM mailbox_cursor", as: Int64.self) ?? 0
    }

    func setMailboxCursor(_ sequence: Int64) throws {
        try db.execute(
            """
            INSERT INTO mailbox_cursor(singleton, sequence) VALUES (1, ?)
            ON CONFLICT(singleton) DO UPDATE SET sequence = excluded.sequence
            """,
            [sequence])
    }
}
