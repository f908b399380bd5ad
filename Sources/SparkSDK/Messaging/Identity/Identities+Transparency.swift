import Foundation
import SparkCrypto
import SparkDomain
import SparkLock

/// Key transparency on the device (`docs/FORMATS.md`, "Key transparency"): every identity read
/// comes from the domain's log with its search proof, verified here against the domain's keys
/// (pinned when first fetched) and the last tree head this device accepted, which every later
/// head must extend. The user's own identity and the contacts' are checked again on a schedule
/// (monitoring), so that a version none of the user's devices published raises an alarm.
extension Identities {
    /// What the log proves of a user: the identity it holds, or, when its proof failed, the
    /// identity the domain claims and why it failed.
    struct Proven: Sendable {
        var identity: PublishedIdentity?
        var failure: String?
    }

    /// How many times one lookup asks again when other lookups keep a newer head while its proof
    /// is in flight (a proof extends the head it was asked from, which must still be the one kept).
    static let lookupsPerHeadRace = 4

    /// `user`'s identity as the transparency log proves it; a failed proof is returned with the
    /// identity the domain claims (to show, never to trust), not thrown.
    ///
    /// Lookups run concurrently, so the head kept when a proof is asked for may not be the one
    /// kept when it is verified: a proof is taken only if the head it was verified against is
    /// still the one kept (else this asks again, from the newer head). A lookup that read an
    /// older head can never replace a newer one with a head that does not extend it.
    func provenIdentity(of user: String) async throws -> Proven {
        for _ in 0..<Self.lookupsPerHeadRace {
            if let proven = try await provenIdentityOnce(of: user) { return proven }
        }
        throw MessagingError(
            .refused, "the transparency log's head moved during each of \(Self.lookupsPerHeadRace) lookups of \(user)",
            domainCode: .unavailable)
    }

    /// One lookup of `user`: nil when another lookup kept a newer head meanwhile.
    private func provenIdentityOnce(of user: String) async throws -> Proven? {
        let state = try await read { store in try store.transparencyState() }
        let keys: TransparencyKeys
        if let pinned = state.keys { keys = pinned } else { keys = try await transparencyKeys() }
        let previous = state.head
        let proof: IdentityProof
        do {
            proof = try await domainCall {
                try await domain.identityProof(
                    token: try await token(), endpointID: endpointID, userID: user, since: previous?.size,
                    auditor: context.transparencyAuditor)
            }
        } catch let error as MessagingError where error.domainCode == .notFound && context.transparencyAuditor == nil {
            // An empty log (no user has published an identity yet): nobody to prove. A device
            // that has seen a head takes no such answer: the log only grows.
            guard let previous else { return Proven(identity: nil, failure: nil) }
            return Proven(
                identity: nil,
                failure: "the domain says its transparency log is empty after showing one of \(previous.size) entries")
        }
        let verified: IdentityProof.Verified
        do {
            verified = try proof.verify(userID: user, keys: keys, previous: previous, auditor: context.transparencyAuditor)
        } catch {
            let reason = (error as? CryptoError)?.reason ?? "\(error)"
            let claimed = try await domainCall {
                try await domain.identity(token: try await token(), endpointID: endpointID, userID: user)
            }
            return Proven(identity: claimed, failure: reason)
        }
        guard try await keep(verified.head, extending: previous) else { return nil }
        return Proven(identity: verified.identity, failure: nil)
    }

    /// The domain's transparency keys: as pinned, or fetched and pinned now.
    func transparencyKeys() async throws -> TransparencyKeys {
        if let pinned = try await read({ store in try store.transparencyState().keys }) { return pinned }
        let fetched = try await domainCall {
            try await domain.transparencyKeys(token: try await token(), endpointID: endpointID)
        }
        guard (try? fetched.vrf()) != nil, (try? fetched.head()) != nil else {
            throw MessagingError(.forged, "the domain's transparency keys are not P-256 keys")
        }
        return try await write { store in
            var state = try store.transparencyState()
            if let pinned = state.keys { return pinned }
            state.keys = fetched
            try store.setTransparencyState(state)
            return fetched
        }
    }

    /// Keeps `head`, verified to extend `previous`, as the last accepted (and gossips it from
    /// now on), if `previous` is still the head kept; false when another lookup kept another head
    /// meanwhile (the proof says nothing of how `head` relates to that one). A head already kept
    /// is taken as it is.
    func keep(_ head: TreeHead, extending previous: TreeHead?) async throws -> Bool {
        let kept = try await write { store -> TreeHead? in
            var state = try store.transparencyState()
            if let current = state.head, Self.same(current, head) { return current }
            guard Self.same(state.head, previous) else { return nil }
            state.head = head
            try store.setTransparencyState(state)
            return head
        }
        guard let kept else { return false }
        context.gossipHead.withLock { $0 = TransparencyCodec.encode(kept) }
        return true
    }

    /// Whether two heads are the same point of the log (their signatures may differ).
    private static func same(_ a: TreeHead?, _ b: TreeHead?) -> Bool {
        a?.size == b?.size && a?.root == b?.root
    }

    /// Gossips the head kept in the store (at start).
    func loadGossip() async {
        guard let head = try? await read({ store in try store.transparencyState().head }) else { return }
        context.gossipHead.withLock { $0 = TransparencyCodec.encode(head) }
    }

    /// A head another member's device carried in a message: signed by the domain's key, it must
    /// be one the domain would give this device too. A head of this device's size with another
    /// root, or one the domain does not name as its head of that size, is a fork (the domain
    /// shows members different logs): the alarm is raised for good. A head that is not the
    /// domain's (a member's garbage) is ignored.
    func heard(_ encoded: Data, from user: String) async {
        // Most messages carry a head already seen: no read, no signature check for those.
        guard encoded != context.gossipHead.withLock({ $0 }),
            let head = try? TransparencyCodec.decodeHead(encoded), !confirmedHeads.contains(head.root),
            let state = try? await read({ store in try store.transparencyState() }),
            let keys = state.keys, head.isSigned(by: keys), state.fork == nil
        else { return }
        if let mine = state.head, mine.size == head.size {
            if mine.root != head.root {
                await raiseFork("\(user)'s device was shown another log of \(head.size) entries than this device")
            } else {
                confirmedHeads.insert(head.root)
            }
            return
        }
        guard
            let heads = try? await domainCall({
                try await domain.transparencyHeads(token: try await token(), endpointID: endpointID, since: head.size)
            })
        else { return }
        guard let signed = heads.at, signed.root == head.root else {
            await raiseFork("\(user)'s device was shown a log of \(head.size) entries that the domain does not show this device")
            return
        }
        if confirmedHeads.count >= 4_096 { confirmedHeads.removeAll() }
        confirmedHeads.insert(head.root)
    }

    private func raiseFork(_ reason: String) async {
        let alarm = "the domain shows members different logs (a fork): \(reason)"
        let raised =
            (try? await write { store -> Bool in
                var state = try store.transparencyState()
                guard state.fork == nil else { return false }
                state.fork = alarm
                try store.setTransparencyState(state)
                return true
            }) ?? false
        if raised { eventSinks.yield(.transparencyAlarm(reason: alarm)) }
    }

    /// Checks this user's own label: the log's latest identity must be the one this device
    /// holds (its signing and encryption keys). Anything else, or a proof that fails, raises the
    /// alarm (kept, and told once as ``MessagingEvent/transparencyAlarm(reason:)``); a later
    /// check that finds the log right again clears it.
    @discardableResult
    func monitorOwnIdentity() async throws -> String? {
        let proven = try await provenIdentity(of: me)
        let own = try keys.publishedIdentity()
        // The auditor's latest co-signed head may predate this identity: not yet audited is no
        // alarm, as long as the log's latest head (proved, not co-signed) holds it.
        var awaitingAudit = false
        if proven.failure == nil, context.transparencyAuditor != nil,
            proven.identity.map({ $0.keyVersion < own.keyVersion }) ?? true
        {
            awaitingAudit = try await latestLogHolds(own)
        }
        let alarm: String? =
            if awaitingAudit {
                nil
            } else if let failure = proven.failure {
                "the transparency log's proof of your own identity failed: \(failure)"
            } else if let logged = proven.identity {
                ContactDirectory.sameKeys(logged, own)
                    ? nil
                    : "the transparency log holds a version of your identity (key version \(logged.keyVersion)) that none of your devices published"
            } else {
                "the transparency log holds no identity for you: it was reset by no device of yours"
            }
        let raised = try await write { store -> Bool in
            var state = try store.transparencyState()
            guard state.alarm != alarm else { return false }
            state.alarm = alarm
            try store.setTransparencyState(state)
            return alarm != nil
        }
        if raised, let alarm { eventSinks.yield(.transparencyAlarm(reason: alarm)) }
        return alarm
    }

    /// Whether the log's latest head, as the domain proves it without an auditor's co-signature,
    /// holds `own` as this user's identity (checked against the pinned keys; the head is not
    /// kept, since the device takes only co-signed heads).
    private func latestLogHolds(_ own: PublishedIdentity) async throws -> Bool {
        let keys = try await transparencyKeys()
        let proof = try await domainCall {
            try await domain.identityProof(
                token: try await token(), endpointID: endpointID, userID: me, since: nil, auditor: nil)
        }
        guard let logged = try? proof.verify(userID: me, keys: keys, previous: nil, auditor: nil).identity else {
            return false
        }
        return ContactDirectory.sameKeys(logged, own)
    }

    /// The alarm monitoring or gossip raised, if any (a fork first: it is never cleared).
    func transparencyAlarm() async throws -> String? {
        try await read { store in
            let state = try store.transparencyState()
            return state.fork ?? state.alarm
        }
    }

    /// Checks every stored contact's key against the log again (contact monitoring): a key the
    /// log no longer proves, or a newer one, marks the contact changed as a read would.
    func monitorContacts() async throws {
        let users = try await read { store in try store.contactUsers() }
        for user in users where user != me {
            _ = try await contactRecord(of: user, refresh: true)
        }
    }
}
