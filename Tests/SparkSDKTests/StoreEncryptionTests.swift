import Foundation
import SparkCrypto
import SparkStore
import SparkTestSupport
import Testing

@testable import SparkSDK

/// The endpoint store's secrets at rest: encrypted under a key that is not in the file; a
/// missing or wrong key is a clear error that loses nothing; a reset destroys the key.
@Suite("Endpoint store: secrets at rest")
struct StoreEncryptionTests {
    static func files(_ directory: URL) -> Data {
        ["endpoint.sqlite", "endpoint.sqlite-wal"].reduce(into: Data()) { all, name in
            all += FileManager.default.contents(atPath: directory.appendingPathComponent(name).path) ?? Data()
        }
    }

    @Test func noSecretIsInTheFilesInTheClear() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory)
            let (_, alice) = try await world.endpoint("alice", "alice-laptop")
            let (bob, bobAccess) = try await world.endpoint("bob", "bob-phone")
            let text = "meet at the north gate \(UUID().uuidString)"
            let chat = try await alice.startChat(with: ["bob"], subject: "Secret plans \(UUID().uuidString)")
            try await alice.sendMessage(text, tag: "Text", data: #"{"where":"north gate"}"#, to: chat.chatID)
            let messages = try await bobAccess.messages(in: chat.chatID)
            #expect(await waitFor("bob has it") { messages.value.first?.content == text })
            #expect(bobAccess.chats.value.first?.subject == chat.subject, "it reads back")
            let bytes = Self.files(directory.appendingPathComponent("bob-phone"))
            let identity = try #require(await bob.keys).signing.rawRepresentation.unsafeData()
            for (name, secret) in [
                ("the message", Data(text.utf8)), ("the subject", Data(chat.subject.utf8)), ("the data", Data("north gate".utf8)),
                ("the identity key", identity),
            ] {
                #expect(bytes.range(of: secret) == nil, "\(name) is in the file in the clear")
            }
        }
    }

    @Test func aWrongOrMissingKeyIsRefusedAndLosesNothing() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("device")
            let keys = directory.appendingPathComponent("keys")
            let store = try EndpointStore(directory: data, key: .keyFile(directory: keys))
            let userKeys = try UnlockedKeys.generate(userID: "alice", keyVersion: 1)
            try store.saveKeys(userKeys)
            let before = Self.files(data)
            // Another key: refused, and the file is as it was.
            do {
                _ = try EndpointStore(directory: data, key: .provided(SymmetricKey(size: .bits256)))
                Issue.record("a wrong key opened the store")
            } catch let error as AuthError {
                #expect(error.code == .storeLocked && error.reason.contains("does not open"), "\(error)")
            }
            #expect(Self.files(data) == before, "nothing was changed")
            // The key file gone: refused, and no new key is made over the old data.
            let keyFile = try #require(try FileManager.default.contentsOfDirectory(atPath: keys.path).first)
            let mode = try FileManager.default.attributesOfItem(atPath: keys.path)[.posixPermissions] as? Int
            let fileMode =
                try FileManager.default.attributesOfItem(atPath: keys.appendingPathComponent(keyFile).path)[
                    .posixPermissions] as? Int
            #expect(mode == 0o700 && fileMode == 0o600, "the key directory 0700, the key file 0600")
            let saved = try Data(contentsOf: keys.appendingPathComponent(keyFile))
            try FileManager.default.removeItem(at: keys.appendingPathComponent(keyFile))
            do {
                _ = try EndpointStore(directory: data, key: .keyFile(directory: keys))
                Issue.record("a store was opened without its key")
            } catch let error as AuthError {
                #expect(error.code == .storeLocked && error.reason.contains("key is missing"), "\(error)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: keys.path).isEmpty)
            // The key restored: everything is there.
            try saved.write(to: keys.appendingPathComponent(keyFile))
            let reopened = try EndpointStore(directory: data, key: .keyFile(directory: keys))
            #expect(try reopened.keys(userID: "alice")?.signing.publicKey == userKeys.signing.publicKey)
        }
    }

    @Test func aValueMovedToAnotherRowDoesNotOpen() throws {
        let sealer = StoreSealer(key: SymmetricKey(size: .bits256))
        let sealed = try sealer.seal("hello", EndpointStore.Seal.content("m1"))
        #expect(try sealer.openText(sealed, EndpointStore.Seal.content("m1")) == "hello")
        #expect(throws: AuthError(.storeLocked, "")) { try sealer.openText(sealed, EndpointStore.Seal.content("m2")) }
        #expect(throws: AuthError(.storeLocked, "")) { try sealer.openText(sealed, EndpointStore.Seal.subject("m1")) }
        var flipped = sealed
        flipped[flipped.count - 1] ^= 1
        #expect(throws: AuthError(.storeLocked, "")) { try sealer.openText(flipped, EndpointStore.Seal.content("m1")) }
        // Empty, multi-byte and truncated values.
        #expect(try sealer.openText(try sealer.seal("", "c"), "c") == "")
        #expect(try sealer.openText(try sealer.seal("héllo 👋", "c"), "c") == "héllo 👋")
        #expect(throws: AuthError(.storeLocked, "")) { try sealer.openText(sealed.prefix(28), EndpointStore.Seal.content("m1")) }
        #expect(throws: AuthError(.storeLocked, "")) { try sealer.openText(sealed.dropLast(), EndpointStore.Seal.content("m1")) }
    }

    @Test func aResetDestroysTheKeyAndSealsWhatFollowsUnderANewOne() async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let devices = try Devices(directory)
            let service = try await devices.service("laptop")
            _ = try await devices.begin(service)
            try await service.completeSetup(using: ScriptedHandler(passcodes: ["first-passcode"]))
            let configKeys = Fixtures.isolatedConfigHome.appendingPathComponent("spark-sdk/store-keys")
            let store = try EndpointStore(directory: directory.appendingPathComponent("laptop"))
            let keyFile = try #require(store.keyring.keyFile)
            let oldKey = try Data(contentsOf: keyFile)
            #expect(keyFile.path.hasPrefix(configKeys.path), "the default key file is apart from the data")
            try await service.resetService()
            let newKey = try Data(contentsOf: keyFile)
            #expect(newKey != oldKey, "the old key is gone")
            do {
                _ = try EndpointStore(
                    directory: directory.appendingPathComponent("laptop"),
                    key: .provided(SymmetricKey(data: try #require(Data(base64Encoded: String(decoding: oldKey, as: UTF8.self)))))
                )
                Issue.record("the destroyed key still opens the store")
            } catch let error as AuthError {
                #expect(error.code == .storeLocked)
            }
        }
    }

    /// The migration list names each version once; five migrations that shipped under names
    /// repeating a number were renamed, and a store that recorded the old names opens with its
    /// data, nothing applied twice.
    @Test func aStoreThatRecordedTheOldMigrationNamesOpens() throws {
        let names = EndpointStore.migrator(StoreSealer(key: SymmetricKey(size: .bits256))).migrations.map(\.identifier)
        #expect(names.map { $0.split(separator: "-")[0] } == (1...names.count).map { "v\($0)" })
        try Fixtures.withTemporaryDirectorySync { directory in
            let data = directory.appendingPathComponent("device")
            let keys = directory.appendingPathComponent("keys")
            do {
                let store = try EndpointStore(directory: data, key: .keyFile(directory: keys))
                try store.queue.write { db in
                    try db.execute("INSERT INTO chats(chat_id, subject, last_activity) VALUES ('c1', x'00', 0)")
                    // As the last release recorded them.
                    for (old, new) in [
                        ("v6-encrypted-values", "v22-encrypted-values"), ("v8-mls-chats", "v23-mls-chats"),
                        ("v9-chat-sessions", "v24-chat-sessions"), ("v22-sent-posts-by-digest", "v25-sent-posts-by-digest"),
                        ("v23-key-package-suites", "v26-key-package-suites"),
                    ] {
                        try db.execute("UPDATE spark_migrations SET identifier = ? WHERE identifier = ?", [old, new])
                    }
                }
            }
            // Applied again, v26 would fail (its column exists); v22 would add a second check row.
            let store = try EndpointStore(directory: data, key: .keyFile(directory: keys))
            let (chats, checks, recorded) = try store.queue.read { db in
                (
                    try db.scalar("SELECT count(*) FROM chats", as: Int.self),
                    try db.scalar("SELECT count(*) FROM store_key_check", as: Int.self),
                    try db.rows("SELECT identifier FROM spark_migrations ORDER BY identifier")
                        .map { try $0.get(0, as: String.self) }
                )
            }
            #expect(chats == 1 && checks == 1)
            #expect(recorded == names.sorted())
        }
    }

    @Test func aStoreFromBeforeEncryptionIsSealedInPlace() throws {
        try Fixtures.withTemporaryDirectorySync { directory in
            let data = directory.appendingPathComponent("device")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            // The store as the previous version left it: the schema, plaintext values.
            let queue = try DatabaseQueue(path: data.appendingPathComponent("endpoint.sqlite").path)
            try EndpointStore.migrator(StoreSealer(key: SymmetricKey(size: .bits256)))
                .prefix(through: "v21-fewer-pages-a-message").migrate(queue)
            let old = try UnlockedKeys.generate(userID: "alice", keyVersion: 1)
            try queue.write { db in
                try db.execute(
                    "INSERT INTO local_keys(user_id, key_version, signing_key, encryption_key) VALUES ('alice', 1, ?, ?)",
                    [old.signing.rawRepresentation.unsafeData(), old.encryption.rawRepresentation.unsafeData()])
                try db.execute("INSERT INTO chats(chat_id, subject, last_activity) VALUES ('c1', 'Old plans', 0)")
                try db.execute(
                    """
                    INSERT INTO messages(local_id, chat_id, number, sender, incoming, content, tag, state, timestamp)
                    VALUES ('m1', 'c1', 1, 'bob', 1, 'an old message', 'Text', 'delivered', 0)
                    """)
            }
            let store = try EndpointStore(directory: data, key: .keyFile(directory: directory.appendingPathComponent("keys")))
            #expect(try store.keys(userID: "alice")?.signing.publicKey == old.signing.publicKey)
            let sealer = store.sealer
            let (content, subject) = try store.queue.read { db in
                (
                    try db.scalar("SELECT content FROM messages", as: Data.self),
                    try db.scalar("SELECT subject FROM chats", as: Data.self)
                )
            }
            #expect(try sealer.openText(try #require(content), EndpointStore.Seal.content("m1")) == "an old message")
            #expect(try sealer.openText(try #require(subject), EndpointStore.Seal.subject("c1")) == "Old plans")
            #expect(Self.files(data).range(of: Data("an old message".utf8)) == nil)
        }
    }
}

extension SecretServiceTests {
    /// Kills every process whose command line contains `marker` (the keyring
    /// daemon a test started, found by the control directory only it was given).
    static func stopProcesses(whoseCommandLineContains marker: String) {
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), pid != getpid(),
                let line = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"),
                String(decoding: line.map { $0 == 0 ? 32 : $0 }, as: UTF8.self).contains(marker)
            else { continue }
            kill(pid, SIGKILL)  // the keyring daemon ignores SIGTERM
        }
    }

    /// Runs a program with its output to a file, and waits for it on a thread of its own
    /// (Foundation's `Process` is not used: it must not reap or watch a session's daemons).
    static func runWithoutPipes(
        _ executable: URL, _ arguments: [String], output: URL, environment: [String: String]
    ) async throws -> Int32 {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var actions = posix_spawn_file_actions_t()
                posix_spawn_file_actions_init(&actions)
                defer { posix_spawn_file_actions_destroy(&actions) }
                posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
                posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
                posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
                let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
                let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
                defer { for pointer in argv + envp { free(pointer) } }
                var pid = pid_t()
                guard posix_spawn(&pid, executable.path, &actions, nil, argv, envp) == 0 else {
                    continuation.resume(returning: -1)
                    return
                }
                var status: Int32 = 0
                waitpid(pid, &status, 0)
                continuation.resume(returning: (status >> 8) & 0xff)
            }
        }
    }
}

@Suite("Endpoint store: where the keys go")
struct StoreKeyDirectoryTests {
    /// The store keys follow the XDG base directory rules, as the data follows `$HOME`: a
    /// process run with another `$HOME` keeps its keys there, not in the passwd entry's home.
    @Test func theKeysFollowXDGAndHome() {
        #expect(
            StoreKeyring.defaultKeyDirectory(environment: ["XDG_CONFIG_HOME": "/x/config", "HOME": "/h"]).path
                == "/x/config/spark-sdk/store-keys")
        #expect(StoreKeyring.defaultKeyDirectory(environment: ["HOME": "/h"]).path == "/h/.config/spark-sdk/store-keys")
        #expect(
            StoreKeyring.defaultKeyDirectory(environment: ["XDG_CONFIG_HOME": "relative", "HOME": "/h"]).path
                == "/h/.config/spark-sdk/store-keys", "a relative XDG_CONFIG_HOME is ignored")
        #expect(
            StoreKeyring.defaultKeyDirectory(environment: [:]).path
                == FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".config/spark-sdk/store-keys").path)
    }
}

/// The Secret Service path for real: a private D-Bus session with GNOME Keyring (installed by
/// `scripts/bootstrap.sh`), and the `sdk-peer` helper opening a store in it.
@Suite("Endpoint store: the key in the Secret Service")
struct SecretServiceTests {
    @Test func theKeyringKeepsTheKeyAndWithoutItTheStoreStaysLocked() async throws {
        let session = URL(fileURLWithPath: "/usr/bin/dbus-run-session")
        let keyring = URL(fileURLWithPath: "/usr/bin/gnome-keyring-daemon")
        #expect(
            FileManager.default.isExecutableFile(atPath: session.path)
                && FileManager.default.isExecutableFile(atPath: keyring.path),
            "dbus-run-session and gnome-keyring-daemon are missing: run scripts/bootstrap.sh")
        try await Fixtures.withTemporaryDirectory { directory in
            let peer = Fixtures.executable("sdk-peer").path
            let data = directory.appendingPathComponent("device").path
            var environment = ProcessInfo.processInfo.environment
            environment["SPARK_SECRET_SERVICE"] = nil
            environment["DBUS_SESSION_BUS_ADDRESS"] = nil
            environment["XDG_CONFIG_HOME"] = directory.appendingPathComponent("config").path
            // Two processes in one desktop session: the first makes the key, the second finds it.
            // The keyring daemon outlives the session's shell: the output goes to a file, not to
            // the pipes this test reads, and the daemon (the newest of its name) is stopped.
            let control = directory.appendingPathComponent("keyring").path
            let output = directory.appendingPathComponent("session.out").path
            let inner = """
                eval "$(printf test | gnome-keyring-daemon --unlock --components=secrets --control-directory='\(control)' 2>/dev/null)"
                '\(peer)' store '\(data)' && '\(peer)' store '\(data)'
                """
            // The session's daemons outlive it: no descriptor of this process (other tests'
            // pipes) may reach them, so the shell closes every one above 2 before it starts.
            environment["INNER"] = inner
            let closeAndRun = """
                for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done 2>/dev/null
                exec '\(session.path)' -- bash -c "$INNER"
                """
            let status = try await Self.runWithoutPipes(
                URL(fileURLWithPath: "/bin/bash"), ["-c", closeAndRun], output: URL(fileURLWithPath: output),
                environment: environment)
            Self.stopProcesses(whoseCommandLineContains: "--control-directory=\(control)")
            let transcript = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            #expect(status == 0, "\(transcript)")
            #expect(transcript == "opened; no key file\nopened; no key file\n", "the key is in the keyring, not in a file")
            // Without the session (another login, a copied disk): locked, with the reason.
            let outside = try await Fixtures.run(URL(fileURLWithPath: peer), ["store", data], environment: environment)
            #expect(outside.status == 1 && outside.stdout.hasPrefix("refused: storeLocked: "), "\(outside.stdout)")
            #expect(outside.stdout.contains("its key is missing"))
        }
    }
}
