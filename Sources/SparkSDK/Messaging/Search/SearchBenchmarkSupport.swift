public import Foundation

/// What `spark-bench`'s search rows drive: an endpoint store's messaging tables filled and
/// searched directly, without a domain or MLS (the rows measure the index, not the network).
/// Not for apps.
@_spi(Benchmarks) public final class SearchBenchmarkStore: Sendable {
    /// A message to store, as a device stores one it received.
    public struct Message: Sendable {
        public var id: String
        public var chatID: String
        public var number: Int64
        public var sender: String
        public var text: String
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

    /// Indexes stored `messages` in one transaction with the text in hand, as a mailbox page
    /// does after storing them: the index's own part of a catch-up.
    public func index(_ messages: [Message]) async throws {
        try await storage.write { store in
            guard let store = store as? SQLiteMessagingStore else { return }
            for message in messages {
                try store.index(
                    SearchDocument(
                        content: message.text, fileName: nil, mediaType: nil, chatID: message.chatID, sender: message.sender),
                    id: message.id)
            }
        }
    }

    /// One page of `query`'s results (no chats: subjects are not the row's business).
    public func search(_ query: SearchQuery) async throws -> SearchPage {
        let match = try SearchMatch(query)
        let (limit, marks) = (query.limit, query.marks)
        let page = try await storage.read { store in try MessageSearch.page(store, match, from: 0, limit: limit, marks: marks) }
        return SearchPage(results: page.results, chats: [], next: page.next.map(String.init))
    }
}
