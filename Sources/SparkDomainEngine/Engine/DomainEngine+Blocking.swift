import Foundation
import SparkDomain
import SparkStore

/// Blocking: each user's list of users they blocked, kept by the domain so that every device of
/// the user reads the same list, and so that the domain refuses what a blocked user would start
/// with them: a chat with them, or adding them to a chat. What a blocked user sends in a chat
/// both are in already is delivered, and dropped by the blocker's devices (the domain cannot
/// read it to tell).
extension DomainEngine {
    /// The most users one user may block.
    package static let maximumBlocked = 10_000

    /// Blocks `target` for the caller (or unblocks them); the user's other devices are told to
    /// read the list again. Blocking a user blocked already changes nothing.
    package func setBlocked(as caller: Caller, userID target: String, blocked: Bool) async throws {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        guard target != user, !target.isEmpty, target.utf8.count <= 255 else {
            throw DomainError(.invalidRequest, "a user blocks another user, by a user id of 1 to 255 bytes")
        }
        let now = clock.now().timeIntervalSince1970
        try await storage {
            try await store.write(.locking(["blocks:" + user])) { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                let changed: Int
                if blocked {
                    let count = try db.scalar("SELECT count(*) FROM blocks WHERE user_id = ?", [user], as: Int.self) ?? 0
                    guard count < Self.maximumBlocked else {
                        throw DomainError(.tooLarge, "a user blocks at most \(Self.maximumBlocked) users")
                    }
                    changed = try db.execute(
                        "INSERT INTO blocks(user_id, blocked, blocked_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                        [user, target, now])
                } else {
                    changed = try db.execute("DELETE FROM blocks WHERE user_id = ? AND blocked = ?", [user, target])
                }
                guard changed > 0 else { return }
                // The user's devices read the list again (the notice of a change of theirs).
                try Self.append(
                    db, to: [user], chatID: "", sender: user, kind: .devices, messageNumber: nil, payload: Data(), members: nil,
                    now: now)
                try db.announce([user])
            }
        }
        announceEntries(to: [user])
    }

    /// The users the caller blocked, sorted.
    package func blockedUsers(as caller: Caller) async throws -> [String] {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        return try await storage {
            try await store.read { db in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                return try db.rows("SELECT blocked FROM blocks WHERE user_id = ? ORDER BY blocked", [user]).map {
                    try $0.get(0, as: String.self)
                }
            }
        }
    }

    /// Refuses a chat `inviter` starts with, or a chat they add, a user who blocked them.
    static func requireNotBlocked(_ db: any DomainStatements, inviter: String, invited: [String]) throws {
        for user in invited where user != inviter {
            if try db.scalar("SELECT 1 FROM blocks WHERE user_id = ? AND blocked = ?", [user, inviter], as: Int.self) != nil {
                throw DomainError(.forbidden, "\(user) does not take chats from \(inviter)")
            }
        }
    }
}
