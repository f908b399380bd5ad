import Foundation
import SparkDomain
import SparkDomainEngine

/// The entries a transaction wrote, as `NOTIFY` payloads on ``PostgreSQLDomainStore/entriesChannel``,
/// so that an instance whose long-poll waits on one of their users can hand it the entries
/// instead of reading the mailbox (`MailboxWaiters.deliver`).
///
/// A payload is a JSON array of groups; a group is one entry's content (the same for each of
/// its users: chat, sender, kind, number, payload, members, time, epoch) with the users it
/// reached and each one's sequence. A transaction's groups go out in as many payloads as their
/// size needs (each at most ``PostgreSQLDomainStore/payloadLimit`` bytes); an entry too large
/// for one payload with a single user is not carried, and its users are announced by name (they
/// read). A channel of its own: nothing a user can choose (a user id, a chat id) is ever read as
/// entries on the channel of names.
enum EntryNotifications {
    /// One entry's content and the users it reached.
    struct Group: Codable, Equatable {
        var chatID: String
        var sender: String
        var kind: String
        var number: Int64?
        var payload: Data
        var members: [ChatMember]?
        var postedAt: Double
        var epoch: Int64?
        var users: [String] = []
        var sequences: [Int64] = []

        enum CodingKeys: String, CodingKey {
            case chatID = "c", sender = "s", kind = "k", number = "n", payload = "p", members = "m", postedAt = "t"
            case epoch = "e", users = "u", sequences = "q"
        }

        init(_ entry: MailboxEntry) {
            chatID = entry.chatID
            sender = entry.sender
            kind = entry.kind.rawValue
            number = entry.messageNumber
            payload = entry.payload
            members = entry.members
            postedAt = entry.postedAt.timeIntervalSince1970
            epoch = entry.epoch
        }

        /// Whether `entry` has this group's content.
        func holds(_ entry: MailboxEntry) -> Bool {
            chatID == entry.chatID && sender == entry.sender && kind == entry.kind.rawValue && number == entry.messageNumber
                && postedAt == entry.postedAt.timeIntervalSince1970 && epoch == entry.epoch && members == entry.members
                && payload == entry.payload
        }
    }

    /// The payloads that carry `appended` (users in the order given, each user's entries in
    /// order), and the users whose entries could not be carried.
    static func payloads(_ appended: [(user: String, entry: MailboxEntry)], limit: Int) -> (
        payloads: [String], uncarried: [String]
    ) {
        // Entries with the same content (one post's, to each member) share a group, found by
        // what tells posts apart and then compared whole.
        var groups: [Group] = []
        var byPost: [String: [Int]] = [:]
        for (user, entry) in appended {
            let key =
                "\(entry.chatID)\u{0}\(entry.sender)\u{0}\(entry.kind.rawValue)\u{0}\(entry.messageNumber ?? -1)\u{0}\(entry.epoch ?? -1)\u{0}\(entry.payload.count)"
            if let index = byPost[key]?.first(where: { groups[$0].holds(entry) }) {
                groups[index].users.append(user)
                groups[index].sequences.append(entry.sequence)
            } else {
                var group = Group(entry)
                group.users = [user]
                group.sequences = [entry.sequence]
                byPost[key, default: []].append(groups.count)
                groups.append(group)
            }
        }
        let encoder = JSONEncoder()
        var pieces: [String] = []
        var uncarried: [String] = []
        for group in groups {
            // The content alone, then as many users as fit beside it.
            var empty = group
            empty.users = []
            empty.sequences = []
            guard let head = try? encoder.encode(empty), head.count + 64 < limit else {
                uncarried += group.users
                continue
            }
            var part = empty
            var size = head.count
            for (user, sequence) in zip(group.users, group.sequences) {
                // A user's share: the quoted id (escaped at most six bytes a byte), its sequence, commas.
                let share = user.utf8.count * 6 + 24
                if !part.users.isEmpty, size + share > limit - 2 {
                    if let piece = try? encoder.encode(part) { pieces.append(String(decoding: piece, as: UTF8.self)) }
                    part = empty
                    size = head.count
                }
                guard head.count + share <= limit - 2 else {
                    uncarried.append(user)
                    continue
                }
                part.users.append(user)
                part.sequences.append(sequence)
                size += share
            }
            if !part.users.isEmpty, let piece = try? encoder.encode(part) {
                pieces.append(String(decoding: piece, as: UTF8.self))
            }
        }
        // Pieces packed into payloads: `[` piece `,` piece … `]`.
        var payloads: [String] = []
        var current = ""
        for piece in pieces {
            // What the payload would be with this piece: a comma and the brackets besides.
            if !current.isEmpty, current.utf8.count + 1 + piece.utf8.count + 2 > limit {
                payloads.append("[" + current + "]")
                current = ""
            }
            current += current.isEmpty ? piece : "," + piece
        }
        if !current.isEmpty { payloads.append("[" + current + "]") }
        return (payloads, uncarried)
    }

    /// The entries a payload carries; nil for one that is not a list of well-formed groups
    /// (then nothing of it is handed to anyone).
    static func entries(_ payload: String) -> AppendedEntries? {
        guard let groups = try? JSONDecoder().decode([Group].self, from: Data(payload.utf8)) else { return nil }
        var appended = AppendedEntries()
        for group in groups {
            guard group.users.count == group.sequences.count, let kind = MailboxKind(rawValue: group.kind) else { return nil }
            // One post's copies: the long-polls they wake share one wire encoding.
            let shared = SharedEntryEncoding()
            for (user, sequence) in zip(group.users, group.sequences) {
                var entry = MailboxEntry(
                    sequence: sequence, chatID: group.chatID, sender: group.sender, kind: kind, messageNumber: group.number,
                    payload: group.payload, members: group.members, postedAt: Date(timeIntervalSince1970: group.postedAt),
                    epoch: group.epoch)
                entry.shared = shared
                appended.add(entry, for: user)
            }
        }
        return appended
    }
}
