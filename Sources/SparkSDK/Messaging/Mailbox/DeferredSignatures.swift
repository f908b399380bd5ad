import Dispatch
import SparkLock
import SparkMLS

/// The signatures on a page's messages, receipts and events, verified on other threads while the
/// page's transaction stores what they say (see `MailboxSync.processRun`): each check is kept
/// and answered true at once, handed on eight at a time to a concurrent queue (one wake-up for
/// several signatures; the machine's other cores verify them), and ``allValid()`` waits for them
/// all.
///
/// The page's transaction commits only once ``allValid()`` is true. When one signature fails,
/// the transaction rolls back (nothing of the page, nor its cursor, is kept) and the page is
/// applied again with every signature checked in line, so that the forged entry is dropped
/// alone, exactly as it would have been: deferring changes when a signature is checked, never
/// whether a message whose signature fails is kept.
final class DeferredSignatures: MLSSignatureChecker {
    private let queue = DispatchQueue(label: "spark.signatures", attributes: .concurrent)
    private let pending = DispatchGroup()
    private let failed = Locked(false)
    /// Checks not yet handed on (see ``handOff``).
    private let gathered = Locked<[MLSSignatureCheck]>([])
    /// How many checks go to the queue together.
    static let handOff = 8

    func check(_ check: MLSSignatureCheck) -> Bool {
        let ready = gathered.withLock { gathered -> [MLSSignatureCheck] in
            gathered.append(check)
            guard gathered.count >= Self.handOff else { return [] }
            defer { gathered = [] }
            return gathered
        }
        if !ready.isEmpty { verify(ready) }
        return true
    }

    /// Waits for every check kept so far; true when each one held.
    func allValid() -> Bool {
        verify(
            gathered.withLock { gathered in
                defer { gathered = [] }
                return gathered
            })
        pending.wait()
        return !failed.withLock { $0 }
    }

    private func verify(_ checks: [MLSSignatureCheck]) {
        guard !checks.isEmpty else { return }
        queue.async(group: pending) {
            if !checks.allSatisfy({ $0.verify() }) { self.failed.withLock { $0 = true } }
        }
    }

    /// What a page's transaction throws to roll back when a deferred signature failed.
    struct Failed: MessagingStorage.Rollback {}
}
