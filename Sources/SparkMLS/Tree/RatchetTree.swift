import Foundation

/// The public ratchet tree (RFC 9420 §7): leaves and parents in the array representation, padded
/// to a power of two leaves, with a cache of subtree hashes that a change clears along its
/// direct path only, so a commit's tree hash costs the logarithm of the group's size.
struct RatchetTree: Sendable {
    private(set) var nodes: [Node?]
    private var hashes: [Data?]
    let suite: MLSCipherSuite
    /// Which leaf holds each signature key and encryption key, and how many members use and
    /// support each credential type: the uniqueness and compatibility rules of §7.3 in constant time.
    private(set) var index = MemberIndex()

    struct MemberIndex: Sendable {
        var signatureKeys: [Data: LeafIndex] = [:]
        var encryptionKeys: [Data: LeafIndex] = [:]
        var credentialsInUse: [UInt16: Int] = [:]
        var credentialSupport: [UInt16: Int] = [:]
        var occupied = Set<LeafIndex>()
        var count: Int { occupied.count }

        mutating func insert(_ leaf: LeafNode, at position: LeafIndex) {
            signatureKeys[leaf.signatureKey] = position
            encryptionKeys[leaf.encryptionKey] = position
            credentialsInUse[leaf.credential.type, default: 0] += 1
            for type in Set(leaf.capabilities.credentials) { credentialSupport[type, default: 0] += 1 }
            occupied.insert(position)
        }

        mutating func remove(_ leaf: LeafNode, at position: LeafIndex) {
            if signatureKeys[leaf.signatureKey] == position { signatureKeys[leaf.signatureKey] = nil }
            if encryptionKeys[leaf.encryptionKey] == position { encryptionKeys[leaf.encryptionKey] = nil }
            credentialsInUse[leaf.credential.type, default: 0] -= 1
            for type in Set(leaf.capabilities.credentials) { credentialSupport[type, default: 0] -= 1 }
            occupied.remove(position)
        }
    }

    /// The number of leaves, a power of two.
    var leafCount: UInt32 { UInt32((nodes.count + 1) / 2) }

    var root: UInt32 { TreeMath.root(leafCount) }

    /// A tree of one leaf.
    init(suite: MLSCipherSuite, firstLeaf: LeafNode) {
        self.suite = suite
        nodes = [.leaf(firstLeaf)]
        hashes = [nil]
        index.insert(firstLeaf, at: 0)
    }

    /// The tree of a `ratchet_tree` extension: parents at odd indices, leaves at even ones, the
    /// last node not blank; padded with blanks to a full tree.
    init(suite: MLSCipherSuite, encoded: RatchetTreeEncoding) throws {
        self.suite = suite
        var nodes = encoded.nodes
        guard let last = nodes.last, last != nil else {
            throw MLSError(.malformed, "a ratchet tree is not empty and does not end with a blank node")
        }
        for (index, node) in nodes.enumerated() {
            switch node {
            case .leaf where index % 2 == 1: throw MLSError(.malformed, "a leaf node at parent index \(index)")
            case .parent where index % 2 == 0: throw MLSError(.malformed, "a parent node at leaf index \(index)")
            default: break
            }
        }
        guard nodes.count % 2 == 1, nodes.count < 1 << 31 else {
            throw MLSError(.malformed, "a ratchet tree of \(nodes.count) nodes")
        }
        var width = 1
        while width < nodes.count { width = 2 * width + 1 }
        nodes += [Node?](repeating: nil, count: width - nodes.count)
        self.nodes = nodes
        hashes = [Data?](repeating: nil, count: nodes.count)
        for position in stride(from: 0, to: nodes.count, by: 2) {
            if case .leaf(let leaf) = nodes[position] { index.insert(leaf, at: UInt32(position / 2)) }
        }
        // Unmerged leaves must be leaves below the node that hold a member, and must be listed by
        // every non-blank ancestor between them and the node.
        for index in stride(from: 1, to: nodes.count, by: 2) {
            guard case .parent(let parent) = nodes[index] else { continue }
            for leaf in parent.unmergedLeaves {
                guard leaf < leafCount, TreeMath.isInSubtree(leaf * 2, of: UInt32(index)), self.leaf(leaf) != nil else {
                    throw MLSError(.invalid, "parent \(index) lists unmerged leaf \(leaf), which is not a member below it")
                }
                let leafNode = leaf * 2
                for ancestor in TreeMath.directPath(leafNode, leaves: leafCount) {
                    if ancestor == UInt32(index) { break }
                    if case .parent(let between) = nodes[Int(ancestor)], !between.unmergedLeaves.contains(leaf) {
                        throw MLSError(.invalid, "leaf \(leaf) is unmerged at \(index) but not at \(ancestor) below it")
                    }
                }
            }
        }
    }

    /// The extension's encoding: trailing blank nodes dropped.
    var encoding: RatchetTreeEncoding {
        var trimmed = nodes
        while let last = trimmed.last, last == nil { trimmed.removeLast() }
        return RatchetTreeEncoding(nodes: trimmed)
    }

    func node(_ index: UInt32) -> Node? { Int(index) < nodes.count ? nodes[Int(index)] : nil }

    func leaf(_ leaf: LeafIndex) -> LeafNode? {
        guard leaf < leafCount, case .leaf(let node) = nodes[Int(leaf) * 2] else { return nil }
        return node
    }

    func parent(_ index: UInt32) -> ParentNode? {
        guard Int(index) < nodes.count, case .parent(let node) = nodes[Int(index)] else { return nil }
        return node
    }

    /// The leaves that hold members, in order.
    var memberLeaves: [LeafIndex] { (0..<leafCount).filter { index.occupied.contains($0) } }

    mutating func set(_ position: UInt32, _ node: Node?) {
        if position % 2 == 0 {
            if case .leaf(let old) = nodes[Int(position)] { index.remove(old, at: position / 2) }
            if case .leaf(let new) = node { index.insert(new, at: position / 2) }
        }
        nodes[Int(position)] = node
        var cursor = position
        hashes[Int(cursor)] = nil
        while cursor != root {
            cursor = TreeMath.parent(cursor, leaves: leafCount)
            hashes[Int(cursor)] = nil
        }
    }

    // MARK: - Resolution and paths

    /// The resolution of a node (§4.1.1): the non-blank nodes that cover its subtree.
    func resolution(_ index: UInt32) -> [UInt32] {
        var result: [UInt32] = []
        collectResolution(index, into: &result)
        return result
    }

    private func collectResolution(_ index: UInt32, into result: inout [UInt32]) {
        switch nodes[Int(index)] {
        case .leaf: result.append(index)
        case .parent(let parent):
            result.append(index)
            for leaf in parent.unmergedLeaves { result.append(leaf * 2) }
        case nil:
            guard TreeMath.level(index) > 0 else { return }
            collectResolution(TreeMath.left(index), into: &result)
            collectResolution(TreeMath.right(index), into: &result)
        }
    }

    /// Whether every node of the subtree at `index` is blank (its resolution is empty).
    func isBlankSubtree(_ index: UInt32) -> Bool {
        if nodes[Int(index)] != nil { return false }
        guard TreeMath.level(index) > 0 else { return true }
        return isBlankSubtree(TreeMath.left(index)) && isBlankSubtree(TreeMath.right(index))
    }

    /// The filtered direct path of a leaf (§4.1.2) with the copath child of each of its nodes.
    func filteredDirectPath(_ leaf: LeafIndex) -> [(node: UInt32, copathChild: UInt32)] {
        var result: [(UInt32, UInt32)] = []
        var child = leaf * 2
        while child != root {
            let parent = TreeMath.parent(child, leaves: leafCount)
            let sibling = TreeMath.sibling(child, leaves: leafCount)
            if !isBlankSubtree(sibling) { result.append((parent, sibling)) }
            child = parent
        }
        return result
    }

    // MARK: - Changes (§7.7, §12.1)

    /// Adds `leafNode` at the leftmost blank leaf, growing the tree when it is full; returns its index.
    mutating func add(_ leafNode: LeafNode) -> LeafIndex {
        var firstBlank: UInt32 = 0
        while firstBlank < leafCount, self.index.occupied.contains(firstBlank) { firstBlank += 1 }
        let index =
            firstBlank < leafCount
            ? firstBlank
            : {
                let old = leafCount
                nodes += [Node?](repeating: nil, count: nodes.count + 1)
                hashes = [Data?](repeating: nil, count: nodes.count)
                return old
            }()
        for ancestor in TreeMath.directPath(index * 2, leaves: leafCount) {
            if case .parent(var parent) = nodes[Int(ancestor)] {
                parent.unmergedLeaves.append(index)
                set(ancestor, .parent(parent))
            }
        }
        set(index * 2, .leaf(leafNode))
        return index
    }

    /// Replaces a member's leaf and blanks its direct path (an Update).
    mutating func update(_ leaf: LeafIndex, with leafNode: LeafNode) {
        set(leaf * 2, .leaf(leafNode))
        blankDirectPath(leaf)
    }

    /// Blanks a member's leaf and direct path, then drops the right half while it is all blank.
    mutating func remove(_ leaf: LeafIndex) {
        guard leaf < leafCount else { return }
        set(leaf * 2, nil)
        blankDirectPath(leaf)
        while leafCount > 1, (leafCount / 2..<leafCount).allSatisfy({ self.leaf($0) == nil }) {
            nodes.removeLast(nodes.count / 2 + 1)
            hashes = [Data?](repeating: nil, count: nodes.count)
        }
    }

    private mutating func blankDirectPath(_ leaf: LeafIndex) {
        for ancestor in TreeMath.directPath(leaf * 2, leaves: leafCount) where nodes[Int(ancestor)] != nil {
            set(ancestor, nil)
        }
    }

    /// Merges a sender's new path: its leaf, and new public keys on its filtered direct path (the
    /// rest of its direct path blank), then sets the parent hashes from the root down. Returns the
    /// parent hash the leaf must carry.
    mutating func mergePath(sender: LeafIndex, leafNode: LeafNode?, publicKeys: [Data]) -> Data {
        let path = filteredDirectPath(sender)
        precondition(path.count == publicKeys.count, "one key per node of the filtered direct path")
        blankDirectPath(sender)
        for (entry, key) in zip(path, publicKeys) {
            set(entry.node, .parent(ParentNode(encryptionKey: key, parentHash: Data(), unmergedLeaves: [])))
        }
        var above = Data()
        for index in path.indices.reversed() {
            if case .parent(var parent) = nodes[Int(path[index].node)] {
                parent.parentHash = above
                set(path[index].node, .parent(parent))
                above = parentHash(of: parent, siblingHash: treeHash(path[index].copathChild))
            }
        }
        if let leafNode { set(sender * 2, .leaf(leafNode)) }
        return above
    }

    /// `Hash(ParentHashInput)` of §7.9.
    func parentHash(of parent: ParentNode, siblingHash: Data) -> Data {
        var writer = TLSWriter()
        writer.opaque(parent.encryptionKey)
        writer.opaque(parent.parentHash)
        writer.opaque(siblingHash)
        return suite.hash(writer.bytes)
    }

    // MARK: - Hashes (§7.8, §7.9)

    /// The tree hash of the whole tree.
    mutating func rootHash() -> Data { treeHash(root) }

    /// The tree hash of the subtree at `index`, cached.
    mutating func treeHash(_ index: UInt32) -> Data {
        if let cached = hashes[Int(index)] { return cached }
        let value: Data
        if TreeMath.level(index) == 0 {
            value = Self.leafHash(suite, index / 2, nodes[Int(index)])
        } else {
            let left = treeHash(TreeMath.left(index))
            let right = treeHash(TreeMath.right(index))
            value = Self.parentHashInput(suite, nodes[Int(index)], left, right)
        }
        hashes[Int(index)] = value
        return value
    }

    /// The tree hash of the subtree at `index` as if the leaves `removed` were blank and in no
    /// unmerged list (the "original sibling tree hash" of §7.9.1). Not cached.
    func treeHash(_ index: UInt32, without removed: Set<LeafIndex>) -> Data {
        if TreeMath.level(index) == 0 {
            return Self.leafHash(suite, index / 2, removed.contains(index / 2) ? nil : nodes[Int(index)])
        }
        var node = nodes[Int(index)]
        if case .parent(var parent) = node {
            parent.unmergedLeaves.removeAll { removed.contains($0) }
            node = .parent(parent)
        }
        return Self.parentHashInput(
            suite, node, treeHash(TreeMath.left(index), without: removed), treeHash(TreeMath.right(index), without: removed))
    }

    private static func leafHash(_ suite: MLSCipherSuite, _ leaf: LeafIndex, _ node: Node?) -> Data {
        var writer = TLSWriter()
        writer.u8(1)
        writer.u32(leaf)
        if case .leaf(let leafNode) = node {
            writer.u8(1)
            writer.write(leafNode)
        } else {
            writer.u8(0)
        }
        return suite.hash(writer.bytes)
    }

    private static func parentHashInput(_ suite: MLSCipherSuite, _ node: Node?, _ left: Data, _ right: Data) -> Data {
        var writer = TLSWriter()
        writer.u8(2)
        if case .parent(let parent) = node {
            writer.u8(1)
            writer.write(parent)
        } else {
            writer.u8(0)
        }
        writer.opaque(left)
        writer.opaque(right)
        return suite.hash(writer.bytes)
    }

    /// Checks §7.9.2: every non-blank parent node is the end of exactly one chain of parent-hash
    /// links that starts at a leaf.
    mutating func verifyParentHashes() throws {
        var coverage = [UInt32: Int]()
        var memo = [UInt32: (Data, UInt32)?]()
        for leaf in memberLeaves {
            var current = leaf * 2
            var expected = self.leaf(leaf)?.parentHash
            while current != root, let claimed = expected {
                let link: (Data, UInt32)?
                if let cached = memo[current] {
                    link = cached
                } else {
                    link = parentHashLink(from: current)
                    memo[current] = link
                }
                guard let (hash, ancestor) = link, hash == claimed else { break }
                coverage[ancestor, default: 0] += 1
                current = ancestor
                expected = parent(ancestor)?.parentHash
            }
        }
        for index in stride(from: 1, to: UInt32(nodes.count), by: 2) where nodes[Int(index)] != nil {
            guard coverage[index] == 1 else {
                throw MLSError(.invalid, "parent node \(index) is not covered by exactly one parent-hash chain")
            }
        }
    }

    /// The parent hash `current` should carry toward its first non-blank ancestor, and that ancestor.
    private mutating func parentHashLink(from current: UInt32) -> (Data, UInt32)? {
        var ancestor = current
        repeat {
            ancestor = TreeMath.parent(ancestor, leaves: leafCount)
        } while nodes[Int(ancestor)] == nil && ancestor != root
        guard case .parent(let parent) = nodes[Int(ancestor)] else { return nil }
        let sibling = current < ancestor ? TreeMath.right(ancestor) : TreeMath.left(ancestor)
        let siblingHash =
            parent.unmergedLeaves.isEmpty ? treeHash(sibling) : treeHash(sibling, without: Set(parent.unmergedLeaves))
        return (parentHash(of: parent, siblingHash: siblingHash), ancestor)
    }
}
