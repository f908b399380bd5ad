public import Foundation
import SparkLock

/// Something the app should know that is not a chat or message change.
public enum MessagingEvent: Sendable, Equatable {
    /// A contact's identity key changed (a reset, or an attack): shown on the contact and their
    /// chats until the user accepts it.
    case identityChanged(userID: String)
    /// The domain's transparency log did not prove the key it gives for a contact (a key outside
    /// the log, a forked or rewritten log): the contact is held as changed, with the reason.
    case transparencyFailure(userID: String, reason: String)
    /// The monitoring of this user's own identity found what none of their devices published
    /// (or the log's proof of it failed): the reason. ``BBMAccess/transparencyAlarm()`` keeps it.
    case transparencyAlarm(reason: String)
    /// Something arrived that failed its checks (forged, altered, replayed, reordered or for
    /// another chat) and was dropped; nothing was marked.
    case dropped(chatID: String, reason: String)
    /// The domain says a reset of `userID`'s identity was requested and takes effect at
    /// `effectiveAt` unless cancelled: this user's own (an app shows it, and offers
    /// ``BBMKeyManager/cancelReset(caller:)`` if the user did not ask), or a contact's (whose
    /// new keys, if they come, are not to be trusted without checking).
    case identityResetPending(userID: String, effectiveAt: Date)
    /// The pending reset of `userID`'s identity was cancelled.
    case identityResetCancelled(userID: String)
    /// This device is in the chat without its messages from before it joined: another user
    /// added it (an invitation, or a device of a new identity), or the history a device of this
    /// user sent could not be opened. It shows what follows.
    case historyUnavailable(chatID: String)
    /// A device of this user that this device does not trust registered after it, and set up
    /// (its credential is signed by the user's identity key): it joins no chat and gets no
    /// history until the user approves it here (``BBMAccess/approveDevice(_:code:)``) or on
    /// another device, after both screens show `code`. A device the user did not set up is an
    /// attacker holding the identity key: remove it (``BBMEnterpriseService/deregisterEndpoint(_:)``).
    case deviceAwaitingApproval(endpointID: String, code: String)
    /// `count` messages that `userID`'s devices sent in the chat have not arrived: a later
    /// message's authenticated sequence says they were sent, so the domain withholds them or
    /// they are late. Raised whenever the count changes, with 0 once they all arrived (each
    /// then shows in its place); ``Chat/missingMessageCount`` holds the chat's total.
    case messagesMissing(chatID: String, userID: String, count: Int)
    /// `userID` is typing in the chat (or stopped). A typing user's device repeats the notice
    /// every few seconds while they type: show them as typing until a stop comes or
    /// ``BBMAccess/typingTimeout`` passes without a notice. Only devices online get it.
    case typing(chatID: String, userID: String, isTyping: Bool)
    /// An app-defined live event in the chat (Spark's `chatEventSend`, as its whiteboard and
    /// location-sharing samples used), from ``BBMAccess/sendChatEvent(_:data:to:)``: delivered to
    /// the members' devices that are online, never stored. A device of `userID` other than this
    /// one sent it.
    case chatEvent(chatID: String, userID: String, tag: String, data: String?)
}

/// A step in the life of a message this user sent, as it happens: accepted and numbered by the
/// domain, delivered to a recipient's endpoint, read, or refused. Every step is reported once, in
/// order, even when the next follows at once (a read receipt right after the delivery receipt),
/// which the conflated ``BBMAccess/messages(in:)`` flow may show only as its last state.
public struct MessageEvent: Sendable, Equatable, CustomStringConvertible {
    /// The message's id (``ChatMessage/id``).
    public var messageID: String
    /// Its chat.
    public var chatID: String
    /// The chat-wide number the domain gave it; nil when it was refused before getting one.
    public var number: Int64?
    /// The state it reached: ``MessageState/sent``, ``MessageState/delivered``,
    /// ``MessageState/read`` or ``MessageState/failed(reason:)``.
    public var state: MessageState

    /// An event.
    public init(messageID: String, chatID: String, number: Int64?, state: MessageState) {
        self.messageID = messageID
        self.chatID = chatID
        self.number = number
        self.state = state
    }

    /// `#<number> <state>`.
    public var description: String { "#\(number.map(String.init) ?? "-") \(state)" }
}

/// Messages of a chat that changed after they arrived (``BBMAccess/messageChanges``).
public struct MessageChange: Sendable, Equatable {
    /// The chat.
    public var chatID: String
    /// The messages' ids, or nil when any of the chat's messages may have changed.
    public var messageIDs: Set<String>?

    /// A change.
    public init(chatID: String, messageIDs: Set<String>?) {
        self.chatID = chatID
        self.messageIDs = messageIDs
    }
}

/// What changed in a chat's messages, for its flow: nothing, the messages of these ids, or
/// anything (the window is read again).
enum MessageChanges: Sendable, Equatable {
    case none
    case some(Set<String>)
    case all

    mutating func formUnion(_ other: MessageChanges) {
        switch (self, other) {
        case (.all, _), (_, .none): break
        case (_, .all), (.none, _): self = other
        case (.some(let mine), .some(let theirs)): self = .some(mine.union(theirs))
        }
    }
}

/// The open `events` streams of one messenger: each consumer gets its own stream (an
/// `AsyncStream` has one consumer), and every event goes to all of them.
final class EventSinks<Event: Sendable>: Sendable {
    private struct State {
        var open: [Int: AsyncStream<Event>.Continuation] = [:]
        var next = 0
        var finished = false
        /// Events from before the first stream was opened: the catch-up the messenger does as
        /// soon as setup succeeds, which would otherwise happen before the app could listen.
        var early: [Event] = []
        var subscribed = false
    }

    private let sinks = Locked(State())

    /// A new stream of the events from now on (the first stream also gets the events from
    /// before it, up to 1,000). It keeps the newest 1,000 a slow consumer has not taken yet.
    func stream() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(1000))
        let id = sinks.withLock { state -> Int? in
            guard !state.finished else { return nil }
            defer { state.next += 1 }
            state.open[state.next] = continuation
            if !state.subscribed {
                state.subscribed = true
                for event in state.early { continuation.yield(event) }
                state.early = []
            }
            return state.next
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in self?.sinks.withLock { _ = $0.open.removeValue(forKey: id) } }
        return stream
    }

    func yield(_ event: Event) {
        let open = sinks.withLock { state -> [AsyncStream<Event>.Continuation] in
            if !state.subscribed, state.early.count < 1000 { state.early.append(event) }
            return Array(state.open.values)
        }
        for continuation in open { continuation.yield(event) }
    }

    func finish() {
        let open = sinks.withLock { state -> [AsyncStream<Event>.Continuation] in
            state.finished = true
            defer { state.open = [:] }
            return Array(state.open.values)
        }
        for continuation in open { continuation.finish() }
    }
}
