import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS
import SparkStore

/// The mailbox sync: entries are read in the domain's order, a page at a time, and applied with
/// the cursor in one transaction, so a crash, or the store, the domain or the token failing,
/// leaves neither and the page is read again: each entry is applied exactly once. A page's run of
/// messages, events, receipts and member lists is one transaction (each entry in a savepoint of
/// its own, so one that contradicts the store is dropped alone); an entry that needs the store as
/// the entries before it left it, or the network, before it can be judged (a commit, a Welcome,
/// a change of this user's devices, an identity notice) is a transaction of its own.
///
/// For each entry of a chat the group decides (`ChatGroup`): apply it, drop it with a reason
/// (reported as ``MessagingEvent/dropped(chatID:reason:)``, nothing changed), or keep it until
/// the commit before it arrives (a domain that withholds a commit delays what follows it; it
/// cannot make a device skip it).
extension Messenger {
    /// Reads and applies the mailbox after the stored cursor; returns how many entries came from
    /// elsewhere (this device's own echoes bring nothing new: after a read of only those, the
    /// poll loop goes back to a long-poll at once instead of reading again in `pollInterval`).
    ///
    /// Reads run one at a time: the poll loop and `BBMAccess.refresh()` interleave at every
    /// `await`, and two reads from the same cursor would apply an entry twice (the second time
    /// refused as a replay and reported as dropped).
    func syncOnce(wait: Duration = .zero) async throws -> Int {
        // A read now must not queue behind a long-poll: the long-poll ends (empty) instead.
        if wait == .zero { longPoll?.cancel() }
        let previous = lastSync
        let next = Task {
            _ = try? await previous?.value
            do {
                return try await readMailbox(wait: wait)
            } catch is CancellationError where wait > .zero {
                return 0
            }
        }
        lastSync = next
        if wait > .zero { longPoll = next }
        return try await withTaskCancellationHandler {
            try await next.value
        } onCancel: {
            next.cancel()
        }
    }

    /// What applying one entry changed, beyond the store: steps of this user's messages,
    /// events for the app, the number to acknowledge as delivered, and whether the chat's group
    /// moved (so that entries waiting for it are offered again).
    struct Effects: Sendable {
        var events: [MessageEvent] = []
        var notices: [MessagingEvent] = []
        /// The chat's messages this changed, for its flow (all of them unless said otherwise).
        var changed: MessageChanges = .all
        /// Received messages a delivery receipt is due for.
        var delivered: [CoveredMessage] = []
        var moved = false
        var waiting = false
        var reconcile = false
        var reconcileAll = false
        /// The echo of something this device posted.
        var echo = false
        /// Messages of other users it brought.
        var arrived: [ChatMessage] = []
        /// A message may have started counting down (see `noteExpiring`).
        var expiring = false
    }

    /// What one mailbox entry changes in the store; `process` writes it with the cursor.
    struct Applied {
        var changes: (@Sendable (any MessagingStore) throws -> Effects)?
    }

    /// What a batch touched, for the flows and the app.
    private struct Batch {
        var touched: [String: MessageChanges] = [:]
        /// What changed of messages already there (not this device's echoes, not new arrivals).
        var altered: [String: MessageChanges] = [:]
        var events: [MessageEvent] = []
        var echoes = 0
    }

    private func readMailbox(wait: Duration) async throws -> Int {
        try requireRunning()
        let cursor = try await read { store in try store.mailboxCursor() }
        let entries = try await domain.readMailbox(
            token: try await token(), endpointID: endpointID, after: cursor, limit: 200, wait: wait)
        var batch = Batch()
        var failure: (any Error)?
        var start = 0
        while start < entries.count {
            do {
                if Self.appliesAlone(entries[start]) {
                    let entry = entries[start]
                    if try await process(entry, waiting: false, into: &batch) {
                        try await offerWaiting(entry.chatID, into: &batch)
                    }
                    start += 1
                } else {
                    let end = entries[start...].firstIndex(where: Self.appliesAlone) ?? entries.count
                    try await processRun(entries[start..<end], into: &batch)
                    start = end
                }
            } catch {
                failure = error
                break
            }
        }
        // What committed before a failure is shown and acknowledged all the same; the flows
        // first, so that an app told of a step finds it there.
        await reloadFlows(batch.touched)
        for (chatID, altered) in batch.altered {
            switch altered {
            case .none: break
            case .some(let ids): if !ids.isEmpty { changeSinks.yield(MessageChange(chatID: chatID, messageIDs: ids)) }
            case .all: changeSinks.yield(MessageChange(chatID: chatID, messageIDs: nil))
            }
        }
        report(batch.events)
        if let failure { throw failure }
        return max(0, entries.count - batch.echoes)
    }

    /// Whether an entry is applied in a transaction of its own: it moves a chat's group, or its
    /// preparation reads what the entries before it write, or asks the domain.
    static func appliesAlone(_ entry: MailboxEntry) -> Bool {
        switch entry.kind {
        case .message, .event, .receipt, .membership, .ephemeral: false
        case .commit, .welcome, .devices, .identityReset: true
        }
    }

    /// Applies a run of entries that need nothing but the store (messages, events, receipts,
    /// member lists) in one transaction with the cursor after the last of them. Each entry's
    /// changes are in a savepoint: one that contradicts the store (an id or a number taken) is
    /// rolled back alone and dropped with a reason. Throws, with nothing applied, for a failure
    /// outside the entries.
    private func processRun(_ run: ArraySlice<MailboxEntry>, into batch: inout Batch) async throws {
        guard let last = run.last else { return }
        var steps: [(entry: MailboxEntry, changes: (@Sendable (any MessagingStore) throws -> Effects)?)] = []
        var notices: [[MessagingEvent]] = []
        for entry in run {
            let (applied, refused) = try await prepare(entry)
            steps.append((entry, applied.changes))
            notices.append(refused)
        }
        let prepared = steps
        let outcomes = try await write { store -> [(effects: Effects, conflict: String?)] in
            var outcomes: [(effects: Effects, conflict: String?)] = []
            for step in prepared {
                do {
                    outcomes.append((try store.savepoint { try step.changes?(store) ?? Effects(changed: .none) }, nil))
                } catch let error as MessagingError where error.code == .conflict {
                    outcomes.append((Effects(changed: .none), error.reason))
                }
            }
            try store.setMailboxCursor(last.sequence)
            return outcomes
        }
        for (index, outcome) in outcomes.enumerated() {
            let entry = prepared[index].entry
            let dropped = outcome.conflict.map { [MessagingEvent.dropped(chatID: entry.chatID, reason: $0)] } ?? []
            await finish(entry, effects: outcome.effects, notices: notices[index] + dropped, into: &batch)
        }
    }

    /// Opens and checks an entry as far as it can before the write (see `apply`): its changes,
    /// or, when it is refused, none and the reason. Throws only for a failure outside the entry.
    private func prepare(_ entry: MailboxEntry) async throws -> (Applied, [MessagingEvent]) {
        do {
            return (try await apply(entry), [])
        } catch let error where Self.isRetryable(error) {
            throw error
        } catch {
            return (Applied(), [.dropped(chatID: entry.chatID, reason: (error as? MessagingError)?.reason ?? "\(error)")])
        }
    }

    /// Applies one entry (a fresh one with the cursor, a waiting one by forgetting it) and
    /// returns whether the chat's group moved. Throws only for a failure outside the entry.
    private func process(_ entry: MailboxEntry, waiting: Bool, into batch: inout Batch) async throws -> Bool {
        let (applied, refused) = try await prepare(entry)
        var notices = refused
        let done = { @Sendable (store: any MessagingStore, effects: Effects) throws in
            if waiting {
                if !effects.waiting { try store.forgetDeferred(sequence: entry.sequence) }
            } else {
                try store.setMailboxCursor(entry.sequence)
            }
        }
        var effects = Effects()
        do {
            let changes = applied.changes
            effects = try await write { store in
                let effects = try changes?(store) ?? Effects(changed: .none)
                try done(store, effects)
                return effects
            }
        } catch let error as MessagingError where error.code == .conflict {
            // The entry contradicts the store (an id or a number already taken): retrying cannot
            // help, so it is dropped like a forgery, its changes rolled back, and only the cursor
            // moves past it.
            notices.append(.dropped(chatID: entry.chatID, reason: error.reason))
            try await write { store in try done(store, Effects(changed: .none)) }
            effects.changed = .none
        }
        await finish(entry, effects: effects, notices: notices, into: &batch)
        return effects.moved
    }

    /// What follows an applied entry, once its transaction committed: the app's events, the
    /// receipts due, the chats to look at, and what the page touched.
    private func finish(_ entry: MailboxEntry, effects: Effects, notices: [MessagingEvent], into batch: inout Batch) async {
        for notice in notices + effects.notices { eventSinks.yield(notice) }
        for message in effects.arrived { arrivalSinks.yield(message) }
        if effects.expiring { noteExpiring() }
        if !effects.delivered.isEmpty { receiptsDue[entry.chatID, default: []] += effects.delivered }
        if effects.reconcile { needsReconcile.withLock { _ = $0.insert(entry.chatID) } }
        if effects.reconcileAll {
            devicesChanged = true
            if let chats = try? await read({ store in try store.groupChats() }) {
                needsReconcile.withLock { $0.formUnion(chats) }
            }
        }
        if !entry.chatID.isEmpty { batch.touched[entry.chatID, default: .none].formUnion(effects.changed) }
        // Only what a member sent changes messages already there (a commit or a Welcome reloads
        // the flow, changing none of them; a receipt's step is a `messageEvents` event).
        if !entry.chatID.isEmpty, !effects.echo, [.message, .event].contains(entry.kind) {
            var altered = effects.changed
            if case .some(let ids) = altered { altered = .some(ids.subtracting(effects.arrived.map(\.id))) }
            batch.altered[entry.chatID, default: .none].formUnion(altered)
        }
        batch.events += effects.events
        if effects.echo { batch.echoes += 1 }
    }

    /// Offers the chat's waiting entries again, oldest first, after its group moved; again
    /// from the start each time one of them moves it further.
    private func offerWaiting(_ chatID: String, into batch: inout Batch) async throws {
        var rounds = 0
        while rounds < 1000 {
            rounds += 1
            let waiting = try await read { store in try store.deferred(chatID: chatID) }
            var moved = false
            for entry in waiting where try await process(entry, waiting: true, into: &batch) {
                moved = true
                break
            }
            if !moved { return }
        }
    }

    /// Domain failures that say nothing about what was sent: retry later.
    /// The domain's refusals that pass: a post over the user's limits (`tooManyAttempts`) stays in
    /// the outbox and goes once the window ends.
    static let transientDomainCodes: [DomainError.Code] = [.storageFailure, .unavailable, .tokenExpired, .tooManyAttempts]

    /// Whether applying an entry failed for a reason outside the entry (the store, the domain or
    /// the token, the messenger stopping, or the read was cancelled), so that it must be read
    /// again rather than dropped.
    static func isRetryable(_ error: any Error) -> Bool {
        switch error {
        case let error as MessagingError:
            error.code == .storageFailure || error.code == .notReady
                || error.domainCode.map(transientDomainCodes.contains) == true
        case let error as DomainError: transientDomainCodes.contains(error.code)
        case is AuthError, is CancellationError: true
        default: false
        }
    }

    // MARK: Entries

    /// Opens and checks one entry as far as it can before the write (looking up the identities
    /// a Welcome or a commit brings); returns its changes without writing them.
    private func apply(_ entry: MailboxEntry) async throws -> Applied {
        let groups = self.groups
        switch entry.kind {
        case .membership:
            guard let members = entry.members else { return Applied() }
            return Applied { store in try self.applyMembers(members, of: entry.chatID, in: store) }
        case .welcome:
            return try await welcome(entry)
        case .commit:
            let (mine, stored) = try await read { store in
                (
                    try store.sent(payload: entry.payload) != nil,
                    try groups.load(store, chatID: entry.chatID, validator: MLSAcceptAnyCredential())
                )
            }
            if mine { return Applied { store in try self.ownCommit(entry, in: store) } }
            // Not in this chat's group (not added yet, or no longer): nothing to apply.
            guard var probe = stored?.group, probe.group.isActive else { return Applied() }
            // The users whose devices the commit adds are looked up first, so that their keys
            // are known when the commit is checked for real.
            if case .commit(let added, _, _) = probe.receive(entry, now: Date()) {
                for user in Set(added.map(\.user)) where user != me { _ = try? await contactRecord(of: user, refresh: false) }
            }
            return Applied { store in try self.applyGroupEntry(entry, in: store) }
        case .message, .event, .receipt:
            // Decided inside the page's transaction: no read of its own before it.
            return Applied { store in
                guard let mine = try store.sent(payload: entry.payload) else { return try self.applyGroupEntry(entry, in: store) }
                // The echo of what this device sent: a message gets its number.
                try store.forgetSent(payload: entry.payload)
                guard entry.kind == .message, let localID = mine.localID else { return Effects(changed: .none, echo: true) }
                try groups.noteNumber(store, chatID: entry.chatID, number: entry.messageNumber ?? 0)
                return Effects(
                    events: try store.accept(localID, number: entry.messageNumber, at: nil), changed: .some([localID]),
                    echo: true)
            }
        case .ephemeral:
            try await receiveEphemeral(entry)
            return Applied()
        case .devices:
            // This user's devices changed, or the users it blocked: every chat is looked at
            // after this read, and the block list read again.
            try? await refreshBlocked()
            return Applied { _ in Effects(reconcileAll: true) }
        case .identityReset:
            guard let notice = try? JSONDecoder().decode(IdentityResetNotice.self, from: entry.payload) else {
                throw MessagingError(.forged, "an identity reset notice is malformed")
            }
            switch (notice.state, notice.pending) {
            case (.pending, let pending?):
                eventSinks.yield(.identityResetPending(userID: entry.sender, effectiveAt: pending.effectiveAt))
            case (.cancelled, _): eventSinks.yield(.identityResetCancelled(userID: entry.sender))
            case (.replaced, _):
                // A hint to look again: the key itself is trusted only as the directory decides.
                if entry.sender != me { _ = try? await contactRecord(of: entry.sender, refresh: true) }
            default: throw MessagingError(.forged, "an identity reset notice is malformed")
            }
            return Applied()
        }
    }

    /// The domain's member list is a hint, never the chat's membership (the group is): a user it
    /// no longer lists left, and an admin's device removes their devices; when it no longer lists
    /// this user, this user left (from another device) and this device forgets the group.
    private nonisolated func applyMembers(_ members: [ChatMember], of chatID: String, in store: any MessagingStore) throws
        -> Effects
    {
        guard try store.groupVersion(chatID: chatID) != nil else { return Effects() }
        let listed = Set(members.map(\.userID))
        guard listed.count == members.count else {
            return Effects(notices: [.dropped(chatID: chatID, reason: "a member list that names a user twice")])
        }
        guard listed.contains(me) else {
            try self.leftChat(store, chatID: chatID)
            return Effects()
        }
        let gone = try store.participants(chatID: chatID).filter { !listed.contains($0) }
        guard !gone.isEmpty else { return Effects() }
        try store.noteDeparted(chatID: chatID, users: gone)
        return Effects(reconcile: true)
    }

    /// A Welcome: this device joins when it holds the private half of one of the KeyPackages it
    /// names, and when every device in the group is one it accepts.
    private func welcome(_ entry: MailboxEntry) async throws -> Applied {
        let references = (try? MLSGroup.keyPackageReferences(inWelcome: entry.payload)) ?? []
        let found = try await read { store -> (Data, MLSKeyPackageBundle)? in
            for reference in references {
                if let bundle = try DeviceKeys.bundle(store, reference: reference) { return (reference, bundle) }
            }
            return nil
        }
        // For another device (this user's or a member's): nothing to do here.
        guard let (reference, bundle) = found else { return Applied() }
        let (inGroup, leftAt) = try await read { store in
            (try store.groupVersion(chatID: entry.chatID) != nil, try store.leftEpoch(chatID: entry.chatID))
        }
        if inGroup {
            throw MessagingError(.forged, "a Welcome to chat \(entry.chatID), which this device is in already: replayed")
        }
        let probe: ChatGroup
        do {
            probe = try ChatGroup.join(
                chatID: entry.chatID, welcome: entry.payload, bundle: bundle, validator: MLSAcceptAnyCredential())
        } catch {
            throw MessagingError(.forged, "a Welcome this device cannot open: \((error as? MLSError)?.reason ?? "\(error)")")
        }
        // A Welcome to the group as it was when this device left, or before: a replay (a new
        // invitation comes with a later epoch).
        if let leftAt, probe.group.epoch <= leftAt {
            throw MessagingError(
                .forged,
                "a Welcome to chat \(entry.chatID) at epoch \(probe.group.epoch), which this device left at \(leftAt): replayed")
        }
        // An invitation from a user this user blocked, or to a chat with no one else but users
        // it blocked (whoever the domain names as its sender), is not taken.
        let others = probe.users.filter { $0 != me }
        if blocked.contains(entry.sender) || (!others.isEmpty && others.allSatisfy(blocked.contains)) {
            return Applied()
        }
        // Everyone in the group is looked up first (a first contact is met here).
        for user in probe.users where user != me { _ = try? await contactRecord(of: user, refresh: false) }
        return Applied { store in
            guard try store.groupVersion(chatID: entry.chatID) == nil else {
                return Effects(notices: [.dropped(chatID: entry.chatID, reason: "a replayed Welcome")])
            }
            let joined: ChatGroup
            do {
                joined = try ChatGroup.join(
                    chatID: entry.chatID, welcome: entry.payload, bundle: bundle, validator: try self.groupValidator(store))
            } catch {
                return Effects(notices: [
                    .dropped(
                        chatID: entry.chatID,
                        reason:
                            "the Welcome's group holds a device this device does not accept: \((error as? MLSError)?.reason ?? "\(error)")"
                    )
                ])
            }
            guard joined.users.contains(entry.sender) else {
                return Effects(notices: [
                    .dropped(chatID: entry.chatID, reason: "a Welcome from \(entry.sender), who is not in its group")
                ])
            }
            try store.consumeKeyPackageBundle(reference: reference)
            try self.adopt(joined, in: store, updated: true)
            // Added by another user to a chat that had moved on (an invitation, or a new
            // identity's device): no device of this user hands it what came before.
            let history: [MessagingEvent] =
                entry.sender != self.me && joined.group.epoch > 1 ? [.historyUnavailable(chatID: entry.chatID)] : []
            return Effects(notices: history, moved: true, reconcile: true)
        }
    }

    /// The echo of a commit this device posted: when its answer was lost, the pending group
    /// becomes the chat's group now.
    private nonisolated func ownCommit(_ entry: MailboxEntry, in store: any MessagingStore) throws -> Effects {
        try store.forgetSent(payload: entry.payload)
        guard
            let next = try groups.pending(
                store, chatID: entry.chatID, digest: SHA256.hash(entry.payload), validator: try groupValidator(store)),
            let stored = try groups.load(store, chatID: entry.chatID, validator: MLSAcceptAnyCredential()),
            stored.group.group.epoch + 1 == next.group.epoch
        else { return Effects() }
        try adopt(next, in: store, updated: true)
        return Effects(moved: true)
    }

    /// A commit or an application message of a chat's group, decided by the group.
    private nonisolated func applyGroupEntry(_ entry: MailboxEntry, in store: any MessagingStore) throws -> Effects {
        let chatID = entry.chatID
        guard var stored = try groups.load(store, chatID: chatID, validator: try groupValidator(store)) else {
            return Effects()
        }
        switch stored.group.receive(entry, now: Date()) {
        case .retry(let reason):
            guard try store.deferredCount(chatID: chatID) < GroupStore.maximumDeferred else {
                return Effects(
                    notices: [.dropped(chatID: chatID, reason: "\(reason); too many entries wait already")], changed: .none)
            }
            try store.deferEntry(entry)
            return Effects(changed: .none, waiting: true)
        case .drop(let reason):
            return Effects(notices: [.dropped(chatID: chatID, reason: reason)], changed: .none)
        case .refuseCommit(let reason):
            // The domain's epoch moved past every member: an admin's device replaces it.
            try store.noteRefusedCommit(chatID: chatID, epoch: stored.group.group.epoch, sender: entry.sender)
            return Effects(notices: [.dropped(chatID: chatID, reason: reason)], changed: .none, reconcile: true)
        case .removed:
            try self.leftChat(store, chatID: chatID)
            return Effects()
        case .commit(_, let removed, let by):
            // A device of this user removed by another device: this one updates its own keys
            // at once (post-compromise security).
            stored.sentSinceUpdate = core.sentAfterCommit(stored.sentSinceUpdate, removed: removed, by: by)
            try groups.save(store, stored)
            try Self.applyMembership(store, group: stored.group, now: entry.postedAt)
            try applySubject(of: stored.group, in: store)
            return Effects(moved: true, reconcile: stored.sentSinceUpdate >= MessagingCore.updateAfterMessages)
        case .message(let payload, let sender):
            // The ratchet moved: the group is kept whatever the payload turns out to be.
            return try applyPayload(payload, from: sender, entry: entry, stored: &stored, in: store)
        }
    }

    /// Carries out what the messaging core decides for an opened payload, in the entry's
    /// transaction: the group is kept first (its ratchet moved, whatever the payload turns out to be).
    private nonisolated func applyPayload(
        _ payload: ChatPayload, from sender: ChatGroup.Device, entry: MailboxEntry, stored: inout GroupStore.Stored,
        in store: any MessagingStore
    ) throws -> Effects {
        let chatID = entry.chatID
        // Another device's text names its place among that device's texts: one that was missing
        // arrives late (and is taken whatever its number), one past a gap makes the gap missing.
        var (sequences, known): (TextSequences?, TextSequences?) = (nil, nil)
        var late = false
        if entry.kind == .message, payload.kind == .text, let sequence = payload.sequence, sender.device != endpointID {
            known = try store.textSequences(chatID: chatID, device: sender.device)
            late = known?.awaits(sequence) ?? false
            sequences = TextSequences.noting(
                known, chatID: chatID, user: sender.user, device: sender.device, sequence: sequence,
                withdrawn: payload.withdrawn)
        }
        if sender.user != me, blocked.contains(sender.user) {
            // A blocked user's message, receipt or event: the ratchet moved (the group is kept)
            // and a text's place is noted (so it is not counted missing later); nothing else.
            if let sequences { try store.saveTextSequences(sequences) }
            try groups.save(store, stored)
            return Effects(changed: .none)
        }
        let outcome = try core.apply(
            payload, from: sender.user, entry: entry, lastNumber: stored.lastNumber, late: late, lookup: store.lookup)
        stored.lastNumber = outcome.lastNumber
        try groups.save(store, stored)
        var effects = Effects(changed: .none)
        if let sequences, outcome.actions.contains(where: { if case .insert = $0 { true } else { false } }) {
            try store.saveTextSequences(sequences)
            // The user's count changes only when this device's does (the usual text changes neither).
            if sequences.missing != known?.missing ?? [] {
                let count = try store.missingTexts(chatID: chatID)[sender.user] ?? 0
                effects.notices.append(.messagesMissing(chatID: chatID, userID: sender.user, count: count))
                effects.changed.formUnion(.all)
            }
        }
        for action in outcome.actions {
            switch action {
            case .drop(let reason):
                effects.notices.append(.dropped(chatID: chatID, reason: reason))
            case .insert(let message):
                try store.insertReceived(message, chatID: chatID, incoming: message.sender != me, ignoringTaken: false)
                if message.sender != me {
                    effects.arrived.append(
                        ChatMessage(
                            id: message.id, chatID: chatID, number: message.number, sender: message.sender, isIncoming: true,
                            content: message.content, tag: message.tag, data: message.data, ref: message.ref,
                            state: message.state, timestamp: message.timestamp,
                            attachment: message.attachment.map(Attachment.init)))
                }
                if message.sender == me { effects.expiring = true }
                effects.changed.formUnion(.some([message.id]))
            case .touchChat(let time):
                try store.touchChat(chatID, at: time)
            case .setContent(let messageID, let content):
                try store.setContent(messageID, content: content)
                effects.changed.formUnion(.some([messageID]))
            case .react(let messageID, let user, let emoji, let added):
                if let reactions = Reaction.applying(try store.reactions(of: messageID), user: user, emoji: emoji, added: added) {
                    try store.setReactions(messageID, reactions)
                    effects.changed.formUnion(.some([messageID]))
                }
            case .recall(let messageID):
                try store.recall(messageID)
                effects.changed.formUnion(.some([messageID]))
            case .advanceSent(let ids, let step):
                let moved = try store.advanceSent(chatID: chatID, ids: ids, step)
                effects.events += moved
                effects.changed.formUnion(.some(Set(moved.map(\.messageID))))
            case .readReceived(let ids):
                try store.readReceived(chatID: chatID, ids: ids)
                try store.startExpiry(chatID: chatID, at: clock.now())
                effects.expiring = true
                effects.changed.formUnion(.some(Set(ids)))
            case .openHistory(let history):
                let opened = try applyHistory(history, group: stored.group, chatID: chatID, in: store)
                effects.notices += opened.notices
                effects.changed.formUnion(.all)
            case .reportSent(let messageID, let number):
                effects.events.append(MessageEvent(messageID: messageID, chatID: chatID, number: number, state: .sent))
            case .acknowledge(let message):
                effects.delivered.append(message)
            }
        }
        return effects
    }

    /// Tells every `messageEvents` stream of steps that committed.
    func report(_ events: [MessageEvent]) {
        for event in events { messageEventSinks.yield(event) }
    }
}
