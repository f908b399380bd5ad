package import Foundation
package import SparkDomain
import SparkLock
import SparkStore

/// Chats, mailboxes and moderation. The domain routes and numbers ciphertext; it never sees a
/// chat key or a message's content.
extension DomainEngine {
    /// The largest payload accepted: a 70 KB message plus encryption and signature overhead.
    package static let maximumPayloadSize = 72 * 1024
    /// The most members a chat may have.
    package static let maximumChatMembers = 1000

    /// Creates a chat with the caller as its admin.
    package func createChat(as caller: Caller, chatID: String, participants: [String], posts: [ChatPost]) async throws -> ChatInfo
    {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        let policy = try requestPolicy()
        guard Self.isValidIdentifier(chatID, maximum: 64) else {
            throw DomainError(.invalidRequest, "a chat id is 1 to 64 of a-z, A-Z, 0-9, '-', '_'")
        }
        let members = Array(Set(participants + [user])).sorted()
        guard members.count <= Self.maximumChatMembers, members.allSatisfy({ !$0.isEmpty && $0.count <= 255 }) else {
            throw DomainError(.invalidRequest, "a chat has at most \(Self.maximumChatMembers) members with valid user ids")
        }
        try Self.check(posts, for: members)
        let now = clock.now()
        let (info, routed) = try await storage {
            try await store.write(Self.chatScope(chatID)) { db -> (ChatInfo, [String]) in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                if let creator = try db.scalar("SELECT created_by FROM chats WHERE chat_id = ?", [chatID], as: String.self) {
                    // A retry after a lost answer: the same creator and members get the chat
                    // as it was made (its posts went out then); anything else is a clash.
                    let existing = try Self.chatInfo(db, chatID)
                    if creator == user, existing.members.map(\.userID).sorted() == members { return (existing, []) }
                    throw DomainError(.conflict, "a chat with that id exists")
                }
                if posts.contains(where: { $0.kind == .event }) { try Self.requireGoodStanding(db, user: user, now: now) }
                try Self.requireRegistered(db, members.filter { $0 != user })
                try Self.requireNotBlocked(db, inviter: user, invited: members)
                try self.usage.charge(user, .chat, now: now, policy: policy)
                try db.execute(
                    "INSERT INTO chats(chat_id, created_by, next_message_number, created_at) VALUES (?, ?, 1, ?)",
                    [chatID, user, now.timeIntervalSince1970])
                for member in members {
                    try db.execute(
                        """
                        INSERT INTO chat_members(chat_id, user_id, is_admin, position)
                        VALUES (?, ?, ?, (SELECT coalesce(max(position), 0) + 1 FROM chat_members WHERE chat_id = ?))
                        """, [chatID, member, member == user, chatID])
                }
                let info = try Self.chatInfo(db, chatID)
                try Self.append(
                    db, to: members, chatID: chatID, sender: user, kind: .membership, messageNumber: nil, payload: Data(),
                    members: info.members, now: now.timeIntervalSince1970)
                try Self.append(posts, db, chatID: chatID, sender: user, members: members, now: now.timeIntervalSince1970)
                try db.announce(members)
                return (info, members)
            }
        }
        announceEntries(to: routed)
        return info
    }

    /// Adds and removes members; the chat's members before and after hear of it.
    package func updateMembers(as caller: Caller, chatID: String, add: [String], remove: [String], posts: [ChatPost]) async throws
        -> ChatInfo
    {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        let clockNow = clock.now()
        let now = clockNow.timeIntervalSince1970
        let (info, routed) = try await storage {
            try await store.write(Self.chatScope(chatID)) { db -> (ChatInfo, [String]) in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                guard let (before, final) = try Self.changeMembers(db, chatID: chatID, by: user, add: add, remove: remove) else {
                    // A change that changes nothing (a retry after a lost answer) is not made again.
                    return (try Self.chatInfo(db, chatID), [])
                }
                let audience = Set(before.members.map(\.userID)).union(final.members.map(\.userID))
                try Self.append(
                    db, to: Array(audience), chatID: chatID, sender: user, kind: .membership, messageNumber: nil, payload: Data(),
                    members: final.members, now: now)
                if !posts.isEmpty {
                    // Checked against the members after the change: a key for someone just
                    // removed is refused, and so is the whole change with it.
                    guard final.members.contains(where: { $0.userID == user }) else {
                        throw DomainError(.notAMember, "a member who left cannot post")
                    }
                    try Self.check(posts, for: final.members.map(\.userID))
                    if posts.contains(where: { $0.kind == .event }) {
                        try Self.requireGoodStanding(db, user: user, now: clockNow)
                    }
                    try Self.append(posts, db, chatID: chatID, sender: user, members: final.members.map(\.userID), now: now)
                }
                try db.announce(Array(audience))
                return (final, Array(audience))
            }
        }
        announceEntries(to: routed)
        return info
    }

    /// The caller's mailbox after `cursor`; with a `wait`, returns once an entry for the caller
    /// arrives (posted by this process or, through the file, by another), or empty when the
    /// wait ends.
    package func readMailbox(as caller: Caller, after cursor: Int64, limit: Int, wait: Duration) async throws
        -> [MailboxEntry]
    {
        var step = try await beginMailboxRead(as: caller, after: cursor, limit: limit, wait: wait)
        while case .wait(let poll) = step {
            await waitForMailbox(poll)
            step = try await continueMailboxRead(poll)
        }
        guard case .entries(let entries) = step else { return [] }
        return entries
    }

    /// Where a mailbox read stands: done, with what it found, or waiting for an entry.
    package enum MailboxStep: Sendable {
        case entries([MailboxEntry])
        case wait(MailboxPoll)
    }

    /// A mailbox read that waits: what it takes to wait and read again, and nothing else (a
    /// long-poll waits holding this, not the frames of the calls that began it).
    package struct MailboxPoll: Sendable {
        let user: String
        let endpointID: String
        let cursor: Int64
        let limit: Int
        let deadline: ContinuousClock.Instant
        let ticket: MailboxWaiters.Ticket
        let mayTrustSettled: Bool
        /// Where a post made here leaves the entries that answer the wait.
        let reader: MailboxWaiters.Reader
    }

    /// ``readMailbox(token:endpointID:after:limit:wait:)`` up to its first wait: checks the
    /// token and the wait, records how far the endpoint read, and reads (or knows without
    /// reading that nothing came).
    package func beginMailboxRead(as caller: Caller, after cursor: Int64, limit: Int, wait: Duration)
        async throws -> MailboxStep
    {
        guard wait >= .zero, wait <= maximumMailboxWait else {
            throw DomainError(.invalidRequest, "a mailbox wait is 0 to 30 seconds")
        }
        let (user, endpointID) = (caller.userID, caller.endpointID)
        // A read after `cursor` says the endpoint applied everything up to it.
        if cursor > 0 { try await pruneMailbox(user: user, endpointID: endpointID, cursor: cursor) }
        // A long-poll sent again right after its answer need not read first: a read since the
        // user's last entry was announced found nothing past this cursor, so it waits at once,
        // and ends as a wait that had read would. That halves the reads a delivery costs. Not
        // on an embedded file shared with other processes (watched only from the first wait
        // on); and where a writer may go unheard (`spark-admin` on a served file), only before
        // the first wait, so that an entry whose announcement never came is read when the wait
        // ends. Where every writer is heard (PostgreSQL), a wait that ends empty reads nothing.
        return try await mailboxStep(
            user: user, endpointID: endpointID, cursor: cursor, limit: max(1, min(limit, Self.maximumMailboxPage)),
            deadline: ContinuousClock.now + wait, mayTrustSettled: wait > .zero && !sharedWithOtherProcesses)
    }

    /// Waits for an entry for the poll's user, until its deadline.
    package func waitForMailbox(_ poll: MailboxPoll) async {
        await mailboxWaiters.wait(poll.ticket, reader: poll.reader, timeout: poll.deadline - ContinuousClock.now)
    }

    /// ``waitForMailbox(_:)`` without a task: `wake` is called once when the wait would end.
    package func parkMailboxWait(_ poll: MailboxPoll, wake: @escaping MailboxWaiters.Wake) {
        mailboxWaiters.park(poll.ticket, reader: poll.reader, timeout: poll.deadline - ContinuousClock.now, wake: wake)
    }

    /// The read after a wait: what came, or another wait until the deadline. What a post made
    /// here handed the wait is the answer without a read (see ``MailboxWaiters/deliver(_:usable:)``).
    package func continueMailboxRead(_ poll: MailboxPoll) async throws -> MailboxStep {
        // Its client is gone (the connection closed): nobody would get what a read found.
        if Task.isCancelled { return .entries([]) }
        if let delivered = poll.reader.take() { return .entries(delivered) }
        return try await mailboxStep(
            user: poll.user, endpointID: poll.endpointID, cursor: poll.cursor, limit: poll.limit, deadline: poll.deadline,
            mayTrustSettled: poll.mayTrustSettled)
    }

    private func mailboxStep(
        user: String, endpointID: String, cursor: Int64, limit: Int, deadline: ContinuousClock.Instant, mayTrustSettled: Bool
    ) async throws -> MailboxStep {
        // Taken before the read, so an entry committed after it still wakes the wait.
        let ticket = mailboxWaiters.ticket(for: user)
        let entries: [MailboxEntry]
        if mayTrustSettled, mailboxWaiters.isSettled(ticket, after: cursor) {
            entries = []
        } else {
            entries = try await mailbox(user: user, endpointID: endpointID, after: cursor, limit: limit)
            if entries.count < limit { mailboxWaiters.settle(ticket, at: entries.last?.sequence ?? cursor) }
        }
        if !entries.isEmpty || deadline <= ContinuousClock.now || Task.isCancelled || mailboxWaiters.isEnded {
            return .entries(entries)
        }
        startWatchingOtherProcesses()
        return .wait(
            MailboxPoll(
                user: user, endpointID: endpointID, cursor: cursor, limit: limit, deadline: deadline, ticket: ticket,
                mayTrustSettled: mayTrustSettled && store.hearsEveryWriter,
                reader: MailboxWaiters.Reader(endpointID: endpointID, cursor: cursor, limit: limit)))
    }

    /// How long an entry every endpoint of its user has read past is still kept (a device that
    /// restores its store from a backup of the last hour reads it again).
    package static let readEntriesKeptFor: TimeInterval = 3600

    /// How often an endpoint's reads record how far it read (``pruneMailbox(user:endpointID:cursor:)``):
    /// every 10 minutes, since what every endpoint read past is kept an hour anyway. Each record
    /// is a write, and a connected device reads at least every 30 seconds: once a minute, 10,000
    /// devices made 170 writes a second of it.
    package static let cursorRecordInterval: TimeInterval = 600

    /// Records how far `endpointID` has read (at most every ``cursorRecordInterval`` an endpoint,
    /// or when its cursor moved a long way), then deletes the user's entries that every registered endpoint
    /// of the user has read past (after ``readEntriesKeptFor``) and those older than
    /// ``DomainPolicy/mailboxRetention``.
    func pruneMailbox(user: String, endpointID: String, cursor: Int64) async throws {
        let now = clock.now().timeIntervalSince1970
        let due = prunedAt.withLock { seen -> Bool in
            guard let last = seen[endpointID], now - last.at < Self.cursorRecordInterval, cursor - last.cursor < 1000 else {
                if seen.count > 100_000 { seen.removeAll() }
                seen[endpointID] = (cursor, now)
                return true
            }
            return false
        }
        guard due else { return }
        let retention = Double(try currentPolicy().mailboxRetention)
        try await storage {
            try await store.write { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                try Self.recordMailboxCursor(db, endpointID: endpointID, cursor)
                let readByAll = try Self.mailboxReadByAll(db, user: user)
                try db.execute(
                    "DELETE FROM mailbox WHERE user_id = ? AND ((sequence <= ? AND posted_at < ?) OR posted_at < ?)",
                    [user, readByAll, now - Self.readEntriesKeptFor, now - retention])
                try Self.deleteExpiredEphemeral(db, now: now)
                try Self.deleteExpiredBlobs(db, now: now, retention: retention)
            }
        }
    }

    /// How long an ephemeral entry is delivered and kept: a device that reads its mailbox later
    /// does not get it, and it is deleted with the next ephemeral post or prune.
    package static let ephemeralLifetime: TimeInterval = 10

    /// The largest ephemeral payload.
    package static let maximumEphemeralSize = 16 * 1024

    /// Deletes the ephemeral entries past their lifetime: the chat's, or every chat's.
    @discardableResult
    static func deleteExpiredEphemeral(_ db: any DomainStatements, chatID: String? = nil, now: TimeInterval) throws -> Int {
        if let chatID {
            return try db.execute(
                "DELETE FROM mailbox WHERE kind = 'ephemeral' AND chat_id = ? AND posted_at < ?",
                [chatID, now - ephemeralLifetime])
        }
        return try db.execute("DELETE FROM mailbox WHERE kind = 'ephemeral' AND posted_at < ?", [now - ephemeralLifetime])
    }

    /// Deletes the ephemeral entries past ``ephemeralLifetime`` (`spark-domaind` runs it every
    /// few seconds); returns how many went.
    @discardableResult
    package func pruneEphemeralEntries() throws -> Int {
        let now = clock.now().timeIntervalSince1970
        return try blockingStorage { try store.blockingWrite { db in try Self.deleteExpiredEphemeral(db, now: now) } }
    }

    /// Deletes every mailbox entry older than ``DomainPolicy/mailboxRetention``, whoever's it is,
    /// read or not: a mailbox whose owner never reads (or that names no one's device) must not keep
    /// its entries past the retention because no read triggers ``pruneMailbox``. `spark-domaind`
    /// runs it on a timer; returns how many entries went.
    @discardableResult
    package func pruneExpiredEntries() throws -> Int {
        let retention = Double(try currentPolicy().mailboxRetention)
        let cutoff = clock.now().timeIntervalSince1970 - retention
        return try blockingStorage {
            try store.blockingWrite { db in try db.execute("DELETE FROM mailbox WHERE posted_at < ?", [cutoff]) }
        }
    }

    /// The most entries one mailbox read returns.
    static let maximumMailboxPage = 1000

    /// Up to `limit` (1 to ``maximumMailboxPage``) of the user's entries after `cursor`, for an
    /// endpoint of the user that may read them.
    ///
    /// One statement when there are entries (a long-poll's wake-up): it returns them only while
    /// the endpoint is registered and not taking the profile over, as ``requireEndpoint(_:user:endpointID:unlocking:)``
    /// checks; an empty answer is then checked there, for the refusal to say why.
    private func mailbox(user: String, endpointID: String, after cursor: Int64, limit: Int) async throws -> [MailboxEntry] {
        try await storage {
            try await store.readEach { db in
                let rows = try db.rows(
                    """
                    SELECT sequence, chat_id, sender, kind, message_number, payload, members, posted_at, epoch FROM mailbox
                    WHERE user_id = ? AND sequence > ? AND (kind != 'ephemeral' OR posted_at >= ?)
                    AND \(Self.endpointMayReadCondition)
                    ORDER BY sequence LIMIT ?
                    """,
                    [user, cursor, self.clock.now().timeIntervalSince1970 - Self.ephemeralLifetime, endpointID, user, limit])
                if rows.isEmpty { try Self.requireEndpoint(db, user: user, endpointID: endpointID) }
                return try rows.map { row in
                    MailboxEntry(
                        sequence: try row.get(0), chatID: try row.get(1), sender: try row.get(2),
                        kind: MailboxKind(rawValue: try row.get(3)) ?? .event, messageNumber: try row.get(4),
                        payload: try row.get(5),
                        members: try row.get(6, as: String?.self).flatMap {
                            try? JSONDecoder().decode([ChatMember].self, from: Data($0.utf8))
                        },
                        postedAt: Date(timeIntervalSince1970: try row.get(7)), epoch: try row.get(8))
                }
            }
        }
    }

    /// A chat's members, for one of them.
    package func chat(as caller: Caller, chatID: String) async throws -> ChatInfo {
        let user = try await requireEndpoint(caller)
        return try await storage {
            try await store.read { db in
                let info = try Self.chatInfo(db, chatID)
                guard info.members.contains(where: { $0.userID == user }) else {
                    throw DomainError(.notAMember, "not a member of this chat")
                }
                return info
            }
        }
    }

    // MARK: Helpers

    /// Refuses members who never registered an endpoint here: a chat's members are users of the
    /// domain, not names made up to fill other mailboxes (a chat of 999 made-up ids once wrote
    /// into 999 mailboxes no one reads).
    static func requireRegistered(_ db: any DomainStatements, _ users: [String]) throws {
        var unknown: [String] = []
        for user in users where try !Self.everRegistered(db, user: user) {
            unknown.append(user)
            if unknown.count == 3 { break }
        }
        guard unknown.isEmpty else {
            throw DomainError(.notFound, "no user \(unknown.joined(separator: ", ")) has an endpoint in this domain")
        }
    }

    /// Adds and removes members as `user` asks (admins only; anyone may remove only themselves),
    /// giving a chat whose last admin left its longest-standing member as admin. Only users who
    /// registered an endpoint are added (see `requireRegistered`). Returns the
    /// chat before and after, or nil when the change changes nothing.
    static func changeMembers(_ db: any DomainStatements, chatID: String, by user: String, add: [String], remove: [String])
        throws -> (before: ChatInfo, after: ChatInfo)?
    {
        let before = try chatInfo(db, chatID)
        guard let me = before.members.first(where: { $0.userID == user }) else {
            throw DomainError(.notAMember, "the caller is not a member of this chat")
        }
        let leavingOnlySelf = add.isEmpty && remove == [user]
        guard me.isAdmin || leavingOnlySelf else {
            throw DomainError(.notAMember, "only admins may invite or remove members")
        }
        let current = Set(before.members.map(\.userID))
        if add.allSatisfy({ $0.isEmpty || current.contains($0) }), remove.allSatisfy({ !current.contains($0) }) {
            return nil
        }
        guard before.members.count + add.count <= maximumChatMembers,
            add.allSatisfy({ $0.utf8.count <= 255 }), remove.allSatisfy({ $0.utf8.count <= 255 })
        else {
            throw DomainError(.invalidRequest, "a chat has at most \(maximumChatMembers) members with valid user ids")
        }
        try requireRegistered(db, add.filter { !$0.isEmpty && !current.contains($0) })
        try requireNotBlocked(db, inviter: user, invited: add.filter { !current.contains($0) })
        for member in add where !member.isEmpty {
            try db.execute(
                """
                INSERT INTO chat_members(chat_id, user_id, is_admin, position)
                VALUES (?, ?, 0, (SELECT coalesce(max(position), 0) + 1 FROM chat_members WHERE chat_id = ?))
                ON CONFLICT DO NOTHING
                """, [chatID, member, chatID])
        }
        for member in remove {
            try db.execute("DELETE FROM chat_members WHERE chat_id = ? AND user_id = ?", [chatID, member])
        }
        let after = try chatInfo(db, chatID)
        if !after.members.isEmpty, !after.members.contains(where: \.isAdmin) {
            try db.execute(
                "UPDATE chat_members SET is_admin = 1 WHERE chat_id = ? AND user_id = ?", [chatID, after.members[0].userID])
        }
        return (before, try chatInfo(db, chatID))
    }

    /// A chat's transactions (creation, membership, posts) run one at a time per chat: under
    /// the chat's lock, membership, message numbers and idempotency records are read and written
    /// without another transaction of the same chat in between; mailbox heads move atomically.
    static func chatScope(_ chatID: String) -> WriteScope { .locking(chatLocks(chatID)) }
    /// The lock a chat's writes take (see `WriteScope.locking`).
    static func chatLocks(_ chatID: String) -> [String] { ["chat:" + chatID] }

    /// Whether `user` is a member of `chatID` (what the other areas ask of a chat).
    static func isMember(_ db: any DomainStatements, user: String, chatID: String) throws -> Bool {
        try db.scalar("SELECT 1 FROM chat_members WHERE chat_id = ? AND user_id = ?", [chatID, user], as: Int64.self) != nil
    }

    /// The users who share a chat with `user` (`user` too, when in any chat).
    static func chatPeers(_ db: any DomainStatements, of user: String) throws -> [String] {
        try db.rows(
            "SELECT DISTINCT b.user_id FROM chat_members a JOIN chat_members b ON a.chat_id = b.chat_id WHERE a.user_id = ?",
            [user]
        ).map { try $0.get(0, as: String.self) }
    }

    /// The number the chat's next message will take (1 for a chat with none, or none at all).
    static func nextMessageNumber(_ db: any DomainStatements, chatID: String) throws -> Int64 {
        try db.scalar("SELECT next_message_number FROM chats WHERE chat_id = ?", [chatID], as: Int64.self) ?? 1
    }

    static func chatInfo(_ db: any DomainStatements, _ chatID: String) throws -> ChatInfo {
        guard let epoch = try db.scalar("SELECT epoch FROM chats WHERE chat_id = ?", [chatID], as: Int64.self) else {
            throw DomainError(.notFound, "no chat \(chatID)")
        }
        let members = try db.rows("SELECT user_id, is_admin FROM chat_members WHERE chat_id = ? ORDER BY position", [chatID]).map
        {
            ChatMember(userID: try $0.get(0), isAdmin: try $0.get(1))
        }
        return ChatInfo(chatID: chatID, members: members, epoch: epoch)
    }

    /// The posts that may go out with a chat's creation or a membership change: one event for
    /// every member, within the size cap.
    static func check(_ posts: [ChatPost], for members: [String]) throws {
        guard posts.count <= 1 else {
            throw DomainError(.invalidRequest, "at most one event goes with a membership change")
        }
        for post in posts {
            guard post.payload.count <= maximumPayloadSize else {
                throw DomainError(.tooLarge, "a post is \(post.payload.count) bytes; at most \(maximumPayloadSize)")
            }
            guard post.kind == .event, post.recipient == nil else {
                throw DomainError(.invalidRequest, "a post with a membership change is an event for every member")
            }
        }
    }

    /// Routes checked posts as ``post(token:endpointID:chatID:kind:payload:recipient:clientID:)``
    /// does: an event to every member.
    static func append(
        _ posts: [ChatPost], _ db: any DomainStatements, chatID: String, sender: String, members: [String], now: TimeInterval
    ) throws {
        for post in posts {
            let audience = post.recipient.map { Array(Set([$0, sender])) } ?? members
            try append(
                db, to: audience, chatID: chatID, sender: sender, kind: post.kind, messageNumber: nil, payload: post.payload,
                members: nil, now: now)
        }
    }

    /// Appends one entry to each user's mailbox; returns them (for the announcement to hand
    /// the long-polls waiting on them).
    @discardableResult
    static func append(
        _ db: any DomainStatements, to users: [String], chatID: String, sender: String, kind: MailboxKind, messageNumber: Int64?,
        payload: Data,
        members: [ChatMember]?, now: TimeInterval, epoch: Int64? = nil
    ) throws -> AppendedEntries {
        var appended = AppendedEntries()
        let membersJSON = try members.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        // Every mailbox's copy differs only in its sequence: the long-polls it wakes share one
        // wire encoding of it.
        let shared = SharedEntryEncoding()
        // In one order for every transaction, so two that route to the same users never wait
        // on each other's mailbox heads; each head moves in one atomic statement. The users go
        // in batches, two statements a batch (the heads, then the entries) instead of two a
        // user; a batch is a power of two up to 64 users, so a store prepares few shapes.
        try Self.inBatches(users) { batch in
            let size = batch.count
            let rows = try db.rows(
                """
                INSERT INTO mailbox_heads(user_id, last_sequence) VALUES \(Array(repeating: "(?, 1)", count: size).joined(separator: ", "))
                ON CONFLICT(user_id) DO UPDATE SET last_sequence = mailbox_heads.last_sequence + 1
                RETURNING user_id, last_sequence
                """, Array(batch))
            var next: [String: Int64] = [:]
            for row in rows { next[try row.get(0, as: String.self)] = try row.get(1, as: Int64.self) }
            var arguments: [any DatabaseValueConvertible] = []
            arguments.reserveCapacity(size * 10)
            for user in batch {
                guard let sequence = next[user] else {
                    throw DomainError(.storageFailure, "the mailbox head of \(user) did not move")
                }
                arguments += [user, sequence, chatID, sender, kind.rawValue, messageNumber, payload, membersJSON, now, epoch]
                var entry = MailboxEntry(
                    sequence: sequence, chatID: chatID, sender: sender, kind: kind, messageNumber: messageNumber,
                    payload: payload, members: members, postedAt: Date(timeIntervalSince1970: now), epoch: epoch)
                entry.shared = shared
                appended.add(entry, for: user)
            }
            try db.execute(
                """
                INSERT INTO mailbox(user_id, sequence, chat_id, sender, kind, message_number, payload, members, posted_at, epoch)
                VALUES \(Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", count: size).joined(separator: ", "))
                """, arguments)
        }
        return appended
    }

    /// `users` once each, in order, in batches whose sizes are powers of two up to
    /// ``mailboxBatch``: a statement a batch, of few shapes for a store to prepare.
    static func inBatches(_ users: [String], _ body: (ArraySlice<String>) throws -> Void) throws {
        let sorted = Set(users).sorted()
        var start = 0
        while start < sorted.count {
            var size = 1
            while size * 2 <= min(sorted.count - start, Self.mailboxBatch) { size *= 2 }
            try body(sorted[start..<start + size])
            start += size
        }
    }

    /// The most users whose mailboxes one pair of statements reaches.
    static let mailboxBatch = 64

    /// Counts `bytes` more from `sender` in each recipient's mailbox, or refuses the post when
    /// one would then hold more than `cap` unread from that sender
    /// (``DomainPolicy/unreadBytesPerSender``). The counts only go up (reading or deleting
    /// entries does not touch them), so a count is an upper bound: one past the cap is counted
    /// again from the mailbox itself, and the post is refused only if the mailbox really holds
    /// that much unread; so the cost of a post is one statement, and the count is taken again
    /// once per cap's worth of posts at most. One statement a batch of recipients, as in
    /// ``append(_:to:chatID:sender:kind:messageNumber:payload:members:now:epoch:)``.
    static func chargeHeld(_ db: any DomainStatements, recipients: [String], sender: String, bytes: Int, cap: Int) throws {
        try inBatches(recipients) { batch in
            let size = batch.count
            var arguments: [any DatabaseValueConvertible] = []
            for recipient in batch { arguments += [recipient, sender, Int64(bytes)] }
            let rows = try db.rows(
                """
                INSERT INTO mailbox_held(user_id, sender, bytes) VALUES \(Array(repeating: "(?, ?, ?)", count: size).joined(separator: ", "))
                ON CONFLICT(user_id, sender) DO UPDATE SET bytes = mailbox_held.bytes + excluded.bytes
                RETURNING user_id, bytes
                """, arguments)
            for row in rows where try row.get(1, as: Int64.self) > Int64(cap) {
                let recipient = try row.get(0, as: String.self)
                // Unread: past what every endpoint of the recipient has read (as last recorded:
                // ``pruneMailbox(user:endpointID:cursor:)``).
                let held =
                    try db.scalar(
                        """
                        SELECT COALESCE(SUM(length(payload)), 0) FROM mailbox WHERE user_id = ? AND sender = ? AND kind <> 'ephemeral'
                        AND sequence > \(Self.mailboxReadByAllExpression)
                        """, [recipient, sender, recipient], as: Int64.self) ?? 0
                guard held + Int64(bytes) <= Int64(cap) else {
                    throw DomainError(
                        .tooManyAttempts,
                        "\(recipient) has not read \(held / 1024) KiB from \(sender) yet, and one sender may leave at most \(cap / 1024) KiB unread for one user; this is sent once they read",
                        retryAfter: 60)
                }
                try db.execute(
                    "UPDATE mailbox_held SET bytes = ? WHERE user_id = ? AND sender = ?",
                    [held + Int64(bytes), recipient, sender])
            }
        }
    }
}
