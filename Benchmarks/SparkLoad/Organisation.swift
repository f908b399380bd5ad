import Foundation
import SparkCrypto
import SparkDomain
import SparkMLS

/// The organisation `spark-load` simulates: `users` users with a device each, every one of them
/// in a one-to-one chat, one in five also in a team chat of 10, and another one in five in one
/// of the few company-wide chats of 500. Traffic goes where it does in an organisation: four
/// messages in five to one-to-one chats, most of the rest to team chats, one in a thousand to a
/// company-wide chat (at 300 messages a second, one every 13 seconds in each of the four: a
/// busy announcements channel, and still 500 deliveries a message).
struct Organisation {
    /// A class of chats: their size, how many there are, and its share of the messages.
    struct ChatClass {
        let size: Int
        let count: Int
        let share: Double
    }

    /// One chat: its id, its class (an index into ``classes``) and its members (user indexes;
    /// the first made it).
    struct Chat {
        let id: String
        let chatClass: Int
        let members: [Int]
    }

    let users: Int
    let classes: [ChatClass]
    let chats: [Chat]

    /// The messages' default shares: one-to-one, team, company-wide.
    static let standardMix = [0.80, 0.199, 0.001]

    init(users: Int, mix: [Double] = Self.standardMix) {
        self.users = users
        let company = min(500, users)
        let companyChats = max(1, users / 2500)
        let teamChats = users / 25 / 2
        classes = [
            ChatClass(size: 2, count: users / 2, share: mix[0]),
            ChatClass(size: 10, count: teamChats, share: teamChats > 0 ? mix[1] : 0),
            ChatClass(size: company, count: companyChats, share: mix[2]),
        ]
        var chats: [Chat] = []
        for pair in 0..<users / 2 {
            chats.append(Chat(id: "pair-\(pair)", chatClass: 0, members: [2 * pair, 2 * pair + 1]))
        }
        // Team chats over the users after the company-wide ones' (disjoint, so each user's
        // mailbox sees at most three chats).
        let teamStart = min(users, companyChats * company) % users
        for team in 0..<teamChats {
            chats.append(Chat(id: "team-\(team)", chatClass: 1, members: (0..<10).map { (teamStart + team * 10 + $0) % users }))
        }
        for index in 0..<companyChats {
            chats.append(
                Chat(id: "company-\(index)", chatClass: 2, members: (0..<company).map { (index * company + $0) % users }))
        }
        self.chats = chats
    }

    /// A user's id in the domain.
    static func user(_ index: Int) -> String { "user-\(index)" }

    /// Real MLS traffic for each class: a group of the class's size made in this process (its
    /// creator adding every other member in one commit, as the SDK does when a chat starts), the
    /// commit that takes it to epoch 1, and `count` application messages its creator sealed at
    /// epoch 1 (text of a chat message's size). Every chat of a class is put at epoch 1 with a
    /// commit, so the domain takes these messages in each, as it would take the chat's own: it
    /// orders opaque MLS, and checks only the epoch a message is framed in.
    struct Traffic {
        let commits: [Data]
        let messages: [[Data]]
    }

    func traffic(messagesPerClass count: Int) throws -> Traffic {
        var commits: [Data] = []
        var messages: [[Data]] = []
        var random = MLSSystemRandom()
        let now = Date()
        for chatClass in classes {
            let creator = try MLSGroup.create(
                groupID: Data("load \(chatClass.size)".utf8), signer: try Self.signer("creator"), random: &random)
            let bundles = try (1..<chatClass.size).map {
                try MLSKeyPackageBundle(signer: try Self.signer("member \($0)"), now: now, random: &random).keyPackage
            }
            let added = try creator.commit(adding: bundles, updatingPath: false, now: now, random: &random)
            var sender = added.group
            let text = Data(repeating: 0x61, count: 160)
            messages.append(try (0..<count).map { _ in try sender.protect(text, random: &random) })
            // A company-wide chat opens with a team chat's commit: its own carries 499
            // KeyPackages (about 150 KB) to 500 mailboxes, a cost of the setup, not of the load.
            commits.append(chatClass.size <= 10 || commits.isEmpty ? added.commit : commits[commits.count - 1])
        }
        return Traffic(commits: commits, messages: messages)
    }

    static func signer(_ name: String) throws -> MLSSigner {
        MLSSigner(credential: MLSCredential(identity: Data(name.utf8)), key: try Ed25519.PrivateKey())
    }

    /// Each user's token and endpoint, made through `domain` `width` at a time.
    func enroll(through domain: RemoteDomain, width: Int = 16) async throws -> [(token: String, endpoint: String)] {
        try await Self.inParallel(count: users, width: width) { index in
            let token = try await domain.testToken(userID: Self.user(index)).token
            let endpoint = "device-\(index)"
            _ = try await domain.registerEndpoint(token: token, registration: .init(endpointID: endpoint, description: "load"))
            return (token, endpoint)
        }
    }

    /// Makes every chat (by its first member) and orders its class's commit in it.
    func open(through domain: RemoteDomain, credentials: [(token: String, endpoint: String)], traffic: Traffic, width: Int = 16)
        async throws
    {
        _ = try await Self.inParallel(count: chats.count, width: width) { index in
            let chat = chats[index]
            let (token, endpoint) = credentials[chat.members[0]]
            _ = try await domain.createChat(
                token: token, endpointID: endpoint, chatID: chat.id, participants: chat.members.dropFirst().map(Self.user))
            let epoch = try await domain.postCommit(
                token: token, endpointID: endpoint, chatID: chat.id, epoch: 0, commit: traffic.commits[chat.chatClass],
                welcome: nil, add: [], remove: [])
            guard epoch == 1 else { throw LoadError("\(chat.id) went to epoch \(epoch), not 1") }
            return ()
        }
    }

    /// `body` for 0..<count, at most `width` at a time; the results in order.
    static func inParallel<T: Sendable>(count: Int, width: Int, _ body: @escaping @Sendable (Int) async throws -> T)
        async throws -> [T]
    {
        try await withThrowingTaskGroup(of: (Int, T).self) { group in
            var results = [T?](repeating: nil, count: count)
            var next = 0
            while next < min(width, count) {
                let index = next
                group.addTask { (index, try await body(index)) }
                next += 1
            }
            while let (index, value) = try await group.next() {
                results[index] = value
                if next < count {
                    let index = next
                    group.addTask { (index, try await body(index)) }
                    next += 1
                }
            }
            return results.map { $0! }
        }
    }
}
