import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

@testable import SparkMLS

@Suite("MLS vectors: trees and framing")
struct TreeVectorTests {
    static func tree(_ data: Data, _ suite: MLSCipherSuite) throws -> RatchetTree {
        try RatchetTree(suite: suite, encoded: RatchetTreeEncoding(tlsEncoded: data))
    }

    @Test func treeValidation() throws {
        try MLSVectors.run("tree-validation") { entry in
            var tree = try Self.tree(entry.hex("tree"), entry.suite)
            let resolutions = entry["resolutions"] as? [[Int]] ?? []
            let hashes = (entry["tree_hashes"] as? [String] ?? []).map { Data(hex: $0) }
            try MLSVectors.expectEqual(hashes.count, tree.nodes.count, "node count")
            for index in 0..<tree.nodes.count {
                try MLSVectors.expectEqual(
                    tree.resolution(UInt32(index)).map(Int.init), resolutions[index], "resolution \(index)")
                try MLSVectors.expectEqual(tree.treeHash(UInt32(index)), hashes[index], "tree hash \(index)")
            }
            try tree.verifyParentHashes()
            for leaf in tree.memberLeaves {
                try MLSVectors.expectTrue(
                    tree.leaf(leaf)!.verifySignature(suite: entry.suite, groupID: entry.hex("group_id"), leafIndex: leaf),
                    "the signature of leaf \(leaf)")
            }
        }
    }

    @Test func treeOperations() throws {
        try MLSVectors.run("tree-operations") { entry in
            var tree = try Self.tree(entry.hex("tree_before"), entry.suite)
            try MLSVectors.expectEqual(tree.rootHash(), entry.hex("tree_hash_before"), "tree hash before")
            switch try Proposal(tlsEncoded: entry.hex("proposal")) {
            case .add(let keyPackage): _ = tree.add(keyPackage.leafNode)
            case .update(let leaf): tree.update(UInt32(entry.int("proposal_sender")), with: leaf)
            case .remove(let removed): tree.remove(removed)
            default: throw MLSVectors.Mismatch(description: "unexpected proposal")
            }
            try MLSVectors.expectEqual(tree.encoding.tlsEncoded, entry.hex("tree_after"), "tree after")
            try MLSVectors.expectEqual(tree.rootHash(), entry.hex("tree_hash_after"), "tree hash after")
        }
    }

    /// A parent hash that was altered anywhere in a valid tree breaks the chain it belongs to.
    @Test func alteredParentHashIsRefused() throws {
        let url = MLSVectors.directory.appendingPathComponent("tree-validation.json")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [[String: Any]])
        let suiteOne = entries.filter { $0["cipher_suite"] as? Int == 1 || $0["cipher_suite"] as? Int == 3 }
        var checked = 0
        for entry in suiteOne {
            let tree = try Self.tree(Data(hex: entry["tree"] as? String ?? ""), .x25519AES128GCMSHA256Ed25519)
            for index in stride(from: 1, to: tree.nodes.count, by: 2) {
                guard case .parent(var parent) = tree.nodes[index] else { continue }
                var altered = tree
                parent.parentHash = parent.parentHash.isEmpty ? Data([1]) : Data(parent.parentHash.map { $0 ^ 1 })
                altered.set(UInt32(index), .parent(parent))
                var alteredKey = tree
                if case .parent(var keyed) = tree.nodes[index] {
                    keyed.encryptionKey = Data(keyed.encryptionKey.map { $0 ^ 0x80 })
                    alteredKey.set(UInt32(index), .parent(keyed))
                }
                // The root's own parent hash is empty and checked by no one but its children's links.
                #expect(throws: MLSError.self, "tree \(checked), node \(index)") { try alteredKey.verifyParentHashes() }
                if index != Int(tree.root) {
                    #expect(throws: MLSError.self, "tree \(checked), node \(index)") { try altered.verifyParentHashes() }
                }
                checked += 1
            }
        }
        #expect(checked > 20)
    }
}

extension TreeVectorTests {
    /// A tree whose parent lists an unmerged leaf far outside it (once an overflow trap in the
    /// check itself), or one that is not below it, or a blank one, is refused as invalid.
    @Test func unmergedLeavesOutsideTheTreeAreRefused() throws {
        let leaf = GroupVectorTests.dummyLeaf
        for unmerged in [UInt32.max, 2, 1] as [UInt32] {
            var other = leaf
            other.signatureKey = Data(repeating: 2, count: 32)
            let nodes: [Node?] = [
                .leaf(leaf),
                .parent(ParentNode(encryptionKey: Data(repeating: 3, count: 32), parentHash: Data(), unmergedLeaves: [unmerged])),
                unmerged == 1 ? nil : .leaf(other),
            ]
            var encoding = RatchetTreeEncoding(nodes: nodes)
            if unmerged == 1 { encoding.nodes += [nil, .leaf(other)] }
            #expect(throws: MLSError(.invalid, ""), "unmerged leaf \(unmerged)") {
                try RatchetTree(suite: .x25519AES128GCMSHA256Ed25519, encoded: encoding)
            }
        }
    }
}
