import Foundation
import SparkCrypto
import SparkLock
import SparkTestSupport
import Testing

@testable import SparkMLS

/// The simulation's work runs on threads of its own at the lowest CPU priority (nice 19), off
/// Swift's cooperative pool: a 1,000-member group is a minute of CPU, and the suite's other tests
/// (which wait for things to happen within a few seconds) run beside it on two cores.
enum Background {
    // On Linux the nice value is per thread, and `who` 0 is the calling thread (setpriority(2)).
    static func lowerPriority() { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19) }

    /// Runs `body` on a low-priority thread of its own.
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                lowerPriority()
                continuation.resume(with: Result { try body() })
            }
        }
    }

    // Locked, not Synchronization.Mutex: ThreadSanitizer does not see the latter's futex.
    final class Counter: Sendable {
        let next = Locked(0)
        func take() -> Int {
            next.withLock { value in
                defer { value += 1 }
                return value
            }
        }
    }

    /// Calls `body` for 0..<count on as many low-priority threads as there are cores.
    static func forEach(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let counter = Counter()
        let group = DispatchGroup()
        for _ in 0..<max(1, ProcessInfo.processInfo.activeProcessorCount) {
            group.enter()
            Thread.detachNewThread {
                lowerPriority()
                while true {
                    let index = counter.take()
                    if index >= count { break }
                    body(index)
                }
                group.leave()
            }
        }
        group.wait()
    }
}

/// A group of clients in one process, each with its own state, driven through epochs: every
/// commit goes to every other client, every Welcome to its joiners.
///
/// A commit adding more than `joinersFollowed` members has only that many of them join as
/// clients, spread over the batch (its first and last included); the others are leaves of the
/// tree that no client here plays. Every member checking every other's KeyPackage and leaf is
/// quadratic: a thousand clients are over a minute of CPU (several under a sanitizer), where a
/// sample of them follows the same thousand-leaf tree in seconds.
struct Simulation {
    /// The clients, by leaf.
    var members: [UInt32: MLSGroup] = [:]
    /// The group's members, clients or not.
    var size = 1
    var random: MLSSeededRandom
    var nextIdentity = 0
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    let suite: MLSCipherSuite
    let joinersFollowed: Int

    init(seed: String, suite: MLSCipherSuite = .x25519AES128GCMSHA256Ed25519, joinersFollowed: Int = .max) throws {
        random = MLSSeededRandom(seed: seed)
        self.suite = suite
        self.joinersFollowed = joinersFollowed
        let creator = try Self.signer("member-0", &random)
        let group = try MLSGroup.create(groupID: Data("group \(seed)".utf8), signer: creator, suite: suite, random: &random)
        members[0] = group
        nextIdentity = 1
    }

    static func signer(_ name: String, _ random: inout MLSSeededRandom) throws -> MLSSigner {
        MLSSigner(
            credential: MLSCredential(identity: Data(name.utf8)),
            key: try Ed25519.PrivateKey(rawRepresentation: random.secret(count: 32)))
    }

    mutating func bundle() throws -> MLSKeyPackageBundle {
        defer { nextIdentity += 1 }
        return try MLSKeyPackageBundle(
            signer: Self.signer("member-\(nextIdentity)", &random), suite: suite, now: now, random: &random)
    }

    /// `committer` commits; everyone else processes; joiners join. Returns the new leaves.
    @discardableResult
    mutating func commit(by committer: UInt32, adding count: Int = 0, removing: [UInt32] = [], path: Bool = true) throws
        -> [UInt32]
    {
        let bundles = try (0..<count).map { _ in try bundle() }
        let result = try members[committer]!.commit(
            adding: bundles.map(\.keyPackage), removing: removing, updatingPath: path, now: now, random: &random)
        let now = now
        let outcomes = try everyone(except: committer) { group in try group.process(result.commit, now: now) }
        for (leaf, outcome) in outcomes where removing.contains(leaf) {
            try #require(outcome == .removed)
            members[leaf] = nil
        }
        members[committer] = result.group
        size += count - removing.count
        var added: [UInt32] = []
        if let welcome = result.welcome {
            let joiners =
                count <= joinersFollowed
                ? Array(bundles.indices) : (0..<joinersFollowed).map { $0 * (count - 1) / (joinersFollowed - 1) }
            let joined = Locked<[MLSGroup]>([])
            let failure = Locked<(any Error)?>(nil)
            Background.forEach(joiners.count) { index in
                do {
                    let group = try MLSGroup.join(welcome: welcome, bundle: bundles[joiners[index]])
                    joined.withLock { $0.append(group) }
                } catch {
                    failure.withLock { $0 = error }
                }
            }
            if let error = failure.withLock({ $0 }) { throw error }
            for group in joined.withLock({ $0 }) {
                members[group.ownLeaf] = group
                added.append(group.ownLeaf)
            }
        }
        try checkAgreement()
        return added
    }

    /// Runs `body` on every member but `excluded`, on all cores (each member's state is its own),
    /// and keeps the new states; returns each member's result.
    mutating func everyone<Result: Sendable>(
        except excluded: UInt32, _ body: @escaping @Sendable (inout MLSGroup) throws -> Result
    ) throws -> [UInt32: Result] {
        let leaves = members.keys.filter { $0 != excluded }
        let states = members
        let results = Locked<[UInt32: (MLSGroup, Result)]>([:])
        let failure = Locked<(any Error)?>(nil)
        Background.forEach(leaves.count) { index in
            var group = states[leaves[index]]!
            do {
                let result = try body(&group)
                results.withLock { $0[leaves[index]] = (group, result) }
            } catch {
                failure.withLock { $0 = error }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        var outcomes: [UInt32: Result] = [:]
        for (leaf, (group, result)) in results.withLock({ $0 }) {
            members[leaf] = group
            outcomes[leaf] = result
        }
        return outcomes
    }

    func checkAgreement() throws {
        let epochs = Set(members.values.map(\.epoch))
        let authenticators = Set(members.values.map(\.epochAuthenticator))
        try #require(epochs.count == 1, "members disagree on the epoch: \(epochs)")
        try #require(authenticators.count == 1, "members disagree on the epoch authenticator")
        let sizes = Set(members.values.map(\.memberCount))
        try #require(sizes == [size], "members disagree on the membership")
    }

    /// `sender` sends an application message; every other member reads it.
    mutating func send(from sender: UInt32, _ text: String) throws {
        let message = try members[sender]!.protect(Data(text.utf8), random: &random)
        let received = try everyone(except: sender) { group in try group.process(message) }
        for outcome in received.values {
            try #require(outcome == .application(Data(text.utf8), sender: sender, authenticatedData: Data()))
        }
    }
}

@Suite("MLS groups")
struct GroupTests {
    /// Groups of 2, 10, 100 and 1,000 members through adds, updates, removes and messages; after
    /// every epoch, all members hold the same epoch authenticator. In the group of 1,000, the
    /// creator and 32 of the 999 it adds at once are clients (the other committers, the removed
    /// and the last sender among them), each following the whole tree.
    @Test(arguments: [2, 10, 100, 1000])
    func groupsAgreeEveryEpoch(size: Int) async throws {
        // Checks here are #require: a failure throws out of the background thread into the test.
        try await Background.run { try Self.driveGroup(size: size) }
    }

    static func driveGroup(size: Int) throws {
        var simulation = try Simulation(seed: "size \(size)", joinersFollowed: size >= 1000 ? 32 : .max)
        var remaining = size - 1
        while remaining > 0 {
            // One bulk add for the largest group (a bulk add processed by every member is a
            // quadratic amount of KeyPackage checking); batches of a quarter for the others.
            let batch = size >= 1000 ? remaining : min(remaining, max(1, size / 4))
            let committer = simulation.members.keys.max()!
            try simulation.commit(by: committer, adding: batch)
            remaining -= batch
        }
        try #require(simulation.size == size && simulation.members.count == (size >= 1000 ? 33 : size))
        let leaves = simulation.members.keys.sorted()
        try simulation.send(from: leaves[0], "hello from the creator")
        // An update commit from a member in the middle, an Update proposal committed by another.
        try simulation.commit(by: leaves[leaves.count / 2])
        if size > 2 {
            let proposer = leaves[1]
            let proposal = try simulation.members[proposer]!.proposeUpdate(random: &simulation.random)
            _ = try simulation.everyone(except: proposer) { group in try group.process(proposal) }
            try simulation.commit(by: leaves[0])
        }
        // Removes, then a re-add into the freed leaves, then a message from the last member.
        let removed = size > 2 ? [leaves[leaves.count - 1], leaves[leaves.count / 3]] : [leaves[1]]
        try simulation.commit(by: leaves[0], removing: removed)
        try #require(simulation.size == size - removed.count)
        let readded = try simulation.commit(by: leaves[0], adding: removed.count, path: false)
        try #require(Set(readded) == Set(removed) || size == 2)
        try simulation.send(from: simulation.members.keys.max()!, "still here")
    }

    /// Suite 3 (ChaCha20-Poly1305) through the same steps, and a suite-1 KeyPackage refused by it.
    @Test func suiteThree() throws {
        var simulation = try Simulation(seed: "suite 3", suite: .x25519ChaCha20Poly1305SHA256Ed25519)
        try simulation.commit(by: 0, adding: 4)
        try simulation.send(from: 2, "over ChaCha20-Poly1305")
        try simulation.commit(by: 3, removing: [1])
        try simulation.commit(by: 0)
        #expect(simulation.members[0]!.cipherSuite.description == "MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519")
        var random = MLSSeededRandom(seed: "other suite")
        let other = try MLSKeyPackageBundle(
            signer: try Simulation.signer("other", &random), now: simulation.now, random: &random)
        #expect(throws: MLSError(.invalid, "")) {
            _ = try simulation.members[0]!.commit(adding: [other.keyPackage], now: simulation.now, random: &random)
        }
    }

    /// The post-quantum suite (KEM X-Wing) through the same steps: adds by Welcome, an update
    /// path sealed to X-Wing keys, an Update proposal, removes and re-adds, messages, a restart
    /// from the stored state and an external join; a KeyPackage whose init key holds an ML-KEM
    /// coefficient not below q, and a suite-1 KeyPackage, are refused.
    @Test func postQuantumSuite() throws {
        let suite = MLSCipherSuite.xWingAES128GCMSHA256Ed25519
        #expect(suite.isPostQuantum && suite.rawValue == 0xF768 && !MLSCipherSuite.x25519AES128GCMSHA256Ed25519.isPostQuantum)
        #expect(try MLSCipherSuite(rawValue: 0xF768) == suite)
        var simulation = try Simulation(seed: "x-wing", suite: suite)
        try simulation.commit(by: 0, adding: 6)
        try simulation.send(from: 3, "sealed under X-Wing")
        try simulation.commit(by: 4)
        let proposal = try simulation.members[2]!.proposeUpdate(random: &simulation.random)
        _ = try simulation.everyone(except: 2) { group in try group.process(proposal) }
        try simulation.commit(by: 5)
        try simulation.commit(by: 0, removing: [1, 6])
        try simulation.commit(by: 3, adding: 2, path: false)
        #expect(simulation.members[0]!.cipherSuite.description == "MLS_128_MLKEM768X25519_AES128GCM_SHA256_Ed25519")
        // The stored state comes back and keeps following.
        let restored = try MLSGroup(serialized: simulation.members[2]!.serialized())
        simulation.members[2] = restored
        try simulation.commit(by: 0)
        try simulation.send(from: 2, "after a restart")
        // An external join from the GroupInfo (its external_pub an X-Wing key).
        let info = try simulation.members[0]!.groupInfo()
        let outsider = try Simulation.signer("outsider", &simulation.random)
        let (commit, joined) = try MLSGroup.joinExternally(groupInfo: info, signer: outsider, random: &simulation.random)
        guard case .commit = try simulation.members[0]!.process(commit) else {
            Issue.record("the external commit was not applied")
            return
        }
        #expect(simulation.members[0]!.epochAuthenticator == joined.epochAuthenticator)

        var random = MLSSeededRandom(seed: "hostile packages")
        let good = try MLSKeyPackageBundle(
            signer: try Simulation.signer("carol", &random), suite: suite, now: simulation.now, random: &random)
        #expect(good.keyPackage.count > 2 * XWing.publicKeyByteCount, "two X-Wing keys: its init and leaf keys")
        // The init key's first coefficient set to 4095 (not below q), the package signed again.
        var package = good.package
        package.initKey[0] = 0xff
        package.initKey[1] |= 0x0f
        package.signature = try suite.signWithLabel(good.signer.key, "KeyPackageTBS", package.signedContent)
        let hostile = MLSMessageBody.keyPackage(package).tlsEncoded
        let member = simulation.members[0]!
        #expect(throws: MLSError(.invalid, "")) {
            _ = try member.commit(adding: [hostile], now: simulation.now, random: &random)
        }
        // The leaf's encryption key broken the same way (it would be used only by a later
        // commit's path): refused when the package is checked, at the add.
        var leafPackage = good.package
        leafPackage.leafNode.encryptionKey[0] = 0xff
        leafPackage.leafNode.encryptionKey[1] |= 0x0f
        try leafPackage.leafNode.sign(suite: suite, key: good.signer.key, groupID: Data(), leafIndex: 0)
        leafPackage.signature = try suite.signWithLabel(good.signer.key, "KeyPackageTBS", leafPackage.signedContent)
        #expect(throws: MLSError(.invalid, "")) {
            _ = try member.commit(
                adding: [MLSMessageBody.keyPackage(leafPackage).tlsEncoded], now: simulation.now, random: &random)
        }
        let classic = try MLSKeyPackageBundle(
            signer: try Simulation.signer("dave", &random), now: simulation.now, random: &random)
        #expect(throws: MLSError(.invalid, "")) {
            _ = try member.commit(adding: [classic.keyPackage], now: simulation.now, random: &random)
        }
        _ = try member.commit(adding: [good.keyPackage], now: simulation.now, random: &random)
    }

    @Test func stateSurvivesSerialization() throws {
        var simulation = try Simulation(seed: "storage")
        try simulation.commit(by: 0, adding: 3)
        let message = try simulation.members[2]!.protect(Data("after restore".utf8), random: &simulation.random)
        let stored = simulation.members[1]!.serialized()
        var restored = try MLSGroup(serialized: stored)
        #expect(restored.epochAuthenticator == simulation.members[1]!.epochAuthenticator)
        #expect(try restored.process(message) == .application(Data("after restore".utf8), sender: 2, authenticatedData: Data()))
        // The restored member keeps following the group.
        simulation.members[1] = restored
        try simulation.commit(by: 3)
        try simulation.send(from: 1, "restored and sending")
        // Damaged state is refused.
        var bytes = stored.unsafeData()
        bytes.removeLast()
        #expect(throws: MLSError.self) { try MLSGroup(serialized: bytes) }
        #expect(throws: MLSError.self) { try MLSGroup(serialized: Data([9]) + bytes.dropFirst()) }
    }

    @Test func epochStateAndRatchetsAreStoredApart() throws {
        var simulation = try Simulation(seed: "two parts")
        try simulation.commit(by: 0, adding: 3)
        let epoch = simulation.members[1]!.serializedEpoch()
        // Messages move the ratchets only: the epoch state stays byte for byte the same.
        try simulation.send(from: 1, "first")
        try simulation.send(from: 2, "second")
        #expect(simulation.members[1]!.serializedEpoch() == epoch)
        let ratchets = simulation.members[1]!.serializedRatchets()
        let message = try simulation.members[2]!.protect(Data("after restore".utf8), random: &simulation.random)
        var restored = try MLSGroup(epoch: epoch, ratchets: ratchets)
        #expect(restored.serialized() == simulation.members[1]!.serialized())
        #expect(try restored.process(message) == .application(Data("after restore".utf8), sender: 2, authenticatedData: Data()))
        // A key used before the ratchets were stored is gone after the restore too.
        let spent = try simulation.members[2]!.protect(Data("spent".utf8), random: &simulation.random)
        _ = try restored.process(spent)
        #expect(throws: MLSError.self) { _ = try restored.process(spent) }
        simulation.members[1] = restored
        try simulation.commit(by: 3)
        try simulation.send(from: 1, "restored and sending")
        // Parts of different epochs, or swapped, or damaged, are refused.
        let later = simulation.members[1]!
        #expect(throws: MLSError.self) { try MLSGroup(epoch: epoch, ratchets: later.serializedRatchets()) }
        #expect(throws: MLSError.self) { try MLSGroup(epoch: later.serializedEpoch(), ratchets: ratchets) }
        #expect(throws: MLSError.self) { try MLSGroup(epoch: ratchets, ratchets: epoch) }
        #expect(throws: MLSError.self) { try MLSGroup(serialized: epoch) }
        var damaged = later.serializedRatchets().unsafeData()
        damaged.removeLast()
        #expect(throws: MLSError.self) { try MLSGroup(epoch: later.serializedEpoch(), ratchets: damaged) }
        #expect(
            try MLSGroup(epoch: later.serializedEpoch(), ratchets: later.serializedRatchets()).serialized() == later.serialized())
    }

    @Test func ratchetsStayTheSameSizeWhateverTheGroupSize() throws {
        var small = try Simulation(seed: "small")
        try small.commit(by: 0, adding: 1)
        var large = try Simulation(seed: "large")
        try large.commit(by: 0, adding: 63)
        try small.send(from: 0, "hello")
        try large.send(from: 0, "hello")
        let (smallSize, largeSize) = (small.members[1]!.serializedRatchets().count, large.members[1]!.serializedRatchets().count)
        // The secrets along one path (log of the size) and the sender's ratchets: not one per member.
        #expect(largeSize < smallSize + 6 * 40, "\(smallSize) and \(largeSize) bytes")
        #expect(large.members[1]!.serializedEpoch().count > 4 * small.members[1]!.serializedEpoch().count)
    }

    @Test func externalJoin() throws {
        var simulation = try Simulation(seed: "external")
        try simulation.commit(by: 0, adding: 2)
        let info = try simulation.members[1]!.groupInfo()
        let signer = try Simulation.signer("late", &simulation.random)
        let (commit, joined) = try MLSGroup.joinExternally(groupInfo: info, signer: signer, random: &simulation.random)
        for leaf in simulation.members.keys { _ = try simulation.members[leaf]!.process(commit) }
        simulation.members[joined.ownLeaf] = joined
        simulation.size += 1
        try simulation.checkAgreement()
        try simulation.send(from: joined.ownLeaf, "joined from outside")
        try simulation.commit(by: 0)
    }

    @Test func exporterAgrees() throws {
        var simulation = try Simulation(seed: "exporter")
        try simulation.commit(by: 0, adding: 1)
        let a = try simulation.members[0]!.export(label: "test", context: Data([1]), length: 32)
        let b = try simulation.members[1]!.export(label: "test", context: Data([1]), length: 32)
        #expect(a == b)
        #expect(a != (try simulation.members[1]!.export(label: "test", context: Data([2]), length: 32)))
    }

    /// The application's own group context extensions reach joiners, change by commit, survive
    /// storage, and must use private-use types.
    @Test func applicationExtensionsAreAgreedOn() throws {
        var random = MLSSeededRandom(seed: "extensions")
        let first = MLSGroupExtension(type: 0xF001, data: Data("one".utf8))
        let signer = MLSSigner(credential: MLSCredential(identity: Data("a".utf8)), key: try Ed25519.PrivateKey())
        #expect(throws: MLSError(.invalid, "")) {
            try MLSGroup.create(
                groupID: Data("g".utf8), signer: signer, extensions: [MLSGroupExtension(type: 2, data: Data())], random: &random)
        }
        #expect(throws: MLSError(.invalid, "")) {
            try MLSGroup.create(groupID: Data("g".utf8), signer: signer, extensions: [first, first], random: &random)
        }
        let group = try MLSGroup.create(groupID: Data("g".utf8), signer: signer, extensions: [first], random: &random)
        let bob = try MLSKeyPackageBundle(
            signer: MLSSigner(credential: MLSCredential(identity: Data("b".utf8)), key: try Ed25519.PrivateKey()), now: Date(),
            random: &random)
        let added = try group.commit(adding: [bob.keyPackage], now: Date(), random: &random)
        var joined = try MLSGroup.join(welcome: try #require(added.welcome), bundle: bob)
        #expect(joined.applicationExtensions == [first])
        let second = MLSGroupExtension(type: 0xF002, data: Data("two".utf8))
        let changed = try added.group.commit(extensions: [second], now: Date(), random: &random)
        _ = try joined.process(changed.commit)
        #expect(joined.applicationExtensions == [second] && changed.group.applicationExtensions == [second])
        #expect(try MLSGroup(serialized: joined.serialized()).applicationExtensions == [second])
    }

    /// `processWithSender` names the member who signed: the committer as it was before its own
    /// path, and an application message's sender.
    @Test func theSenderOfACommitAndOfAMessageIsNamed() throws {
        var simulation = try Simulation(seed: "senders")
        try simulation.commit(by: 0, adding: 2)
        let before = try #require(simulation.members[1]!.member(at: 1))
        let result = try simulation.members[1]!.commit(now: simulation.now, random: &simulation.random)
        var observer = simulation.members[2]!
        let (received, committer) = try observer.processWithSender(result.commit, now: simulation.now)
        guard case .commit = received else { throw MLSError(.invalid, "not a commit: \(received)") }
        #expect(committer == before, "the committer as the tree had it before the commit")
        var sender = result.group
        let message = try sender.protect(Data("hi".utf8), random: &simulation.random)
        let (opened, author) = try observer.processWithSender(message)
        #expect(opened == .application(Data("hi".utf8), sender: 1, authenticatedData: Data()))
        #expect(author?.leafIndex == 1 && author?.credential == before.credential)
    }
}

/// Ephemeral messages (`MLSGroup.sealEphemeral`): every member of the epoch opens one, knows
/// which leaf signed it (opening is not `mutating`: the ratchets do not move); a member who holds the epoch's key but
/// signs as another leaf, another group, another epoch and altered bytes are refused.
@Suite("MLS ephemeral messages")
struct EphemeralMessageTests {
    @Test func membersOpenItAndNoOneSignsAsAnother() throws {
        var simulation = try Simulation(seed: "ephemeral")
        try simulation.commit(by: 0, adding: 2)
        let alice = simulation.members[0]!
        let bob = simulation.members[1]!
        let sealed = try alice.sealEphemeral(Data("typing".utf8), random: &simulation.random)
        let opened = try bob.openEphemeral(sealed)
        #expect(opened.content == Data("typing".utf8) && opened.sender.leafIndex == 0)

        // Leaf 2 holds the epoch's key, seals a notice that names leaf 0 and signs it itself.
        let mallory = simulation.members[2]!
        var header = TLSWriter()
        header.opaque(mallory.groupID)
        header.u64(mallory.epoch)
        header.u32(0)
        let nonce = simulation.random.secret(count: 12).unsafeData()
        header.raw(nonce)
        var signed = TLSWriter()
        signed.raw(header.bytes)
        signed.opaque(Data("forged".utf8))
        var plaintext = TLSWriter()
        plaintext.opaque(Data("forged".utf8))
        plaintext.opaque(try mallory.cipherSuite.signWithLabel(mallory.signer.key, "EphemeralContentTBS", signed.bytes))
        let key = try mallory.export(label: "spark ephemeral", context: Data(), length: 16)
        var forged = TLSWriter()
        forged.raw(header.bytes)
        forged.opaque(try mallory.cipherSuite.seal(key: key, nonce: nonce, aad: header.bytes, plaintext.bytes))
        #expect(throws: MLSError(.authentication, "")) { try bob.openEphemeral(forged.data) }

        var altered = sealed
        altered[altered.count - 3] ^= 1
        #expect(throws: MLSError.self) { try bob.openEphemeral(altered) }
        try simulation.commit(by: 1)
        #expect(throws: MLSError(.keyUnavailable, "")) { try simulation.members[2]!.openEphemeral(sealed) }
        let other = try Simulation(seed: "another group")
        #expect(throws: MLSError(.wrongGroup, "")) { try other.members[0]!.openEphemeral(sealed) }
    }
}
