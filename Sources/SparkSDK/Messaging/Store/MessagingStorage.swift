import Dispatch
import Foundation
import SparkLock
import SparkStore

/// The messaging store as the messenger reaches it: transactions run on a thread of the
/// storage's own and are awaited, never on Swift's cooperative pool (two threads on a small
/// machine: a transaction waiting for the file lock there would stall every task of the app).
///
/// ```swift
/// let cursor = try await storage.read { store in try store.mailboxCursor() }
/// try await storage.write { store in try store.setMailboxCursor(cursor + 1) }
/// ```
///
/// A `write` body runs in one transaction: it commits when the body returns and rolls back when
/// it throws, so a step is applied whole or not at all (a page of mailbox entries with its
/// cursor, a message with the group's ratchet). Bodies run one at a time, in the order they were
/// called, and must not call the storage again.
///
/// Two stores sit behind it, chosen when the messenger is made:
/// - ``sqlite(_:sealer:)``: the endpoint store's tables, every secret value sealed;
/// - ``memory(_:)``: plain values in memory, for tests and for apps that keep nothing on disk
///   (the ``MemoryMessagingStore`` may outlive one storage, as a file outlives a process).
///
/// ``close()`` ends it: no write runs after it returns (a messenger stopping must not overwrite
/// what the next one on the same store records).
final class MessagingStorage: Sendable {
    private enum Backend: Sendable {
        case sqlite(DatabaseQueue, StoreSealer)
        case memory(MemoryMessagingStore)
    }

    /// An error a body throws to roll its transaction back on purpose: ``write(_:)`` throws it
    /// as it is (any other error of a body is a failure of the store).
    protocol Rollback: Error {}

    private let backend: Backend
    private let thread = DispatchQueue(label: "spark.messaging-storage")
    /// Set on `thread` (a key of this storage's own), so that a call made there (an app's flow
    /// observer) is recognised.
    private let onThread = DispatchSpecificKey<Bool>()
    /// Set on the storage's thread by `close()`: checked there before every write.
    private let closed = Locked(false)

    private init(_ backend: Backend) {
        self.backend = backend
        thread.setSpecific(key: onThread, value: true)
    }

    /// The endpoint store's SQLite tables, values sealed by `sealer`.
    static func sqlite(_ queue: DatabaseQueue, sealer: StoreSealer) -> MessagingStorage {
        MessagingStorage(.sqlite(queue, sealer))
    }

    /// A store in memory.
    static func memory(_ store: MemoryMessagingStore) -> MessagingStorage { MessagingStorage(.memory(store)) }

    /// The SQLite file's queue, when the store is the file (for what looks at the file itself:
    /// the tests that scan it for what must not be there).
    var sqliteQueue: DatabaseQueue? {
        guard case .sqlite(let queue, _) = backend else { return nil }
        return queue
    }

    /// Runs `body` on one consistent snapshot of the store.
    func read<T: Sendable>(_ body: @escaping @Sendable (any MessagingStore) throws -> T) async throws -> T {
        try await run(writing: false, body)
    }

    /// ``read(_:)`` for a synchronous caller (``BBMAccess/saveAttachment(of:to:)`` refuses at
    /// once a message without an attachment): it blocks the calling thread for one short read.
    /// Called on the storage's thread itself (an app's flow observer, see ``show(_:)``), it
    /// runs there at once.
    func readNow<T: Sendable>(_ body: (any MessagingStore) throws -> T) throws -> T {
        if DispatchQueue.getSpecific(key: onThread) == true { return try transaction(writing: false, body) }
        return try thread.sync { try transaction(writing: false, body) }
    }

    /// Reads what a flow shows with `body`, then runs the update it returns on the storage's
    /// thread once the transaction is over and before any later transaction: flows change in the
    /// order of the snapshots they show (two reloads that cross never leave the older one shown),
    /// and an observer the update calls runs outside the transaction.
    func show(_ body: @escaping @Sendable (any MessagingStore) throws -> @Sendable () -> Void) async throws {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            thread.async {
                do {
                    let update = try self.transaction(writing: false, body)
                    update()
                    done.resume()
                } catch {
                    done.resume(throwing: error)
                }
            }
        }
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    /// A constraint the body breaks (an id or a number taken twice) is thrown as
    /// `MessagingError(.conflict)`, a failure of the store as `.storageFailure`.
    func write<T: Sendable>(_ body: @escaping @Sendable (any MessagingStore) throws -> T) async throws -> T {
        try await run(writing: true, body)
    }

    /// ``write(_:)``, then, on the storage's thread before anything else runs there, a read by
    /// `show` of what the write returned and the update it makes of the flows: what a step
    /// stored is shown the moment it commits, with no hop to another thread and back in between
    /// (a page of the mailbox, see `MailboxSync`). The update runs outside both transactions, in
    /// the order of the snapshots, as ``show(_:)``'s; a read that fails shows nothing (the
    /// write stands).
    ///
    /// With `synced` false the commit does not sync the log (`DatabaseQueue.writeWithoutSync`):
    /// only for a write that a power cut may take back because it is made again (the record of
    /// the domain's receipts for messages posted: they stay sending and are posted again, and
    /// the domain answers with the same receipts); the next synced commit makes it durable.
    func write<T: Sendable>(
        synced: Bool = true,
        _ body: @escaping @Sendable (any MessagingStore) throws -> T,
        thenShowing show: @escaping @Sendable (T, any MessagingStore) throws -> @Sendable () -> Void
    ) async throws -> T {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<T, any Error>) in
            thread.async {
                let result = Result { try self.transaction(writing: true, synced: synced, body) }
                if case .success(let written) = result,
                    let update = try? self.transaction(writing: false, { store in try show(written, store) })
                {
                    update()
                }
                done.resume(with: result)
            }
        }
    }

    /// Ends the storage: every write called before has finished when this returns, and none runs
    /// after (they throw `notReady`).
    func close() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            thread.async {
                self.closed.withLock { $0 = true }
                // The search index's changes since its image: in a new one, so that the next
                // start indexes nothing again.
                if case .sqlite(let queue, let sealer) = self.backend {
                    try? SearchIndexImage.saveIfDue(queue, sealer: sealer, anyChange: true)
                }
                done.resume()
            }
        }
    }

    private func run<T: Sendable>(
        writing: Bool, _ body: @escaping @Sendable (any MessagingStore) throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<T, any Error>) in
            thread.async { done.resume(with: Result { try self.transaction(writing: writing, body) }) }
        }
    }

    /// One transaction, on the storage's thread.
    private func transaction<T: Sendable>(
        writing: Bool, synced: Bool = true, _ body: (any MessagingStore) throws -> T
    ) throws -> T {
        if writing, closed.withLock({ $0 }) {
            throw MessagingError(.notReady, "messaging has stopped (the service was stopped, reset or signed out)")
        }
        do {
            switch backend {
            case .sqlite(let queue, let sealer):
                guard writing else {
                    return try SQLiteMessagingStore.catchingUp(queue, sealer: sealer) {
                        try queue.read { db in
                            let store = SQLiteMessagingStore(db: db, sealer: sealer)
                            try store.synchronizeSearchIndex()
                            return try body(store)
                        }
                    }
                }
                let purged = Locked(false)
                let result = try SQLiteMessagingStore.write(queue, sealer: sealer, purged: purged, synced: synced) { store in
                    try body(store)
                }
                if purged.withLock({ $0 }) {
                    // What was erased (expired content; a message taken out of the search index,
                    // whose row changed: its old sealed text) is still in the log's old pages:
                    // truncate it. (The index's postings never reach the file: it is in memory.)
                    _ = try? queue.withConnection { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
                }
                return result
            case .memory(let store):
                return writing ? try store.write(body) : try store.read(body)
            }
        } catch let error as MessagingError {
            throw error
        } catch let error as any Rollback {
            throw error
        } catch let error as StoreError where SQLiteMessagingStore.dataConflicts.contains(error.resultCode) {
            throw MessagingError(.conflict, "it contradicts what this endpoint stored (\(error.message))")
        } catch {
            throw MessagingError(.storageFailure, "the endpoint store failed: \(error)")
        }
    }
}
