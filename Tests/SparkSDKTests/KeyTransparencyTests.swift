import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkDomainEngine
@testable import SparkSDK

/// The transparency log as an operator holding the domain's database and keys can rewrite it:
/// the tree rebuilt from the domain's rows with a change, its heads signed with the domain's own
/// head key.
struct ForgedLog: Sendable {
    let tree: CombinedTree
    let secrets: TransparencySecrets

    /// The rows of `domain`'s log, as stored.
    static func rows(of domain: EmbeddedDomain) async throws -> [CombinedTree.Logged] {
        try await domain.store.read { db in
            try db.rows("SELECT position, label, version, vrf_output, opening, value FROM kt_log ORDER BY position").map { row in
                CombinedTree.Logged(
                    position: UInt64(try row.get(0, as: Int64.self)), label: try row.get(1),
                    version: UInt32(try row.get(2, as: Int64.self)), vrfOutput: try row.get(3), opening: try row.get(4),
                    value: try row.get(5))
            }
        }
    }

    /// `domain`'s log with `rows` instead of its own, then `appended` updates (label, value).
    init(_ domain: EmbeddedDomain, rows: [CombinedTree.Logged], appended: [(label: Data, value: Data)] = []) throws {
        secrets = domain.transparency.secrets
        var tree = CombinedTree(vrf: secrets.vrf)
        try tree.append(logged: rows)
        if !appended.isEmpty { _ = try tree.appendLogging(epoch: appended) }
        self.tree = tree
    }

    /// The head of `size` entries (the whole log by default), signed with the domain's key.
    func head(size: UInt64? = nil) throws -> TreeHead {
        let size = size ?? tree.size
        let root = try #require(tree.root(at: size))
        let timestamp = UInt64(Date().timeIntervalSince1970 * 1000)
        let signature = try secrets.head.signature(
            for: TreeHead.signedBytes(size: size, root: root, timestamp: timestamp, vrfKey: secrets.publicKeys.vrfKey))
        return TreeHead(size: size, root: root, timestamp: timestamp, signature: signature)
    }

    /// A proof of `user`'s latest value in this log, for a reader holding a head of `since` entries.
    func proof(of user: String, since: UInt64?) throws -> IdentityProof {
        let consistency = since.flatMap { $0 > 0 && $0 < tree.size ? tree.consistencyProof(from: $0, to: tree.size) : nil }
        return IdentityProof(
            head: try head(), consistency: consistency ?? [], search: try tree.searchLatest(IdentityProof.label(of: user)))
    }

    /// The heads a reader holding `since` entries is shown.
    func heads(since: UInt64?) throws -> TransparencyHeads {
        guard let since, since > 0, since <= tree.size else {
            return TransparencyHeads(latest: try head(), consistency: [], at: nil)
        }
        return TransparencyHeads(
            latest: try head(), consistency: since < tree.size ? tree.consistencyProof(from: since, to: tree.size) ?? [] : [],
            at: try head(size: since))
    }
}

extension HostileWorld {
    /// What an operator with the database does to put its own identity for a user in the log
    /// (``DomainEngine/logAsOperator(_:)``).
    func logForged(_ identity: PublishedIdentity) async throws { try await real.logAsOperator(identity) }
}

/// Key transparency against a domain that lies: each of the four attacks of issue 45 is caught
/// by the devices, without anyone comparing safety numbers.
@Suite("Key transparency: a substituted key caught by the log's proofs, monitoring and gossip")
struct KeyTransparencyTests {
    /// The domain gives alice a key for bob that is not in its log (with the proof it has):
    /// alice's first contact with bob (trusted on first use before key transparency) holds bob as
    /// changed with the reason, nothing reaches the key, and accepting it is refused; once the
    /// domain behaves, the log's key is trusted.
    @Test(arguments: MessagingStoreKind.tested) func aKeyOutsideTheLogIsHeldWithTheReasonAtFirstContact(
        messaging: MessagingStoreKind
    ) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            let events = EventRecorder(alice)
            let impostor = try HostileWorld.impostor(of: "bob")
            world.substitute(impostor, for: "bob")
            await #expect(throws: MessagingError(.identityUnconfirmed, "")) { try await alice.startChat(with: ["bob"]) }
            let contact = try await alice.contact("bob")
            #expect(contact.verification == .changed)
            #expect(
                contact.transparencyFailure?.contains("did not commit to") == true, "\(contact.transparencyFailure ?? "none")")
            await #expect(throws: MessagingError(.identityUnconfirmed, "")) { try await alice.acceptIdentityChange(of: "bob") }
            #expect(
                await waitFor("the failure told") {
                    events.value.contains { event in
                        if case .transparencyFailure(userID: "bob", _) = event { return true }
                        return false
                    }
                })
            #expect(world.welcomesAdmitting(impostor) == 0, "nothing admits the substitute")

            world.substitute(nil, for: "bob")
            let restored = try await alice.contact("bob")
            #expect(restored.verification == .unverified && restored.transparencyFailure == nil)
            let chat = try await alice.startChat(with: ["bob"])
            #expect(try await alice.sendMessage("hello", to: chat.chatID).state != .held)
        }
    }

    /// The domain logs a version of bob's identity it holds (with KeyPackages signed by it). A new
    /// contact cannot tell from the proof, but bob's own device, checking its label, raises the
    /// alarm; alice, who trusted bob's real key, sees bob changed at her next check.
    @Test(arguments: MessagingStoreKind.tested) func aFakeVersionInTheLogRaisesTheOwnersAlarm(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            _ = try await alice.startChat(with: ["bob"])
            #expect(try await bob.checkTransparency() == nil, "the log holds bob's own key")
            let bobEvents = EventRecorder(bob)

            let keys = try UnlockedKeys.generate(userID: "bob", keyVersion: 2)
            try await world.logForged(try keys.publishedIdentity())
            let alarm = try await bob.checkTransparency()
            #expect(alarm?.contains("none of your devices published") == true, "\(alarm ?? "none")")
            #expect(try await bob.transparencyAlarm() == alarm, "the alarm is a state on the user")
            #expect(
                await waitFor("the alarm told") {
                    bobEvents.value.contains { event in
                        if case .transparencyAlarm = event { return true }
                        return false
                    }
                })
            _ = try await alice.checkTransparency()
            #expect(try await alice.contact("bob").verification == .changed, "alice's contact monitoring sees the new version")
        }
    }

    /// Alice holds the log's head; the domain then shows her a log whose past is rewritten (bob's
    /// first identity replaced), signed with its own key: the new head does not extend hers.
    @Test(arguments: MessagingStoreKind.tested) func aRewrittenPastIsCaught(messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            _ = try await alice.startChat(with: ["bob"])
            let impostor = try HostileWorld.impostor(of: "bob")
            let label = IdentityProof.label(of: "bob")
            let rows = try await ForgedLog.rows(of: world.real).map { row in
                var row = row
                if row.label == label { row.value = try! IdentityProof.value(of: impostor.identity) }
                return row
            }
            let forged = try ForgedLog(world.real, rows: rows, appended: [(IdentityProof.label(of: "zed"), Data("z".utf8))])
            world.domain.proofRewrite.withLock {
                $0 = { _, user, since, _ in try forged.proof(of: user, since: since) }
            }
            _ = try await alice.checkTransparency()
            let contact = try await alice.contact("bob")
            #expect(contact.verification == .changed)
            #expect(contact.transparencyFailure?.contains("does not extend") == true, "\(contact.transparencyFailure ?? "none")")
        }
    }

    /// Two lookups at once: while one's proof is in flight, another keeps a newer head. The
    /// domain answers the first with a log forked right after the head that lookup started from
    /// (so it extends that head, not the newer one), longer than the real log, and holding an
    /// impostor's key for bob. The first lookup must not replace the newer head with the fork:
    /// it asks again from the newer head, and the fork is caught as not extending it.
    @Test(arguments: MessagingStoreKind.tested) func aLookupOvertakenByANewerHeadAsksAgain(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            _ = try await alice.startChat(with: ["bob"])
            let impostor = try HostileWorld.impostor(of: "bob")
            let padding = (0..<4).map { (IdentityProof.label(of: "pad\($0)"), Data("p".utf8)) }
            let forked = try ForgedLog(
                world.real, rows: try await ForgedLog.rows(of: world.real),
                appended: [(IdentityProof.label(of: "bob"), try IdentityProof.value(of: impostor.identity))] + padding)
            // Bob's proofs are the fork's once the held lookup goes on (lookups the device makes
            // meanwhile on its own, on a slow machine, get the true ones and keep true heads).
            let forging = Locked(false)
            world.domain.proofRewrite.withLock {
                $0 = { _, user, since, proof in
                    user == "bob" && forging.withLock({ $0 }) ? try forked.proof(of: user, since: since) : proof
                }
            }
            // The first lookup of bob is held until dave's lookup has kept a newer head.
            let (parked, parking) = AsyncStream<Void>.makeStream()
            let (released, release) = AsyncStream<Void>.makeStream()
            let held = Locked(false)
            world.domain.proofPause.withLock {
                $0 = { _, user, _ in
                    guard user == "bob" else { return }
                    let first = held.withLock { wasHeld in
                        defer { wasHeld = true }
                        return !wasHeld
                    }
                    guard first else { return }
                    parking.yield()
                    for await _ in released { break }
                }
            }
            let lookup = Task { try await alice.checkTransparency() }
            for await _ in parked { break }
            _ = try await world.endpoint("dave", "dave-phone")
            _ = try await alice.startChat(with: ["dave"])
            let real = try ForgedLog(world.real, rows: try await ForgedLog.rows(of: world.real))
            #expect(try forked.head().size > real.head().size, "the fork is longer than the real log")
            forging.withLock { $0 = true }
            release.yield()
            _ = try await lookup.value
            // Whichever lookup was held (this check's, or one the device made on its own), the
            // kept head is the real one: bob's next proof, the fork's, does not extend it.
            _ = try await alice.checkTransparency()
            let contact = try await alice.contact("bob")
            #expect(contact.verification == .changed)
            #expect(contact.transparencyFailure?.contains("does not extend") == true, "\(contact.transparencyFailure ?? "none")")
            // The head kept is still the real log's: dave's proof, honest, verifies against it.
            world.domain.proofRewrite.withLock { $0 = nil }
            _ = try await alice.checkTransparency()
            #expect(try await alice.contact("dave").transparencyFailure == nil)
        }
    }

    /// Marks the lookups a test holds (the device's own lookups, made beside them, are not).
    @TaskLocal static var held = false

    /// A lookup overtaken by a newer head at each of its tries gives up as the domain being
    /// unavailable (a transient error: nothing is kept, the next check asks again), rather than
    /// take a proof verified against a head that is no longer the one kept.
    @Test func aLookupOvertakenAtEveryTryGivesUpAsUnavailable() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            _ = try await alice.startChat(with: ["bob"])
            let parked = Counter()
            let (released, release) = AsyncStream<Void>.makeStream()
            // A failed step below leaves no lookup held.
            defer { release.finish() }
            world.domain.proofPause.withLock {
                $0 = { _, user, _ in
                    guard user == "bob", Self.held else { return }
                    parked.increment()
                    for await _ in released { break }
                }
            }
            let lookup = Task { try await Self.$held.withValue(true) { try await alice.checkTransparency() } }
            // At each try, while bob's proof is in flight, a new user publishes and the device
            // keeps the head that holds them; then another publishes, so that the proof answered
            // ends at a head the device has not kept either.
            for index in 0..<Identities.lookupsPerHeadRace {
                try #require(await eventually { parked.value == index + 1 }, "try \(index + 1) of bob's lookup")
                _ = try await world.endpoint("p\(index)", "p\(index)-phone")
                _ = try await alice.startChat(with: ["p\(index)"])
                _ = try await world.endpoint("q\(index)", "q\(index)-phone")
                release.yield()
            }
            await #expect {
                _ = try await lookup.value
            } throws: { error in
                guard let error = error as? MessagingError else { return false }
                return error.code == .refused && error.domainCode == .unavailable
                    && "\(error)".contains("moved during each of \(Identities.lookupsPerHeadRace) lookups")
            }
            // Nothing was taken from the proofs given up: the next check, not overtaken, proves
            // bob against the head kept.
            world.domain.proofPause.withLock { $0 = nil }
            #expect(try await alice.checkTransparency() == nil)
            let contact = try await alice.contact("bob")
            #expect(contact.transparencyFailure == nil && contact.verification != .changed)
        }
    }

    /// A domain that says its log is empty to a device that has seen a head of it (to hide a
    /// change from its monitoring) is caught: the contact is held, and the owner's alarm raised.
    @Test func aLogSaidToBeEmptyAfterAHeadIsCaught() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            _ = try await alice.startChat(with: ["bob"])
            world.domain.proofRewrite.withLock {
                $0 = { _, _, _, _ in throw DomainError(.notFound, "the transparency log is empty") }
            }
            let alarm = try await alice.checkTransparency()
            #expect(alarm?.contains("empty") == true, "\(alarm ?? "none")")
            let contact = try await alice.contact("bob")
            #expect(contact.verification == .changed && contact.transparencyFailure?.contains("empty") == true)
        }
    }

    /// A device that requires no auditor takes no abridged proof (one that walks the last entry
    /// only, which hides what earlier entries held): the domain that serves one is refused.
    @Test func anAbridgedProofIsRefusedWithoutAnAuditor() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            _ = try await world.endpoint("carol", "carol-laptop")
            let honest = try ForgedLog(world.real, rows: try await ForgedLog.rows(of: world.real))
            world.domain.proofRewrite.withLock {
                $0 = { _, user, _, proof in
                    var proof = proof
                    proof.search = try honest.tree.searchLatest(
                        IdentityProof.label(of: user), size: proof.head.size, abridged: true)
                    return proof
                }
            }
            await #expect(throws: MessagingError(.identityUnconfirmed, "")) { try await alice.startChat(with: ["bob"]) }
            #expect(try await alice.contact("bob").transparencyFailure?.contains("frontier") == true)
        }
    }

    /// The domain shows carol a log of its own (the real one with an entry only she sees) and
    /// alice the real one, which then grows (by one: alice's head is the size of carol's, with
    /// another root; by two: carol asks the domain for its head of alice's size, which her forked
    /// view does not have). Alice's next message carries her head; carol's device finds it cannot
    /// be in the log she was shown, and raises the alarm.
    @Test(arguments: [(1, MessagingStoreKind.sqlite), (2, MessagingStoreKind.memory)])
    func aForkIsCaughtByTheHeadsMembersGossip(growth: Int, messaging: MessagingStoreKind) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory, messaging: messaging)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            _ = try await world.endpoint("bob", "bob-phone")
            let (carolService, carol) = try await world.endpoint("carol", "carol-laptop")
            let chat = try await alice.startChat(with: ["bob", "carol"])
            let carolEndpoint = try await carolService.endpointID
            let forked = try ForgedLog(
                world.real, rows: try await ForgedLog.rows(of: world.real),
                appended: [(IdentityProof.label(of: "mallory"), Data("m".utf8))])
            world.domain.proofRewrite.withLock {
                $0 = { endpoint, user, since, proof in
                    endpoint == carolEndpoint ? try forked.proof(of: user, since: since) : proof
                }
            }
            world.domain.headsRewrite.withLock {
                $0 = { endpoint, since, heads in endpoint == carolEndpoint ? try forked.heads(since: since) : heads }
            }
            #expect(try await carol.checkTransparency() == nil, "carol's view alone is consistent")
            // The real log grows: dave sets up (and erin).
            for user in ["dave", "erin"].prefix(growth) { _ = try await world.endpoint(user, "\(user)-phone") }
            #expect(try await alice.checkTransparency() == nil)
            let carolEvents = EventRecorder(carol)
            _ = try await alice.sendMessage("hello", to: chat.chatID)
            #expect(
                await waitFor("carol's alarm") {
                    carolEvents.value.contains { event in
                        if case .transparencyAlarm(let reason) = event {
                            return reason.contains("fork") && reason.contains("alice")
                        }
                        return false
                    }
                })
            #expect(try await carol.transparencyAlarm()?.contains("a fork") == true, "the alarm stays on carol")
        }
    }

    /// A new user whose plist requires an auditor, checked before the auditor co-signed a head
    /// holding her identity: not yet audited is no alarm. Once it co-signs, her check passes on
    /// the audited head; and when the log's latest head holds an identity none of her devices
    /// published, the alarm is raised as before, audited or not.
    @Test func notYetAuditedIsNoAlarm() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let auditor = TransparencyAuditor(
                source: world.real, keys: world.real.transparency.keys, signer: try P256.SigningKey(), lastSigned: nil)
            try world.real.addTransparencyAuditor(auditor.publicKey, name: "second organisation")
            _ = try await world.endpoint("bob", "bob-phone")
            #expect(try await auditor.step()?.size == 1)
            let (_, dana) = try await world.endpoint("dana", "dana-laptop", auditor: auditor.publicKey)
            #expect(try await dana.checkTransparency() == nil, "her identity is only newer than the audited head")
            #expect(try await dana.transparencyAlarm() == nil)
            // Erin's identity is replaced before any audit: the latest head does not hold hers.
            let (_, erin) = try await world.endpoint("erin", "erin-laptop", auditor: auditor.publicKey)
            try await world.logForged(try Fixtures.publishedIdentity("erin", version: 2).0)
            #expect(try await erin.checkTransparency() != nil, "not awaiting an audit: the log holds another identity")
            #expect(try await auditor.step()?.size == 4)
            #expect(try await dana.checkTransparency() == nil)
            try await world.logForged(try Fixtures.publishedIdentity("dana", version: 2).0)
            #expect(try await auditor.step()?.size == 5)
            #expect(try await dana.checkTransparency()?.contains("none of your devices published") == true)
        }
    }

    /// A device whose plist names an auditor accepts only heads that auditor co-signed; the
    /// auditor, rebuilding the log from its updates, co-signs it while it only grows, and stops
    /// at a log whose past was rewritten in the database.
    @Test func anAuditorCosignsTheLogAndDevicesRequireIt() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try HostileWorld(directory)
            let auditorKey = try P256.SigningKey()
            let auditor = TransparencyAuditor(
                source: world.real, keys: world.real.transparency.keys, signer: auditorKey, lastSigned: nil)
            try world.real.addTransparencyAuditor(auditor.publicKey, name: "second organisation")
            let (_, alice) = try await world.endpoint("alice", "alice-laptop", auditor: auditor.publicKey)
            _ = try await world.endpoint("bob", "bob-phone")
            await #expect(throws: (any Error).self, "no head is co-signed yet") { try await alice.startChat(with: ["bob"]) }
            let signed = try #require(try await auditor.step())
            #expect(signed.size == 2)
            _ = try await alice.startChat(with: ["bob"])
            #expect(try await alice.contact("bob").transparencyFailure == nil)

            // The domain serves a head the auditor never signed: refused.
            world.domain.proofRewrite.withLock {
                $0 = { _, _, _, proof in
                    var proof = proof
                    proof.auditorSignature = try auditorKey.signature(for: Data("another head".utf8))
                    return proof
                }
            }
            _ = try await alice.checkTransparency()
            #expect(try await alice.contact("bob").transparencyFailure?.contains("co-signed") == true)
            world.domain.proofRewrite.withLock { $0 = nil }

            // An operator rewrites bob's entry in the database; an instance started afterwards
            // rebuilds its log from the rows, finds they do not give its signed head's root, and
            // signs nothing over the rewritten past: the auditor has no new head to co-sign.
            try await world.real.store.write { db in
                try db.execute(
                    "UPDATE kt_log SET value = ? WHERE label = ?", [Data("forged".utf8), IdentityProof.label(of: "bob")])
            }
            let restarted = try EmbeddedDomain.open(
                at: directory.appendingPathComponent("domain.sqlite").path, allowUnsafePasswordHashing: true)
            let carol = try await restarted.testToken(userID: "carol").token
            _ = try await restarted.registerEndpoint(token: carol, registration: .init(endpointID: "c1", description: "test"))
            let refused = await #expect(throws: DomainError.self, "the restarted domain signs no head over it") {
                try await restarted.publishIdentity(
                    token: carol, endpointID: "c1", identity: try Fixtures.publishedIdentity("carol").0)
            }
            #expect(refused?.code == .unavailable, "\(String(describing: refused))")
            #expect(try await auditor.step() == nil, "no new head to co-sign")
            #expect(await auditor.lastSigned == signed)
        }
    }
}
