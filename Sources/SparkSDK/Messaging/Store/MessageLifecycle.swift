/// The life of a message, as explicit transitions: each step names where a message may be when
/// it happens and where it goes, and nothing else moves a message (a `MessagingStore` applies steps
/// only from their sources, in SQL and in memory alike).
///
/// ```
/// this user's:  held ⇄ sending → sent → delivered → read
///                        ↓
///                      failed
/// received:     delivered → read
/// ```
enum MessageStep: Sendable, Equatable {
    /// Nothing holds the chat now: a held message is sealed and goes out.
    case release
    /// The chat holds a device this one does not trust: a message not yet accepted waits, sealed to no one.
    case hold
    /// The domain accepted and numbered it.
    case accept
    /// The domain refused it for good.
    case refuse(reason: String)
    /// A recipient's device has it (a delivery receipt, or a read receipt that covers it).
    case deliver
    /// Read: by a recipient (this user's message) or by this user (a received one).
    case read

    /// The states the step moves a message from.
    var sources: [MessageState] {
        switch self {
        case .release: [.held]
        case .hold: [.sending]
        case .accept: [.sending]
        case .refuse: [.sending]
        case .deliver: [.sent]
        case .read: [.delivered]
        }
    }

    /// Where the step takes a message.
    var target: MessageState {
        switch self {
        case .release: .sending
        case .hold: .held
        case .accept: .sent
        case .refuse(let reason): .failed(reason: reason)
        case .deliver: .delivered
        case .read: .read
        }
    }
}

extension MessageState {
    /// The state after `step`, or nil when the step does not apply to a message in this state
    /// (a receipt for a message already read, a second answer from the domain).
    func after(_ step: MessageStep) -> MessageState? {
        step.sources.contains(where: { $0.storedName == storedName }) ? step.target : nil
    }

    /// The state's name in the store's `state` column (a failure's reason goes in `failure`).
    var storedName: String {
        if case .failed = self { return "failed" }
        return description
    }

    /// A state from its stored name and failure reason (an unknown name is a failure: a store
    /// that says something else was not written by this code).
    init(storedName: String, failure: String?) {
        switch storedName {
        case "sending": self = .sending
        case "held": self = .held
        case "sent": self = .sent
        case "delivered": self = .delivered
        case "read": self = .read
        default: self = .failed(reason: failure ?? "failed")
        }
    }
}
