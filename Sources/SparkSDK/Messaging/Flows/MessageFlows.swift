import Foundation
import SparkLock
import SparkMLS
import SparkObservable

/// The app's view of the store: the chat list's flow and each chat's message flow, changed by
/// deltas (the messages a step touched, read again by id and put in their places) on the
/// storage's thread right after the read they show, so that a flow never goes back to an older
/// snapshot when two reloads cross. Observers run outside the transaction.
actor MessageFlows {
    let storage: MessagingStorage
    nonisolated let chatsOwner = MutableStateFlow<[Chat]>([], label: "Messaging.chats")
    /// Each chat's message flow, by chat (read off the actor by a page's own storage job, see
    /// ``showing(_:in:)``).
    private nonisolated let messageOwners = Locked<[String: MutableStateFlow<[ChatMessage]>]>([:])
    /// The first read of a chat's flow, while it runs.
    private var messageLoads: [String: Task<Void, any Error>] = [:]
    /// How many of a chat's newest messages its flow holds.
    static let flowWindow = 200

    init(storage: MessagingStorage) { self.storage = storage }

    /// The chat as the app sees it (see ``loadChats(_:only:)``).
    nonisolated func chat(_ chatID: String) async throws -> Chat {
        guard let chat = try await storage.read({ store in try self.loadChats(store, only: chatID).first }) else {
            throw MessagingError(.unknownChat, "no chat \(chatID)")
        }
        return chat
    }

    func messageFlow(_ chatID: String) async throws -> StateFlow<[ChatMessage]> {
        if let owner = messageOwners.withLock({ $0[chatID] }) {
            // Made by a call still reading its first window: shown once that is in.
            try await messageLoads[chatID]?.value
            return owner.flow
        }
        let owner = MutableStateFlow<[ChatMessage]>([], label: "Messaging.messages")
        messageOwners.withLock { $0[chatID] = owner }
        let load = Task {
            try await self.storage.show { store in
                let page = try store.page(chatID: chatID, before: nil, limit: Self.flowWindow)
                return { owner.value = page }
            }
        }
        messageLoads[chatID] = load
        defer { messageLoads[chatID] = nil }
        do {
            try await load.value
        } catch {
            messageOwners.withLock { $0[chatID] = nil }
            throw error
        }
        return owner.flow
    }

    /// Brings the chat's flow up to date with what changed: the messages named are read again
    /// (by id) and put in their place in the window, the rest of it untouched; `.all` reads the
    /// window again.
    ///
    /// The flow changes on the storage's thread, inside the read: reads run there one at a time
    /// in the order they were asked for, so a flow never goes back to an older snapshot when two
    /// reloads cross.
    func reloadMessages(_ chatID: String, changed: MessageChanges = .all) async {
        guard let owner = messageOwners.withLock({ $0[chatID] }), changed != .none else { return }
        try? await storage.show { store in try Self.reload(owner, chatID: chatID, changed: changed, store: store) }
    }

    /// Reads what `touched` changed, in each chat's flow and in the chat list's rows of those
    /// chats; the change returned shows it. Run on the storage's thread by the job of the write
    /// that touched them, right after it commits (`MessagingStorage.write(_:thenShowing:)`): what
    /// a page of the mailbox applied is shown before the app hears of it.
    nonisolated func showing(_ touched: [String: MessageChanges], in store: any MessagingStore) throws -> @Sendable () -> Void {
        guard !touched.isEmpty else { return {} }
        let owners = messageOwners.withLock { $0 }
        let updates = try touched.compactMap { chatID, changed in
            try owners[chatID].map { owner in try Self.reload(owner, chatID: chatID, changed: changed, store: store) }
        }
        let rows = try replaceChats(Set(touched.keys), in: chatsOwner, store: store)
        return {
            for update in updates { update() }
            rows()
        }
    }

    /// Reads what `changed` asks of the flow of `chatID`, and returns the change of `owner` (run
    /// by ``MessagingStorage/show(_:)`` on the storage's thread).
    nonisolated static func reload(
        _ owner: MutableStateFlow<[ChatMessage]>, chatID: String, changed: MessageChanges, store: any MessagingStore
    ) throws -> @Sendable () -> Void {
        switch changed {
        case .none:
            return {}
        case .all:
            let page = try store.page(chatID: chatID, before: nil, limit: flowWindow)
            return { owner.value = page }
        case .some(let ids):
            guard !ids.isEmpty else { return {} }
            let found = try store.messages(chatID: chatID, ids: Array(ids))
            return {
                owner.update { window in
                    merge(found, removing: ids.subtracting(found.map(\.id)), into: &window, limit: flowWindow)
                }
            }
        }
    }

    /// The update that puts `messages`, as just written, in their places in the chat's flow,
    /// without reading them back. Run by the job of the write that wrote them, right after it
    /// commits (`MessagingStorage.write(_:thenShowing:)`): so it comes before any later write's
    /// update, and a message never shows an older state after a newer one (`sending` after
    /// `delivered`, as when it was applied from another actor after the storage had moved on).
    nonisolated func showingMessages(_ messages: [ChatMessage], in chatID: String) -> @Sendable () -> Void {
        guard let owner = messageOwners.withLock({ $0[chatID] }), !messages.isEmpty else { return {} }
        return { owner.update { window in Self.merge(messages, removing: [], into: &window, limit: Self.flowWindow) } }
    }

    /// `window` with `changed` in their places (replaced, or added where they sort) and
    /// `removed` taken out, in the flow's order (numbered messages by number, then those without a
    /// number yet by time), keeping the newest `limit`: what ``messages(in:before:limit:)`` reads.
    static func merge(_ changed: [ChatMessage], removing removed: Set<String>, into window: [ChatMessage], limit: Int)
        -> [ChatMessage]
    {
        var merged = window
        merge(changed, removing: removed, into: &merged, limit: limit)
        return merged
    }

    /// ``merge(_:removing:into:limit:)`` in place: a flow's window changes where it is kept.
    static func merge(_ changed: [ChatMessage], removing removed: Set<String>, into window: inout [ChatMessage], limit: Int) {
        replace(changed, removing: removed, in: &window) { a, b in
            switch (a.number, b.number) {
            case (let x?, let y?): x < y
            case (.some, .none): true
            case (.none, .some): false
            case (.none, .none): a.timestamp < b.timestamp
            }
        }
        if window.count > limit { window.removeFirst(window.count - limit) }
    }

    /// `list` with `changed` in place of the items of the same id, the new ones added, those of
    /// `removed` taken out, in the order of `order`: how a flow changes by a delta.
    ///
    /// A flow's list is kept in that order, so each change is put in its place (kept where it is
    /// while it still sorts there, else taken out and inserted after every item it does not sort
    /// before, as a stable sort of the list with it appended would place it): a few comparisons
    /// and one move, where sorting the whole list again copied and compared every item. A list
    /// found out of order is sorted whole.
    static func replace<Item: Identifiable>(
        _ changed: [Item], removing removed: Set<Item.ID>, in list: inout [Item], sortedBy order: (Item, Item) -> Bool
    ) {
        guard list.indices.dropFirst().allSatisfy({ !order(list[$0], list[$0 - 1]) }) else {
            list = replacing(changed, removing: removed, in: list, sortedBy: order)
            return
        }
        // An item both removed and changed stays out (when it was in).
        var gone: Set<Item.ID> = []
        if !removed.isEmpty {
            list.removeAll { item in
                guard removed.contains(item.id) else { return false }
                gone.insert(item.id)
                return true
            }
        }
        for item in changed where !gone.contains(item.id) {
            if let index = list.lastIndex(where: { $0.id == item.id }) {
                let fitsBefore = index == 0 || !order(item, list[index - 1])
                let fitsAfter = index == list.count - 1 || !order(list[index + 1], item)
                if fitsBefore && fitsAfter {
                    list[index] = item
                    continue
                }
                list.remove(at: index)
            }
            var (low, high) = (0, list.count)
            while low < high {
                let middle = (low + high) / 2
                if order(item, list[middle]) { high = middle } else { low = middle + 1 }
            }
            list.insert(item, at: low)
        }
    }

    /// ``replace(_:removing:in:sortedBy:)`` for any list: the changes applied, then the whole
    /// list sorted (stably) by `order`.
    static func replacing<Item: Identifiable>(
        _ changed: [Item], removing removed: Set<Item.ID>, in list: [Item], sortedBy order: (Item, Item) -> Bool
    ) -> [Item] {
        let replacement = Dictionary(changed.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        var merged = list.compactMap { item in removed.contains(item.id) ? nil : (replacement[item.id] ?? item) }
        let present = Set(list.map(\.id))
        var added: Set<Item.ID> = []
        merged += changed.filter { !present.contains($0.id) && added.insert($0.id).inserted }
        merged.sort(by: order)
        return merged
    }

    /// Brings the chat list up to date: every chat, or only `chatIDs` (each read again and put
    /// in its place, most recent activity first).
    func reloadChats(_ chatIDs: Set<String>? = nil) async {
        let owner = chatsOwner
        guard let chatIDs else {
            try? await storage.show { store in
                let chats = try self.loadChats(store, only: nil)
                return { owner.value = chats }
            }
            return
        }
        guard !chatIDs.isEmpty else { return }
        // On the storage's thread, as ``reloadMessages(_:changed:)`` does.
        try? await storage.show { store in try self.replaceChats(chatIDs, in: owner, store: store) }
    }

    /// Reads `chatIDs` again; the change returned puts each in its place in the chat list (most
    /// recent activity first), or takes it out when it is gone.
    nonisolated func replaceChats(
        _ chatIDs: Set<String>, in owner: MutableStateFlow<[Chat]>, store: any MessagingStore
    ) throws -> @Sendable () -> Void {
        guard !chatIDs.isEmpty else { return {} }
        let found = try chatIDs.flatMap { try self.loadChats(store, only: $0) }
        return {
            owner.update { chats in
                Self.replace(
                    found, removing: chatIDs.subtracting(found.map(\.chatID)), in: &chats,
                    sortedBy: { $0.lastActivity > $1.lastActivity })
            }
        }
    }

    /// The chat `chatID`, or every chat, as the app sees it: the store's rows, each participant
    /// with the trust the contacts give them.
    nonisolated func loadChats(_ store: any MessagingStore, only chatID: String?) throws -> [Chat] {
        let chats = try store.chats(only: chatID)
        let trust = try store.verifications(of: Set(chats.flatMap { $0.participants.map(\.userID) }))
        return try chats.map { chat in
            Chat(
                chatID: chat.chatID, subject: chat.subject,
                participants: chat.participants.map {
                    Participant(userID: $0.userID, isAdmin: $0.isAdmin, verification: trust[$0.userID] ?? .unverified)
                }, unreadCount: chat.unreadCount,
                missingMessageCount: try store.missingTexts(chatID: chat.chatID).values.reduce(0, +),
                lastActivity: chat.lastActivity, isActive: chat.isActive,
                disappearingTimer: chat.timer > 0 ? .seconds(chat.timer) : nil,
                postQuantum: chat.suite == MLSCipherSuite.xWingPrivateUseCodePoint)
        }
    }
}
