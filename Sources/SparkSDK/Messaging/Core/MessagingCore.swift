import Foundation
import SparkDomain

/// What the messaging core asks of the store to decide: the messages a payload names. Read-only;
/// the core changes nothing itself (libsignal's protocol functions take their stores the same way).
protocol MessageLookup {
    /// The chat's message `id` as this device has it, or nil.
    func message(_ id: String, in chatID: String) throws -> MessagingCore.KnownMessage?
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
/// - Only a message's sender edits it.
/// - Only this user's own devices hand over history, each transfer to one device.
/// - A receipt names the newest message it covers by its authenticated id: what it moves is
///   decided by this device's number for that message, not by what the receipt or the domain says.
struct MessagingCore: Sendable {
    /// This user.
    let user: String
    /// This device.
    let endpointID: String

    /// A message as the store has it.
    struct KnownMessage: Equatable, Sendable {
        var number: Int64?
        var sender: String
    }

    /// What to do, in order.
    enum Action: Equatable, Sendable {
        /// Keep the message (its `ref` is the number this device has for the message it refers to).
        case insert(ChatHistory.Record)
        /// The chat's last activity is now at least `at`.
        case touchChat(at: Date)
        /// An edit: the message's new text.
        case setContent(messageID: String, content: String)
        /// Move this user's messages numbered up to `upTo` by `step` (where it applies).
        case advanceSent(upTo: Int64, MessageStep)
        /// This user read the received messages up to `upTo` (on another of its devices).
        case readReceived(upTo: Int64)
        /// A history transfer for this device: open it and keep its messages.
        case openHistory(ChatPayload)
        /// A step of this user's message, sent from another of its devices.
        case reportSent(messageID: String, number: Int64)
        /// A delivery receipt is due for the chat up to `number`.
        case acknowledge(number: Int64)
        /// Refused, with the reason: nothing else happens (the group's ratchet moved all the same).
        case drop(String)
    }

    /// What an opened payload does: the chat's newest number from now on, and the actions.
    struct Outcome: Equatable, Sendable {
        var lastNumber: Int64
        var actions: [Action]
    }

    /// Decides what `payload`, opened from `entry` and signed by a device of `sender`, does in a
    /// chat whose newest number so far is `lastNumber`.
    func apply(
        _ payload: ChatPayload, from sender: String, entry: MailboxEntry, lastNumber: Int64, lookup: some MessageLookup
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
            // Numbers only grow in the domain's order: one that does not was renumbered.
            guard let number = entry.messageNumber, number > lastNumber else {
                return drop(
                    "message \(payload.id) is numbered \(entry.messageNumber.map(String.init) ?? "nothing") after \(lastNumber): renumbered"
                )
            }
            let ref = try payload.ref.flatMap { try lookup.message($0, in: chatID)?.number }
            let received = ChatHistory.Record(
                id: payload.id, number: number, sender: sender, content: payload.content, tag: payload.tag,
                data: payload.data, ref: ref, state: incoming ? .delivered : .sent, timestamp: entry.postedAt)
            return Outcome(
                lastNumber: number,
                actions: [
                    .insert(received), .touchChat(at: entry.postedAt),
                    incoming ? .acknowledge(number: number) : .reportSent(messageID: payload.id, number: number),
                ])
        case (.event, .edit):
            // Only the sender edits, and only their own message.
            guard let ref = payload.ref, try lookup.message(ref, in: chatID)?.sender == sender else {
                return drop("an edit of a message that is not its sender's")
            }
            return Outcome(lastNumber: lastNumber, actions: [.setContent(messageID: ref, content: payload.content)])
        case (.event, .history):
            // Only this user's own devices hand over history, each to one device.
            guard sender == user else { return drop("a history transfer from another user") }
            guard payload.ref == endpointID else { return Outcome(lastNumber: lastNumber, actions: []) }
            return Outcome(lastNumber: lastNumber, actions: [.openHistory(payload)])
        case (.receipt, .receipt):
            guard let ref = payload.ref, let number = try lookup.message(ref, in: chatID)?.number else {
                return drop("a receipt for a message this device does not have")
            }
            guard incoming else {
                // Read on another of this user's devices.
                return Outcome(lastNumber: lastNumber, actions: payload.receipt == .read ? [.readReceived(upTo: number)] : [])
            }
            // A receipt covers every message up to its number. A message read before its
            // delivery receipt came was delivered too: both steps, in order.
            return Outcome(
                lastNumber: lastNumber,
                actions: [.advanceSent(upTo: number, .deliver)]
                    + (payload.receipt == .read ? [.advanceSent(upTo: number, .read)] : []))
        default:
            return drop("a \(payload.kind) payload in a \(entry.kind.rawValue) entry")
        }
    }
}
