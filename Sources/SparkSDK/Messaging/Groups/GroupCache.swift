import Foundation
import SparkCrypto
import SparkLock

/// The chats' groups kept parsed in memory between messages: a live session per chat, so that a
/// message costs one indexed read of the row's version instead of opening, parsing and checking
/// the whole group (which a 1,000-member chat makes expensive).
///
/// A session is good exactly while the row's `version` is the one it was loaded or saved with.
/// Every write of a chat's group gives the row a fresh random version, so:
/// - another process writing the row (two processes on one data directory) moves the version,
///   and the next load here reads the row again;
/// - a transaction that saved a session and then rolled back leaves the row at its old version,
///   which the session (remembered with the new one) no longer matches; a version is never
///   reused (128 random bits), so a later write cannot make a stale session match again.
///
/// Bounded: at most `capacity` sessions stay, the least recently used going first, so a device in
/// 10,000 chats keeps a bounded amount of memory and loads the others on demand.
final class GroupCache: Sendable {
    private struct Entry {
        var version: Data
        var stored: GroupStore.Stored
        var lastUse: UInt64
        var untrusted: Untrusted?
    }

    /// The users with a device in the group that the trusted keys do not vouch for, as found for
    /// one version of the contacts and one epoch (its authenticator: the same exactly when the
    /// tree is): a send checks it without checking every member's credential again.
    private struct Untrusted {
        var contacts: Data
        var authenticator: Data
        var users: [String]
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var clock: UInt64 = 0
    }

    private let state = Locked(State())
    let capacity: Int

    init(capacity: Int = 256) {
        precondition(capacity > 0, "a session cache holds at least one session")
        self.capacity = capacity
    }

    /// A fresh row version.
    static func newVersion() -> Data { SystemRandom.bytes(count: 16) }

    /// The session of `chatID` if it is the row's `version`.
    func session(_ chatID: String, version: Data) -> GroupStore.Stored? {
        state.withLock { state in
            guard var entry = state.entries[chatID], entry.version == version else { return nil }
            state.clock += 1
            entry.lastUse = state.clock
            state.entries[chatID] = entry
            return entry.stored
        }
    }

    /// Remembers `stored` as the row of `chatID` at `version`.
    func remember(_ stored: GroupStore.Stored, version: Data) {
        state.withLock { state in
            state.clock += 1
            let chatID = stored.group.chatID
            state.entries[chatID] = Entry(
                version: version, stored: stored, lastUse: state.clock, untrusted: state.entries[chatID]?.untrusted)
            if state.entries.count > capacity, let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                state.entries.removeValue(forKey: oldest.key)
            }
        }
    }

    /// Changes the session of `chatID`, if it is at `version`, and moves it to `newVersion`;
    /// forgets it otherwise (the next load reads the row).
    func update(_ chatID: String, from version: Data?, to newVersion: Data, _ change: (inout GroupStore.Stored) -> Void) {
        state.withLock { state in
            guard var entry = state.entries[chatID], let version, entry.version == version else {
                state.entries.removeValue(forKey: chatID)
                return
            }
            change(&entry.stored)
            entry.version = newVersion
            state.entries[chatID] = entry
        }
    }

    /// The chat's untrusted users as found for `contacts` and `authenticator`, if they were.
    func untrusted(_ chatID: String, contacts: Data, authenticator: Data) -> [String]? {
        state.withLock { state in
            guard let known = state.entries[chatID]?.untrusted, known.contacts == contacts, known.authenticator == authenticator
            else { return nil }
            return known.users
        }
    }

    /// Remembers the chat's untrusted users for `contacts` and `authenticator` (while it is live).
    func rememberUntrusted(_ chatID: String, _ users: [String], contacts: Data, authenticator: Data) {
        state.withLock { state in
            state.entries[chatID]?.untrusted = Untrusted(contacts: contacts, authenticator: authenticator, users: users)
        }
    }

    func forget(_ chatID: String) { _ = state.withLock { $0.entries.removeValue(forKey: chatID) } }

    /// Forgets every session (their secrets are released, and wiped with their `SecureBytes`).
    func removeAll() { state.withLock { $0.entries.removeAll() } }

    /// How many sessions are live (for tests and measurements).
    var count: Int { state.withLock { $0.entries.count } }
}
