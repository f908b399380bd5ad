package import Foundation
package import SparkDomain
import SparkStore

/// Posts to a chat: one at a time (any kind a client may post), or a sender's messages as one
/// batch, numbered in the order given in one transaction.
extension DomainEngine {
    /// The most messages one batch holds.
    package static let maximumBatch = 64

    /// Posts to a chat; see ``DomainService/post(token:endpointID:chatID:kind:payload:recipient:clientID:)``.
    package func post(as caller: Caller, chatID: String, kind: MailboxKind, payload: Data, recipient: String?, clientID: String?)
        async throws -> PostReceipt
    {
        let policy = try requestPolicy()
        try Self.checkPayload(payload)
        guard kind != .membership, kind != .identityReset, kind != .commit, kind != .welcome, kind != .devices else {
            throw DomainError(.invalidRequest, "\(kind.rawValue) entries are made by the domain")
        }
        let now = clock.now()
        // Group commit: posts that arrive together share one transaction, each in a savepoint,
        // and each is answered once that transaction committed (see `GroupCommit`).
        let (receipt, appended, usable) = try await storage {
            try await posts.write(locks: Self.chatLocks(chatID)) {
                db -> (PostReceipt, AppendedEntries, Set<MailboxWaiters.Endpoint>) in
                let info = try Self.poster(db, caller, chatID: chatID, moderated: kind.isModerated, now: now)
                let (receipt, appended) = try self.append(
                    Post(kind: kind, payload: payload, recipient: recipient, clientID: clientID), db, by: caller.userID,
                    in: info, policy: policy, now: now)
                if !appended.byUser.isEmpty { try db.announce(appended) }
                return (receipt, appended, try self.usableWaitingEndpoints(db, of: appended.users))
            }
        }
        announceEntries(appended, usable: usable)
        return receipt
    }

    /// Posts a sender's messages to a chat in order, as one; see
    /// ``DomainService/postMessages(token:endpointID:chatID:messages:)``.
    package func postMessages(as caller: Caller, chatID: String, messages: [MessagePost]) async throws -> PostBatchReceipt {
        let policy = try requestPolicy()
        guard (1...Self.maximumBatch).contains(messages.count) else {
            throw DomainError(.invalidRequest, "a batch holds 1 to \(Self.maximumBatch) messages")
        }
        for message in messages {
            guard !message.clientID.isEmpty, message.clientID.utf8.count <= 64 else {
                throw DomainError(.invalidRequest, "a message's clientID is 1 to 64 bytes")
            }
        }
        let now = clock.now()
        // One write of the group commit: the caller, the chat and the sender's standing are
        // checked once; each message (its size, its epoch, the limits) in a savepoint of its own,
        // so that the first one refused ends the batch with the ones before it kept (those after
        // it were sealed in the same epoch, or follow it in the sender's order: not tried).
        let (receipt, appended, usable) = try await storage {
            try await posts.write(locks: Self.chatLocks(chatID)) {
                db -> (PostBatchReceipt, AppendedEntries, Set<MailboxWaiters.Endpoint>) in
                let info = try Self.poster(db, caller, chatID: chatID, moderated: true, now: now)
                var batch = PostBatchReceipt(receipts: [], refusal: nil)
                var appended = AppendedEntries()
                for message in messages {
                    try db.execute("SAVEPOINT post_message")
                    do {
                        try Self.checkPayload(message.payload)
                        let (receipt, entries) = try self.append(
                            Post(kind: .message, payload: message.payload, recipient: nil, clientID: message.clientID), db,
                            by: caller.userID, in: info, policy: policy, now: now)
                        try db.execute("RELEASE SAVEPOINT post_message")
                        batch.receipts.append(receipt)
                        appended.add(entries)
                    } catch let refusal as DomainError {
                        try db.execute("ROLLBACK TO SAVEPOINT post_message")
                        try db.execute("RELEASE SAVEPOINT post_message")
                        batch.refusal = refusal
                        break
                    }
                }
                if !appended.byUser.isEmpty { try db.announce(appended) }
                return (batch, appended, try self.usableWaitingEndpoints(db, of: appended.users))
            }
        }
        announceEntries(appended, usable: usable)
        return receipt
    }

    /// One post, as its sender gave it.
    struct Post {
        let kind: MailboxKind
        let payload: Data
        let recipient: String?
        let clientID: String?
    }

    /// Refuses a payload over the size a message may have.
    private static func checkPayload(_ payload: Data) throws {
        guard payload.count <= maximumPayloadSize else {
            throw DomainError(.tooLarge, "the payload is \(payload.count) bytes; at most \(maximumPayloadSize)")
        }
    }

    /// The chat, once the caller's endpoint is checked, the caller is one of its members and, for
    /// what moderation covers, in good standing.
    private static func poster(_ db: any DomainStatements, _ caller: Caller, chatID: String, moderated: Bool, now: Date) throws
        -> ChatInfo
    {
        try requireEndpoint(db, user: caller.userID, endpointID: caller.endpointID)
        let info = try chatInfo(db, chatID)
        guard info.members.contains(where: { $0.userID == caller.userID }) else {
            throw DomainError(.notAMember, "the caller is not a member of this chat")
        }
        if moderated { try requireGoodStanding(db, user: caller.userID, now: now) }
        return info
    }

    /// Appends `post` by `user` to the mailboxes of its audience in the chat `info`; returns its
    /// receipt and the entries written (none for a repeat of a post accepted before, which is
    /// answered with its first receipt).
    private func append(
        _ post: Post, _ db: any DomainStatements, by user: String, in info: ChatInfo, policy: DomainPolicy, now: Date
    ) throws -> (PostReceipt, AppendedEntries) {
        let chatID = info.chatID
        let kind = post.kind
        if let clientID = post.clientID, kind != .ephemeral {
            if let row = try db.row(
                "SELECT message_number, posted_at FROM posted WHERE chat_id = ? AND sender = ? AND client_id = ?",
                [chatID, user, clientID])
            {
                return (
                    PostReceipt(messageNumber: try row.get(0), postedAt: Date(timeIntervalSince1970: try row.get(1))),
                    AppendedEntries()
                )
            }
        }
        // An MLS message of an epoch the chat has left (a commit was ordered after the sender
        // sealed it) would reach members who can no longer open it: its sender applies the
        // commit and seals it again.
        if kind == .message || kind == .event || kind == .receipt, let framed = Self.mlsEpoch(of: post.payload),
            framed.epoch != info.epoch
        {
            throw DomainError(
                .conflict,
                "the chat is at epoch \(info.epoch), not \(framed.epoch): apply the commits before this message and seal it again"
            )
        }
        var number: Int64?
        if kind == .message {
            number = try db.scalar(
                "UPDATE chats SET next_message_number = next_message_number + 1 WHERE chat_id = ? RETURNING next_message_number - 1 AS number",
                [chatID], as: Int64.self)
        }
        let audience: [String]
        if let recipient = post.recipient {
            guard info.members.contains(where: { $0.userID == recipient }) else {
                throw DomainError(.notAMember, "the recipient is not a member of this chat")
            }
            // The sender's own mailbox too, so its other endpoints see what was sent.
            audience = Array(Set([recipient, user]))
        } else {
            audience = info.members.map(\.userID)
        }
        let bytes = post.payload.count
        if kind == .ephemeral {
            guard post.recipient == nil, bytes <= Self.maximumEphemeralSize else {
                throw DomainError(
                    .invalidRequest, "an ephemeral post goes to every member and is at most \(Self.maximumEphemeralSize) bytes")
            }
            try usage.charge(user, .ephemeral, bytes: bytes * audience.count, now: now, policy: policy)
            // The chat's entries past their lifetime go with each new one (under the chat's
            // lock); every chat's go on the daemon's timer and with mailbox pruning.
            try Self.deleteExpiredEphemeral(db, chatID: chatID, now: now.timeIntervalSince1970)
        } else {
            try usage.charge(user, .post, bytes: bytes * audience.count, now: now, policy: policy)
            try Self.chargeHeld(
                db, recipients: audience.filter { $0 != user }, sender: user, bytes: bytes, cap: policy.unreadBytesPerSender)
        }
        let appended = try Self.append(
            db, to: audience, chatID: chatID, sender: user, kind: kind, messageNumber: number, payload: post.payload,
            members: nil,
            now: now.timeIntervalSince1970)
        if let clientID = post.clientID, kind != .ephemeral {
            try db.execute(
                "INSERT INTO posted(chat_id, sender, client_id, message_number, posted_at) VALUES (?, ?, ?, ?, ?)",
                [chatID, user, clientID, number, now.timeIntervalSince1970])
        }
        return (PostReceipt(messageNumber: number, postedAt: now), appended)
    }
}

extension MailboxKind {
    /// Whether moderation covers posts of this kind (a timed-out or banned sender's are refused).
    var isModerated: Bool { self == .message || self == .event || self == .ephemeral }
}
