import Foundation
import SparkCrypto

/// Search: this device's messages found by their words, with an index that holds keyed tokens
/// only (``SearchText``, `docs/SEARCH.md`).
///
/// The store keeps the index in step in the same transaction as the message: a message is
/// indexed when stored (sent, received, or handed over in a history transfer), indexed again
/// when edited, and taken out when recalled, when it expires, and when this user leaves its
/// chat; a wipe empties it. A search asks the store for the messages that hold every token of
/// the query, best first, then checks each on its text (prefixes, phrases and substrings are
/// decided there) and makes its snippet.
struct MessageSearch: MessagingPart {
    let context: MessagingContext

    /// Messages looked at per store read, beyond the page asked for (some fail the check on
    /// their text).
    static let candidateBatch = 64
    /// Messages indexed per transaction in a rebuild.
    static let rebuildBatch = 500

    func search(_ query: SearchQuery) async throws -> SearchPage {
        let match = try SearchMatch(query)
        let fingerprint = Self.fingerprint(of: query)
        var offset = 0
        if let cursor = query.cursor {
            guard let data = try? Data(base64URLEncoded: cursor), let decoded = String(data: data, encoding: .utf8),
                let separator = decoded.firstIndex(of: ":"), decoded[decoded.index(after: separator)...] == fingerprint,
                let value = Int(decoded[..<separator]), value >= 0
            else {
                throw MessagingError(.invalidArgument, "the cursor is not one of this search's pages")
            }
            offset = value
        }
        let limit = query.limit
        let marks = query.marks
        let start = offset
        let (results, next, chats) = try await read { store in
            try Self.page(store, match, from: start, limit: limit, marks: marks)
        }
        let cursor = next.map { Data("\($0):\(fingerprint)".utf8).base64URLEncodedString() }
        var shown: [Chat] = []
        for chat in chats { shown.append(try await flows.chat(chat.chatID)) }
        return SearchPage(results: results, chats: shown, next: cursor)
    }

    /// A page of results from candidate `start` on: candidates read from the store in batches,
    /// each checked on its text; the position after the last one looked at when there may be
    /// more; and, on a first page, the chats whose subject matches.
    static func page(
        _ store: any MessagingStore, _ match: SearchMatch, from start: Int, limit: Int, marks: (open: String, close: String)
    ) throws -> (results: [SearchResult], next: Int?, chats: [StoredChat]) {
        let terms = match.terms(store.searchKey)
        var results: [SearchResult] = []
        var position = start
        var more = true
        while results.count < limit, more {
            let candidates = try store.searchCandidates(terms, match, offset: position, limit: candidateBatch)
            more = candidates.count == candidateBatch
            for (index, hit) in candidates.enumerated() {
                position += 1
                guard let snippet = match.snippet(of: hit.document, marks: marks) else { continue }
                results.append(
                    SearchResult(
                        messageID: hit.id, chatID: hit.document.chatID, sender: hit.sender, timestamp: hit.timestamp,
                        number: hit.number, snippet: snippet))
                if results.count == limit {
                    // Candidates left in this batch: there may be another page.
                    if index < candidates.count - 1 { more = true }
                    break
                }
            }
        }
        return (results, more ? position : nil, try chats(store, match, first: start == 0, limit: limit))
    }

    /// The live chats whose subject holds every clause, on a first page without message filters.
    private static func chats(
        _ store: any MessagingStore, _ match: SearchMatch, first: Bool, limit: Int
    ) throws -> [StoredChat] {
        guard first, !match.clauses.isEmpty, match.filters.isEmpty, match.chatID == nil, match.sender == nil,
            match.since == nil, match.until == nil
        else { return [] }
        return try store.chats(only: nil).filter { chat in
            chat.isActive && match.matches(in: SearchText.units(of: chat.subject)) != nil
        }.prefix(limit).map { $0 }
    }

    /// What ties a cursor to its query: a digest of everything but the cursor.
    private static func fingerprint(of query: SearchQuery) -> String {
        var described = query
        described.cursor = nil
        let text = [
            described.text, described.chatID ?? "", described.sender ?? "",
            described.since.map { "\($0.timeIntervalSince1970)" } ?? "",
            described.until.map { "\($0.timeIntervalSince1970)" } ?? "",
            "\(described.hasAttachment)", described.mediaType ?? "", "\(described.limit)",
        ].joined(separator: "\u{0}")
        return SHA256.hash(Data(text.utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// Rebuilds the index from the stored messages, `progress` told how many are done of how
    /// many after each batch. Messages that arrive meanwhile are indexed as they are stored.
    func rebuild(progress: @escaping @Sendable (_ done: Int, _ total: Int) -> Void = { _, _ in }) async throws {
        try await write { store in try store.resetSearchIndex() }
        try await finishRebuild(progress: progress)
    }

    /// Rebuilds the index when it is of an older version, or completes a rebuild an exit
    /// interrupted (at start).
    func resumeIfNeeded() async throws {
        let state = try await read { store in try store.searchIndexState() }
        if !state.current {
            try await rebuild()
        } else if state.building {
            try await finishRebuild(progress: { _, _ in })
        }
    }

    private func finishRebuild(progress: @escaping @Sendable (Int, Int) -> Void) async throws {
        let total = try await read { store in try store.unindexedCount() }
        var (done, after) = (0, Int64(0))
        while true {
            try requireRunning()
            let from = after
            let (indexed, last) = try await write { store in
                try store.indexUnindexed(after: from, limit: Self.rebuildBatch)
            }
            done += indexed
            progress(done, max(total, done))
            guard let last else { return }
            after = last
        }
    }

    /// The messages of `messageID`'s chat around it: up to `limit`, about as many after it as
    /// before, oldest first (where a search result opens its chat).
    func messages(around messageID: String, limit: Int) async throws -> [ChatMessage] {
        guard (1...500).contains(limit) else { throw MessagingError(.invalidArgument, "a page holds 1 to 500 messages") }
        return try await read { store in
            guard let message = try store.message(messageID) else {
                throw MessagingError(.unknownChat, "no message \(messageID)")
            }
            guard let number = message.number else { return try store.page(chatID: message.chatID, before: nil, limit: limit) }
            let after = try store.page(chatID: message.chatID, before: number + Int64(limit / 2) + 1, limit: limit)
            return after
        }
    }
}
