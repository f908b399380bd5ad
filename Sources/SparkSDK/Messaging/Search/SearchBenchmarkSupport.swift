public import Foundation
import SparkCrypto
import SparkStore

/// What `spark-bench`'s search rows drive: an endpoint store's messaging tables filled and
/// searched directly, without a domain or MLS (the rows measure the index, not the network).
/// Not for apps.
@_spi(Benchmarks) public final class SearchBenchmarkStore: Sendable {
    /// A message to store, as a device stores one it received.
    public struct Message: Sendable {
        /// Its id.
        public var id: String
        /// Its chat.
        public var chatID: String
        /// Its number in the chat.
        public var number: Int64
        /// Who sent it.
        public var sender: String
        /// Its text.
        public var text: String
        /// When it was sent.
        public var timestamp: Date

        /// Message `id`, number `number` of `chatID`, from `sender`.
        public init(id: String, chatID: String, number: Int64, sender: String, text: String, timestamp: Date) {
            (self.id, self.chatID, self.number, self.sender, self.text, self.timestamp) = (
                id, chatID, number, sender, text, timestamp
            )
        }
    }

    private let store: EndpointStore
    private let storage: MessagingStorage

    /// An endpoint store in `directory` (made there), its key in a key file beside it.
    public init(directory: URL) throws {
        store = try EndpointStore(directory: directory, key: .keyFile(directory: directory.appendingPathComponent("keys")))
        storage = store.messagingStorage()
    }

    /// The SQLite file.
    public var path: String { store.directory.appendingPathComponent("endpoint.sqlite").path }

    /// The search index's sealed image (written by ``close()``, and as messages come).
    public var imagePath: String { store.directory.appendingPathComponent(SearchIndexImage.fileName).path }

    /// Stops the store as messaging does: the index's image written, nothing written after.
    public func close() async { await storage.close() }

    /// Stores (and indexes) `messages` in one transaction, as a mailbox page is applied.
    public func store(_ messages: [Message]) async throws {
        try await storage.write { store in
            for message in messages {
                try store.insertReceived(
                    ChatHistory.Record(
                        id: message.id, number: message.number, sender: message.sender,
                        content: message.text, tag: "Text", state: .delivered, timestamp: message.timestamp),
                    chatID: message.chatID, incoming: true, ignoringTaken: false)
            }
        }
    }

    /// Takes every message out of the index (to index them again with ``index(_:)``).
    public func unindexAll() async throws {
        try await storage.write { store in try store.resetSearchIndex() }
    }

    /// The rows `messages` are stored in (a page has them from its inserts).
    public func rows(of messages: [Message]) async throws -> [Int64] {
        let ids = messages.map(\.id)
        return try await storage.read { store in
            guard let store = store as? SQLiteMessagingStore else { return [] }
            return try ids.map { id in
                try store.db.scalar("SELECT rowid FROM messages WHERE local_id = ?", [id], as: Int64.self) ?? 0
            }
        }
    }

    /// Indexes stored `messages` (in `rows`) in one transaction with the text in hand, as a
    /// mailbox page does after storing them: the index's own part of a catch-up.
    public func index(_ messages: [Message], rows: [Int64]) async throws {
        try await storage.write { store in
            guard let store = store as? SQLiteMessagingStore else { return }
            // What `insertReceived` adds for the index: the tokens, and their row in the index
            // (the token count goes in the message's own INSERT).
            for (message, row) in zip(messages, rows) {
                let document = SearchDocument(
                    content: message.text, fileName: nil, mediaType: nil, chatID: message.chatID, sender: message.sender)
                if let tokens = try store.searchTokens(document) { try store.addToIndex(tokens, row: row) }
            }
        }
    }

    /// Makes the tokens of `messages` and nothing else; returns how many (to tell the hashing's
    /// share of ``index(_:rows:)`` from the database's).
    public func tokenize(_ messages: [Message]) -> Int {
        return messages.reduce(0) { count, message in
            count
                + SearchDocument(
                    content: message.text, fileName: nil, mediaType: nil, chatID: message.chatID, sender: message.sender
                ).tokens(key).count
        }
    }

    /// The key of this store's index.
    private var key: SearchKey { store.sealer.searchKey }

    /// One page of `query`'s results (no chats: subjects are not the row's business).
    public func search(_ query: SearchQuery) async throws -> SearchPage {
        let match = try SearchMatch(query)
        let (limit, marks) = (query.limit, query.marks)
        let page = try await storage.read { store in try MessageSearch.page(store, match, from: 0, limit: limit, marks: marks) }
        return SearchPage(results: page.results, chats: [], next: page.next.map(String.init))
    }
}

/// The query parser and the check on a message's text, for the `search-query` fuzz harness.
@_spi(Fuzzing) public enum SearchProbe {
    private static let key = SearchKey(key: SymmetricKey(data: Data(repeating: 9, count: 32)))
    private static let document = SearchDocument(
        content: "Let's have lunch tomorrow at the Crème café 東京都 e-mail NEAR \"quoted\" *", fileName: "menu (1).pdf",
        mediaType: "application/pdf", chatID: "c1", sender: "alice")

    /// Parses `text` as a query and checks it against a fixed message; returns the number of
    /// tokens (0 when the query is refused). Never crashes: that is what is fuzzed.
    public static func run(_ text: String) -> Int {
        guard let match = try? SearchMatch(SearchQuery(text)) else { return 0 }
        let tokens = match.terms(key)
        _ = match.snippet(of: document, marks: ("[", "]"))
        return tokens.count
    }
}
