import Foundation
import SparkLock

/// Leaf signatures this process has already verified, by the SHA-256 of key, content and
/// signature. Verifying Ed25519 is a pure function of those three, so a hit is exactly as good as
/// verifying again; an entry is only written after a verification succeeded. A device sees the
/// same leaves again and again (every Welcome and GroupInfo carries the whole tree, and the same
/// contacts are in many groups), and a 1,000-member tree costs 1,000 verifications the first time.
/// Bounded: when full, it starts over. Behind `SparkLock` (a pthread mutex, which
/// ThreadSanitizer sees; it does not see `Synchronization.Mutex`'s futex).
enum VerifiedLeaves {
    private static let entries = Locked<Set<Data>>([])
    static let limit = 1 << 16

    static func contains(_ digest: Data) -> Bool { entries.withLock { $0.contains(digest) } }

    static func insert(_ digest: Data) {
        entries.withLock { set in
            if set.count >= limit { set.removeAll(keepingCapacity: true) }
            set.insert(digest)
        }
    }

    static func removeAll() { entries.withLock { $0.removeAll() } }
}

extension MLSGroup {
    /// Forgets every leaf signature this process verified, so the next join verifies all of them.
    /// For measurements of a cold join; correctness never depends on it.
    public static func forgetVerifiedLeaves() { VerifiedLeaves.removeAll() }
}
