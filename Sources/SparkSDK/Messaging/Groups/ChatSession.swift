import Foundation
import SparkCrypto
import SparkLock
import SparkMLS

/// One chat's group as one transaction sees it: loaded once, for one purpose, and passed down.
/// It is the only way the messenger seals in a chat, takes a chat's entry or commits in it, and
/// the one place where a chat's trust is decided: nothing is sealed while the group holds a
/// device this device does not trust (``requireTrusted()``), whichever part asks.
struct ChatSession {
    /// What the group is loaded for, and so which credentials its devices are judged by.
    enum Purpose {
        /// Sealing, taking entries, committing, reading the devices: the group as its members
        /// keep it, each contact's trusted key, or the changed one while the user has not decided
        /// (the group must follow what the others commit; this device holds its own sends).
        case follow
        /// Looking at an entry before the real check (the users a commit adds, so that their
        /// keys are known first), the epoch, or this device's own commit: any credential.
        case probe
    }

    /// The stored group; mutated by what the session does, written by ``save()``.
    var stored: GroupStore.Stored
    let store: any MessagingStore
    let context: MessagingContext

    var chatID: String { stored.group.chatID }
    var group: ChatGroup { stored.group }

    /// The chat's group in `store`, judged for `purpose`; nil when this device is in no group
    /// of the chat.
    static func open(
        _ chatID: String, in store: any MessagingStore, _ context: MessagingContext, for purpose: Purpose = .follow
    ) throws -> ChatSession? {
        let validator: any MLSCredentialValidator =
            switch purpose {
            case .follow: try context.validators.current(store).group
            case .probe: MLSAcceptAnyCredential()
            }
        guard let stored = try context.groups.load(store, chatID: chatID, validator: validator) else { return nil }
        return ChatSession(stored: stored, store: store, context: context)
    }

    // MARK: Trust

    /// The users with a device in the chat's group that this device does not trust (their
    /// identity changed, the policy holds a first contact, or a device is of an identity no
    /// longer trusted). Found once per epoch and version of the contacts while the chat is live,
    /// not by checking every member's credential at every send.
    func untrustedUsers() throws -> [String] {
        let current = try context.validators.current(store)
        let (chatID, authenticator) = (chatID, stored.group.group.epochAuthenticator)
        let cache = context.groups.cache
        if let contacts = current.contacts, let known = cache.untrusted(chatID, contacts: contacts, authenticator: authenticator)
        {
            return known
        }
        let users = Set(stored.group.devices(refusedBy: current.trusted).map(\.user)).sorted()
        if let contacts = current.contacts {
            cache.rememberUntrusted(chatID, users, contacts: contacts, authenticator: authenticator)
        }
        return users
    }

    /// Refuses with `identityUnconfirmed` while the group holds a device this device does not
    /// trust.
    func requireTrusted() throws {
        let refused = try untrustedUsers()
        guard refused.isEmpty else {
            throw MessagingError(
                .identityUnconfirmed,
                "the identity of \(refused.joined(separator: ", ")) is not confirmed: accept it or confirm the safety number first"
            )
        }
    }

    // MARK: Sealing

    /// Whom a sealed payload may reach.
    enum Reach {
        /// Every device in the group: refused while one of them is not trusted.
        case members
        /// One device of this user (a history transfer, whose records are sealed to it alone):
        /// goes regardless of the others.
        case ownDevice
    }

    /// Seals `payload` as this device's next message in the chat; the group's ratchet moves in
    /// the same transaction, and the bytes are remembered as this device's (for their echo).
    /// Refused with `identityUnconfirmed` while the group holds a device this device does not
    /// trust (checked here, in the transaction that seals: a commit applied while the caller
    /// awaited may have added one), unless it reaches one device of this user.
    mutating func seal(_ payload: ChatPayload, localID: String?, reach: Reach = .members) throws -> Data {
        guard stored.group.group.isActive else { throw MessagingError(.unknownChat, "this device is not in chat \(chatID)") }
        if reach == .members { try requireTrusted() }
        // A text carries its place among this device's texts in the chat, and the places of
        // those the domain refused, so that recipients see one the domain withholds.
        var payload = payload
        if payload.kind == .text, let localID {
            let sequence = try store.sendingSequence(chatID: chatID, localID: localID)
            payload.sequence = sequence
            payload.withdrawn = try store.withdrawnSequences(chatID: chatID).filter { $0 < sequence }
        }
        var random = MLSSystemRandom()
        let sealed = try stored.group.seal(payload, gossip: context.gossipHead.withLock { $0 }, random: &random)
        stored.sentSinceUpdate += 1
        if stored.sentSinceUpdate >= MessagingCore.updateAfterMessages {
            let chatID = chatID
            context.needsReconcile.withLock { _ = $0.insert(chatID) }
        }
        try save()
        try store.recordSent(chatID: chatID, payload: sealed, localID: localID)
        return sealed
    }

    /// Writes the group as it is now (a ratchet moved, a counter changed).
    func save() throws { try context.groups.save(store, stored) }

    // MARK: Commits

    /// A commit of `group`, with fresh randomness.
    static func commit(
        _ group: ChatGroup, adding keyPackages: [Data], removing devices: Set<ChatGroup.Device>,
        context change: ChatGroup.ContextChange
    ) throws -> (commit: Data, welcome: Data?, next: ChatGroup) {
        var random = MLSSystemRandom()
        return try group.commit(
            adding: keyPackages, removing: devices, subject: change.subject, timer: change.timer, now: Date(),
            random: &random)
    }

    /// A new chat's group and the commit that adds its first devices.
    static func newGroup(
        chatID: String, signer: MLSSigner, validator: any MLSCredentialValidator, subject: String,
        suite: MLSCipherSuite = .x25519AES128GCMSHA256Ed25519, keyPackages: [Data]
    ) throws -> (created: ChatGroup, commit: Data, welcome: Data?, next: ChatGroup) {
        var random = MLSSystemRandom()
        let created = try ChatGroup.create(
            chatID: chatID, signer: signer, validator: validator, subject: subject, suite: suite, random: &random)
        let (commit, welcome, next) = try created.commit(
            adding: keyPackages, removing: Set<ChatGroup.Device>(), now: Date(), random: &random)
        return (created, commit, welcome, next)
    }

    // MARK: What the group shows

    /// Records a chat's participants as its group has them (the users with a device in it, the
    /// admins its extension names, admins first), and whether this user is in it.
    static func applyMembership(_ store: some MessagingStore, group: ChatGroup, now: Date) throws {
        let admins = group.admins
        let users = group.users.sorted { (admins.contains($0) ? 0 : 1, $0) < (admins.contains($1) ? 0 : 1, $1) }
        try store.setMembership(
            chatID: group.chatID, participants: users.map { ChatMember(userID: $0, isAdmin: admins.contains($0)) },
            active: group.group.isActive, at: now)
        try store.setSuite(group.group.cipherSuite.rawValue, chatID: group.chatID)
    }

    /// Shows the group's subject when it changed, and applies its timer.
    static func applySubject(of group: ChatGroup, in store: some MessagingStore) throws {
        if try store.subject(chatID: group.chatID) != group.subject {
            try store.setSubject(group.subject, chatID: group.chatID, at: Date())
        }
        if try store.timer(chatID: group.chatID) != group.disappearingTimer {
            try store.setTimer(group.disappearingTimer, chatID: group.chatID)
        }
    }
}

extension MessagingPart {
    /// Seals `payload` as this device's next message in the chat, in its session (see
    /// ``ChatSession/seal(_:localID:reach:)``): the only way a part seals for the members.
    func sealNext(_ payload: ChatPayload, chatID: String, localID: String?, in store: any MessagingStore) throws -> Data {
        var session = try activeSession(chatID, in: store)
        return try session.seal(payload, localID: localID)
    }
}
