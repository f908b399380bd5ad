import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

@testable import SparkMLS

/// `spark-mls`, run as a binary: two clients exchanging raw MLSMessage files, as the working
/// group's interop harness drives clients, and a third built from the library in this process,
/// so the files are checked against an independent reader.
@Suite("spark-mls")
struct CLITests {
    static let tool = Fixtures.executable("spark-mls")

    @discardableResult
    static func mls(_ arguments: String..., status expected: Int32 = 0, sourceLocation: SourceLocation = #_sourceLocation)
        async throws -> String
    {
        let (status, stdout, stderr) = try await Fixtures.run(tool, arguments)
        #expect(status == expected, "spark-mls \(arguments.joined(separator: " ")): \(stderr)", sourceLocation: sourceLocation)
        return stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func twoClientsAndTheLibrary() async throws {
        try await Fixtures.withTemporaryDirectory { root in
            let alice = root.appendingPathComponent("alice").path
            let bob = root.appendingPathComponent("bob").path
            func file(_ name: String) -> String { root.appendingPathComponent(name).path }
            try await Self.mls("create", alice, "--identity", "alice", "--group-id", "0a0b0c")
            let reference = try await Self.mls("keypackage", bob, file("bob.kp"), "--identity", "bob")
            #expect(reference.count == 64)
            try await Self.mls("add", alice, file("bob.kp"), file("commit1"), file("welcome1"))
            #expect(try await Self.mls("join", bob, file("welcome1")) == "epoch 1")
            let aliceEpoch = try await Self.mls("epoch", alice)
            #expect(aliceEpoch.hasPrefix("1 ") && aliceEpoch.count == 2 + 64)
            #expect(try await Self.mls("epoch", bob) == aliceEpoch)

            try await Self.mls("protect", alice, "hello bob", file("m1"))
            #expect(try await Self.mls("process", bob, file("m1")) == "hello bob")
            // The same key never opens twice: a replay is refused with status 1.
            try await Self.mls("process", bob, file("m1"), status: 1)

            // A client of the library joins by a KeyPackage it made; spark-mls adds it.
            var random = MLSSeededRandom(seed: "cli")
            let carol = try MLSKeyPackageBundle(
                signer: MLSSigner(credential: MLSCredential(identity: Data("carol".utf8)), key: try Ed25519.PrivateKey()),
                now: Date(), random: &random)
            try carol.keyPackage.write(to: URL(fileURLWithPath: file("carol.kp")))
            try await Self.mls("add", bob, file("carol.kp"), file("commit2"), file("welcome2"))
            #expect(try await Self.mls("process", alice, file("commit2")) == "epoch 2")
            var carolGroup = try MLSGroup.join(
                welcome: try Data(contentsOf: URL(fileURLWithPath: file("welcome2"))), bundle: carol)
            let epoch = try await Self.mls("epoch", alice)
            #expect(epoch == "2 " + carolGroup.epochAuthenticator.hexString)

            // Carol writes; both binaries read. An update and a remove go round.
            try carolGroup.protect(Data("hi from the library".utf8), random: &random).write(to: URL(fileURLWithPath: file("m2")))
            #expect(try await Self.mls("process", alice, file("m2")) == "hi from the library")
            #expect(try await Self.mls("process", bob, file("m2")) == "hi from the library")
            try await Self.mls("update", alice, file("commit3"))
            #expect(try await Self.mls("process", bob, file("commit3")) == "epoch 3")
            _ = try carolGroup.process(try Data(contentsOf: URL(fileURLWithPath: file("commit3"))))
            try await Self.mls("remove", alice, String(carolGroup.ownLeaf), file("commit4"))
            #expect(try await Self.mls("process", bob, file("commit4")) == "epoch 4")
            #expect(try carolGroup.process(try Data(contentsOf: URL(fileURLWithPath: file("commit4")))) == .removed)
            #expect(try await Self.mls("epoch", alice) == (try await Self.mls("epoch", bob)))

            // A damaged message is refused (1) and changes nothing.
            var damaged = try Data(contentsOf: URL(fileURLWithPath: file("commit4")))
            damaged[damaged.count / 2] ^= 1
            try damaged.write(to: URL(fileURLWithPath: file("bad")))
            let before = try await Self.mls("epoch", bob)
            try await Self.mls("process", bob, file("bad"), status: 1)
            #expect(try await Self.mls("epoch", bob) == before)
            // A Welcome for someone else is refused.
            try await Self.mls("keypackage", root.appendingPathComponent("dave").path, file("dave.kp"), "--identity", "dave")
            try await Self.mls("join", root.appendingPathComponent("dave").path, file("welcome1"), status: 1)
        }
    }

    @Test func badUsageIs64() async throws {
        try await Fixtures.withTemporaryDirectory { root in
            let dir = root.appendingPathComponent("c").path
            try await Self.mls(status: 64)
            try await Self.mls("frobnicate", status: 64)
            try await Self.mls("create", dir, status: 64)
            try await Self.mls("epoch", dir, status: 64)
            try await Self.mls("process", dir, root.appendingPathComponent("missing").path, status: 64)
            try await Self.mls("create", dir, "--identity", "x", "--group-id", "zz", status: 64)
            try await Self.mls("create", dir, "--identity", "x", "extra", status: 64)
            try await Self.mls("create", dir, "--identity", "x")
            try await Self.mls("create", dir, "--identity", "x", status: 64)
            try await Self.mls("keypackage", dir, root.appendingPathComponent("k").path, "--identity", "someone-else", status: 64)
            try await Self.mls("remove", dir, "not-a-leaf", root.appendingPathComponent("o").path, status: 64)
            // Removing a leaf that holds no one is refused by MLS, not a usage error.
            try await Self.mls("remove", dir, "5", root.appendingPathComponent("o").path, status: 1)
            let help = try await Self.mls("--help")
            #expect(help.contains("spark-mls join DIR WELCOME"))
        }
    }
}
