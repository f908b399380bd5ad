import Foundation
package import SparkDomain
import SparkLock
import SparkStore

/// Moderation: a user's standing, reports, infractions, time-outs and bans.
extension DomainEngine {
    /// The caller's status and open infractions.
    package func userStatus(as caller: Caller) async throws -> UserStatus {
        let user = try await requireEndpoint(caller)
        return try moderationStatus(of: user)
    }

    /// Dismisses one of the caller's infractions.
    package func dismissInfraction(as caller: Caller, id: Int64) async throws {
        let user = try await requireEndpoint(caller)
        try await storage {
            try await store.write { db in
                let changed = try db.execute(
                    "UPDATE infractions SET dismissed = 1 WHERE id = ? AND user_id = ? AND dismissed = 0", [id, user])
                if changed == 0 { throw DomainError(.notFound, "no open infraction \(id)") }
            }
        }
    }

    /// Any user's status (the operator's view).
    package func moderationStatus(of user: String) throws -> UserStatus {
        let now = clock.now()
        return try blockingStorage {
            try store.blockingRead { db in
                let infractions = try db.rows(
                    "SELECT id, reason, issued_at FROM infractions WHERE user_id = ? AND dismissed = 0 ORDER BY id", [user]
                ).map {
                    Infraction(id: try $0.get(0), reason: try $0.get(1), issuedAt: Date(timeIntervalSince1970: try $0.get(2)))
                }
                return UserStatus(state: try Self.standing(db, user: user, now: now), infractions: infractions)
            }
        }
    }

    /// The most messages one report reveals.
    package static let maximumReportedMessages = 50
    /// The longest reason a report gives, in bytes.
    package static let maximumReportReason = 1000

    /// Reports a member of a chat; see ``DomainService/report(token:endpointID:chatID:user:reason:messages:)``.
    package func report(as caller: Caller, chatID: String, user reported: String, reason: String, messages: [ReportedMessage])
        async throws -> Int64
    {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        let policy = try requestPolicy()
        guard reported != user, reason.utf8.count <= Self.maximumReportReason,
            (1...Self.maximumReportedMessages).contains(messages.count),
            messages.allSatisfy({
                $0.sender == reported && $0.content.utf8.count <= Self.maximumPayloadSize && (1...64).contains($0.id.utf8.count)
            })
        else {
            throw DomainError(
                .invalidRequest,
                "a report names another user, a reason of at most 1,000 bytes and 1 to 50 of their messages (64 KB each)")
        }
        let body = String(decoding: try JSONEncoder().encode(messages), as: UTF8.self)
        let now = clock.now()
        return try await storage {
            try await store.write { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                let members = try Self.chatInfo(db, chatID).members.map(\.userID)
                guard members.contains(user), members.contains(reported) else {
                    throw DomainError(.notAMember, "the reporter and the reported user must both be members of the chat")
                }
                // A message is cited by a number the chat gave out (1 up to its last), or by none.
                let next = try Self.nextMessageNumber(db, chatID: chatID)
                if let number = messages.compactMap(\.number).first(where: { !(1..<next).contains($0) }) {
                    throw DomainError(
                        .invalidRequest, "the chat never had a message numbered \(number) (its numbers run 1 to \(next - 1))")
                }
                try self.usage.charge(user, .post, bytes: body.utf8.count, now: now, policy: policy)
                guard
                    let id = try db.scalar(
                        """
                        INSERT INTO reports(reporter, reported, chat_id, reason, messages, created_at) VALUES (?, ?, ?, ?, ?, ?)
                        RETURNING id
                        """, [user, reported, chatID, reason, body, now.timeIntervalSince1970], as: Int64.self)
                else { throw DomainError(.storageFailure, "the report got no id") }
                return id
            }
        }
    }

    /// The reports users made, newest first (at most `limit`).
    package func reports(limit: Int = 50) throws -> [Report] {
        try blockingStorage {
            try store.blockingRead { db in
                try db.rows(
                    "SELECT id, reporter, reported, chat_id, reason, messages, created_at FROM reports ORDER BY id DESC LIMIT ?",
                    [max(1, min(limit, 1000))]
                ).map { row in
                    Report(
                        id: try row.get(0), reporter: try row.get(1), reported: try row.get(2), chatID: try row.get(3),
                        reason: try row.get(4),
                        messages: try JSONDecoder().decode(
                            [ReportedMessage].self, from: Data(try row.get(5, as: String.self).utf8)),
                        createdAt: Date(timeIntervalSince1970: try row.get(6)))
                }
            }
        }
    }

    /// Issues an infraction (a warning the user sees).
    @discardableResult
    package func issueInfraction(to user: String, reason: String) throws -> Infraction {
        let now = clock.now()
        return try blockingStorage {
            try store.blockingWrite { db in
                let id = try db.scalar(
                    "INSERT INTO infractions(user_id, reason, issued_at) VALUES (?, ?, ?) RETURNING id",
                    [user, reason, now.timeIntervalSince1970], as: Int64.self)
                guard let id else { throw DomainError(.storageFailure, "the infraction got no id") }
                return Infraction(id: id, reason: reason, issuedAt: now)
            }
        }
    }

    /// Times a user out: their messages are refused until the time passes.
    package func timeOut(_ user: String, for seconds: Int, reason: String) throws {
        guard (1...(366 * 86400)).contains(seconds) else {
            throw DomainError(.invalidRequest, "a timeout lasts 1 second to a year")
        }
        let until = clock.now().timeIntervalSince1970 + Double(seconds)
        try blockingStorage {
            try store.blockingWrite { db in
                try db.execute(
                    """
                    INSERT INTO moderation(user_id, timeout_until, timeout_reason) VALUES (?, ?, ?)
                    ON CONFLICT(user_id) DO UPDATE SET timeout_until = excluded.timeout_until, timeout_reason = excluded.timeout_reason
                    """, [user, until, reason])
            }
        }
    }

    /// Bans a user: their messages are refused until unbanned.
    package func ban(_ user: String, reason: String) throws {
        try blockingStorage {
            try store.blockingWrite { db in
                try db.execute(
                    """
                    INSERT INTO moderation(user_id, banned_reason) VALUES (?, ?)
                    ON CONFLICT(user_id) DO UPDATE SET banned_reason = excluded.banned_reason
                    """, [user, reason])
            }
        }
    }

    /// Lifts a ban and any timeout.
    package func unban(_ user: String) throws {
        try blockingStorage {
            try store.blockingWrite { db in try db.execute("DELETE FROM moderation WHERE user_id = ?", [user]) }
        }
    }
}

// MARK: A user's standing, as the other areas ask it

extension DomainEngine {
    /// Whether `user` may act: valid, banned, or timed out until a time.
    static func standing(_ db: any DomainStatements, user: String, now: Date) throws -> UserStatus.State {
        guard
            let row = try db.row("SELECT banned_reason, timeout_until, timeout_reason FROM moderation WHERE user_id = ?", [user])
        else {
            return .valid
        }
        if let reason = try row.get(0, as: String?.self) { return .banned(reason: reason) }
        if let until = try row.get(1, as: Double?.self), until > now.timeIntervalSince1970 {
            return .timeout(until: Date(timeIntervalSince1970: until), reason: try row.get(2, as: String?.self) ?? "")
        }
        return .valid
    }

    /// Throws ``DomainError/Code/moderated`` unless `user` is in good standing.
    static func requireGoodStanding(_ db: any DomainStatements, user: String, now: Date) throws {
        switch try standing(db, user: user, now: now) {
        case .valid: return
        case .banned(let reason): throw DomainError(.moderated, "the user is banned: \(reason)")
        case .timeout(let until, let reason):
            throw DomainError(
                .moderated, "the user is timed out for \(Int(until.timeIntervalSince(now).rounded(.up))) more seconds: \(reason)",
                retryAfter: Int(until.timeIntervalSince(now).rounded(.up)))
        }
    }
}
