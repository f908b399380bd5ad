import Foundation
import SparkDomain

/// What the messaging core asks of the store to decide: the messages a payload names. Read-only;
/// the core changes nothing itself (libsignal's protocol functions take their stores the same way).
protocol MessageLookup {
    /// The chat's message `id` as this device has it, or nil.
    func message(_ id: String, in chatID: String) throws -> MessagingCore.KnownMessage?
    /// Whether a message of the chat has `number` here.
    func isTaken(_ number: Int64, in chatID: String) throws -> Bool
}

/// The rules of what a chat's messages do once the chat's group opened them, as a pure function
/// of the payload, its entry, its authenticated sender and what the store says of the messages it
/// names: it returns actions, and the messenger carries them out in the entry's transaction (as
/// matrix-sdk-crypto's `OlmMachine` returns requests, and swift-nio's state machines return
/// actions). Every refusal here is a unit test (`MessagingCoreTests`), without a store or a domain.
///
/// - A text is numbered by the domain, and numbers only grow: a number that does not was
///   renumbered, and the message is dropped. An id already taken is dropped too (a replay under
///   another number); the same id and number is the copy a history transfer handed over already.
/// - Only a message's sender edits it or recalls it, and a recalled message takes no edit and
///   no reaction.
/// - A reaction is its sender's (the device's authenticated user): adding one again or removing
///   one that is not there changes nothing, and no one adds or removes another user's.
/// - Only this user's own devices hand over history, each transfer to one device.
/// - A receipt covers exactly the messages it names, by their authenticated ids: a message the
///   domain withheld from the recipient is never counted as delivered or read by a receipt for a
///   later one. What it moves is this user's messages among those (a receipt moves no one
///   else's), each from where it is.
struct MessagingCore: Sendable {
    /// This user.
    let user: String
    /// This device.
    let endpointID: String

    /// A message as the store has it.
    struct KnownMessage: Equatable, Sendable {
        var number: Int64?
        var sender: String
        /// Whether its sender recalled it.
        var recalled = false
    }

    /// What to do, in order.
    enum Action: Equatable, Sendable {
        /// Keep the message (its `ref` is the number this device has for the message it refers to).
        case insert(ChatHistory.Record)
        /// The chat's last activity is now at least `at`.
        case touchChat(at: Date)
        /// An edit: the message's new text.
        case setContent(messageID: String, content: String)
        /// `user`'s reaction `emoji` to the message is added (or removed).
        case react(messageID: String, user: String, emoji: String, added: Bool)
        /// The message's sender recalled it: its content, data and reactions go.
        case recall(messageID: String)
        /// Move these messages of this user by `step` (where it applies).
        case advanceSent(ids: [String], MessageStep)
        /// This user read these received messages (on another of its devices).
        case readReceived(ids: [String])
        /// A history transfer for this device: open it and keep its messages.
        case openHistory(ChatPayload)
        /// A step of this user's message, sent from another of its devices.
        case reportSent(messageID: String, number: Int64)
        /// A delivery receipt is due for this message.
        case acknowledge(CoveredMessage)
        /// Refused, with the reason: nothing else happens (the group's ratchet moved all the same).
        case drop(String)
    }

    /// What an opened payload does: the chat's newest number from now on, and the actions.
    struct Outcome: Equatable, Sendable {
        var lastNumber: Int64
        var actions: [Action]
    }

    /// Decides what `payload`, opened from `entry` and signed by a device of `sender`, does in a
    /// chat whose newest number so far is `lastNumber`. A `late` text is one its sender's
    /// sequence says was missing: it is taken below the newest number.
    func apply(
        _ payload: ChatPayload, from sender: String, entry: MailboxEntry, lastNumber: Int64, late: Bool = false,
        lookup: some MessageLookup
    ) throws -> Outcome {
        let chatID = entry.chatID
        let incoming = sender != user
        func drop(_ reason: String) -> Outcome { Outcome(lastNumber: lastNumber, actions: [.drop(reason)]) }
        switch (entry.kind, payload.kind) {
        case (.message, .text):
            let known = try lookup.message(payload.id, in: chatID)
            if let known {
                guard known.number == entry.messageNumber else {
                    return drop("message \(payload.id) is here already under another number: replayed")
                }
                // Handed over already in a history transfer (sent while this device joined).
                return Outcome(lastNumber: max(lastNumber, entry.messageNumber ?? 0), actions: [])
            }
            // Numbers only grow in the domain's order: one that does not was renumbered (unless
            // it is a text its sender's sequence says was missing, which comes late).
            let lateAndFree = try late && entry.messageNumber.map { try $0 > 0 && !lookup.isTaken($0, in: chatID) } ?? false
            guard let number = entry.messageNumber, number > lastNumber || lateAndFree else {
                return drop(
                    "message \(payload.id) is numbered \(entry.messageNumber.map(String.init) ?? "nothing") after \(lastNumber): renumbered"
                )
            }
            let ref = try payload.ref.flatMap { try lookup.message($0, in: chatID)?.number }
            let received = ChatHistory.Record(
                id: payload.id, number: number, sender: sender, content: payload.content, tag: payload.tag,
                data: payload.data, ref: ref, state: incoming ? .delivered : .sent, timestamp: entry.postedAt,
                attachment: payload.attachment)
            return Outcome(
                lastNumber: max(lastNumber, number),
                actions: [
                    .insert(received), .touchChat(at: entry.postedAt),
                    incoming
                        ? .acknowledge(CoveredMessage(id: payload.id, number: number))
                        : .reportSent(messageID: payload.id, number: number),
                ])
        case (.event, .edit), (.event, .recall):
            // Only the sender edits or recalls, only their own message, and not once recalled.
            guard let ref = payload.ref, let target = try lookup.message(ref, in: chatID), target.sender == sender else {
                return drop("a\(payload.kind == .edit ? "n edit" : " recall") of a message that is not its sender's")
            }
            guard !target.recalled else { return drop("a \(payload.kind) of message \(ref), which was recalled") }
            let action: Action =
                payload.kind == .edit ? .setContent(messageID: ref, content: payload.content) : .recall(messageID: ref)
            return Outcome(lastNumber: lastNumber, actions: [action])
        case (.event, .reaction), (.event, .unreaction):
            // A reaction is its sender's, to a message this device has and that was not recalled.
            guard let ref = payload.ref, let target = try lookup.message(ref, in: chatID), target.number != nil,
                !target.recalled
            else { return drop("a reaction to a message this device does not have, or that was recalled") }
            return Outcome(
                lastNumber: lastNumber,
                actions: [.react(messageID: ref, user: sender, emoji: payload.content, added: payload.kind == .reaction)])
        case (.event, .history):
            // Only this user's own devices hand over history, each to one device.
            guard sender == user else { return drop("a history transfer from another user") }
            guard payload.ref == endpointID else { return Outcome(lastNumber: lastNumber, actions: []) }
            return Outcome(lastNumber: lastNumber, actions: [.openHistory(payload)])
        case (.receipt, .receipt):
            // The named messages this device has, numbered (a receipt for one it lacks moves nothing).
            var known: [(id: String, message: KnownMessage)] = []
            for id in payload.covered {
                if let message = try lookup.message(id, in: chatID), message.number != nil { known.append((id, message)) }
            }
            guard !known.isEmpty else { return drop("a receipt for messages this device does not have") }
            guard incoming else {
                // Read on another of this user's devices: the received messages it names.
                let received = known.filter { $0.message.sender != user }.map(\.id)
                return Outcome(
                    lastNumber: lastNumber,
                    actions: payload.receipt == .read && !received.isEmpty ? [.readReceived(ids: received)] : [])
            }
            // This user's messages it names. One read before its delivery receipt came was
            // delivered too: both steps, in order.
            let mine = known.filter { $0.message.sender == user }.map(\.id)
            guard !mine.isEmpty else { return Outcome(lastNumber: lastNumber, actions: []) }
            return Outcome(
                lastNumber: lastNumber,
                actions: [.advanceSent(ids: mine, .deliver)] + (payload.receipt == .read ? [.advanceSent(ids: mine, .read)] : []))
        default:
            return drop("a \(payload.kind) payload in a \(entry.kind.rawValue) entry")
        }
    }
}

// MARK: Keeping a chat's group right

extension MessagingCore {
    /// Post-compromise security: a device commits an update of its own keys in each chat after
    /// this many messages it sent there since its last commit…
    static let updateAfterMessages = 1000
    /// …or this long after its last commit, whichever comes first.
    static let updateAfterInterval: TimeInterval = 7 * 86400

    /// Whether this device's key update is due in a chat where it sent `sent` messages since its
    /// last commit, made at `updatedAt`.
    static func updateDue(sent: Int, updatedAt: Date, now: Date) -> Bool {
        sent >= updateAfterMessages || now.timeIntervalSince(updatedAt) >= updateAfterInterval
    }

    /// The messages sent since the last update after a commit that `removed` devices, committed
    /// by `committer`: a device of this user removed by another device means this one updates
    /// its own keys at once (whoever removed it may have held its secrets).
    func sentAfterCommit(_ sent: Int, removed: [ChatGroup.Device], by committer: ChatGroup.Device) -> Int {
        let own = ChatGroup.Device(user: user, device: endpointID)
        return removed.contains(where: { $0.user == user }) && committer != own ? Self.updateAfterMessages : sent
    }

    /// What a chat's group holds, as the driver read it, for ``plan(_:)``.
    struct GroupReview: Sendable {
        /// Every device in the group.
        var devices: [ChatGroup.Device]
        /// The chat's admins.
        var admins: Set<String>
        /// The devices whose credential no key this device trusts signed.
        var refused: Set<ChatGroup.Device>
        /// This user's devices, as the domain lists them.
        var mine: Set<String>
        /// Those of them this device trusts (approved on a device the user has: `OwnDevices`).
        var approved: Set<String>
        /// The users the domain said left (noted from its member lists).
        var departed: Set<String>
        /// The users the domain lists as members now; asked only when ``needsMemberList`` says so.
        var listed: Set<String>?
        /// The users whose identity key this device trusts now.
        var trusted: Set<String>
        var sentSinceUpdate: Int
        var updatedAt: Date
        /// The sender of a commit ordered for the group's epoch that every member refused.
        var refusedCommitBy: String? = nil
    }

    /// What a chat's group needs from this device, in one commit.
    struct GroupPlan: Equatable, Sendable {
        /// Devices to remove.
        var remove: Set<ChatGroup.Device> = []
        /// This user's devices to add (a KeyPackage of each to claim).
        var addMine: Set<ChatGroup.Device> = []
        /// Users whose devices of the trusted identity replace those of an identity no longer trusted.
        var replace: [String] = []
        /// This device's own key update is due.
        var updateDue = false
        /// The member whose refused commit this commit replaces (and whose devices it removes).
        var replacingRefusedBy: String?

        /// Whether the group needs no commit.
        var isEmpty: Bool {
            remove.isEmpty && addMine.isEmpty && replace.isEmpty && !updateDue && replacingRefusedBy == nil
        }
    }

    /// Whether ``plan(_:)`` needs the domain's member list first: only an admin's device removes
    /// those who left, and only when some were noted.
    func needsMemberList(_ review: GroupReview) -> Bool {
        review.admins.contains(user) && (!review.departed.isEmpty || review.refusedCommitBy != nil)
    }

    /// What the group needs from this device:
    /// - this user's devices that the domain no longer lists, or of a previous identity, go; those
    ///   it lists, this device trusts and the group lacks are added (a user adds and removes their
    ///   own devices; one not approved is left where it is, and added by no device of the user);
    /// - as an admin: the devices of a user who left go (the domain's list may be older than the
    ///   group, so only users it still does not list), and so do a contact's devices of an identity
    ///   this device no longer trusts, replaced by the devices of the trusted one;
    /// - as an admin, when the members refused a commit a non-admin posted for this epoch: a
    ///   commit that replaces it and removes that member's devices (security review 4);
    /// - and this device's own key update, when due.
    func plan(_ review: GroupReview, now: Date) -> GroupPlan {
        var plan = GroupPlan()
        let isAdmin = review.admins.contains(user)
        plan.remove = Set(
            review.devices.filter {
                $0.user == user && $0.device != endpointID && (!review.mine.contains($0.device) || review.refused.contains($0))
            })
        if isAdmin, let culprit = review.refusedCommitBy, !review.admins.contains(culprit) {
            plan.replacingRefusedBy = culprit
            plan.remove.formUnion(review.devices.filter { $0.user == culprit })
        }
        if isAdmin, !review.departed.isEmpty, let listed = review.listed {
            plan.remove.formUnion(review.devices.filter { review.departed.contains($0.user) && !listed.contains($0.user) })
        }
        if isAdmin {
            for other in Set(review.refused.map(\.user)).sorted() where other != user && review.trusted.contains(other) {
                plan.remove.formUnion(review.refused.filter { $0.user == other })
                plan.replace.append(other)
            }
        }
        let present = Set(review.devices).subtracting(plan.remove)
        plan.addMine = Set(
            review.mine.intersection(review.approved).subtracting(present.filter { $0.user == user }.map(\.device))
                .subtracting([endpointID]).map {
                    ChatGroup.Device(user: user, device: $0)
                })
        plan.updateDue = Self.updateDue(sent: review.sentSinceUpdate, updatedAt: review.updatedAt, now: now)
        return plan
    }

    /// The devices a history transfer goes to after a commit took the group from `before` to
    /// `after`: this user's devices that joined in it (each gets what it could not read).
    func historyRecipients(before: [ChatGroup.Device], after: [ChatGroup.Device]) -> [ChatGroup.Device] {
        Set(after).subtracting(before).filter { $0.user == user && $0.device != endpointID }.sorted()
    }
}
