import Foundation
import SparkCrypto
import SparkDomain
import SparkMLS
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkSDK

/// Live chat sessions (`GroupCache` under `GroupStore`): a group stays parsed between messages,
/// a message writes only its ratchets, and a session is never used once the row moved on, by
/// another process on the same data directory or by a transaction that rolled back. A stale
/// session would seal with a ratchet key already used (the worst failure a messenger can have),
/// so each test checks what was sealed, not only what was stored.
@Suite("Chats on MLS: live sessions")
struct ChatSessionTests {
    /// One endpoint store opened twice, as two processes on one data directory do, each with its
    /// own sessions; and bob's group to open what they seal.
    struct Fixture {
        let first: (queue: DatabaseQueue, groups: GroupStore)
        let second: (queue: DatabaseQueue, groups: GroupStore)
        var bob: ChatGroup
        let validator: DeviceCredentialValidator
        /// The stores' sealer (one key for both).
        let sealer: StoreSealer

        init(_ directory: URL, capacity: Int = 8) throws {
            let key = SymmetricKey(size: .bits256)
            let stores = try (0..<2).map { _ in try EndpointStore(directory: directory, key: .provided(key)) }
            sealer = stores[0].sealer
            first = (stores[0].queue, GroupStore(cache: GroupCache(capacity: capacity)))
            second = (stores[1].queue, GroupStore(cache: GroupCache(capacity: capacity)))
            let world = try ChatGroupTests.World()
            bob = try #require(world.groups["bob"])
            validator = DeviceCredentialValidator(identityKeys: [
                "alice": world.alice.identity.publicKey.rawRepresentation, "bob": world.bob.identity.publicKey.rawRepresentation,
                "carol": world.carol.identity.publicKey.rawRepresentation,
            ])
            let alice = try #require(world.groups["alice"])
            let (groups, sealer) = (first.groups, sealer)
            try first.queue.write { db in
                try groups.save(
                    SQLiteMessagingStore(db: db, sealer: sealer),
                    GroupStore.Stored(group: alice, sentSinceUpdate: 0, updatedAt: Date(), lastNumber: 0))
            }
        }

        /// Seals `text` as alice's next message through `side`, in one transaction as the outbox does.
        func seal(_ text: String, through side: (queue: DatabaseQueue, groups: GroupStore)) throws -> Data {
            let (validator, sealer) = (self.validator, self.sealer)
            return try side.queue.write { db in
                var stored = try #require(
                    try side.groups.load(SQLiteMessagingStore(db: db, sealer: sealer), chatID: "c1", validator: validator))
                var random = MLSSystemRandom()
                let sealed = try stored.group.seal(
                    ChatPayload(kind: .text, id: UUID().uuidString, content: text), random: &random)
                stored.sentSinceUpdate += 1
                try side.groups.save(SQLiteMessagingStore(db: db, sealer: sealer), stored)
                return sealed
            }
        }

        /// Bob opens alice's message; the text he read.
        mutating func open(_ sealed: Data, number: Int64) -> String? {
            let entry = MailboxEntry(
                sequence: number, chatID: "c1", sender: "alice", kind: .message, messageNumber: number, payload: sealed,
                members: nil, postedAt: Date())
            guard case .message(let payload, _, _) = bob.receive(entry, now: Date()) else { return nil }
            return payload.content
        }

        func row(_ column: String) throws -> Data? {
            let table = column == "state" ? "chat_epoch_states" : "chat_groups"
            return try first.queue.read { db in
                try db.scalar("SELECT \(column) FROM \(table) WHERE chat_id = 'c1'", as: Data.self)
            }
        }
    }

    @Test func aMessageRewritesTheRatchetsAndNotTheEpochState() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            var fixture = try Fixture(directory)
            let (state, ratchets, version) = (
                try fixture.row("state"), try fixture.row("ratchets"), try fixture.row("version")
            )
            #expect(fixture.open(try fixture.seal("one", through: fixture.first), number: 1) == "one")
            #expect(try fixture.row("state") == state, "the epoch state is not rewritten for a message")
            #expect(try fixture.row("ratchets") != ratchets)
            #expect(try fixture.row("version") != version)
        }
    }

    @Test func anotherProcessesMessageIsSeenAndNoKeyIsUsedTwice() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            var fixture = try Fixture(directory)
            // Both processes have the chat live; they send in turns. A session kept after the other
            // process moved the ratchet would seal with a generation bob has used already: he
            // would refuse it as a replay, or (worse) two messages would share a key.
            var texts: [String] = []
            for round in 0..<4 {
                let side = round % 2 == 0 ? fixture.first : fixture.second
                texts.append(
                    fixture.open(try fixture.seal("message \(round)", through: side), number: Int64(round + 1)) ?? "refused")
            }
            #expect(texts == ["message 0", "message 1", "message 2", "message 3"])
            let sealer = fixture.sealer
            let sent = try fixture.first.queue.read { db in
                try fixture.first.groups.load(
                    SQLiteMessagingStore(db: db, sealer: sealer), chatID: "c1", validator: fixture.validator)?.sentSinceUpdate
            }
            #expect(sent == 4, "each process counted the other's messages")
        }
    }

    @Test func aRolledBackSaveLeavesNoSessionBehind() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            var fixture = try Fixture(directory)
            struct Abort: Error {}
            // Sealed, saved, then the transaction fails: the message was never sent, and the
            // row (and so the next seal) is where it was.
            let (groups, sealer) = (fixture.first.groups, fixture.sealer)
            let validator = fixture.validator
            var lost = Data()
            #expect(throws: Abort.self) {
                try fixture.first.queue.write { db -> Void in
                    var stored = try #require(
                        try groups.load(SQLiteMessagingStore(db: db, sealer: sealer), chatID: "c1", validator: validator))
                    var random = MLSSystemRandom()
                    lost = try stored.group.seal(ChatPayload(kind: .text, id: "lost", content: "lost"), random: &random)
                    try groups.save(SQLiteMessagingStore(db: db, sealer: sealer), stored)
                    throw Abort()
                }
            }
            let next = try fixture.seal("after the rollback", through: fixture.first)
            #expect(fixture.open(next, number: 1) == "after the rollback")
            // The lost message and the next one were sealed with the same ratchet generation (the
            // rollback undid its step); bob, past it now, refuses the lost one.
            #expect(fixture.open(lost, number: 2) == nil)
        }
    }

    @Test func sessionsAreBoundedAndLoadedOnDemand() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let fixture = try Fixture(directory, capacity: 2)
            let world = try ChatGroupTests.World()
            let (groups, sealer) = (fixture.first.groups, fixture.sealer)
            var random = MLSSeededRandom(seed: "more chats")
            let signer = world.alice.signer
            try fixture.first.queue.write { db in
                for chat in ["c2", "c3", "c4"] {
                    let group = try ChatGroup.create(chatID: chat, signer: signer, validator: fixture.validator, random: &random)
                    try groups.save(
                        SQLiteMessagingStore(db: db, sealer: sealer),
                        GroupStore.Stored(group: group, sentSinceUpdate: 0, updatedAt: Date(), lastNumber: 0))
                }
            }
            #expect(groups.cache.count == 2)
            // The chat no longer live is read from the store, as it was.
            let loaded = try fixture.first.queue.read { db in
                try groups.load(SQLiteMessagingStore(db: db, sealer: sealer), chatID: "c1", validator: fixture.validator)
            }
            #expect(try #require(loaded).group.group.epochAuthenticator == fixture.bob.group.epochAuthenticator)
            #expect(groups.cache.count == 2)
        }
    }

    @Test func aLiveSessionIsJudgedByTheValidatorOfTheLoad() async throws {
        // A session loaded to look (accepting any credential) must not carry that validator into
        // a load that checks for real.
        try await Fixtures.withTemporaryDirectory { directory in
            let fixture = try Fixture(directory)
            let (groups, sealer) = (fixture.first.groups, fixture.sealer)
            _ = try fixture.first.queue.read { db in
                try groups.load(SQLiteMessagingStore(db: db, sealer: sealer), chatID: "c1", validator: MLSAcceptAnyCredential())
            }
            let strict = try fixture.first.queue.read { db in
                try groups.load(
                    SQLiteMessagingStore(db: db, sealer: sealer), chatID: "c1",
                    validator: DeviceCredentialValidator(identityKeys: [:]))
            }
            #expect(try #require(strict).group.group.credentialValidator is DeviceCredentialValidator)
            let again = try fixture.first.queue.read { db in
                try groups.load(SQLiteMessagingStore(db: db, sealer: sealer), chatID: "c1", validator: MLSAcceptAnyCredential())
            }
            #expect(try #require(again).group.group.credentialValidator is MLSAcceptAnyCredential)
        }
    }

    @Test func aChangeOfAContactIsAChangeOfTheContactsVersion() async throws {
        // The validators and each chat's untrusted users are built again exactly when the
        // version moves: a contact saved without moving it would leave a changed key trusted.
        try await Fixtures.withTemporaryDirectory { directory in
            let fixture = try Fixture(directory)
            let before = try fixture.first.queue.read { db in
                try SQLiteMessagingStore(db: db, sealer: fixture.sealer).contactsVersion()
            }
            let identity = PublishedIdentity(
                userID: "dave", signingKey: try Ed25519.PrivateKey().publicKey.rawRepresentation, encryptionKey: Data(count: 32),
                keyVersion: 1, signature: Data())
            try fixture.second.queue.write { db in
                try SQLiteMessagingStore(db: db, sealer: fixture.sealer).saveContact(
                    ContactDirectory.Record(trusted: identity, state: .unverified, seen: nil))
            }
            let after = try fixture.first.queue.read { db in
                try SQLiteMessagingStore(db: db, sealer: fixture.sealer).contactsVersion()
            }
            #expect(before != nil && after != nil && before != after)
            let validators = CredentialValidators(user: "alice", identityKey: Data(count: 32))
            let first = try fixture.first.queue.read { db in
                try validators.current(SQLiteMessagingStore(db: db, sealer: fixture.sealer))
            }
            try fixture.second.queue.write { db in
                _ = try ContactDirectory.accept(SQLiteMessagingStore(db: db, sealer: fixture.sealer), "dave", verified: true)
            }
            let second = try fixture.first.queue.read { db in
                try validators.current(SQLiteMessagingStore(db: db, sealer: fixture.sealer))
            }
            #expect(first.contacts != second.contacts, "built again after another process changed a contact")
        }
    }

    @Test func untrustedUsersAreKnownForOneEpochAndOneVersionOfTheContacts() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let fixture = try Fixture(directory)
            let (sessions, sealer) = (fixture.first.groups.cache, fixture.sealer)
            _ = try fixture.first.queue.read { db in
                try fixture.first.groups.load(
                    SQLiteMessagingStore(db: db, sealer: sealer), chatID: "c1", validator: fixture.validator)
            }
            let (contacts, epoch) = (Data([1]), Data([2]))
            sessions.rememberUntrusted("c1", ["mallory"], contacts: contacts, authenticator: epoch)
            #expect(sessions.untrusted("c1", contacts: contacts, authenticator: epoch) == ["mallory"])
            #expect(sessions.untrusted("c1", contacts: Data([3]), authenticator: epoch) == nil, "the contacts changed")
            #expect(sessions.untrusted("c1", contacts: contacts, authenticator: Data([4])) == nil, "a commit changed the tree")
        }
    }

    @Test func aGroupStoredWholeBeforeTheSplitLoadsAndIsStoredInTwoPartsNext() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            var fixture = try Fixture(directory)
            let (groups, sealer) = (fixture.first.groups, fixture.sealer)
            let validator = fixture.validator
            // The row as a store from before `v24-chat-sessions` held it: the whole state, no ratchets.
            try fixture.first.queue.write { db in
                let stored = try #require(
                    try groups.load(SQLiteMessagingStore(db: db, sealer: sealer), chatID: "c1", validator: validator))
                let whole = try sealer.seal(stored.group.group.serialized().unsafeData(), SQLiteMessagingStore.Seal.state("c1"))
                try db.execute(
                    "UPDATE chat_groups SET state = ?, ratchets = NULL, version = randomblob(16) WHERE chat_id = 'c1'", [whole])
                try db.execute("DELETE FROM chat_epoch_states")
            }
            #expect(
                fixture.open(try fixture.seal("after the migration", through: fixture.second), number: 1) == "after the migration"
            )
            #expect(try fixture.row("ratchets") != nil && fixture.row("state") != nil, "stored in two parts once saved")
            #expect(fixture.open(try fixture.seal("and again", through: fixture.first), number: 2) == "and again")
        }
    }
}
