public import Foundation

/// Where a message is in its life (Spark's message states).
public enum MessageState: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Stored here, not yet accepted by the domain.
    case sending
    /// Held here, sealed to no one: a participant's identity key changed (or is a first contact
    /// the policy holds). It goes out once the user accepts the key
    /// (``BBMAccess/acceptIdentityChange(of:)``) or confirms its safety number.
    case held
    /// Accepted by the domain and numbered.
    case sent
    /// Decrypted and stored by a recipient's endpoint.
    case delivered
    /// Read by a recipient.
    case read
    /// Refused (by the domain or here); `reason` says why.
    case failed(reason: String)

    /// `sending`, `sent`, `delivered`, `read` or `failed: <reason>`.
    public var description: String {
        switch self {
        case .sending: "sending"
        case .held: "held"
        case .sent: "sent"
        case .delivered: "delivered"
        case .read: "read"
        case .failed(let reason): "failed: \(reason)"
        }
    }

    /// Whether the domain accepted the message: `sent`, `delivered` or `read`. A message just
    /// sent may already be `delivered` by the time the app looks, when a recipient was quick.
    public var isAccepted: Bool {
        switch self {
        case .sent, .delivered, .read: true
        case .sending, .held, .failed: false
        }
    }

    /// Where the state is in a message's life: held and sending 0, sent 1, delivered 2, read 3,
    /// failed 4 (final). A message's state only ever moves to a higher rank (held to sending is
    /// the one move within a rank).
    public var rank: Int {
        switch self {
        case .sending, .held: 0
        case .sent: 1
        case .delivered: 2
        case .read: 3
        case .failed: 4
        }
    }
}

/// A message in a chat.
public struct ChatMessage: Sendable, Equatable, Identifiable {
    /// The sender's local id for it (stable across endpoints).
    public var id: String
    /// The chat.
    public var chatID: String
    /// The chat-wide number the domain gave it (nil while sending or failed).
    public var number: Int64?
    /// The sender's user id.
    public var sender: String
    /// Whether another user sent it.
    public var isIncoming: Bool
    /// The text.
    public var content: String
    /// An app-defined tag (Spark's message tag, for example "Text").
    public var tag: String
    /// Optional JSON the app attaches.
    public var data: String?
    /// The number of a message this one refers to (a reply or an edit).
    public var ref: Int64?
    /// Where it is in its life.
    public var state: MessageState
    /// When it was sent (the domain's time once sent).
    public var timestamp: Date
    /// The reactions to it, each emoji with the users who chose it: the most chosen first (then
    /// by emoji), so that every device shows the same order.
    public var reactions: [Reaction] = []
    /// Whether its sender recalled it (deleted it for everyone): its content, data and
    /// reactions are gone from every device of every member.
    public var isRecalled = false
    /// When it disappears from this device, in a chat with a disappearing-messages timer
    /// (``Chat/disappearingTimer``): its timer counted from when it was sent (this user's) or
    /// read here (received); nil while a received message is unread, or without a timer.
    public var expiresAt: Date?
    /// The file sent with it, if any (gone once it is recalled or expired).
    public var attachment: Attachment?
}

/// A message to send with ``BBMAccess/queueMessages(_:to:)``: what ``BBMAccess/queueMessage(_:tag:data:ref:to:)``
/// takes for one.
public struct NewMessage: Sendable, Equatable {
    /// The text; with `data`, at most 70 KB.
    public var content: String
    /// The app's tag for it ("Text" unless the app says otherwise).
    public var tag: String
    /// Data the app attaches (JSON, say); with `content`, at most 70 KB.
    public var data: String?
    /// The number of the chat's message it refers to (a quote, a reply).
    public var ref: Int64?

    /// A message of `content`, with an optional tag, data and the number of a message it refers to.
    public init(_ content: String, tag: String = "Text", data: String? = nil, ref: Int64? = nil) {
        self.content = content
        self.tag = tag
        self.data = data
        self.ref = ref
    }
}

/// One emoji's reactions to a message: the users who added it, one each.
public struct Reaction: Sendable, Equatable, Codable {
    /// The emoji (one grapheme cluster).
    public var emoji: String
    /// The users who reacted with it, sorted.
    public var userIDs: [String]
    /// How many users reacted with it.
    public var count: Int { userIDs.count }

    /// A reaction.
    public init(emoji: String, userIDs: [String]) {
        self.emoji = emoji
        self.userIDs = userIDs
    }

    /// The most emoji one user adds to one message, and the most users one message's reactions
    /// name in all: past them, a reaction is not kept.
    static let maximumPerUser = 20
    static let maximumPerMessage = 4096

    /// `reactions` with `user`'s `emoji` added (or removed), or nil when that changes nothing:
    /// the user has it already (or not), or an addition passes a limit.
    static func applying(_ reactions: [Reaction], user: String, emoji: String, added: Bool) -> [Reaction]? {
        var reactions = reactions
        let index = reactions.firstIndex { $0.emoji == emoji }
        let has = index.map { reactions[$0].userIDs.contains(user) } ?? false
        guard added != has else { return nil }
        if added {
            guard reactions.filter({ $0.userIDs.contains(user) }).count < maximumPerUser,
                reactions.reduce(0, { $0 + $1.count }) < maximumPerMessage
            else { return nil }
            if let index {
                reactions[index].userIDs.append(user)
                reactions[index].userIDs.sort()
            } else {
                reactions.append(Reaction(emoji: emoji, userIDs: [user]))
            }
        } else if let index {
            reactions[index].userIDs.removeAll { $0 == user }
            if reactions[index].userIDs.isEmpty { reactions.remove(at: index) }
        }
        return reactions.sorted { ($1.count, $0.emoji) < ($0.count, $1.emoji) }
    }
}

/// A participant of a chat.
public struct Participant: Sendable, Equatable, Identifiable {
    /// The user id.
    public var userID: String
    /// Whether they may invite and remove others.
    public var isAdmin: Bool
    /// How far their identity key is trusted (``ContactVerification/verified`` once the two of
    /// you compared safety numbers; ``ContactVerification/changed`` holds sending).
    public var verification: ContactVerification
    /// Whether their identity key changed since this endpoint trusted it (verify with them).
    public var keyChanged: Bool { verification == .changed }
    /// The user id.
    public var id: String { userID }
}

/// A chat as this endpoint knows it.
public struct Chat: Sendable, Equatable, Identifiable {
    /// The chat id.
    public var chatID: String
    /// The subject.
    public var subject: String
    /// The participants (this user included while a member).
    public var participants: [Participant]
    /// Incoming messages not yet read (a recalled one does not count).
    public var unreadCount: Int
    /// Messages known to be missing: a participant's device sent them (its later messages say
    /// so, in their authenticated sequence) and they have not arrived, withheld by the domain
    /// or late. Goes back down as they arrive (``MessagingEvent/messagesMissing(chatID:userID:count:)``).
    public var missingMessageCount: Int = 0
    /// When something last happened in it.
    public var lastActivity: Date
    /// Whether this user is still a member.
    public var isActive: Bool
    /// The disappearing-messages timer (``BBMAccess/setDisappearingTimer(_:in:)``): each message
    /// sent from now on disappears from every device this long after it was sent (on the
    /// sender's devices) or read (on each recipient's); nil when off.
    public var disappearingTimer: Duration?
    /// Whether the chat is post-quantum: its MLS group runs the X-Wing suite
    /// (`MLS_128_MLKEM768X25519_AES128GCM_SHA256_Ed25519`), so a recording of it cannot be
    /// opened later by a quantum computer. False for a chat with a device that does not run
    /// post-quantum chats (an earlier release, or ``ConfigSettings/postQuantumChats`` off).
    /// Signatures are Ed25519 either way (docs/SECURITY.md, "Post-quantum chats").
    public var postQuantum: Bool = false
    /// The chat id.
    public var id: String { chatID }
    /// Whether any participant's identity key changed.
    public var keyChanged: Bool { participants.contains(where: \.keyChanged) }
    /// The participants whose key is not trusted: sending into the chat is held until they are.
    public var unconfirmedParticipants: [String] {
        participants.filter { !$0.verification.isTrusted }.map(\.userID)
    }
    /// Whether it is a one-to-one chat.
    public var isOneToOne: Bool { participants.count == 2 }
}
