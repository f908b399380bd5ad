import Foundation
import SparkLock

/// The disappearing messages' countdown: a task that runs while a message is counting down,
/// looking every ``interval`` for those whose time is up and removing them. A device with no
/// disappearing message has no such task.
actor Expiry {
    let storage: MessagingStorage
    let flows: MessageFlows
    let changes: EventSinks<MessageChange>
    let clock: WallClock
    /// The messenger's stop: from then on nothing is removed (the storage is closed).
    let stopped: Locked<Bool>
    private var task: Task<Void, Never>?
    /// How often the task looks for messages whose time is up.
    static let interval: Duration = .seconds(1)

    init(
        storage: MessagingStorage, flows: MessageFlows, changes: EventSinks<MessageChange>, clock: WallClock,
        stopped: Locked<Bool>
    ) {
        self.storage = storage
        self.flows = flows
        self.changes = changes
        self.clock = clock
        self.stopped = stopped
    }

    private var isStopped: Bool { stopped.withLock { $0 } }

    /// A message may have started counting down (stored or read in a chat with a timer): the
    /// task runs until none is.
    func note() {
        guard task == nil, !isStopped else { return }
        task = Task { [weak self] in
            while let self, await self.expireDue() {
                try? await Task.sleep(for: Self.interval)
                if Task.isCancelled { return }
            }
        }
    }

    /// Ends the task (at the messenger's stop); when it returns, nothing more is removed.
    func stop() async {
        let running = task
        running?.cancel()
        await running?.value
        task = nil
    }

    /// Removes the messages whose disappearing timer ran out (content, data and reactions, from
    /// the store and its write-ahead log) and updates their chats' flows; returns whether any
    /// message is still counting down (if not, the task ends, in the same turn).
    func expireDue() async -> Bool {
        guard !isStopped else { return false }
        let now = clock.now()
        let next: Date?
        do { next = try await storage.read { store in try store.nextExpiry() } } catch { return true }
        guard let next else {
            task = nil
            return false
        }
        guard next <= now, !isStopped, let due = try? await storage.write({ store in try store.expireDue(at: now) }),
            !due.isEmpty
        else { return true }
        for chatID in Set(due.map(\.chatID)) {
            await flows.reloadMessages(chatID)
            changes.yield(MessageChange(chatID: chatID, messageIDs: Set(due.filter { $0.chatID == chatID }.map(\.id))))
        }
        await flows.reloadChats(Set(due.map(\.chatID)))
        return true
    }
}
