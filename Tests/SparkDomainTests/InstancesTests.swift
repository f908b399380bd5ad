import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkDomainServer
import SparkTestSupport
import Testing

/// Several `spark-domaind` instances serving one domain on PostgreSQL, with clients in other
/// processes: live delivery across instances, concurrent posters, and the faults a deployment
/// meets (an instance killed, the database restarted, the primary lost to a standby). After
/// each, every acknowledged message is there exactly once, numbered without gaps.
@Suite("Domain instances on PostgreSQL", .serialized)
struct InstancesTests {
    static let domainID = "instances"

    /// Two instances (A made by `init`, B serving a copy of its directory) on `conninfo`.
    static func twoInstances(in directory: URL, conninfo: String, plain: Bool = false) async throws -> (
        DomainDaemon, DomainDaemon
    ) {
        let first = try await DomainDaemon.start(in: directory, domainID: domainID, plain: plain, database: conninfo)
        let copy = directory.appendingPathComponent("copy")
        try FileManager.default.copyItem(at: first.directory, to: copy)
        let second = try await DomainDaemon.serving(copy, domainID: domainID, arguments: plain ? ["--plain"] : [])
        return (first, second)
    }

    /// A chat of `posters` and a reader, made through `daemon`; the reader's token and endpoint.
    static func chat(_ chatID: String, posters: [String], through domain: RemoteDomain) async throws -> (String, String) {
        let reader = try await domain.testToken(userID: "reader").token
        _ = try await domain.registerEndpoint(token: reader, registration: .init(endpointID: "reader-1", description: "r"))
        // Members are users with an endpoint: each poster's (its burst registers another).
        for poster in posters {
            let token = try await domain.testToken(userID: poster).token
            _ = try await domain.registerEndpoint(
                token: token, registration: .init(endpointID: "\(poster)-0", description: poster))
        }
        _ = try await domain.createChat(token: reader, endpointID: "reader-1", chatID: chatID, participants: posters)
        return (reader, "reader-1")
    }

    /// Runs one `domain-peer` burst per poster at once; every acknowledgement (client id → number).
    static func burst(
        posters: [String], urls: (Int) -> [URL], caFile: String, chat: String, count: Int
    ) async throws -> [String: Int64] {
        try await withThrowingTaskGroup(of: [String: Int64].self) { group in
            for (index, poster) in posters.enumerated() {
                let list = urls(index).map(\.absoluteString).joined(separator: ",")
                group.addTask {
                    let result = try await Fixtures.run(
                        Fixtures.executable("domain-peer"),
                        ["remote", list, caFile, domainID, "burst", poster, chat, String(count)])
                    guard result.status == 0 else { throw DaemonError("\(poster)'s burst failed: \(result.stderr)") }
                    var acks: [String: Int64] = [:]
                    for line in result.stdout.split(separator: "\n") {
                        let fields = line.split(separator: " ")
                        guard fields.count == 3, fields[0] == "ack", let number = Int64(fields[2]) else { continue }
                        if acks.updateValue(number, forKey: String(fields[1])) != nil {
                            throw DaemonError("\(fields[1]) acknowledged twice")
                        }
                    }
                    return acks
                }
            }
            var all: [String: Int64] = [:]
            for try await acks in group { all.merge(acks) { first, _ in first } }
            return all
        }
    }

    /// Every message entry of the reader's mailbox.
    static func messages(of reader: (String, String), through domain: RemoteDomain) async throws -> [MailboxEntry] {
        var all: [MailboxEntry] = []
        var cursor: Int64 = 0
        while true {
            let page = try await domain.readMailbox(token: reader.0, endpointID: reader.1, after: cursor, limit: 500)
            guard let last = page.last else { break }
            all += page
            cursor = last.sequence
        }
        return all.filter { $0.kind == .message }
    }

    /// Returns once the reader's mailbox holds `count` messages (the fault tests strike then).
    static func waitForMessages(_ count: Int, of reader: (String, String), through domain: RemoteDomain) async throws {
        while try await messages(of: reader, through: domain).count < count {
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// What every fault test proves at the end.
    static func expectEachOnceWithoutGaps(_ acks: [String: Int64], _ entries: [MailboxEntry], total: Int) {
        #expect(acks.count == total, "every post acknowledged: \(acks.count) of \(total)")
        #expect(Set(acks.values) == Set(1...Int64(total)), "numbers 1…\(total), each once")
        let delivered = entries.map { String(decoding: $0.payload, as: UTF8.self) }
        #expect(delivered.count == total && Set(delivered).count == total, "each message delivered once: \(delivered.count)")
        for entry in entries {
            let client = String(decoding: entry.payload, as: UTF8.self)
            if acks[client] != entry.messageNumber {
                Issue.record("\(client) was acknowledged as \(acks[client] ?? -1) but delivered as \(entry.messageNumber ?? -1)")
                return
            }
        }
    }

    /// Bob long-polls on `second` while alice posts through `first`; whether he was woken (a
    /// wake-up that never came ends the 30 s wait, when the final read finds the entry anyway,
    /// so the time is the evidence: not a measure of speed).
    static func expectLiveWakeUp(from first: DomainDaemon, to second: DomainDaemon, chat: String) async throws {
        let alice = try first.client()
        let bob = try second.client()
        let aliceToken = try await alice.testToken(userID: "alice").token
        let bobToken = try await bob.testToken(userID: "bob").token
        _ = try await alice.registerEndpoint(token: aliceToken, registration: .init(endpointID: "a1", description: "a"))
        _ = try await bob.registerEndpoint(token: bobToken, registration: .init(endpointID: "b1", description: "b"))
        _ = try await alice.createChat(token: aliceToken, endpointID: "a1", chatID: chat, participants: ["bob"])
        let cursor = try await bob.readMailbox(token: bobToken, endpointID: "b1", after: 0, limit: 1000).last?.sequence ?? 0
        let waiting = Task {
            try await bob.readMailbox(token: bobToken, endpointID: "b1", after: cursor, limit: 100, wait: .seconds(patience(30)))
        }
        // Alice posts through A once Bob is waiting on B.
        var parked = false
        while !parked {
            parked = try await second.metrics().body.contains("spark_long_polls 1")
            if !parked { try await Task.sleep(for: .milliseconds(20)) }
        }
        let posted = ContinuousClock.now
        _ = try await alice.post(
            token: aliceToken, endpointID: "a1", chatID: chat, kind: .message, payload: Data("hi".utf8), recipient: nil,
            clientID: "hello-\(chat)")
        let woken = try await waiting.value
        #expect(woken.map(\.payload) == [Data("hi".utf8)])
        #expect(ContinuousClock.now - posted < .seconds(20), "B woke for A's post rather than at its wait's end")
    }

    @Test func aLongPollOnOneInstanceWakesForAPostThroughTheOther() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        try await Fixtures.withTemporaryDirectory { directory in
            let (first, second) = try await Self.twoInstances(in: directory, conninfo: conninfo, plain: true)
            try await Self.expectLiveWakeUp(from: first, to: second, chat: "live")
            await first.stop()
            await second.stop()
        }
    }

    @Test func anIssuerTrustedThroughOneInstanceIsTrustedByTheOther() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        try await Fixtures.withTemporaryDirectory { directory in
            let (first, second) = try await Self.twoInstances(in: directory, conninfo: conninfo)
            let issuer = TokenIssuer(issuer: "https://idp.example", key: try Ed25519.PrivateKey(), keyID: "k1")
            try await first.administration().trustIssuer(
                "https://idp.example", audience: Self.domainID, jwks: try issuer.jwks.jsonData())
            let token = try issuer.issue(subject: "carol", audience: Self.domainID, lifetime: 600, now: Date())
            // The keys are in the database, not in a file beside instance A.
            let carol = try await second.client().validate(token: token.token)
            #expect(carol.userID == "carol" && carol.issuer == "https://idp.example")
            await first.stop()
            await second.stop()
        }
    }

    /// Identities published through both instances at once land in one transparency log on
    /// PostgreSQL (the epochs take turns under the advisory lock; each instance's copy catches up
    /// from the rows): both prove the same head over HTTPS, and an auditor reading the log
    /// through one co-signs a head the other then serves to a device that requires it.
    @Test func twoInstancesKeepOneTransparencyLog() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        try await Fixtures.withTemporaryDirectory { directory in
            let (first, second) = try await Self.twoInstances(in: directory, conninfo: conninfo)
            let clients = [try first.client(), try second.client()]
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<10 {
                    group.addTask {
                        let domain = clients[index % 2]
                        let token = try await domain.testToken(userID: "user\(index)").token
                        _ = try await domain.registerEndpoint(
                            token: token, registration: .init(endpointID: "e\(index)", description: "test"))
                        try await domain.publishIdentity(
                            token: token, endpointID: "e\(index)", identity: try Fixtures.publishedIdentity("user\(index)").0)
                    }
                }
                try await group.waitForAll()
            }
            let token = try await clients[0].testToken(userID: "user0").token
            let keys = try await clients[0].transparencyKeys(token: token, endpointID: "e0")
            let one = try await clients[0].identityProof(
                token: token, endpointID: "e0", userID: "user7", since: nil, auditor: nil)
            let other = try await clients[1].identityProof(
                token: token, endpointID: "e0", userID: "user7", since: nil, auditor: nil)
            #expect(one.head == other.head && one.head.size == 10)
            #expect(try other.verify(userID: "user7", keys: keys, previous: nil).identity?.userID == "user7")

            let auditorKey = try P256.SigningKey()
            let auditor = TransparencyAuditor(source: clients[0], keys: keys, signer: auditorKey, lastSigned: nil)
            try await first.administration().addTransparencyAuditor(auditor.publicKey, name: "second organisation")
            #expect(try await auditor.step()?.size == 10)
            let audited = try await clients[1].identityProof(
                token: token, endpointID: "e0", userID: "user3", since: nil, auditor: auditor.publicKey)
            #expect(
                try audited.verify(userID: "user3", keys: keys, previous: nil, auditor: auditor.publicKey).identity?.userID
                    == "user3")
            await first.stop()
            await second.stop()
            #expect(!first.log.contains(#""status":5"#) && !second.log.contains(#""status":5"#), "no 5xx")
        }
    }

    @Test func eightProcessesPostingToOneChatThroughTwoInstancesGetGaplessNumbers() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        try await Fixtures.withTemporaryDirectory { directory in
            let (first, second) = try await Self.twoInstances(in: directory, conninfo: conninfo)
            let posters = (1...8).map { "poster\($0)" }
            let reader = try await Self.chat("busy", posters: posters, through: try first.client())
            let caFile = first.directory.appendingPathComponent("ca.pem").path
            let acks = try await Self.burst(
                posters: posters, urls: { $0 % 2 == 0 ? [first.url] : [second.url] }, caFile: caFile, chat: "busy", count: 25)
            let entries = try await Self.messages(of: reader, through: try second.client())
            Self.expectEachOnceWithoutGaps(acks, entries, total: 200)
            await first.stop()
            await second.stop()
            #expect(!first.log.contains(#""status":5"#), "no 5xx")
        }
    }

    @Test func anInstanceKilledMidBurstLosesNothingAndDeliversNothingTwice() async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        try await Fixtures.withTemporaryDirectory { directory in
            let (first, second) = try await Self.twoInstances(in: directory, conninfo: conninfo)
            let posters = (1...6).map { "poster\($0)" }
            let reader = try await Self.chat("crash", posters: posters, through: try second.client())
            let caFile = first.directory.appendingPathComponent("ca.pem").path
            let watcher = try second.client()
            let burst = Task {
                try await Self.burst(
                    posters: posters, urls: { $0 % 2 == 0 ? [first.url, second.url] : [second.url, first.url] },
                    caFile: caFile, chat: "crash", count: 40)
            }
            // Once a quarter has gone through, A dies without a word.
            try await Self.waitForMessages(60, of: reader, through: watcher)
            await first.kill()
            let acks = try await burst.value
            let entries = try await Self.messages(of: reader, through: watcher)
            Self.expectEachOnceWithoutGaps(acks, entries, total: 240)
            await second.stop()
        }
    }

    @Test func aDatabaseRestartMidBurstMeans503sThenEverythingResumes() async throws {
        let cluster = try await Fixtures.blocking { try PostgresCluster.start() }
        defer { cluster.remove() }
        try await Fixtures.blocking { _ = try cluster.psql("CREATE DATABASE spark") }
        try await Fixtures.withTemporaryDirectory { directory in
            let (first, second) = try await Self.twoInstances(
                in: directory, conninfo: cluster.conninfo(database: "spark"), plain: true)
            let posters = (1...4).map { "poster\($0)" }
            let reader = try await Self.chat("restart", posters: posters, through: try first.client())
            let watcher = try first.client()
            let burst = Task {
                try await Self.burst(
                    posters: posters, urls: { $0 % 2 == 0 ? [first.url, second.url] : [second.url, first.url] }, caFile: "-",
                    chat: "restart", count: 40)
            }
            try await Self.waitForMessages(30, of: reader, through: watcher)
            try await Fixtures.blocking { try cluster.stop(mode: "fast") }
            // While the database is gone the instances say so, and are not ready.
            let port = try #require(first.url.port)
            let health = await RawHTTP.request(port: port, method: "GET", path: "/healthz")
            #expect(health.status == 503 && health.headers["retry-after"] != nil, "\(health.status) \(health.body)")
            let refused = await RawHTTP.request(port: port, method: "GET", path: "/v1/policy")
            #expect(refused.status == 503 && refused.body.contains("unavailable"), "\(refused.body)")
            // The client learns nothing of the database (its error text is in the log only).
            #expect(refused.body.contains(DomainRouter.unavailableMessage), "\(refused.body)")
            for leak in ["PostgreSQL", "postgres", "connection", "server closed", "libpq", "SQL"] {
                #expect(!refused.body.contains(leak), "\(leak) in \(refused.body)")
            }
            try await Task.sleep(for: .seconds(1))
            try await Fixtures.blocking { try cluster.restart() }
            let acks = try await burst.value
            let entries = try await Self.messages(of: reader, through: watcher)
            Self.expectEachOnceWithoutGaps(acks, entries, total: 160)
            #expect(await RawHTTP.request(port: port, method: "GET", path: "/healthz").status == 200, "ready again")
            // The listener came back with the database: live delivery across instances again.
            try await Self.expectLiveWakeUp(from: first, to: second, chat: "after-restart")
            await first.stop()
            await second.stop()
            #expect(!first.log.contains(#""status":500"#), "a lost database is a 503, never a 500")
        }
    }

    @Test func aPromotedStandbyTakesOverWithEveryAcknowledgedMessage() async throws {
        let primary = try await Fixtures.blocking { try PostgresCluster.start() }
        defer { primary.remove() }
        try await Fixtures.blocking { _ = try primary.psql("CREATE DATABASE spark") }
        let standby = try await Fixtures.blocking { try primary.standby() }
        defer { standby.remove() }
        // Synchronous replication from now on: a commit is acknowledged once the standby has it.
        try await Fixtures.blocking {
            _ = try primary.psql("ALTER SYSTEM SET synchronous_standby_names = '*'")
            _ = try primary.psql("SELECT pg_reload_conf()")
        }
        let both =
            "host=\(primary.socketDirectory.path),\(standby.socketDirectory.path) port=\(primary.port),\(standby.port)"
            + " user=postgres dbname=spark target_session_attrs=read-write connect_timeout=2"
        try await Fixtures.withTemporaryDirectory { directory in
            let (first, second) = try await Self.twoInstances(in: directory, conninfo: both, plain: true)
            let posters = (1...4).map { "poster\($0)" }
            let reader = try await Self.chat("failover", posters: posters, through: try first.client())
            let watcher = try second.client()
            let burst = Task {
                try await Self.burst(
                    posters: posters, urls: { $0 % 2 == 0 ? [first.url, second.url] : [second.url, first.url] }, caFile: "-",
                    chat: "failover", count: 40)
            }
            try await Self.waitForMessages(30, of: reader, through: watcher)
            let before = try await Self.messages(of: reader, through: watcher).count
            try await Fixtures.blocking {
                try primary.stop(mode: "immediate")
                try standby.promote()
            }
            let acks = try await burst.value
            let entries = try await Self.messages(of: reader, through: watcher)
            #expect(entries.count >= before, "nothing read before the switch is gone after it")
            Self.expectEachOnceWithoutGaps(acks, entries, total: 160)
            let onStandby = try await Fixtures.blocking {
                try standby.psql("SELECT count(*) FROM mailbox WHERE user_id = 'reader' AND kind = 'message'", database: "spark")
            }
            #expect(onStandby == "160", "the promoted standby holds every message")
            await first.stop()
            await second.stop()
        }
    }
}
