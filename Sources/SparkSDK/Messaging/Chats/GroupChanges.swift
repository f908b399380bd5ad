import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS
import SparkStore

/// Chats as MLS groups of devices: making a chat, changing who is in it, and keeping each group
/// in line with the user's devices and with what this device trusts.
///
/// Every change is a commit this device makes and the domain orders (one per epoch): on a
/// conflict another commit came first, so the core catches up to it (`MessagingContext.catchUp`:
/// a conflict is an input to the core, which reads the mailbox) and the device commits again. A commit is kept, pending, before it is posted, so that a lost answer (a crash, the
/// network) is completed by the commit's echo in the mailbox.
actor GroupChanges: MessagingPart {
    nonisolated let context: MessagingContext
    let identities: Identities
    /// Checks a chat is live and not held before a change; hands a new device its history.
    let outbox: Outbox
    /// The latest group change per chat; each waits for the one before it (see `change`).
    private var changes: [String: Task<Void, any Error>] = [:]
    /// The pass of `reconcile(force:)` in progress; each waits for the one before it.
    private var reconciling: Task<Void, Never>?
    /// When every chat was last looked at.
    private var lastReconcile: ContinuousClock.Instant?
    /// How often every chat is looked at when nothing asked for it (this user's devices may
    /// have changed; an update may be due).
    static let reconcileInterval: Duration = .seconds(60)

    init(context: MessagingContext, identities: Identities, outbox: Outbox) {
        self.context = context
        self.identities = identities
        self.outbox = outbox
    }

    // MARK: Making and changing chats

    func startChat(with users: [String], subject: String) async throws -> Chat {
        let others = Array(Set(users)).filter { $0 != me }.sorted()
        guard !others.isEmpty else { throw MessagingError(.unknownUser, "a chat needs at least one other user") }
        try await identities.requireNotBlocked(others)
        try await requireTrusted(others)
        let chatID = SystemRandom.bytes(count: 12).base64URLEncodedString()
        // Every device of every member, and this user's other devices that this device trusts.
        let approved = try await identities.ownDeviceView().approvedIDs
        let (claim, suite) = try await claimForNewChat(of: others + [me])
        let devices = claim.devices.filter { $0.device.user != me || approved.contains($0.device.device) }
        let missing = others.filter { user in !devices.contains { $0.device.user == user } }
        guard missing.isEmpty else {
            throw MessagingError(.unknownUser, "\(missing.joined(separator: ", ")) has no device set up yet")
        }
        let signer = try await identities.deviceSigner()
        // The subject is in the group context: every member has it from the moment they join.
        let (created, commit, welcome, next) = try ChatSession.newGroup(
            chatID: chatID, signer: signer, validator: try await read { store in try self.validators.current(store).group },
            subject: subject, suite: suite, keyPackages: devices.map(\.keyPackage))
        let groups = self.groups
        try await write { store in
            try groups.save(
                store, GroupStore.Stored(group: created, sentSinceUpdate: 0, updatedAt: Date(), lastNumber: 0))
            try groups.setPending(store, chatID: chatID, digest: SHA256.hash(commit), next: next)
            try store.recordSent(chatID: chatID, payload: commit, localID: nil)
        }
        do {
            // The chat is made with this user alone; the commit adds everyone else, with their
            // membership, the commit and the Welcome in one step.
            _ = try await domainCall {
                try await domain.createChat(
                    token: try await token(), endpointID: endpointID, chatID: chatID, participants: [], posts: [])
            }
            _ = try await domainCall {
                try await domain.postCommit(
                    token: try await token(), endpointID: endpointID, chatID: chatID, epoch: 0, commit: commit,
                    welcome: welcome, add: others, remove: [])
            }
        } catch let error where !MessagingContext.isRetryable(error) {
            // Refused: there is no such chat. (Left unanswered, the domain may have taken it:
            // the group and its pending commit stay, and the commit's echo completes the chat.)
            try? await write { store in try groups.leave(store, chatID: chatID) }
            throw error
        }
        try await write { store in try self.adopt(next, in: store, updated: true) }
        await flows.reloadChats()
        return try await flows.chat(chatID)
    }

    func invite(_ users: [String], to chatID: String) async throws {
        let added = Array(Set(users)).filter { $0 != me }.sorted()
        guard !added.isEmpty else { return }
        try await identities.requireNotBlocked(added)
        // Everyone is looked up again: an invitation is refused while anyone's identity in the
        // chat changed, as a send is held.
        let current = try await flows.chat(chatID).participants.map(\.userID).filter { $0 != me }
        try await requireTrusted(Array(Set(added + current)).sorted())
        let suite = try await read { store in try self.activeSession(chatID, in: store).stored.group.group.cipherSuite }
        let claim = try await claimDevices(of: added, suite: suite)
        let devices = claim.devices
        let missing = added.filter { user in !devices.contains { $0.device.user == user } }
        guard missing.isEmpty else {
            let unable = missing.filter { user in claim.withoutSuite.contains { $0.user == user } }
            if !unable.isEmpty {
                throw MessagingError(
                    .refused,
                    "\(unable.joined(separator: ", ")) has no device that runs this post-quantum chat's suite (an earlier release)"
                )
            }
            throw MessagingError(.unknownUser, "\(missing.joined(separator: ", ")) has no device set up yet")
        }
        try await change(chatID, domainAdd: added) { group in
            let present = Set(group.devices)
            return (devices.filter { !present.contains($0.device) }.map(\.keyPackage), [])
        }
        await flows.reloadChats()
    }

    func remove(_ user: String, from chatID: String) async throws {
        guard user != me else { return try await leave(chatID) }
        try await change(chatID, domainRemove: [user]) { group in ([], Set(group.devices.filter { $0.user == user })) }
        await flows.reloadChats()
    }

    /// Leaves: the domain takes this user out, and this device forgets the group. (A member
    /// cannot commit its own removal in MLS; an admin's device removes this user's devices from
    /// the group as soon as it reads that the user left.)
    func leave(_ chatID: String) async throws {
        _ = try await domainCall {
            try await domain.updateMembers(
                token: try await token(), endpointID: endpointID, chatID: chatID, add: [], remove: [me], posts: [])
        }
        try await write { store in try self.leftChat(store, chatID: chatID) }
        await flows.reloadChats()
    }

    /// Changes the subject, by a commit (it is in the group context); refused while the chat
    /// holds a device this device does not trust, since that device would read it.
    func rename(_ chatID: String, subject: String) async throws {
        try await outbox.requireActive(chatID)
        try await outbox.requireNotHeld(chatID)
        try await change(chatID, context: ChatGroup.ContextChange(subject: subject)) { _ in ([], []) }
        await flows.reloadChats()
    }

    /// Sets the chat's disappearing-messages timer (0: off), by a commit (it is in the group
    /// context, so every member's device applies the same); any member may.
    func setTimer(_ chatID: String, seconds: Int) async throws {
        guard seconds == 0 || ChatGroup.timerRange.contains(seconds) else {
            throw MessagingError(.invalidArgument, "a disappearing-messages timer is 5 seconds to 365 days, or off")
        }
        try await outbox.requireActive(chatID)
        try await outbox.requireNotHeld(chatID)
        try await change(chatID, context: ChatGroup.ContextChange(timer: seconds)) { _ in ([], []) }
        await flows.reloadChats()
    }

    /// Looks up each user's identity now and refuses, before anything is made, when one is not
    /// trusted (a changed key, or a first contact the policy holds).
    func requireTrusted(_ users: [String]) async throws {
        var unconfirmed: [String] = []
        for user in users where !(try await identities.contactRecord(of: user, refresh: true)).state.isTrusted {
            unconfirmed.append(user)
        }
        guard unconfirmed.isEmpty else {
            throw MessagingError(
                .identityUnconfirmed,
                "the identity of \(unconfirmed.joined(separator: ", ")) is not confirmed: accept it or confirm the safety number first"
            )
        }
    }

    // MARK: Devices

    /// The devices in the chat's group, as this device holds it.
    func groupDevices(of chatID: String) async throws -> [ChatGroup.Device] { try await storedGroup(chatID)?.devices ?? [] }

    /// The chat's group as this device holds it (nil when it is in no group of that chat).
    func storedGroup(_ chatID: String) async throws -> ChatGroup? {
        try await read { store in try self.session(chatID, in: store)?.group }
    }

    /// A device to add: its KeyPackage, as the domain handed it out and this device checked it.
    struct ClaimedDevice: Sendable {
        var device: ChatGroup.Device
        var keyPackage: Data
    }

    /// What a claim of KeyPackages of one suite found.
    struct Claim: Sendable {
        /// The devices with a KeyPackage of the suite, each checked.
        var devices: [ClaimedDevice] = []
        /// The devices that do not run the suite: the domain handed out their KeyPackage of
        /// suite 1, whose capabilities (signed by the device) do not list the suite.
        var withoutSuite: [ChatGroup.Device] = []
    }

    /// One KeyPackage of MLS cipher suite `suite` of each device of `users` (not this one), each
    /// checked before it is used: its signatures, its lifetime, and a credential for the device
    /// the domain names, signed by the identity key this device trusts for the user. A KeyPackage
    /// that fails is left out, so a domain that substitutes one adds no one. So is one of another
    /// suite whose capabilities list `suite`: its device runs the suite and the domain withheld
    /// its KeyPackages of it (a downgrade); one whose capabilities do not is a device that does
    /// not run the suite (``Claim/withoutSuite``).
    func claimDevices(
        of users: [String], only: Set<ChatGroup.Device>? = nil,
        suite: MLSCipherSuite = .x25519AES128GCMSHA256Ed25519
    ) async throws -> Claim {
        let validator = try await read { store in try self.trustedValidator(store) }
        var claim = Claim()
        let now = Date()
        for user in users {
            let packages = try await domainCall {
                try await domain.claimKeyPackages(
                    token: try await token(), endpointID: endpointID, userID: user, suite: suite.rawValue)
            }
            for package in packages where !(user == me && package.endpointID == endpointID) {
                guard let summary = try? MLSKeyPackageSummary(package.keyPackage), summary.notAfter > now,
                    let credential = try? DeviceCredential(encoded: summary.credential.identity), credential.userID == user,
                    credential.deviceID == package.endpointID,
                    validator.isValid(summary.credential, signatureKey: summary.signatureKey)
                else { continue }
                let device = ChatGroup.Device(user: user, device: package.endpointID)
                if let only, !only.contains(device) { continue }
                guard summary.suite == suite else {
                    if !summary.capableSuites.contains(suite.rawValue) { claim.withoutSuite.append(device) }
                    continue
                }
                claim.devices.append(ClaimedDevice(device: device, keyPackage: package.keyPackage))
            }
        }
        return claim
    }

    /// The KeyPackages a new chat of `users` starts with, and its suite: the first of this
    /// device's suites that every device claimed runs (the post-quantum suite unless a device
    /// does not), so a chat is classic only because of a device that signed that it cannot do
    /// better, never because the domain said so.
    ///
    /// A chat of more than ``postQuantumDeviceLimit`` devices is made classic: its first commit
    /// carries every KeyPackage and its Welcome the tree and a secret for every device, and at
    /// 2.6 KB a device (X-Wing keys and ciphertexts) they would pass the domain's bounds.
    func claimForNewChat(of users: [String]) async throws -> (Claim, MLSCipherSuite) {
        var claim = Claim()
        for suite in suites {
            claim = try await claimDevices(of: users, suite: suite)
            if claim.withoutSuite.isEmpty, !suite.isPostQuantum || claim.devices.count < Self.postQuantumDeviceLimit {
                return (claim, suite)
            }
        }
        return (claim, suites.last ?? .x25519AES128GCMSHA256Ed25519)
    }

    /// The most devices a new post-quantum chat starts with (its creator's included).
    static let postQuantumDeviceLimit = 120

    // MARK: Commits

    /// Commits a change to the chat's group and has the domain order it. `plan` names the
    /// KeyPackages to add and the devices to remove from the group as it is when the commit is
    /// made; `domainAdd` and `domainRemove` are the users whose membership the domain changes.
    /// Changes of one chat run one at a time; a conflict (another commit came first) is
    /// resolved by applying that commit from the mailbox and committing again.
    ///
    /// With `replacingRefused`, the commit replaces the commits ordered since the group's epoch,
    /// which the members refused; it is tried once (on a conflict, another admin's replacement
    /// came first, or the group moved on).
    func change(
        _ chatID: String, domainAdd: [String] = [], domainRemove: [String] = [],
        context: ChatGroup.ContextChange = ChatGroup.ContextChange(), replacingRefused: Bool = false,
        plan: @escaping @Sendable (ChatGroup) throws -> (add: [Data], remove: Set<ChatGroup.Device>)
    ) async throws {
        let previous = changes[chatID]
        let run = Task {
            _ = try? await previous?.value
            try await self.commitChange(
                chatID, domainAdd: domainAdd, domainRemove: domainRemove, context: context,
                replacingRefused: replacingRefused, plan: plan)
        }
        changes[chatID] = run
        defer { if changes[chatID] == run { changes[chatID] = nil } }
        try await run.value
    }

    private func commitChange(
        _ chatID: String, domainAdd: [String], domainRemove: [String], context: ChatGroup.ContextChange,
        replacingRefused: Bool, plan: (ChatGroup) throws -> (add: [Data], remove: Set<ChatGroup.Device>)
    ) async throws {
        let groups = self.groups
        // A conflict the mailbox resolves (the group moved to the commit that won) is progress,
        // however many there are under load; five in a row that move nothing are not.
        var stalled = 0
        for _ in 0..<50 where stalled < 5 {
            let stored = try await read { store in try self.activeSession(chatID, in: store).stored }
            let (add, remove) = try plan(stored.group)
            let (commit, welcome, next) = try ChatSession.commit(stored.group, adding: add, removing: remove, context: context)
            try await write { store in
                try groups.setPending(store, chatID: chatID, digest: SHA256.hash(commit), next: next)
                try store.recordSent(chatID: chatID, payload: commit, localID: nil)
            }
            do {
                _ = try await domainCall {
                    try await domain.postCommit(
                        token: try await token(), endpointID: endpointID, chatID: chatID,
                        epoch: Int64(clamping: stored.group.group.epoch), commit: commit, welcome: welcome, add: domainAdd,
                        remove: domainRemove, replacingRefused: replacingRefused)
                }
            } catch let error as MessagingError where error.domainCode == .conflict {
                // Another commit won this epoch: apply it (and what came with it), then again.
                try await write { store in
                    try store.clearPendingCommit(chatID: chatID, digest: SHA256.hash(commit))
                    try store.forgetSent(payload: commit)
                }
                try await catchUp()
                if replacingRefused { return }
                let epoch = try await read { store in try self.session(chatID, in: store, for: .probe)?.group.group.epoch }
                if epoch == stored.group.group.epoch { stalled += 1 } else { stalled = 0 }
                continue
            }
            // What the domain ordered before the commit was sealed in the epoch it leaves: read
            // up to the commit's echo, which adopts it (`ownCommit`), so none of it is dropped.
            try? await catchUp()
            try await write { store in
                // The mailbox has moved the group (this commit's echo), or could not be read: only
                // the epoch the commit was made for is replaced.
                let now = try self.session(chatID, in: store)
                guard now?.group.group.epoch == stored.group.group.epoch else { return }
                try self.adopt(next, in: store, updated: true)
            }
            return
        }
        throw MessagingError(
            .refused, "the chat's group kept changing under this device's commit; try again", domainCode: .conflict)
    }

    // MARK: Keeping groups right

    /// Looks at the chats that asked for it (or every chat, when `force` or when the last look
    /// was long ago) and commits what each needs (see `reconcile(_:devices:)`).
    func reconcile(force: Bool) async {
        // One pass at a time: two would each decide the same change (an update due) and commit
        // it twice.
        let previous = reconciling
        let pass = Task {
            await previous?.value
            await self.reconcilePass(force: force)
        }
        reconciling = pass
        await pass.value
        if reconciling == pass { reconciling = nil }
    }

    private func reconcilePass(force: Bool) async {
        guard !isStopped else { return }
        let clock = ContinuousClock()
        // KeyPackages on a timer: a device that stays up tops up and rotates as they age.
        if await identities.keyPackagesDue { try? await identities.ensureKeyPackages() }
        // The transparency log on a timer: this user's label and the contacts' (monitoring).
        if await identities.transparencyDue { _ = try? await identities.monitorTransparency() }
        let due = lastReconcile.map { clock.now - $0 >= Self.reconcileInterval } ?? true
        if force || due {
            lastReconcile = clock.now
            if let chats = try? await read({ store in try store.groupChats() }) {
                needsReconcile.withLock { $0.formUnion(chats) }
            }
        }
        let asked = needsReconcile.withLock { asked in
            defer { asked = [] }
            return asked
        }
        let changed = context.devicesChanged.withLock { changed in
            defer { changed = false }
            return changed
        }
        guard !asked.isEmpty || changed else { return }
        let chats = asked.sorted()
        guard let view = try? await identities.ownDeviceView() else {
            needsReconcile.withLock { $0.formUnion(chats) }
            if changed { context.devicesChanged.withLock { $0 = true } }
            return
        }
        let devices = Set(view.listed.map(\.endpoint.endpointID))
        for chatID in chats {
            do {
                try await reconcile(chatID, devices: devices, approved: view.approvedIDs)
            } catch let error where MessagingContext.isRetryable(error) {
                needsReconcile.withLock { _ = $0.insert(chatID) }
            } catch {
                eventSinks.yield(.dropped(chatID: chatID, reason: "the chat's group could not be brought up to date: \(error)"))
            }
        }
    }

    /// Commits, in one commit, what the chat's group needs from this device, as the core plans
    /// it (`MessagingCore.plan`): this user's devices added and removed, as an admin those who
    /// left removed and a contact's devices of an identity no longer trusted replaced, and this
    /// device's key update when due; then this user's new devices get the chat's history. Of
    /// this user's devices (`mine`, as the domain lists them), only the `approved` are added.
    func reconcile(_ chatID: String, devices mine: Set<String>, approved: Set<String>) async throws {
        guard
            let (found, noted, suite) = try await read({ store -> (MessagingCore.GroupReview, Bool, MLSCipherSuite)? in
                guard let stored = try self.session(chatID, in: store)?.stored, stored.group.group.isActive else { return nil }
                let group = stored.group
                let refusedCommit = try store.refusedCommit(chatID: chatID)
                let review = MessagingCore.GroupReview(
                    devices: group.devices, admins: group.admins,
                    refused: Set(group.devices(refusedBy: try self.trustedValidator(store))), mine: mine, approved: approved,
                    departed: try store.departed(chatID: chatID), listed: nil,
                    trusted: Set(try store.trustedContactKeys().keys), sentSinceUpdate: stored.sentSinceUpdate,
                    updatedAt: stored.updatedAt,
                    refusedCommitBy: refusedCommit.flatMap { $0.epoch == group.group.epoch ? $0.sender : nil })
                return (review, refusedCommit != nil, group.group.cipherSuite)
            })
        else { return }
        var review = found
        if core.needsMemberList(review) {
            review.listed = Set(
                try await domainCall {
                    try await domain.chat(token: try await token(), endpointID: endpointID, chatID: chatID)
                }.members.map(\.userID))
        }
        let plan = core.plan(review, now: Date())
        let present = Set(review.devices).subtracting(plan.remove)
        var wanted: [ClaimedDevice] = []
        if !plan.addMine.isEmpty { wanted += try await claimDevices(of: [me], only: plan.addMine, suite: suite).devices }
        if !plan.replace.isEmpty {
            wanted += try await claimDevices(of: plan.replace, suite: suite).devices.filter { !present.contains($0.device) }
        }
        // A refused commit is noted until a pass looks at it: then it is stale (the group moved
        // on), left to an admin, or replaced below.
        let replacing = plan.replacingRefusedBy != nil
        if noted, !replacing { try await write { store in try store.forgetRefusedCommit(chatID: chatID) } }
        guard !plan.remove.isEmpty || !wanted.isEmpty || plan.updateDue || plan.replacingRefusedBy != nil else {
            if !review.departed.isEmpty { try await write { store in try store.forgetDeparted(chatID: chatID) } }
            return
        }
        let (removing, adding) = (plan.remove, wanted)
        // The member who posted the refused commit leaves the domain's list too, if still on it.
        let culprit = plan.replacingRefusedBy.flatMap { review.listed?.contains($0) == true ? $0 : nil }
        do {
            try await change(chatID, domainRemove: culprit.map { [$0] } ?? [], replacingRefused: replacing) { current in
                // Against the group as it is when the commit is made (another commit may have
                // come first): only what is still there is removed, only who is missing is added.
                let now = Set(current.devices)
                return (adding.filter { !now.contains($0.device) }.map(\.keyPackage), removing.intersection(now))
            }
        } catch let error where !MessagingContext.isRetryable(error) {
            if noted { try await write { store in try store.forgetRefusedCommit(chatID: chatID) } }
            throw error
        }
        if noted { try await write { store in try store.forgetRefusedCommit(chatID: chatID) } }
        if !review.departed.isEmpty { try await write { store in try store.forgetDeparted(chatID: chatID) } }
        await outbox.sendHistory(
            of: chatID, to: core.historyRecipients(before: review.devices, after: try await groupDevices(of: chatID)))
    }
}
