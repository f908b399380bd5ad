import Foundation
import SparkCrypto
import Testing

@testable import SparkDomain

/// Key transparency's trees: every inclusion, non-inclusion and consistency proof a log of up to
/// 40 entries can give verifies, and a log that rewrote, removed or reordered anything, or a
/// proof with any value changed, does not.
@Suite("Key transparency: the log tree and the prefix tree")
struct TransparencyTreeTests {
    static func value(_ i: Int) -> Data { SHA256.hash(Data("entry \(i)".utf8)) }

    @Test func everyInclusionAndConsistencyProofVerifiesAndNoForgeryDoes() {
        let leaves = (0..<40).map(Self.value)
        for n in 1...leaves.count {
            let tree = leaves[..<n]
            let root = LogTree.root(tree)
            for index in 0..<n {
                let proof = LogTree.inclusionProof(index, tree)
                #expect(LogTree.verifyInclusion(leaf: leaves[index], index: index, size: n, proof: proof, root: root))
                #expect(!LogTree.verifyInclusion(leaf: Self.value(99), index: index, size: n, proof: proof, root: root))
                if n > 1 {
                    #expect(
                        !LogTree.verifyInclusion(leaf: leaves[index], index: (index + 1) % n, size: n, proof: proof, root: root))
                    var forged = proof
                    forged[0][0] ^= 1
                    #expect(!LogTree.verifyInclusion(leaf: leaves[index], index: index, size: n, proof: forged, root: root))
                }
            }
            for m in 1...n {
                let proof = LogTree.consistencyProof(oldSize: m, tree)
                let oldRoot = LogTree.root(leaves[..<m])
                #expect(
                    LogTree.verifyConsistency(oldSize: m, oldRoot: oldRoot, newSize: n, newRoot: root, proof: proof),
                    "\(m) → \(n)")
                // A past entry rewritten: the old head no longer follows.
                var rewritten = Array(leaves[..<n])
                rewritten[m - 1] = Self.value(1000)
                let rewrittenRoot = LogTree.root(rewritten[...])
                let rewrittenProof = LogTree.consistencyProof(oldSize: m, rewritten[...])
                #expect(
                    !LogTree.verifyConsistency(
                        oldSize: m, oldRoot: oldRoot, newSize: n, newRoot: rewrittenRoot, proof: rewrittenProof))
                if !proof.isEmpty {
                    var forged = proof
                    forged[forged.count - 1][5] ^= 0x80
                    #expect(!LogTree.verifyConsistency(oldSize: m, oldRoot: oldRoot, newSize: n, newRoot: root, proof: forged))
                    #expect(
                        !LogTree.verifyConsistency(
                            oldSize: m, oldRoot: oldRoot, newSize: n, newRoot: root, proof: proof + [Self.value(7)]))
                }
            }
        }
        // Sizes that make no sense are refused, not trapped on.
        #expect(!LogTree.verifyConsistency(oldSize: 0, oldRoot: Data(), newSize: 3, newRoot: Data(), proof: []))
        #expect(!LogTree.verifyConsistency(oldSize: 5, oldRoot: Data(), newSize: 3, newRoot: Data(), proof: []))
        #expect(!LogTree.verifyInclusion(leaf: Data(), index: 3, size: 3, proof: [], root: Data()))
    }

    /// One proof for several entries: every subset of up to three entries of logs up to 24
    /// entries, and what it must not prove.
    @Test func batchInclusionProofsVerifyAndShareNodes() {
        let leaves = (0..<24).map(Self.value)
        for n in 1...leaves.count {
            let root = LogTree.root(leaves[..<n])
            for a in 0..<n {
                for b in a..<n where (b - a) % 3 == 0 {
                    let indices: Set<Int> = [a, b, n - 1]
                    let proof = LogTree.batchInclusionProof(indices, leaves[..<n])
                    let values = Dictionary(uniqueKeysWithValues: indices.map { ($0, leaves[$0]) })
                    #expect(LogTree.verifyBatchInclusion(values, size: n, proof: proof, root: root), "\(indices) of \(n)")
                    // Never more than the separate proofs together; fewer when they share.
                    #expect(proof.count <= indices.map { LogTree.inclusionProof($0, leaves[..<n]).count }.reduce(0, +))
                    var wrong = values
                    wrong[a] = Self.value(500)
                    #expect(!LogTree.verifyBatchInclusion(wrong, size: n, proof: proof, root: root))
                    if !proof.isEmpty {
                        #expect(!LogTree.verifyBatchInclusion(values, size: n, proof: proof.dropLast(), root: root))
                    }
                }
            }
        }
    }

    /// A growing tree (``LogTree/Nodes``, its complete subtrees kept as leaves come) answers for
    /// every earlier size as a tree made afresh at that size does, and its proofs verify.
    @Test func aGrowingTreeAnswersForEveryEarlierSize() {
        let leaves = (0..<70).map(Self.value)
        var nodes = LogTree.Nodes()
        for n in 1...leaves.count {
            nodes.append(leaves[n - 1])
            for size in Set([1, n / 2 + 1, n - 1, n]) where size >= 1 {
                let fresh = LogTree.Nodes(leaves[..<size])
                let root = nodes.root(size: size)
                #expect(root == fresh.root(size: size), "root of \(size) in \(n)")
                let indices: Set<Int> = [0, size / 3, size - 1]
                let proof = nodes.batchInclusionProof(indices, size: size)
                #expect(proof == fresh.batchInclusionProof(indices, size: size))
                let values = Dictionary(uniqueKeysWithValues: indices.map { ($0, leaves[$0]) })
                #expect(LogTree.verifyBatchInclusion(values, size: size, proof: proof, root: root))
                for old in Set([1, size / 2 + 1, size]) where old <= size {
                    let consistency = nodes.consistencyProof(oldSize: old, newSize: size)
                    #expect(
                        LogTree.verifyConsistency(
                            oldSize: old, oldRoot: nodes.root(size: old), newSize: size, newRoot: root, proof: consistency),
                        "\(old) → \(size)")
                }
            }
        }
    }

    /// The draft's shape: a tree of five leaves is ((0 1)(2 3)) 4, with the leaf/parent prefixes.
    @Test func theShapeAndHashingAreTheDrafts() {
        let leaves = (0..<5).map(Self.value)
        func node(_ left: Data, _ leftLeaf: Bool, _ right: Data, _ rightLeaf: Bool) -> Data {
            SHA256.hash(Data([leftLeaf ? 0 : 1]) + left + Data([rightLeaf ? 0 : 1]) + right)
        }
        let left = node(node(leaves[0], true, leaves[1], true), false, node(leaves[2], true, leaves[3], true), false)
        #expect(LogTree.root(leaves[...]) == node(left, false, leaves[4], true))
        #expect(
            LogTree.leafValue(commitment: Data(repeating: 1, count: 32), prefixRoot: Data(repeating: 2, count: 32))
                == SHA256.hash(Data(repeating: 1, count: 32) + Data(repeating: 2, count: 32)))
    }

    @Test func prefixTreeSearchesProveInclusionAndAbsence() throws {
        var tree = PrefixTree()
        #expect(tree.root == Data(count: 32))
        let empty = tree.search(Self.value(0))
        #expect(empty.result == .nonInclusionParent && PrefixTree.verify(empty, key: Self.value(0), root: tree.root))
        let keys = (0..<300).map(Self.value)
        for (index, key) in keys.enumerated() { try tree.insert(key, index: UInt64(index)) }
        #expect(throws: CryptoError.self) { try tree.insert(keys[7], index: 999) }
        let root = tree.root
        for (index, key) in keys.enumerated() {
            let proof = tree.search(key)
            #expect(proof.result == .inclusion(index: UInt64(index)))
            #expect(PrefixTree.verify(proof, key: key, root: root))
            // The same proof claiming another log entry, or for another key: refused.
            var lying = proof
            lying.result = .inclusion(index: UInt64(index) + 1)
            #expect(!PrefixTree.verify(lying, key: key, root: root))
            #expect(!PrefixTree.verify(proof, key: Self.value(index + 5000), root: root))
        }
        var sawLeaf = false
        var sawParent = false
        for absent in (5000..<5300).map(Self.value) {
            let proof = tree.search(absent)
            switch proof.result {
            case .inclusion: Issue.record("an absent key was found")
            case .nonInclusionLeaf: sawLeaf = true
            case .nonInclusionParent: sawParent = true
            }
            #expect(PrefixTree.verify(proof, key: absent, root: root))
            // A log hiding a present key behind a "non-inclusion": its proof does not verify.
            if case .nonInclusionLeaf(let other, _) = proof.result {
                #expect(!PrefixTree.verify(proof, key: other, root: root))
            }
            if !proof.elements.isEmpty {
                var forged = proof
                forged.elements[0][31] ^= 1
                #expect(!PrefixTree.verify(forged, key: absent, root: root))
            }
        }
        #expect(sawLeaf && sawParent)
    }

    @Test func commitmentsBindTheirOpeningLabelAndValue() throws {
        let opening = Data(repeating: 0x42, count: 16)
        let label = Data("bob".utf8)
        let value = Data("bob's identity".utf8)
        let commitment = try TransparencyCommitment.commitment(opening: opening, label: label, value: value)
        // HMAC-SHA-256 under the suite's fixed key over opening ‖ u8 len ‖ label ‖ u32 len ‖ value.
        var input = opening + Data([3]) + label
        input.append(contentsOf: [0, 0, 0, UInt8(value.count)])
        input.append(value)
        let fixedKey = Data([0xd8, 0x21, 0xf8, 0x79, 0x0d, 0x97, 0x70, 0x97, 0x96, 0xb4, 0xd7, 0x90, 0x33, 0x57, 0xc3, 0xf5])
        #expect(commitment == HMAC.authenticationCode(for: input, using: fixedKey, hash: .sha256))
        #expect(
            try TransparencyCommitment.commitment(opening: TransparencyCommitment.opening(), label: label, value: value)
                != commitment)
        #expect(
            try TransparencyCommitment.commitment(opening: opening, label: Data("bo".utf8), value: Data("bbob's identity".utf8))
                != commitment)
        #expect(throws: CryptoError.self) {
            try TransparencyCommitment.commitment(opening: Data(count: 15), label: label, value: value)
        }
        #expect(try TransparencyCommitment.vrfInput(label: label, version: 2) == Data([3]) + label + Data([0, 0, 0, 2]))
    }
}

/// The implicit binary search tree and the binary ladders, with the draft's own examples.
@Suite("Key transparency: searching the log")
struct TransparencySearchTreeTests {
    @Test func theDraftsExamples() {
        // "in a search where the log has 50 entries … users would start at entry root(50) = 31 …
        // right(31, 50) = 47 … the frontier would be entries: 31, 47, 49."
        #expect(SearchTree.root(50) == 31)
        #expect(SearchTree.right(31, 50) == 47)
        #expect(SearchTree.frontier(50) == [31, 47, 49])
        // "if the target version of a label to lookup is 20, a binary ladder would consist of the
        // following versions: 0, 1, 3, 7, 15, 19, 20."
        #expect(SearchTree.ladder(20) == [0, 1, 3, 7, 15, 19, 20])
        #expect(SearchTree.ladder(0) == [0])
        #expect(SearchTree.ladder(2) == [0, 1, 2])
        // The 14-entry figure: leaves at even positions, 7 the root, 3 and 11 below it.
        #expect(SearchTree.root(14) == 7)
        #expect(SearchTree.left(7) == 3 && SearchTree.right(7, 14) == 11)
        #expect(SearchTree.right(11, 14) == 13 && SearchTree.left(11) == 9)
        #expect(SearchTree.level(12) == 0 && SearchTree.left(12) == nil && SearchTree.right(12, 14) == nil)
    }

    /// Every entry of logs up to 300 entries is reached from the root by exactly one path, and
    /// the frontier ends at the last entry.
    @Test func everyEntryIsReachableOnceAndTheFrontierEndsLast() {
        for n in UInt64(1)...300 {
            var seen = Set<UInt64>()
            var pending = [SearchTree.root(n)]
            while let x = pending.popLast() {
                #expect(x < n && seen.insert(x).inserted, "\(x) in \(n)")
                if let left = SearchTree.left(x) { pending.append(left) }
                if let right = SearchTree.right(x, n), right != x { pending.append(right) }
            }
            #expect(seen.count == Int(n), "a log of \(n)")
            #expect(SearchTree.frontier(n).last == n - 1)
        }
    }

    @Test func aFullLadderFindsTheHighestVersion() {
        for highest in UInt32(0)...70 {
            let (lookups, found) = SearchTree.fullLadder { $0 <= highest }
            #expect(found == highest)
            #expect(lookups.count <= 16, "\(lookups)")
        }
        #expect(SearchTree.fullLadder { _ in false } == ([0], nil))
    }
}

/// The combined tree: a label's latest value proved against the log's head, and what a log
/// that lies about it cannot get past.
@Suite("Key transparency: the combined tree's search")
struct CombinedTreeTests {
    static func log() throws -> (CombinedTree, ECVRF.PrivateKey) {
        let vrf = try ECVRF.PrivateKey()
        var tree = CombinedTree(vrf: vrf)
        for round in 0..<4 {
            for user in ["alice", "bob", "carol", "dave", "erin"] where round == 0 || user != "carol" {
                try tree.append(label: Data(user.utf8), value: Data("\(user)'s key \(round)".utf8))
            }
        }
        return (tree, vrf)
    }

    @Test func theLatestValueOfEveryLabelIsProvedAndAnAbsentOneToo() throws {
        let (tree, vrf) = try Self.log()
        let root = try #require(tree.root)
        for (user, latest) in [("alice", 3), ("bob", 3), ("carol", 0), ("erin", 3)] {
            let proof = try tree.searchLatest(Data(user.utf8))
            let verified = try CombinedTree.verifyLatest(
                proof, label: Data(user.utf8), size: tree.size, root: root, vrfKey: vrf.publicKey)
            #expect(verified.version == UInt32(latest))
            #expect(verified.value == Data("\(user)'s key \(latest)".utf8))
            // The same proof for another label, another log size or under another VRF key: refused.
            #expect(throws: CryptoError.self) {
                try CombinedTree.verifyLatest(
                    proof, label: Data("mallory".utf8), size: tree.size, root: root, vrfKey: vrf.publicKey)
            }
            #expect(throws: CryptoError.self) {
                try CombinedTree.verifyLatest(
                    proof, label: Data(user.utf8), size: tree.size + 1, root: root, vrfKey: vrf.publicKey)
            }
            #expect(throws: CryptoError.self) {
                try CombinedTree.verifyLatest(
                    proof, label: Data(user.utf8), size: tree.size, root: root, vrfKey: try ECVRF.PrivateKey().publicKey)
            }
        }
        let absent = try CombinedTree.verifyLatest(
            try tree.searchLatest(Data("zoe".utf8)), label: Data("zoe".utf8), size: tree.size, root: root, vrfKey: vrf.publicKey)
        #expect(absent == CombinedTree.Verified(version: nil, value: nil))
    }

    /// An abridged proof (the last entry's ladder, for audited heads) proves the same latest
    /// value, at the current size and an earlier one; it is refused where a full proof is
    /// required and the reverse, and one that hides the latest version is caught.
    @Test func anAbridgedProofProvesTheLatestValueAtTheLastEntry() throws {
        let (tree, vrf) = try Self.log()
        for size in [tree.size, tree.size - 3] {
            let root = try #require(tree.root(at: size))
            for user in ["alice", "bob", "carol", "erin", "zoe"] {
                let label = Data(user.utf8)
                let abridged = try tree.searchLatest(label, size: size, abridged: true)
                let full = try tree.searchLatest(label, size: size)
                let expected = try CombinedTree.verifyLatest(full, label: label, size: size, root: root, vrfKey: vrf.publicKey)
                #expect(
                    try CombinedTree.verifyLatest(
                        abridged, label: label, size: size, root: root, vrfKey: vrf.publicKey, abridged: true) == expected)
                #expect(abridged.frontier.count == 1 && TransparencyCodec.encode(nodes: abridged.inclusion).count > 0)
                #expect(throws: CryptoError.self) {
                    try CombinedTree.verifyLatest(abridged, label: label, size: size, root: root, vrfKey: vrf.publicKey)
                }
                if full.frontier.count > 1 {
                    #expect(throws: CryptoError.self) {
                        try CombinedTree.verifyLatest(
                            full, label: label, size: size, root: root, vrfKey: vrf.publicKey, abridged: true)
                    }
                }
            }
        }
        // Alice's latest version's lookup dropped from the last entry's ladder: caught.
        var hiding = try tree.searchLatest(Data("alice".utf8), size: tree.size, abridged: true)
        hiding.frontier[0].lookups.removeLast()
        #expect(throws: CryptoError.self) {
            try CombinedTree.verifyLatest(
                hiding, label: Data("alice".utf8), size: tree.size, root: try #require(tree.root), vrfKey: vrf.publicKey,
                abridged: true)
        }
    }

    /// An epoch appended at once (VRFs proved on every core) is the same log as its updates one
    /// by one: versions in order, a label's latest value where it was last set.
    @Test func anEpochAppendsItsUpdatesInOrder() throws {
        let vrf = try ECVRF.PrivateKey()
        var tree = CombinedTree(vrf: vrf)
        let updates = (0..<50).map { i in (Data("user-\(i % 7)".utf8), Data("key \(i)".utf8)) }
        let versions = try tree.append(epoch: updates)
        #expect(versions == (0..<50).map { UInt32($0 / 7) })
        var oneByOne = CombinedTree(vrf: vrf)
        for (label, value) in updates { try oneByOne.append(label: label, value: value) }
        // Same VRF outputs in the same places: the same prefix trees (openings differ, so leaves do).
        #expect(tree.entries.map(\.prefix.root) == oneByOne.entries.map(\.prefix.root))
        let root = try #require(tree.root)
        let verified = try CombinedTree.verifyLatest(
            try tree.searchLatest(Data("user-3".utf8)), label: Data("user-3".utf8), size: tree.size, root: root,
            vrfKey: vrf.publicKey)
        #expect(verified.version == 6 && verified.value == Data("key 45".utf8))
    }

    /// A log that serves an older value, a value it never committed to, or hides the latest
    /// version: each is caught.
    @Test func aLyingLogIsCaught() throws {
        let (tree, vrf) = try Self.log()
        let root = try #require(tree.root)
        let label = Data("bob".utf8)
        let honest = try tree.searchLatest(label)
        func refused(_ proof: CombinedTree.SearchProof) -> Bool {
            (try? CombinedTree.verifyLatest(proof, label: label, size: tree.size, root: root, vrfKey: vrf.publicKey)) == nil
        }
        #expect(!refused(honest))
        // A value the log did not commit to (a substituted key).
        var substituted = honest
        substituted.opened?.value = Data("mallory's key".utf8)
        #expect(refused(substituted))
        // An older version, opened in place of the latest.
        let older = try #require(tree.updates[label]?.first)
        var stale = honest
        stale.opened = CombinedTree.Opened(
            position: older.position, opening: older.opening, value: older.value,
            prefixRoot: tree.entries[Int(older.position)].prefix.root)
        stale.inclusion = LogTree.batchInclusionProof(
            Set(stale.frontier.map { Int($0.position) } + [Int(older.position)]), tree.nodes.leaves[...])
        #expect(refused(stale))
        // The latest version hidden: the last entry's ladder cut short.
        var hidden = honest
        hidden.frontier[hidden.frontier.count - 1].lookups.removeLast()
        #expect(refused(hidden))
        // Nothing opened for a label that has versions.
        var unopened = honest
        unopened.opened = nil
        #expect(refused(unopened))
        // A frontier entry's commitment changed (a rewritten past entry).
        var rewritten = honest
        rewritten.frontier[0].commitment[0] ^= 1
        #expect(refused(rewritten))
    }
}
