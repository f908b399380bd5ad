import Foundation
import SparkDomain
import SparkLock

/// What one user may write into the domain per minute or hour (``DomainPolicy``'s
/// `postsPerMinute`, `postedBytesPerMinute`, `commitsPerMinute`, `chatsPerHour`): so that one
/// token cannot fill every member's mailbox. Counted per instance, in fixed windows; past a limit
/// the call is refused with ``DomainError/Code/tooManyAttempts`` and the seconds until the window
/// ends, and changes nothing. Devices keep a refused post in their outbox and send it then.
final class UsageLimits: Sendable {
    /// What is counted.
    enum Kind: Sendable {
        /// A post: a message, an event, a receipt (its bytes are the payload times its recipients).
        case post
        /// A commit.
        case commit
        /// A new chat.
        case chat
        /// An ephemeral post (typing, a live chat event): counted apart from posts, so that typing
        /// takes nothing from what a user may send, at ``ephemeralPerMinute``.
        case ephemeral
        /// A part of an attachment's blob: its bytes count against `postedBytesPerMinute`, apart
        /// from posts.
        case blob

        var window: TimeInterval { self == .chat ? 3600 : 60 }
    }

    private struct Key: Hashable {
        var user: String
        var kind: Kind
    }

    private struct Window {
        var start: TimeInterval
        var count: Int
        var bytes: Int
    }

    private let windows = Locked<[Key: Window]>([:])

    /// The ephemeral posts one user makes in a minute: a typing notice every second or two, and
    /// an app's live events, with room to spare.
    static let ephemeralPerMinute = 120

    /// Counts one `kind` by `user` that writes `bytes` into mailboxes at `now`, or refuses it.
    func charge(_ user: String, _ kind: Kind, bytes: Int = 0, now: Date, policy: DomainPolicy) throws {
        let (count, byteLimit) =
            switch kind {
            case .post: (policy.postsPerMinute, policy.postedBytesPerMinute)
            case .commit: (policy.commitsPerMinute, Int.max)
            case .chat: (policy.chatsPerHour, Int.max)
            case .ephemeral: (Self.ephemeralPerMinute, policy.postedBytesPerMinute)
            case .blob: (Int.max, policy.postedBytesPerMinute)
            }
        let time = now.timeIntervalSince1970
        try windows.withLock { windows in
            if windows.count > 100_000 { windows = windows.filter { time - $0.value.start < $0.key.kind.window } }
            let key = Key(user: user, kind: kind)
            var window =
                windows[key].flatMap { time - $0.start < kind.window ? $0 : nil } ?? Window(start: time, count: 0, bytes: 0)
            guard window.count < count, window.bytes <= byteLimit - bytes else {
                let wait = Int((window.start + kind.window - time).rounded(.up))
                throw DomainError(
                    .tooManyAttempts, "\(user) wrote too much to the domain for now; try again in \(wait) s",
                    retryAfter: max(1, wait))
            }
            window.count += 1
            window.bytes += bytes
            windows[key] = window
        }
    }
}
