import Foundation
import SparkCrypto
import SparkMLS
import SparkSDK

/// SparkMLS's rows: a protected application message against vodozemac's Megolm, and a commit and
/// a join in a 1,000-member group against the same in a 10-member group (the ratio shows how
/// they grow: TreeKEM's work is logarithmic in the size, a joiner's check of the tree linear).
enum MLSBenchmarks {
    static let all = [
        Benchmark(name: "message-seal-open", run: sealOpen),
        Benchmark(name: "mls-commit-1000", run: commit),
        Benchmark(name: "mls-welcome-1000", run: welcome),
        Benchmark(name: "group-add-100", run: groupAdd),
        Benchmark(name: "mls-add-one-to-1000", run: addOneTo1000),
        Benchmark(name: "mls-add-one-to-1000-pq", run: addOneTo1000PostQuantum),
        Benchmark(name: "mls-welcome-1000-pq", run: welcomePostQuantum),
    ]

    static let now = Date()

    static func signer(_ name: String) throws -> MLSSigner {
        MLSSigner(credential: MLSCredential(identity: Data(name.utf8)), key: try Ed25519.PrivateKey())
    }

    /// A group of `size` members as its creator and its newest member see it, with every parent
    /// node of the tree set, as in a group whose members have each committed since joining. Each
    /// member is added, joins from the Welcome and commits an update at once; only the creator and
    /// the newest member are kept, so building costs one join per member, not a commit processed
    /// by everyone. (Right after a bulk add the parents are blank, and the first commits encrypt
    /// to every leaf below them: linear, as RFC 9420 §7.4 has it.)
    static func group(size: Int, suite: MLSCipherSuite = .x25519AES128GCMSHA256Ed25519) throws -> (
        creator: MLSGroup, member: MLSGroup, welcomeFor: () throws -> Data,
        lastBundle: MLSKeyPackageBundle
    ) {
        var random = MLSSystemRandom()
        var creator = try MLSGroup.create(
            groupID: Data("bench \(size)".utf8), signer: try signer("creator"), suite: suite, random: &random)
        var member = creator
        for index in 1..<size - 1 {
            let bundle = try MLSKeyPackageBundle(signer: try signer("member \(index)"), suite: suite, now: now, random: &random)
            let added = try creator.commit(adding: [bundle.keyPackage], updatingPath: false, now: now, random: &random)
            creator = added.group
            member = try MLSGroup.join(welcome: added.welcome!, bundle: bundle)
            let update = try member.commit(now: now, random: &random)
            member = update.group
            _ = try creator.process(update.commit)
        }
        let last = try MLSKeyPackageBundle(signer: try signer("member \(size - 1)"), suite: suite, now: now, random: &random)
        let frozen = creator
        let welcomeFor = {
            var random = MLSSystemRandom()
            return try frozen.commit(adding: [last.keyPackage], updatingPath: false, now: now, random: &random).welcome!
        }
        return (creator, member, welcomeFor, last)
    }

    /// A group of one device per signer, populated as ``group(size:)`` makes it, as its creator
    /// (the first signer) and its newest member see it; each leaf checked by `validator`.
    static func populatedGroup(signers: [MLSSigner], validator: any MLSCredentialValidator) throws -> (
        creator: MLSGroup, member: MLSGroup
    ) {
        var random = MLSSystemRandom()
        var creator = try MLSGroup.create(
            groupID: Data("populated \(signers.count)".utf8), signer: signers[0], validator: validator, random: &random)
        var member = creator
        for signer in signers.dropFirst() {
            let bundle = try MLSKeyPackageBundle(signer: signer, now: now, random: &random)
            let added = try creator.commit(adding: [bundle.keyPackage], updatingPath: false, now: now, random: &random)
            creator = added.group
            member = try MLSGroup.join(welcome: added.welcome!, bundle: bundle, validator: validator)
            let update = try member.commit(now: now, random: &random)
            member = update.group
            _ = try creator.process(update.commit)
        }
        return (creator, member)
    }

    static func sealOpen() throws -> BenchmarkResult {
        var random = MLSSystemRandom()
        let (alice, bob) = try pair()
        var sender = alice
        var receiver = bob
        let text = Data(repeating: 0x78, count: 200)
        let ours = try Harness.rate {
            let message = try sender.protect(text, random: &random)
            guard case .application(let opened, _, _) = try receiver.process(message), opened.count == 200 else {
                throw BenchError("the MLS message did not round-trip")
            }
        }
        // Where the time goes: the Ed25519 signature and its check, alone, on content of the size
        // MLS signs (FramedContentTBS with the group context, about 330 bytes).
        let key = try Ed25519.PrivateKey()
        let content = Data(repeating: 0x42, count: 330)
        let signature = try key.signature(for: content)
        let signing = try Harness.rate { _ = try key.signature(for: content) }
        let verifying = try Harness.rate {
            let publicKey = try Ed25519.PublicKey(rawRepresentation: key.publicKey.rawRepresentation)
            guard publicKey.isValidSignature(signature, for: content) else { throw BenchError("Ed25519 failed") }
        }
        let parsed = try Ed25519.PublicKey(rawRepresentation: key.publicKey.rawRepresentation)
        let checkingOnly = try Harness.rate {
            guard parsed.isValidSignature(signature, for: content) else { throw BenchError("Ed25519 failed") }
        }
        FileHandle.standardError.write(
            Data(
                ("message-seal-open: \(format(1e6 / ours)) µs a round trip, of which Ed25519 signing "
                    + "\(format(1e6 / signing)) µs and checking \(format(1e6 / verifying)) µs "
                    + "(\(format(1e6 / checkingOnly)) µs of it the check with the key already parsed)\n").utf8))
        let output = try Harness.run("python3", [MessagingBenchmarks.megolm.path]).output
        guard let reference = Double(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw BenchError("the vodozemac reference failed (is vodozemac installed? run scripts/bootstrap.sh)")
        }
        return Harness.result(
            "message-seal-open", unit: "ops/s", ours: ours, reference: reference, higherIsBetter: true,
            referenceName: "vodozemac Megolm encrypt+decrypt (Python)")
    }

    static func pair() throws -> (MLSGroup, MLSGroup) {
        var random = MLSSystemRandom()
        let alice = try MLSGroup.create(groupID: Data("pair".utf8), signer: try signer("alice"), random: &random)
        let bob = try MLSKeyPackageBundle(signer: try signer("bob"), now: now, random: &random)
        let result = try alice.commit(adding: [bob.keyPackage], now: now, random: &random)
        return (result.group, try MLSGroup.join(welcome: result.welcome!, bundle: bob))
    }

    /// Milliseconds to create an update commit and to process it at one other member.
    static func commitMilliseconds(size: Int) throws -> Double {
        let (creator, member, _, _) = try group(size: size)
        var random = MLSSystemRandom()
        let result = try creator.commit(now: now, random: &random)
        let processing = try Harness.bestTime(repeats: 10) {
            var receiver = member
            _ = try receiver.process(result.commit)
        }
        let total =
            try Harness.bestTime(repeats: 10) {
                let result = try creator.commit(now: now, random: &random)
                var receiver = member
                _ = try receiver.process(result.commit)
            } * 1000
        FileHandle.standardError.write(
            Data(
                "mls-commit with \(size) members: \(format(total)) ms, of which processing \(format(processing * 1000)) ms\n".utf8
            ))
        return total
    }

    /// Milliseconds for a new member to join from a Welcome (the whole tree checked, cold).
    static func welcomeMilliseconds(size: Int, suite: MLSCipherSuite = .x25519AES128GCMSHA256Ed25519, printing: Bool = false)
        throws -> Double
    {
        let (_, _, welcomeFor, bundle) = try group(size: size, suite: suite)
        let welcome = try welcomeFor()
        if printing {
            FileHandle.standardError.write(
                Data("mls-welcome with \(size) members, \(suite): the Welcome is \(welcome.count) bytes\n".utf8))
        }
        return try Harness.bestTime(repeats: 5) {
            MLSGroup.forgetVerifiedLeaves()
            _ = try MLSGroup.join(welcome: welcome, bundle: bundle)
        } * 1000
    }

    static func commit() throws -> BenchmarkResult {
        let small = try commitMilliseconds(size: 10)
        let middle = try commitMilliseconds(size: 100)
        let large = try commitMilliseconds(size: 1000)
        return Harness.result(
            "mls-commit-1000", unit: "ms", ours: large, reference: small, higherIsBetter: false,
            referenceName: "the same with 10 members (100: \(format(middle)) ms)")
    }

    /// One commit adding 100 devices (cross-signed device credentials, each leaf checked by the
    /// credential validator) and all 100 joined, each cold (its own checks of the whole tree, as
    /// on its own device), against what adding 100 members cost with the sender keys chats used
    /// before: a chat key sealed to each member's X25519 key and signed, and each member opening it.
    static func groupAdd() throws -> BenchmarkResult {
        var random = MLSSystemRandom()
        struct Person {
            let keys: UnlockedKeys
            let signer: MLSSigner
        }
        func person(_ name: String) throws -> Person {
            let keys = try UnlockedKeys.generate(userID: name, keyVersion: 1)
            let device = try Ed25519.PrivateKey()
            let credential = try DeviceCredential.issue(
                userID: name, deviceID: "\(name)-device", signatureKey: device.publicKey.rawRepresentation,
                identityKeyVersion: 1, identityKey: keys.signing)
            return Person(keys: keys, signer: MLSSigner(credential: credential.mlsCredential, key: device))
        }
        let creator = try person("creator")
        let members = try (0..<100).map { try person("member-\($0)") }
        var trusted = ["creator": creator.keys.signing.publicKey.rawRepresentation]
        for member in members { trusted[member.keys.userID] = member.keys.signing.publicKey.rawRepresentation }
        let validator = DeviceCredentialValidator(identityKeys: trusted)
        let ours =
            try Harness.bestTime(repeats: 3) {
                // Fresh KeyPackages each run: a one-time KeyPackage joins once.
                let bundles = try members.map { try MLSKeyPackageBundle(signer: $0.signer, now: now, random: &random) }
                MLSGroup.forgetVerifiedLeaves()
                let group = try MLSGroup.create(
                    groupID: Data("add 100".utf8), signer: creator.signer, validator: validator, random: &random)
                let added = try group.commit(adding: bundles.map(\.keyPackage), now: now, random: &random)
                for bundle in bundles {
                    MLSGroup.forgetVerifiedLeaves()  // each joiner checks the tree on its own device
                    let joined = try MLSGroup.join(welcome: added.welcome!, bundle: bundle, validator: validator)
                    guard joined.epochAuthenticator == added.group.epochAuthenticator else {
                        throw BenchError("a joiner disagrees on the epoch")
                    }
                }
            } * 1000
        // Where the time goes: the commit alone, and one cold join.
        let bundles = try members.map { try MLSKeyPackageBundle(signer: $0.signer, now: now, random: &random) }
        let empty = try MLSGroup.create(
            groupID: Data("add 100".utf8), signer: creator.signer, validator: validator, random: &random)
        var added: MLSCommitResult?
        let committing = try Harness.bestTime(repeats: 3) {
            MLSGroup.forgetVerifiedLeaves()
            added = try empty.commit(adding: bundles.map(\.keyPackage), now: now, random: &random)
        }
        let joining = try Harness.bestTime(repeats: 3) {
            MLSGroup.forgetVerifiedLeaves()
            _ = try MLSGroup.join(welcome: added!.welcome!, bundle: bundles[0], validator: validator)
        }
        FileHandle.standardError.write(
            Data(
                ("group-add-100: \(format(ours)) ms, of which the commit \(format(committing * 1000)) ms and each of the 100 "
                    + "cold joins \(format(joining * 1000)) ms (Welcome \(added!.welcome!.count) bytes)\n").utf8))
        let reference =
            try Harness.bestTime(repeats: 3) {
                // The sender-key design chats used before MLS: one chat key sealed to each
                // member (an ephemeral X25519 agreement, HKDF, AES-GCM) and signed (Ed25519),
                // and each member checking and opening it.
                let key = SymmetricKey(size: .bits256)
                for member in members {
                    let ephemeral = try X25519.PrivateKey()
                    let context = Data("add 100/\(member.keys.userID)".utf8)
                    let wrapping = SymmetricKey(
                        secureBytes: try HKDF.deriveKey(
                            inputKeyMaterial: try ephemeral.sharedSecret(with: member.keys.encryption.publicKey),
                            salt: ephemeral.publicKey.rawRepresentation, info: context, outputByteCount: 32, hash: .sha256))
                    let box = try AESGCM.seal(key, using: wrapping, authenticating: context)
                    let signature = try creator.keys.signing.signature(for: box.combined + context)
                    precondition(creator.keys.signing.publicKey.isValidSignature(signature, for: box.combined + context))
                    let unwrapping = SymmetricKey(
                        secureBytes: try HKDF.deriveKey(
                            inputKeyMaterial: try member.keys.encryption.sharedSecret(with: ephemeral.publicKey),
                            salt: ephemeral.publicKey.rawRepresentation, info: context, outputByteCount: 32, hash: .sha256))
                    _ = try AESGCM.open(box, using: unwrapping, authenticating: context)
                }
            } * 1000
        return Harness.result(
            "group-add-100", unit: "ms", ours: ours, reference: reference, higherIsBetter: false,
            referenceName: "sender keys: a chat key sealed to 100 members and opened by each")
    }

    static func welcome() throws -> BenchmarkResult {
        let small = try welcomeMilliseconds(size: 10)
        let middle = try welcomeMilliseconds(size: 100)
        let large = try welcomeMilliseconds(size: 1000)
        return Harness.result(
            "mls-welcome-1000", unit: "ms", ours: large, reference: small, higherIsBetter: false,
            referenceName: "the same with 10 members (100: \(format(middle)) ms)")
    }

    // MARK: Against mls-rs

    static let mlsRsScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Python/mls_rs_add_member.py")

    /// mls-rs's Python bindings in `.build/mls-rs-venv`, once.
    static func mlsRsPython() throws -> String {
        let venv = PostgreSQLBenchmarks.repository.appendingPathComponent(".build/mls-rs-venv")
        let python = venv.appendingPathComponent("bin/python").path
        if (try? Harness.run(python, ["-c", "import mls_rs_uniffi"])) == nil {
            FileHandle.standardError.write(Data("spark-bench: installing mls-rs's bindings into \(venv.path)\n".utf8))
            _ = try Harness.run("python3", ["-m", "venv", venv.path])
            _ = try Harness.run(python, ["-m", "pip", "install", "--quiet", "agentvault-mls-rs-uniffi"])
        }
        return python
    }

    /// One member added to a 1,000-member group (the commit) and the commit applied by another
    /// member, ours against mls-rs's, each group made alike: its creator adds 999 members in one
    /// commit and the newest joins from the Welcome. Best of five each.
    static func addOneTo1000() throws -> BenchmarkResult {
        let (best, withPath, _) = try addOneMilliseconds(suite: .x25519AES128GCMSHA256Ed25519)
        let output = try Harness.run(try mlsRsPython(), [mlsRsScript.path]).output
        guard let field = output.split(whereSeparator: \.isWhitespace).first(where: { $0.hasPrefix("total=") }),
            let theirs = Double(field.dropFirst(6))
        else { throw BenchError("mls-rs reported: \(output)") }
        FileHandle.standardError.write(
            Data(
                "mls-add-one-to-1000: ours \(format(best)) ms (\(format(withPath)) ms with a path); mls-rs \(output)".utf8))
        return Harness.result(
            "mls-add-one-to-1000", unit: "ms", ours: best, reference: theirs, higherIsBetter: false,
            referenceName: "mls-rs (PyPI agentvault-mls-rs-uniffi), the same add and apply; goal ≤ 1.0x")
    }

    /// One member added to a 1,000-member group of `suite` (its creator added 999 in one commit,
    /// the newest joined from the Welcome) and the commit applied by another member, best of five:
    /// as an add-only commit without a path, as mls-rs makes one by default (RFC 9420 §12.4 lets
    /// it leave the path out), and with one (what chats commit, for post-compromise security);
    /// and the size of the KeyPackage added.
    static func addOneMilliseconds(suite: MLSCipherSuite) throws -> (addOnly: Double, withPath: Double, size: Int) {
        var random = MLSSystemRandom()
        var creator = try MLSGroup.create(
            groupID: Data("add one \(suite.rawValue)".utf8), signer: try signer("creator"), suite: suite, random: &random)
        let bundles = try (1..<1000).map { index in
            try MLSKeyPackageBundle(signer: try signer("member \(index)"), suite: suite, now: now, random: &random)
        }
        let added = try creator.commit(adding: bundles.map(\.keyPackage), now: now, random: &random)
        creator = added.group
        let receiver = try MLSGroup.join(welcome: added.welcome!, bundle: bundles[bundles.count - 1])
        var size = 0
        func best(updatingPath: Bool) throws -> Double {
            var best = Double.infinity
            for round in 0..<5 {
                let package = try MLSKeyPackageBundle(
                    signer: try signer("new \(round)"), suite: suite, now: now, random: &random
                ).keyPackage
                size = package.count
                let started = ContinuousClock.now
                let commit = try creator.commit(adding: [package], updatingPath: updatingPath, now: now, random: &random)
                var applying = receiver
                _ = try applying.process(commit.commit)
                let elapsed = ContinuousClock.now - started
                best = min(best, Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000)
            }
            return best
        }
        let withPath = try best(updatingPath: true)
        return (try best(updatingPath: false), withPath, size)
    }

    // MARK: The post-quantum suite (X-Wing) against suite 1

    /// One member added to a 1,000-member group of the X-Wing suite and the commit applied by
    /// another member, as `mls-add-one-to-1000` measures it (an add-only commit), against the
    /// same in suite 1 in the same run (goal ≤ 1.5x); the same with a path (what chats commit),
    /// and the KeyPackage sizes, printed beside.
    static func addOneTo1000PostQuantum() throws -> BenchmarkResult {
        let classic = try addOneMilliseconds(suite: .x25519AES128GCMSHA256Ed25519)
        let quantum = try addOneMilliseconds(suite: .xWingAES128GCMSHA256Ed25519)
        FileHandle.standardError.write(
            Data(
                ("mls-add-one-to-1000-pq: \(format(quantum.addOnly)) ms against \(format(classic.addOnly)) ms in suite 1; "
                    + "with a path \(format(quantum.withPath)) ms against \(format(classic.withPath)) ms; a KeyPackage is "
                    + "\(quantum.size) bytes against \(classic.size)\n").utf8))
        return Harness.result(
            "mls-add-one-to-1000-pq", unit: "ms", ours: quantum.addOnly, reference: classic.addOnly, higherIsBetter: false,
            referenceName: "the same add-only commit and apply in suite 1 (mls-add-one-to-1000's measure); goal ≤ 1.5x")
    }

    /// A new member joining a 1,000-member group of the X-Wing suite from its Welcome, against
    /// suite 1 in the same run (goal ≤ 1.5x); the Welcome sizes printed.
    static func welcomePostQuantum() throws -> BenchmarkResult {
        let classic = try welcomeMilliseconds(size: 1000, printing: true)
        let quantum = try welcomeMilliseconds(size: 1000, suite: .xWingAES128GCMSHA256Ed25519, printing: true)
        return Harness.result(
            "mls-welcome-1000-pq", unit: "ms", ours: quantum, reference: classic, higherIsBetter: false,
            referenceName: "the same join in suite 1; goal ≤ 1.5x")
    }
}
