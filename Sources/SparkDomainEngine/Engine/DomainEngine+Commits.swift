package import Foundation
import SparkCrypto
import SparkDomain
import SparkStore

/// MLS commit ordering: the domain as MLS's Delivery Service accepts one commit per epoch of a
/// chat, so every member applies the same commits in the same order and no group forks. The
/// commit and the Welcome are opaque here; the domain sees the chat, the epoch, the sizes and who
/// was added or removed (which it needs to route and authorise), never a key or a plaintext.
extension DomainEngine {
    /// The largest commit or Welcome accepted (a commit carries the KeyPackages it adds; a
    /// Welcome may carry the ratchet tree of a large group).
    package static let maximumWelcomeSize = 512 * 1024

    /// The group id and epoch an MLS PublicMessage or PrivateMessage names in the clear
    /// (RFC 9420 §6: `version`, `wire_format`, then `group_id<V>` and `epoch`), or nil for bytes
    /// that are not one. The domain reads nothing else of a chat's messages.
    static func mlsEpoch(of payload: Data) -> (groupID: Data, epoch: Int64)? {
        let bytes = [UInt8](payload.prefix(4 + 4 + 255 + 8))
        guard bytes.count >= 6, bytes[0] == 0, bytes[1] == 1, bytes[2] == 0, bytes[3] == 1 || bytes[3] == 2 else { return nil }
        var index = 4
        let first = bytes[index]
        let lengthSize = 1 << Int(first >> 6)
        guard lengthSize <= 4, index + lengthSize <= bytes.count else { return nil }
        var length = Int(first & 0x3F)
        for offset in 1..<lengthSize { length = length << 8 | Int(bytes[index + offset]) }
        index += lengthSize
        guard index + length + 8 <= bytes.count else { return nil }
        let groupID = Data(bytes[index..<index + length])
        index += length
        var epoch: UInt64 = 0
        for offset in 0..<8 { epoch = epoch << 8 | UInt64(bytes[index + offset]) }
        guard epoch <= UInt64(Int64.max) else { return nil }
        return (groupID, Int64(epoch))
    }

    /// Orders a commit; see ``DomainService/postCommit(token:endpointID:chatID:epoch:commit:welcome:add:remove:replacingRefused:)``.
    ///
    /// A member gone bad can post a commit every other member refuses (bytes that are no commit,
    /// one that removes others' devices without being an admin, a ReInit): the domain cannot
    /// tell, since a commit is opaque here, so it orders it and the chat's epoch moves past the
    /// members, whose every later post and commit would be refused. An admin's device that
    /// refused it replaces it (`replacingRefused`): the chat goes back to the epoch the members
    /// are at, with the admin's commit as its next. `settled_epoch` is the epoch after the
    /// latest commit an admin made, so no commit of an admin is ever replaced, and an admin's
    /// replacement is final.
    package func postCommit(
        as caller: Caller, chatID: String, epoch: Int64, commit: Data, welcome: Data?, add: [String], remove: [String],
        replacingRefused: Bool
    ) async throws -> Int64 {
        let (user, endpointID) = (caller.userID, caller.endpointID)
        let policy = try requestPolicy()
        guard (1...Self.maximumWelcomeSize).contains(commit.count) else {
            throw DomainError(.tooLarge, "a commit is 1 to \(Self.maximumWelcomeSize) bytes")
        }
        if let welcome {
            guard (1...Self.maximumWelcomeSize).contains(welcome.count) else {
                throw DomainError(.tooLarge, "a Welcome is 1 to \(Self.maximumWelcomeSize) bytes")
            }
            // Under requirePostQuantum no device joins a group of a classic suite.
            guard !policy.requirePostQuantum || Self.welcomeSuite(welcome) == Self.postQuantumSuite else {
                throw DomainError(.forbidden, "this domain takes post-quantum groups only (suite 0xF768)")
            }
        }
        guard epoch >= 0, add.count <= Self.maximumChatMembers, remove.count <= Self.maximumChatMembers,
            Set(add).isDisjoint(with: remove), !add.contains("")
        else {
            throw DomainError(.invalidRequest, "an epoch is not negative; a user is added or removed, not both")
        }
        let digest = SHA256.hash(commit)
        let clockNow = clock.now()
        let now = clockNow.timeIntervalSince1970
        let (accepted, appended, usable) = try await storage {
            try await store.write(Self.chatScope(chatID)) { db -> (Int64, AppendedEntries, Set<MailboxWaiters.Endpoint>) in
                try Self.requireEndpoint(db, user: user, endpointID: endpointID)
                guard
                    let row = try db.row("SELECT epoch, last_commit, settled_epoch FROM chats WHERE chat_id = ?", [chatID])
                else {
                    throw DomainError(.notFound, "no chat \(chatID)")
                }
                let current = try row.get(0, as: Int64.self)
                // A retry of the commit that won (its answer was lost) is answered as it was.
                if current == epoch + 1, try row.get(1, as: Data?.self) == digest { return (current, AppendedEntries(), []) }
                // Only members learn the epoch.
                let before = try Self.chatInfo(db, chatID)
                guard let caller = before.members.first(where: { $0.userID == user }) else {
                    throw DomainError(.notAMember, "the caller is not a member of this chat")
                }
                if replacingRefused {
                    guard caller.isAdmin else {
                        throw DomainError(.notAMember, "only an admin replaces the commits the members refused")
                    }
                    let settled = try row.get(2, as: Int64.self)
                    guard settled <= epoch, epoch < current else {
                        throw DomainError(
                            .conflict,
                            "the chat is at epoch \(current) and an admin's commit made epoch \(settled): no commit since epoch \(epoch) can be replaced"
                        )
                    }
                } else {
                    guard current == epoch else {
                        throw DomainError(
                            .conflict,
                            "the chat is at epoch \(current), not \(epoch): apply the commits before yours and commit again")
                    }
                }
                try self.usage.charge(user, .commit, now: clockNow, policy: policy)
                // A commit that adds or removes no one (an update) needs no admin and changes no members.
                var change: (before: ChatInfo, after: ChatInfo)?
                if !add.isEmpty || !remove.isEmpty {
                    change = try Self.changeMembers(db, chatID: chatID, by: user, add: add, remove: remove)
                    guard change != nil else {
                        throw DomainError(
                            .invalidRequest, "the commit's added users are members already and its removed ones are not")
                    }
                }
                let after = change?.after ?? before
                try db.execute(
                    "UPDATE chats SET epoch = ?, last_commit = ?, settled_epoch = ? WHERE chat_id = ?",
                    [epoch + 1, digest, caller.isAdmin ? epoch + 1 : try row.get(2, as: Int64.self), chatID])
                let audience = Array(Set(before.members.map(\.userID)).union(after.members.map(\.userID)))
                var appended = AppendedEntries()
                if change != nil {
                    appended = try Self.append(
                        db, to: audience, chatID: chatID, sender: user, kind: .membership, messageNumber: nil, payload: Data(),
                        members: after.members, now: now, epoch: epoch)
                }
                appended.add(
                    try Self.append(
                        db, to: audience, chatID: chatID, sender: user, kind: .commit, messageNumber: nil, payload: commit,
                        members: nil, now: now, epoch: epoch))
                // The Welcome goes to every member after the commit: a commit may add devices of
                // users who are members already (a user's new device), and each device looks for
                // its own KeyPackage in the Welcome.
                if let welcome {
                    appended.add(
                        try Self.append(
                            db, to: after.members.map(\.userID), chatID: chatID, sender: user, kind: .welcome, messageNumber: nil,
                            payload: welcome,
                            members: nil, now: now, epoch: epoch))
                }
                try db.announce(appended)
                return (epoch + 1, appended, try self.usableWaitingEndpoints(db, of: audience))
            }
        }
        announceEntries(appended, usable: usable)
        return accepted
    }
}
