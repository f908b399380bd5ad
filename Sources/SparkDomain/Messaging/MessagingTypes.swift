public import Foundation

/// A chat as the domain knows it: its id and members. Everything said in it is ciphertext the
/// domain cannot read.
public struct ChatInfo: Sendable, Codable, Equatable {
    /// The chat's id (chosen by its creator, random).
    public var chatID: String
    /// The current members, with whether each is an admin.
    public var members: [ChatMember]
    /// The MLS epoch the domain has ordered the chat's handshake messages up to: the next
    /// commit is accepted only for this epoch (0 for a chat with no commit yet).
    public var epoch: Int64 = 0

    /// A chat with its members, at `epoch`.
    public init(chatID: String, members: [ChatMember], epoch: Int64 = 0) {
        self.chatID = chatID
        self.members = members
        self.epoch = epoch
    }
}

/// One member of a chat.
public struct ChatMember: Sendable, Codable, Equatable, Hashable {
    /// The user id.
    public var userID: String
    /// Whether the member may invite and remove others.
    public var isAdmin: Bool

    /// A member.
    public init(userID: String, isAdmin: Bool) {
        self.userID = userID
        self.isAdmin = isAdmin
    }
}

/// What kind of thing a mailbox entry carries.
public enum MailboxKind: String, Sendable, Codable {
    /// A chat was created or its membership changed; `members` lists the members now.
    case membership
    /// The user's devices changed (one published its first KeyPackages, or was removed): the
    /// domain's notice, in no chat, to that user's own endpoints, so that one of them adds the
    /// new device to the user's chats or removes the old one at once.
    case devices
    /// An encrypted message, numbered by the domain within its chat.
    case message
    /// A delivery or read receipt.
    case receipt
    /// An encrypted chat event (an edit, a history transfer to one of the sender's devices).
    case event
    /// The domain's notice that `sender`'s identity reset was requested or cancelled (an
    /// ``IdentityResetNotice``, in no chat), to that user's endpoints and their contacts.
    case identityReset
    /// An MLS handshake message (a commit) the domain ordered: it was accepted for the epoch in
    /// the entry's ``MailboxEntry/epoch``, and is the only one for it.
    case commit
    /// An MLS Welcome for devices of the users a commit added (each device looks for its own
    /// KeyPackage in it).
    case welcome
    /// An encrypted ephemeral event (a typing notice, an app's live chat event): delivered to
    /// the members' endpoints that read their mailbox within 10 seconds of its
    /// posting, then deleted; never numbered, never kept.
    case ephemeral
}

/// A KeyPackage the domain handed out for one device of a user (MLS's Delivery Service keeps
/// each device's KeyPackages: one-time ones, each handed out once, and a last-resort one that is
/// handed out again when none is left). The bytes are opaque to the domain.
public struct ClaimedKeyPackage: Sendable, Codable, Equatable {
    /// The device (endpoint) it belongs to.
    public var endpointID: String
    /// The TLS-encoded MLS KeyPackage (an `MLSMessage`).
    public var keyPackage: Data
    /// Whether it is the device's last-resort KeyPackage (which others may get as well).
    public var lastResort: Bool

    /// A claimed KeyPackage.
    public init(endpointID: String, keyPackage: Data, lastResort: Bool) {
        self.endpointID = endpointID
        self.keyPackage = keyPackage
        self.lastResort = lastResort
    }
}

/// What the domain tells a user's devices and contacts about a reset of that user's identity.
public struct IdentityResetNotice: Sendable, Codable, Equatable {
    /// Whether the reset now waits, or was cancelled.
    public enum State: String, Sendable, Codable {
        /// The reset was asked for and waits out the delay.
        case pending
        /// The user cancelled it from one of their devices.
        case cancelled
        /// The reset happened and a new identity is published: contacts look it up (and hold
        /// sending until they accept it). A hint only: a device trusts no key because of it.
        case replaced
    }

    /// Pending or cancelled.
    public var state: State
    /// The reset, when pending.
    public var pending: PendingIdentityReset?

    /// A notice.
    public init(state: State, pending: PendingIdentityReset?) {
        self.state = state
        self.pending = pending
    }
}

/// A post that goes out with a chat's creation or a membership change, in the same
/// transaction: an ``MailboxKind/event`` for every member. (The SDK's chats carry everything in
/// their MLS group and post none; the wire keeps the field for clients of their own.)
public struct ChatPost: Sendable, Codable, Equatable {
    /// ``MailboxKind/event``.
    public var kind: MailboxKind
    /// The sealed payload, opaque to the domain.
    public var payload: Data
    /// Not used: a post with a membership change goes to every member (must be nil).
    public var recipient: String?

    /// A post.
    public init(kind: MailboxKind, payload: Data, recipient: String? = nil) {
        self.kind = kind
        self.payload = payload
        self.recipient = recipient
    }
}

/// One entry in a user's mailbox: what was posted to a chat they are in (or to them).
public struct MailboxEntry: Sendable, Codable, Equatable {
    /// The position in the user's mailbox (1, 2, 3, … without gaps).
    public var sequence: Int64
    /// The chat.
    public var chatID: String
    /// Who posted it.
    public var sender: String
    /// What it is.
    public var kind: MailboxKind
    /// For messages: the chat-wide number the domain assigned (1, 2, 3, … without gaps).
    public var messageNumber: Int64?
    /// The opaque payload (ciphertext for messages, keys and events).
    public var payload: Data
    /// For membership entries: the members now.
    public var members: [ChatMember]?
    /// When the domain accepted it.
    public var postedAt: Date
    /// For commits and Welcomes: the epoch the commit was accepted for.
    public var epoch: Int64?
    /// The wire form this entry shares with the other mailboxes' copies of the same post (set
    /// by the domain as it routes a post; see ``SharedEntryEncoding``). Not part of the entry's
    /// value: it is neither encoded nor compared.
    package var shared: SharedEntryEncoding?

    private enum CodingKeys: String, CodingKey {
        case sequence, chatID, sender, kind, messageNumber, payload, members, postedAt, epoch
    }

    /// Whether two entries are the same (what they share with other copies aside).
    public static func == (lhs: MailboxEntry, rhs: MailboxEntry) -> Bool {
        lhs.sequence == rhs.sequence && lhs.chatID == rhs.chatID && lhs.sender == rhs.sender && lhs.kind == rhs.kind
            && lhs.messageNumber == rhs.messageNumber && lhs.payload == rhs.payload && lhs.members == rhs.members
            && lhs.postedAt == rhs.postedAt && lhs.epoch == rhs.epoch
    }

    /// An entry (the domain makes them; tests and hostile domains forge them).
    public init(
        sequence: Int64, chatID: String, sender: String, kind: MailboxKind, messageNumber: Int64?, payload: Data,
        members: [ChatMember]?, postedAt: Date, epoch: Int64? = nil
    ) {
        self.sequence = sequence
        self.chatID = chatID
        self.sender = sender
        self.kind = kind
        self.messageNumber = messageNumber
        self.payload = payload
        self.members = members
        self.postedAt = postedAt
        self.epoch = epoch
    }
}

/// What the domain answers to a post.
public struct PostReceipt: Sendable, Codable, Equatable {
    /// For messages: the chat-wide number.
    public var messageNumber: Int64?
    /// When the domain accepted it.
    public var postedAt: Date

    /// A receipt for a post accepted at `postedAt`.
    public init(messageNumber: Int64?, postedAt: Date) {
        self.messageNumber = messageNumber
        self.postedAt = postedAt
    }
}

/// A message of a batch (``DomainService/postMessages(token:endpointID:chatID:messages:)``):
/// its ciphertext and its sender's id for it.
public struct MessagePost: Sendable, Codable, Equatable {
    /// The sender's id for it (1 to 64 bytes), which makes a retry idempotent.
    public var clientID: String
    /// The ciphertext.
    public var payload: Data

    /// A message to post under `clientID`.
    public init(clientID: String, payload: Data) {
        self.clientID = clientID
        self.payload = payload
    }
}

/// What the domain did with a batch of messages: the receipts of those it accepted (the first
/// ones, in order) and why the one after them was refused, if one was.
public struct PostBatchReceipt: Sendable, Codable {
    /// The receipts of the messages accepted, one for each of the first `receipts.count`.
    public var receipts: [PostReceipt]
    /// Why the message after them was refused; nil when every message was accepted. The
    /// messages after that one were not tried.
    public var refusal: DomainError?

    /// A batch's answer.
    public init(receipts: [PostReceipt], refusal: DomainError?) {
        self.receipts = receipts
        self.refusal = refusal
    }
}

/// A user's standing with the domain's moderation.
public struct UserStatus: Sendable, Codable, Equatable {
    /// Whether the user may post.
    public enum State: Sendable, Codable, Equatable {
        /// In good standing.
        case valid
        /// Timed out until the given time.
        case timeout(until: Date, reason: String)
        /// Banned.
        case banned(reason: String)
    }

    /// The state now.
    public var state: State
    /// Infractions not yet dismissed, oldest first.
    public var infractions: [Infraction]

    /// A standing and its infractions.
    public init(state: State, infractions: [Infraction]) {
        self.state = state
        self.infractions = infractions
    }
}

/// A moderation notice to a user.
public struct Infraction: Sendable, Codable, Equatable, Identifiable {
    /// Its id.
    public var id: Int64
    /// Why it was issued.
    public var reason: String
    /// When.
    public var issuedAt: Date

    /// An infraction.
    public init(id: Int64, reason: String, issuedAt: Date) {
        self.id = id
        self.reason = reason
        self.issuedAt = issuedAt
    }
}

/// A message a user reveals to the domain's operator in a report: its plaintext, as the reporter's
/// device has it. The domain cannot check it (it never had the key): a report is the reporter's
/// word.
public struct ReportedMessage: Sendable, Codable, Equatable {
    /// The message's id.
    public var id: String
    /// Who sent it.
    public var sender: String
    /// Its number in the chat, when it had one.
    public var number: Int64?
    /// Its text.
    public var content: String
    /// When it was sent.
    public var sentAt: Date

    /// A revealed message.
    public init(id: String, sender: String, number: Int64?, content: String, sentAt: Date) {
        self.id = id
        self.sender = sender
        self.number = number
        self.content = content
        self.sentAt = sentAt
    }
}

/// A report a user made to the domain's operator about another member of a chat.
public struct Report: Sendable, Codable, Equatable, Identifiable {
    /// Its id.
    public var id: Int64
    /// Who reported.
    public var reporter: String
    /// Who is reported.
    public var reported: String
    /// The chat.
    public var chatID: String
    /// Why, in the reporter's words.
    public var reason: String
    /// The messages the reporter chose to reveal.
    public var messages: [ReportedMessage]
    /// When.
    public var createdAt: Date

    /// A report.
    public init(
        id: Int64, reporter: String, reported: String, chatID: String, reason: String, messages: [ReportedMessage],
        createdAt: Date
    ) {
        self.id = id
        self.reporter = reporter
        self.reported = reported
        self.chatID = chatID
        self.reason = reason
        self.messages = messages
        self.createdAt = createdAt
    }
}

/// An attachment's blob as the domain keeps it: opaque bytes (a file encrypted on the sender's
/// device) uploaded in parts to a chat, readable by the chat's members.
public struct BlobStatus: Sendable, Codable, Equatable {
    /// The size of a blob's parts on this version's domains: the most one read returns.
    public static let standardPartSize = 1 << 20

    /// The blob's id (chosen by its uploader, random: 32 hexadecimal digits).
    public var blobID: String
    /// The chat whose members may read it.
    public var chatID: String
    /// Its size in bytes.
    public var size: Int64
    /// The bytes uploaded so far, from the start: the next part goes at this offset. The blob
    /// can be read once all of it is here.
    public var received: Int64
    /// The bytes of every part but the last (the last holds what remains); a read returns at
    /// most this many.
    public var partSize: Int

    /// A blob's status.
    public init(blobID: String, chatID: String, size: Int64, received: Int64, partSize: Int) {
        self.blobID = blobID
        self.chatID = chatID
        self.size = size
        self.received = received
        self.partSize = partSize
    }

    /// Whether every byte is here.
    public var isComplete: Bool { received == size }
}
