import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkStore
import SparkTestSupport
import Testing

/// The domain's transparency log: what a publish puts in it, the proofs it serves, several
/// instances taking turns at its epochs, and the encodings a device decodes.
@Suite("Key transparency: the domain's log")
struct TransparencyLogTests {
    /// Alice's endpoint with her identity published.
    static func published(_ domain: EmbeddedDomain, _ user: String, endpoint: String) async throws -> (
        token: String, identity: PublishedIdentity
    ) {
        let token = try await domain.testToken(userID: user).token
        _ = try await domain.registerEndpoint(token: token, registration: .init(endpointID: endpoint, description: "test"))
        let (identity, _) = try Fixtures.publishedIdentity(user)
        try await domain.publishIdentity(token: token, endpointID: endpoint, identity: identity)
        return (token, identity)
    }

    /// A publish is in the log when the call returns: its proof verifies under the domain's keys
    /// and opens the identity published; a user without one is proved absent.
    @Test func aPublishedIdentityIsProvedFromTheLog() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let (token, alice) = try await Self.published(domain, "alice", endpoint: "a1")
            let keys = try await domain.transparencyKeys(token: token, endpointID: "a1")
            let proof = try await domain.identityProof(token: token, endpointID: "a1", userID: "alice", since: nil, auditor: nil)
            let verified = try proof.verify(userID: "alice", keys: keys, previous: nil)
            #expect(verified.identity == alice && verified.version == 0)
            let absent = try await domain.identityProof(
                token: token, endpointID: "a1", userID: "nobody", since: nil, auditor: nil)
            #expect(try absent.verify(userID: "nobody", keys: keys, previous: proof.head).identity == nil)
            // The proof is for its own label only.
            #expect(throws: CryptoError.self) { try proof.verify(userID: "bob", keys: keys, previous: nil) }

            // Bob publishes: the new head extends alice's, by the consistency proof it comes with.
            _ = try await Self.published(domain, "bob", endpoint: "b1")
            let later = try await domain.identityProof(
                token: token, endpointID: "a1", userID: "alice", since: proof.head.size, auditor: nil)
            #expect(later.head.size == proof.head.size + 1 && !later.consistency.isEmpty)
            #expect(try later.verify(userID: "alice", keys: keys, previous: proof.head).identity == alice)
            let heads = try await domain.transparencyHeads(token: token, endpointID: "a1", since: proof.head.size)
            #expect(heads.latest == later.head && heads.at?.root == proof.head.root)
        }
    }

    /// Before anyone publishes, the log is empty: a proof or a head is not found (a 404 on the
    /// wire, never a 5xx), and an auditor that signed nothing is not found either.
    @Test func anEmptyLogIsNotFound() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let token = try await domain.testToken(userID: "alice").token
            _ = try await domain.registerEndpoint(token: token, registration: .init(endpointID: "a1", description: "test"))
            await #expect(throws: DomainError(.notFound, "")) {
                try await domain.identityProof(token: token, endpointID: "a1", userID: "alice", since: nil, auditor: nil)
            }
            await #expect(throws: DomainError(.notFound, "")) {
                try await domain.transparencyHeads(token: token, endpointID: "a1", since: 5)
            }
            let (identity, _) = try Fixtures.publishedIdentity("alice")
            try await domain.publishIdentity(token: token, endpointID: "a1", identity: identity)
            await #expect(throws: DomainError(.notFound, "")) {
                try await domain.identityProof(
                    token: token, endpointID: "a1", userID: "alice", since: nil, auditor: Data(repeating: 7, count: 64))
            }
            #expect(try await domain.transparencyUpdates(after: -1, limit: 10).updates.count == 1)
        }
    }

    /// A head signed by any key but the domain's, or a proof whose bytes are cut or padded, is
    /// refused.
    @Test func aProofVerifiesOnlyUnderTheDomainsKeys() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let (token, _) = try await Self.published(domain, "alice", endpoint: "a1")
            let keys = try await domain.transparencyKeys(token: token, endpointID: "a1")
            let proof = try await domain.identityProof(token: token, endpointID: "a1", userID: "alice", since: nil, auditor: nil)
            let other = try P256.SigningKey()
            var forged = proof
            forged.head.signature = try other.signature(
                for: TreeHead.signedBytes(
                    size: proof.head.size, root: proof.head.root, timestamp: proof.head.timestamp, vrfKey: keys.vrfKey))
            #expect(throws: CryptoError.self) { try forged.verify(userID: "alice", keys: keys, previous: nil) }
            let otherKeys = TransparencyKeys(vrfKey: keys.vrfKey, headKey: other.publicKey.x + other.publicKey.y)
            #expect(throws: CryptoError.self) { try proof.verify(userID: "alice", keys: otherKeys, previous: nil) }

            let encoded = TransparencyCodec.encode(proof)
            #expect(try TransparencyCodec.decodeProof(encoded) == proof)
            for cut in [0, 1, encoded.count / 2, encoded.count - 1] {
                #expect(throws: CryptoError.self) { try TransparencyCodec.decodeProof(encoded.prefix(cut)) }
            }
            #expect(throws: CryptoError.self) { try TransparencyCodec.decodeProof(encoded + [0]) }
            // Random bytes never crash the decoder.
            var random = SystemRandomNumberGenerator()
            for _ in 0..<200 {
                var noise = encoded
                noise[Int.random(in: 0..<noise.count, using: &random)] ^= UInt8.random(in: 1...255, using: &random)
                if let decoded = try? TransparencyCodec.decodeProof(noise) {
                    _ = try? decoded.verify(userID: "alice", keys: keys, previous: nil)
                }
            }
        }
    }

    /// A hostile operator edits a stopped domain's database: bob's latest log row and directory
    /// row replaced by an identity whose keys the operator holds. The restarted domain rebuilds
    /// its tree from the rows, finds they do not give the root of the head it signed, and neither
    /// serves a proof nor signs a new head. Rolling the log back instead (the heads and rows
    /// after alice's deleted, so the rows agree with the latest head left) is caught by the head
    /// pinned beside the keys.
    @Test func aDomainRefusesALogItsDatabaseRewrote() async throws {
        for rollBack in [false, true] {
            try await Fixtures.withTemporaryDirectory { directory in
                let path = directory.appendingPathComponent("domain.sqlite").path
                var domain: EmbeddedDomain? = try makeDomain(directory)
                let (token, _) = try await Self.published(try #require(domain), "alice", endpoint: "a1")
                _ = try await Self.published(try #require(domain), "bob", endpoint: "b1")
                _ = try await domain?.identityProof(token: token, endpointID: "a1", userID: "bob", since: nil, auditor: nil)
                domain = nil
                let (forged, _) = try Fixtures.publishedIdentity("bob")
                let document = try JSONEncoder().encode(forged)
                let queue = try DatabaseQueue(path: path)
                try queue.write { db in
                    if rollBack {
                        let first = try #require(try db.scalar("SELECT min(size) FROM kt_heads", as: Int64.self))
                        _ = try db.execute("DELETE FROM kt_heads WHERE size > ?", [first])
                        _ = try db.execute("DELETE FROM kt_log WHERE position >= ?", [first])
                    } else {
                        _ = try db.execute(
                            "UPDATE kt_log SET value = ? WHERE label = ?", [document, IdentityProof.label(of: "bob")])
                        // And no pin to compare with (an instance that never saw the latest
                        // head): the signed head in the database is enough to catch it.
                        try FileManager.default.removeItem(atPath: path + ".passcode-keys.kt-head")
                    }
                    _ = try db.execute("UPDATE identities SET document = ? WHERE user_id = 'bob'", [document])
                }
                let heads = try queue.read { db in try db.scalar("SELECT count(*) FROM kt_heads", as: Int.self) }
                let restarted = try EmbeddedDomain.open(at: path, allowUnsafePasswordHashing: true)
                let served = await #expect(throws: DomainError.self, "no proof over the edited log") {
                    try await restarted.identityProof(token: token, endpointID: "a1", userID: "bob", since: nil, auditor: nil)
                }
                #expect(served?.code == .unavailable, "\(String(describing: served))")
                await #expect(throws: DomainError.self, "no heads either") {
                    try await restarted.transparencyHeads(token: token, endpointID: "a1", since: nil)
                }
                let carol = try await restarted.testToken(userID: "carol").token
                _ = try await restarted.registerEndpoint(token: carol, registration: .init(endpointID: "c1", description: "x"))
                await #expect(throws: DomainError.self, "no new head signed over it") {
                    try await restarted.publishIdentity(
                        token: carol, endpointID: "c1", identity: try Fixtures.publishedIdentity("carol").0)
                }
                #expect(
                    try queue.read { db in try db.scalar("SELECT count(*) FROM kt_heads", as: Int.self) } == heads,
                    "rollBack \(rollBack): nothing signed")
            }
        }
    }

    /// An auditor served the domain's own signed head over updates of which one was changed
    /// (by a source that rewrote an entry, or on the way) co-signs nothing: the head is not the
    /// root of the updates as served. The same updates as they are get co-signed.
    @Test func anAuditorRefusesAHeadThatIsNotTheRootOfTheUpdatesServed() async throws {
        struct RewritingSource: TransparencyLogSource {
            let domain: EmbeddedDomain
            func transparencyUpdates(after: Int64, limit: Int, auditor: P256.SigningKey?) async throws -> (
                updates: [TransparencyAudit.Update], head: TreeHead?
            ) {
                var page = try await domain.transparencyUpdates(after: after, limit: limit, auditor: auditor)
                if var last = page.updates.popLast() {
                    var commitment = [UInt8](last.commitment)
                    commitment[0] ^= 1
                    last.commitment = Data(commitment)
                    page.updates.append(last)
                }
                return page
            }
            func postAudit(size: UInt64, auditorKey: Data, signature: Data) async throws {
                try await domain.postAudit(size: size, auditorKey: auditorKey, signature: signature)
            }
        }
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let (token, _) = try await Self.published(domain, "alice", endpoint: "a1")
            _ = try await Self.published(domain, "bob", endpoint: "b1")
            let keys = try await domain.transparencyKeys(token: token, endpointID: "a1")
            let signer = try P256.SigningKey()
            try domain.addTransparencyAuditor(signer.publicKey.x + signer.publicKey.y, name: "Audit Org")
            let fooled = TransparencyAuditor(source: RewritingSource(domain: domain), keys: keys, signer: signer, lastSigned: nil)
            let refused = await #expect(throws: CryptoError.self) { try await fooled.step() }
            #expect(refused?.reason.contains("not the root") == true, "\(String(describing: refused))")
            #expect(await fooled.lastSigned == nil)
            #expect(try domain.transparencyAuditors().map(\.cosignedSize) == [nil], "nothing co-signed")
            let honest = TransparencyAuditor(source: domain, keys: keys, signer: signer, lastSigned: nil)
            let signed = try #require(try await honest.step())
            #expect(try domain.transparencyAuditors().map(\.cosignedSize) == [signed.size])
        }
    }

    /// Anyone may post a co-signature, but only a registered auditor's is kept: seventeen
    /// throwaway keys, each co-signing the public head, are all refused (before their signature
    /// is checked) and the operator's auditor is still taken; removed, it is refused too and its
    /// co-signature is gone. Registering checks the key.
    @Test func onlyRegisteredAuditorsCosign() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try makeDomain(directory)
            let (token, _) = try await Self.published(domain, "alice", endpoint: "a1")
            let keys = try await domain.transparencyKeys(token: token, endpointID: "a1")
            let head = try #require(try await domain.transparencyUpdates(after: -1, limit: 10).head)
            func cosign(_ signer: P256.SigningKey) async throws {
                let key = signer.publicKey.x + signer.publicKey.y
                try await domain.postAudit(
                    size: head.size, auditorKey: key,
                    signature: try signer.signature(for: TransparencyAudit.signedBytes(head, vrfKey: keys.vrfKey)))
            }
            for _ in 0..<17 {
                let refused = await #expect(throws: DomainError.self) { try await cosign(try P256.SigningKey()) }
                #expect(refused?.code == .forbidden, "\(String(describing: refused))")
            }
            let real = try P256.SigningKey()
            try domain.addTransparencyAuditor((real.publicKey.x + real.publicKey.y), name: "Audit Org")
            try await cosign(real)
            let audited = try await domain.identityProof(
                token: token, endpointID: "a1", userID: "alice", since: nil, auditor: (real.publicKey.x + real.publicKey.y))
            #expect(
                try audited.verify(userID: "alice", keys: keys, previous: nil, auditor: (real.publicKey.x + real.publicKey.y))
                    .identity?.userID == "alice")
            #expect(
                try domain.transparencyAuditors().map { [$0.name: $0.cosignedSize] } == [["Audit Org": head.size]])
            // Its signed requests for the updates check out; another key's signature, or an old
            // one, does not.
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let realKey = real.publicKey.x + real.publicKey.y
            let request = TransparencyAudit.updatesRequestBytes(after: -1, limit: 10, at: now)
            try await domain.checkAuditorRequest(
                auditorKey: realKey, at: now, signature: try real.signature(for: request), after: -1, limit: 10)
            await #expect(throws: DomainError.self, "signed by another key") {
                try await domain.checkAuditorRequest(
                    auditorKey: realKey, at: now, signature: try P256.SigningKey().signature(for: request), after: -1,
                    limit: 10)
            }
            await #expect(throws: DomainError.self, "signed for another page") {
                try await domain.checkAuditorRequest(
                    auditorKey: realKey, at: now, signature: try real.signature(for: request), after: -1, limit: 11)
            }
            for extreme in [Int64.min, Int64.min + 1, Int64.max] {
                await #expect(throws: DomainError.self, "at \(extreme)") {
                    try await domain.checkAuditorRequest(
                        auditorKey: realKey, at: extreme, signature: Data(), after: Int64.min, limit: Int.min)
                }
            }
            let old = now - TransparencyAudit.requestSkew - 1_000
            await #expect(throws: DomainError.self, "signed long ago") {
                try await domain.checkAuditorRequest(
                    auditorKey: realKey, at: old,
                    signature: try real.signature(for: TransparencyAudit.updatesRequestBytes(after: -1, limit: 10, at: old)),
                    after: -1, limit: 10)
            }

            try domain.removeTransparencyAuditor((real.publicKey.x + real.publicKey.y))
            #expect(try domain.transparencyAuditors().isEmpty)
            await #expect(throws: DomainError.self, "its co-signature went with it") {
                try await domain.identityProof(
                    token: token, endpointID: "a1", userID: "alice", since: nil, auditor: (real.publicKey.x + real.publicKey.y))
            }
            await #expect(throws: DomainError.self) { try await cosign(real) }
            #expect(throws: DomainError.self, "not a P-256 key") {
                try domain.addTransparencyAuditor(Data(repeating: 7, count: 64), name: "junk")
            }
            #expect(throws: DomainError.self, "no name") {
                try domain.addTransparencyAuditor((real.publicKey.x + real.publicKey.y), name: " ")
            }
        }
    }

    /// Two instances on one database take turns at the epochs: every position is written once,
    /// each instance's replica catches up from the rows the other wrote, and both prove the same
    /// root.
    @Test func twoInstancesShareOneLog() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let first = try makeDomain(directory)
            let second = try EmbeddedDomain.open(
                at: directory.appendingPathComponent("domain.sqlite").path, allowUnsafePasswordHashing: true)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<12 {
                    group.addTask {
                        _ = try await Self.published(index % 2 == 0 ? first : second, "user\(index)", endpoint: "e\(index)")
                    }
                }
                try await group.waitForAll()
            }
            let (token, _) = try await Self.published(first, "reader", endpoint: "r1")
            let keys = try await first.transparencyKeys(token: token, endpointID: "r1")
            #expect(try await second.transparencyKeys(token: token, endpointID: "r1") == keys, "one key file")
            let fromFirst = try await first.identityProof(
                token: token, endpointID: "r1", userID: "user3", since: nil, auditor: nil)
            let fromSecond = try await second.identityProof(
                token: token, endpointID: "r1", userID: "user3", since: nil, auditor: nil)
            #expect(fromFirst.head == fromSecond.head && fromFirst.head.size == 13)
            #expect(try fromSecond.verify(userID: "user3", keys: keys, previous: nil).identity?.userID == "user3")
        }
    }
}

/// `spark-kt-auditor` as a second organisation runs it: the keys `spark-domaind` prints, `init`,
/// then `run --once` against the served domain over HTTPS, whose co-signature then lets a device
/// that requires the auditor read proofs.
@Suite("spark-kt-auditor")
struct AuditorCommandTests {
    /// The log's updates are public, but not free: an anonymous request reads at most 1,000 and
    /// is rate-limited by address (5 a minute here), while a registered auditor's signed requests
    /// read 10,000 and are not counted. A key that is not registered, or a signature that is
    /// not the key's, is refused and counted like an anonymous request.
    @Test func anonymousReadsOfTheLogAreBoundedAndAuditorsPageFreely() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let daemon = try await DomainDaemon.start(in: directory, plain: true, serveArguments: ["--rate-limits", "5,5"])
            let domain = try daemon.client()
            let token = try await domain.testToken(userID: "alice").token
            _ = try await domain.registerEndpoint(token: token, registration: .init(endpointID: "a1", description: "test"))
            try await domain.publishIdentity(token: token, endpointID: "a1", identity: try Fixtures.publishedIdentity("alice").0)
            let auditor = try P256.SigningKey()
            try await daemon.administration().addTransparencyAuditor(
                auditor.publicKey.x + auditor.publicKey.y, name: "Audit Org")

            let tooMany = await #expect(throws: DomainError.self) {
                try await domain.transparencyUpdates(after: -1, limit: 1_001)
            }
            #expect(tooMany?.code == .invalidRequest, "\(String(describing: tooMany))")
            for _ in 0..<12 {
                #expect(try await domain.transparencyUpdates(after: -1, limit: 10_000, auditor: auditor).updates.count == 1)
            }
            let stranger = await #expect(throws: DomainError.self) {
                try await domain.transparencyUpdates(after: -1, limit: 10, auditor: try P256.SigningKey())
            }
            #expect(stranger?.code == .invalidProof && stranger?.reason.contains("not an auditor") == true)
            var refused: DomainError?
            for _ in 0..<6 where refused == nil {
                do {
                    _ = try await domain.transparencyUpdates(after: -1, limit: 10)
                } catch let error as DomainError {
                    refused = error
                }
            }
            #expect(refused?.code == .tooManyAttempts, "the address's bucket runs out: \(String(describing: refused))")
            #expect(
                try await domain.transparencyUpdates(after: -1, limit: 10, auditor: auditor).updates.count == 1,
                "the auditor still reads")
            // The keys and the heads are public too: no token, no endpoint.
            let port = daemon.url.port ?? 0
            let keys = await RawHTTP.request(port: port, method: "GET", path: "/v1/transparency/keys")
            #expect(keys.status == 200 && keys.body.contains("vrfKey"), "\(keys.status) \(keys.body)")
            let heads = await RawHTTP.request(port: port, method: "GET", path: "/v1/transparency/heads?since=1")
            #expect(heads.status == 200 && heads.body.contains("latest"), "\(heads.status) \(heads.body)")
            let proof = await RawHTTP.request(port: port, method: "GET", path: "/v1/transparency/identity?userID=alice")
            #expect(proof.status == 401, "an identity proof names a user: it needs an account (\(proof.status))")
            await daemon.stop()
        }
    }

    @Test func anAuditorFollowsAServedDomainAndCosignsItsHead() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let daemon = try await DomainDaemon.start(in: directory)
            let domain = try daemon.client()
            let token = try await domain.testToken(userID: "alice").token
            _ = try await domain.registerEndpoint(token: token, registration: .init(endpointID: "a1", description: "test"))
            try await domain.publishIdentity(token: token, endpointID: "a1", identity: try Fixtures.publishedIdentity("alice").0)

            let printed = try await Fixtures.run(
                Fixtures.executable("spark-domaind"), ["passcode-keys", daemon.directory.path, "transparency"])
            #expect(printed.status == 0, "\(printed.stderr)")
            func key(_ name: String) -> String? {
                printed.stdout.split(separator: "\n").first { $0.hasPrefix(name) }.map {
                    String($0.dropFirst(name.count)).trimmingCharacters(in: .whitespaces)
                }
            }
            let vrf = try #require(key("vrf key:"))
            let head = try #require(key("head key:"))
            let auditor = Fixtures.executable("spark-kt-auditor")
            let home = directory.appendingPathComponent("auditor").path
            let made = try await Fixtures.run(auditor, ["init", home, "--vrf-key", vrf, "--head-key", head])
            #expect(made.status == 0, "\(made.stderr)")
            let auditorKey = try #require(Data(base64Encoded: made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(try await Fixtures.run(auditor, ["key", home]).stdout == made.stdout)
            let ca = daemon.directory.appendingPathComponent("ca.pem").path
            // Not registered yet: its co-signature is refused, and it says so.
            let unregistered = try await Fixtures.run(
                auditor, ["run", home, "--domain", daemon.url.absoluteString, "--ca", ca, "--once"])
            #expect(unregistered.status != 0 && unregistered.stderr.contains("not an auditor"), "\(unregistered.stderr)")
            // The operator registers it with spark-admin, and lists it.
            let config = try daemon.writeConfig(in: directory)
            let admin = Fixtures.executable("spark-admin")
            let credential = daemon.directory.appendingPathComponent("operator.credential").path
            let added = try await Fixtures.run(
                admin,
                [
                    "--config", config, "--operator", credential, "transparency", "auditor", "add",
                    made.stdout
                        .trimmingCharacters(in: .whitespacesAndNewlines), "Audit Org",
                ])
            #expect(added.status == 0, "\(added.stderr)")
            let run = try await Fixtures.run(auditor, ["run", home, "--domain", daemon.url.absoluteString, "--ca", ca, "--once"])
            #expect(run.status == 0 && run.stdout.contains("co-signed the head of 1 entries"), "\(run.stdout)\(run.stderr)")
            let listed = try await Fixtures.run(
                admin, ["--config", config, "--operator", credential, "transparency", "auditor", "list"])
            #expect(
                listed.status == 0 && listed.stdout.contains("Audit Org")
                    && listed.stdout.contains("co-signed the head of 1 entries"),
                "\(listed.stdout)\(listed.stderr)")

            let keys = try await domain.transparencyKeys(token: token, endpointID: "a1")
            let proof = try await domain.identityProof(
                token: token, endpointID: "a1", userID: "alice", since: nil, auditor: auditorKey)
            #expect(try proof.verify(userID: "alice", keys: keys, previous: nil, auditor: auditorKey).identity?.userID == "alice")
            // Run again with nothing new: nothing to sign, still fine; a wrong key is refused at init.
            let again = try await Fixtures.run(
                auditor, ["run", home, "--domain", daemon.url.absoluteString, "--ca", ca, "--once"])
            #expect(again.status == 0 && !again.stdout.contains("co-signed"), "\(again.stdout)\(again.stderr)")
            let bad = try await Fixtures.run(
                auditor, ["init", directory.appendingPathComponent("other").path, "--vrf-key", head, "--head-key", vrf])
            #expect(bad.status == 64 && bad.stderr.contains("not the domain's transparency keys"), "\(bad.stderr)")
            await daemon.stop()
        }
    }
}
