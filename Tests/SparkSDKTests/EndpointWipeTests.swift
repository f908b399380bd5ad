import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkSDK

/// Every path that wipes an endpoint leaves no byte of the user's messages or keys in the
/// store's files, and the next user of the directory starts clean.
@Suite("Endpoint store: wipes")
struct EndpointWipeTests {
    /// The ways an endpoint's data is wiped.
    enum Path: String, CaseIterable, Sendable {
        case reset, removedElsewhere, anotherUser, signOutWipingKeys
    }

    /// Bob's device after a chat with alice, with the bytes it must not keep after a wipe: the
    /// sealed values its store holds for a message's text, bob's identity key and alice's chat
    /// key (the plaintexts are never in the file at all: see `StoreEncryptionTests`).
    struct Prepared {
        let world: ChatWorld
        let alice: BBMAccess
        let bob: BBMEnterpriseService
        let bobDirectory: URL
        /// Bob's store's connection (its search index is in memory there) and key before the wipe.
        let queue: DatabaseQueue
        let sealer: StoreSealer
        let secrets: [String: Data]
    }

    static func prepare(_ directory: URL) async throws -> Prepared {
        let world = try ChatWorld(directory)
        let (_, alice) = try await world.endpoint("alice", "alice-laptop")
        let (bob, bobAccess) = try await world.endpoint("bob", "bob-phone")
        let text = "the-secret-plan-\(UUID().uuidString)"
        let chat = try await alice.startChat(with: ["bob"], subject: "Plans")
        try await alice.sendMessage(text, to: chat.chatID)
        let messages = try await bobAccess.messages(in: chat.chatID)
        #expect(await waitFor("bob has it") { messages.value.first?.content == text })
        let bobDirectory = directory.appendingPathComponent("bob-phone")
        let store = try DatabaseQueue(path: bobDirectory.appendingPathComponent("endpoint.sqlite").path)
        let stored = try store.read { db in
            (
                try db.scalar("SELECT state FROM chat_epoch_states LIMIT 1", as: Data.self),
                try db.scalar("SELECT content FROM messages LIMIT 1", as: Data.self),
                try db.scalar("SELECT signing_key FROM local_keys LIMIT 1", as: Data.self)
            )
        }
        // The search index's term for a word of it (its last 12 digits: see `SearchTests`).
        let searchKey = try await bobAccess.messenger.read { store in store.searchKey }
        try store.withConnection { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        let sealer = try #require(try await bobAccess.messenger.read { ($0 as? SQLiteMessagingStore)?.sealer })
        return Prepared(
            world: world, alice: alice, bob: bob, bobDirectory: bobDirectory,
            queue: try #require(bobAccess.messenger.storage.sqliteQueue), sealer: sealer,
            secrets: [
                "a message": try #require(stored.1), "the identity key": try #require(stored.2),
                "a chat's group state": try #require(stored.0),
                "a search token": Data(searchKey.token(.word, "secret").suffix(12).utf8),
            ])
    }

    /// Which secrets are found in which of the store's files.
    static func leaks(_ prepared: Prepared) throws -> [String] {
        var found: [String] = []
        for file in ["endpoint.sqlite", "endpoint.sqlite-wal", "endpoint.sqlite-shm"] {
            guard let bytes = FileManager.default.contents(atPath: prepared.bobDirectory.appendingPathComponent(file).path) else {
                continue
            }
            for (name, secret) in prepared.secrets where bytes.range(of: secret) != nil { found.append("\(name) in \(file)") }
        }
        // The search index as the key holder reads it: in memory, and its image opened with the
        // key the store had (a reset destroys it; a wipe that keeps it leaves an empty image).
        let places = [
            ("the index in memory", try prepared.queue.withConnection { try $0.serialize(schema: SearchIndexImage.schema) }),
            (
                "the index's image",
                SearchIndexImage.opened(
                    besides: prepared.bobDirectory.appendingPathComponent("endpoint.sqlite"), sealer: prepared.sealer) ?? Data()
            ),
        ]
        for (place, bytes) in places {
            for (name, secret) in prepared.secrets where bytes.range(of: secret) != nil { found.append("\(name) in \(place)") }
        }
        return found.sorted()
    }

    @Test(arguments: Path.allCases)
    func aWipeLeavesNoMessageOrKeyByteInTheFiles(path: Path) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let prepared = try await Self.prepare(directory)
            // The scan finds what is there: the message and the keys, before the wipe.
            #expect(try Self.leaks(prepared).contains { $0.hasPrefix("a message") }, "the scan sees the message first")
            #expect(try Self.leaks(prepared).contains { $0.hasPrefix("the identity key") })
            #expect(try Self.leaks(prepared).contains { $0.hasPrefix("a search token") })
            let bob = prepared.bob
            switch path {
            case .reset:
                try await bob.resetService()
            case .removedElsewhere:
                try prepared.world.domain.deregisterEndpoint(try await bob.endpointID)
                await bob.checkIn()
                #expect(bob.authState.value.removalReason != nil)
            case .anotherUser:
                await bob.sendAuthToken(
                    try await prepared.world.domain.testToken(userID: "carol").token, userIdentifier: "carol")
                _ = await bob.waitForSettledState()
            case .signOutWipingKeys:
                await bob.signOut(wipeKeys: true)
            }
            #expect(try Self.leaks(prepared) == [], "\(path)")
            let store = try DatabaseQueue(path: prepared.bobDirectory.appendingPathComponent("endpoint.sqlite").path)
            for table in [
                "chats", "messages", "chat_groups", "contacts", "mailbox_cursor", "local_keys", "device_signer",
                "key_package_bundles",
            ] {
                #expect(try store.read { db in try db.scalar("SELECT count(*) FROM \(table)", as: Int.self) } == 0, "\(table)")
            }
        }
    }

    @Test func theNextUserOfTheDirectorySeesOnlyTheirOwnChatsFromTheirFirstEntry() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let prepared = try await Self.prepare(directory)
            // Carol has a chat with alice on her laptop before she ever uses bob's device.
            let (_, carolLaptop) = try await prepared.world.endpoint("carol", "carol-laptop")
            let chat = try await prepared.alice.startChat(with: ["carol"], subject: "For carol")
            try await prepared.alice.sendMessage("hello carol", to: chat.chatID)
            let laptopMessages = try await carolLaptop.messages(in: chat.chatID)
            #expect(await waitFor("the laptop has it") { laptopMessages.value.count == 1 })
            let bob = prepared.bob
            await bob.sendAuthToken(try await prepared.world.domain.testToken(userID: "carol").token, userIdentifier: "carol")
            try await bob.completeSetup(using: ScriptedHandler(passcodes: ["carol-passcode"]))
            let access = try await bob.messaging()
            #expect(access.currentUser == "carol")
            // Approved on her laptop, carol's new device is added to her chat and gets the history.
            try await approve(access, on: carolLaptop)
            #expect(
                await waitFor("bob's chat is gone, carol's comes from her laptop") {
                    access.chats.value.map(\.subject) == ["For carol"]
                })
            let messages = try await access.messages(in: chat.chatID)
            #expect(await waitFor("with its history") { messages.value.map(\.content) == ["hello carol"] })
        }
    }
}
