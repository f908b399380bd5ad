public import Foundation
import SparkCrypto

/// Key transparency's log tree (draft-ietf-keytrans-protocol, "Log Tree"): a left-balanced
/// binary Merkle tree over the log's entries, one a prefix-tree root per update, hashed with
/// SHA-256 (`KT_128_SHA256_P256`):
///
/// ```text
/// leaf value   = SHA-256(commitment ‖ prefix_tree_root)
/// parent value = SHA-256(content(left) ‖ content(right))
/// content(n)   = 0x00 ‖ value for a leaf, 0x01 ‖ value for a parent
/// ```
///
/// Inclusion proofs are the copath of a leaf and consistency proofs the nodes of RFC 6962
/// §2.1.2, both listed left to right as the draft asks. The tree is left-balanced (RFC 6962's
/// shape: a tree of `n` leaves splits at the largest power of two below `n`), so the shape, and
/// which proof element is a leaf, follow from the sizes alone.
public enum LogTree {
    /// Bytes of a node value.
    public static let valueByteCount = 32

    /// The value of a leaf: an entry's commitment and the prefix tree's root after it.
    public static func leafValue(commitment: Data, prefixRoot: Data) -> Data {
        TreeHash.hash(nil, commitment, nil, prefixRoot)
    }

    /// The value of a parent of subtrees of `leftSize` and `rightSize` leaves.
    static func parent(_ left: Data, leftSize: Int, _ right: Data, rightSize: Int) -> Data {
        TreeHash.hash(leftSize == 1 ? 0x00 : 0x01, left, rightSize == 1 ? 0x00 : 0x01, right)
    }

    /// The largest power of two strictly below `n` (`n` ≥ 2): where a tree of `n` leaves splits.
    static func split(_ n: Int) -> Int {
        var k = 1
        while k << 1 < n { k <<= 1 }
        return k
    }

    /// The root value of the tree over `leaves` (leaf values), which must not be empty.
    public static func root(_ leaves: ArraySlice<Data>) -> Data {
        precondition(!leaves.isEmpty, "a log tree has at least one leaf")
        return Nodes(leaves).root(size: leaves.count)
    }

    /// The proof that leaf `index` is in the tree over `leaves`: its copath, left to right.
    public static func inclusionProof(_ index: Int, _ leaves: ArraySlice<Data>) -> [Data] {
        precondition(index >= 0 && index < leaves.count, "no leaf \(index)")
        return Nodes(leaves).batchInclusionProof([index], size: leaves.count)
    }

    /// Whether `proof` shows the leaf of value `leaf` at `index` in a tree of `size` leaves
    /// whose root is `root`.
    public static func verifyInclusion(leaf: Data, index: Int, size: Int, proof: [Data], root: Data) -> Bool {
        guard index >= 0, index < size, proof.allSatisfy({ $0.count == valueByteCount }) else { return false }
        var remaining = proof[...]
        func rebuild(_ index: Int, _ size: Int) -> Data? {
            if size == 1 { return leaf }
            let k = split(size)
            if index < k {
                // The right sibling is the last element: taken before the left path's own.
                guard let right = remaining.popLast(), let left = rebuild(index, k) else { return nil }
                return parent(left, leftSize: k, right, rightSize: size - k)
            }
            guard let left = remaining.popFirst(), let right = rebuild(index - k, size - k) else { return nil }
            return parent(left, leftSize: k, right, rightSize: size - k)
        }
        // Elements left of the path come first, those right of it last: rebuilding from the root
        // down takes the left ones from the front and the right ones from the back.
        guard let rebuilt = rebuild(index, size), remaining.isEmpty else { return false }
        return rebuilt == root
    }

    /// The proof that the leaves at `indices` are in the tree over `leaves`: the fewest node
    /// values that, with those leaves, give the root, left to right (the draft's proof for several
    /// entries at once; one index gives ``inclusionProof(_:_:)``).
    public static func batchInclusionProof(_ indices: Set<Int>, _ leaves: ArraySlice<Data>) -> [Data] {
        Nodes(leaves).batchInclusionProof(indices, size: leaves.count)
    }

    /// Whether `proof` shows the leaves `values` (by index) in a tree of `size` leaves whose root
    /// is `root`.
    public static func verifyBatchInclusion(_ values: [Int: Data], size: Int, proof: [Data], root: Data) -> Bool {
        guard size >= 1, !values.isEmpty, values.keys.allSatisfy({ $0 >= 0 && $0 < size }),
            proof.allSatisfy({ $0.count == valueByteCount })
        else { return false }
        var remaining = proof[...]
        func rebuild(_ start: Int, _ size: Int) -> Data? {
            let range = start..<(start + size)
            guard values.keys.contains(where: { range.contains($0) }) else { return remaining.popFirst() }
            if size == 1 { return values[start] }
            let k = split(size)
            guard let left = rebuild(start, k), let right = rebuild(start + k, size - k) else { return nil }
            return parent(left, leftSize: k, right, rightSize: size - k)
        }
        guard let rebuilt = rebuild(0, size), remaining.isEmpty else { return false }
        return rebuilt == root
    }

    /// The proof that the tree over the first `oldSize` leaves is a prefix of the tree over all
    /// `leaves` (RFC 6962 §2.1.2's nodes, listed left to right).
    public static func consistencyProof(oldSize: Int, _ leaves: ArraySlice<Data>) -> [Data] {
        precondition(oldSize >= 1 && oldSize <= leaves.count, "the old size is 1 … the new size")
        return Nodes(leaves).consistencyProof(oldSize: oldSize, newSize: leaves.count)
    }

    /// Whether `proof` shows that the tree of `oldSize` leaves with root `oldRoot` is a prefix
    /// of the tree of `newSize` leaves with root `newRoot`: nothing removed or changed, only
    /// entries appended.
    public static func verifyConsistency(oldSize: Int, oldRoot: Data, newSize: Int, newRoot: Data, proof: [Data]) -> Bool {
        guard oldSize >= 1, oldSize <= newSize, proof.allSatisfy({ $0.count == valueByteCount }) else { return false }
        var remaining = proof[...]
        // Mirrors `consistencyProof`: each step gives the old subtree's value (nil where the old
        // tree does not reach) and the new one's.
        func rebuild(_ m: Int, _ n: Int, _ complete: Bool) -> (old: Data, new: Data)? {
            if m == n {
                if complete { return (oldRoot, oldRoot) }
                guard let value = remaining.popFirst() else { return nil }
                return (value, value)
            }
            let k = split(n)
            if m <= k {
                guard let right = remaining.popLast(), let left = rebuild(m, k, complete) else { return nil }
                return (left.old, parent(left.new, leftSize: k, right, rightSize: n - k))
            }
            guard let left = remaining.popFirst(), let right = rebuild(m - k, n - k, false) else { return nil }
            return (
                parent(left, leftSize: k, right.old, rightSize: m - k), parent(left, leftSize: k, right.new, rightSize: n - k)
            )
        }
        guard let rebuilt = rebuild(oldSize, newSize, true), remaining.isEmpty else { return false }
        return rebuilt.old == oldRoot && rebuilt.new == newRoot
    }
}

extension LogTree {
    /// A growing log tree's values, kept so that a root or a proof costs O(log² n) hashes instead
    /// of hashing every leaf again: leaves are only appended, so each complete subtree (2^k leaves
    /// starting at a multiple of 2^k), which is every left child of the left-balanced tree, never
    /// changes once whole and is kept. Each append finishes at most one subtree per level.
    public struct Nodes: Sendable {
        /// `levels[k][i]`: the value of the complete subtree of 2^k leaves from leaf i·2^k.
        private var levels: [[Data]] = [[]]

        /// An empty tree.
        public init() {}

        /// The tree over `leaves`, in order.
        public init(_ leaves: some Sequence<Data>) {
            for leaf in leaves { append(leaf) }
        }

        /// The number of leaves.
        public var count: Int { levels[0].count }

        /// The leaf values.
        public var leaves: [Data] { levels[0] }

        /// Appends a leaf value.
        public mutating func append(_ leaf: Data) {
            levels[0].append(leaf)
            var level = 0
            while levels[level].count % 2 == 0 {
                let values = levels[level]
                let size = 1 << level
                let value = LogTree.parent(
                    values[values.count - 2], leftSize: size, values[values.count - 1], rightSize: size)
                if levels.count == level + 1 { levels.append([]) }
                levels[level + 1].append(value)
                level += 1
            }
        }

        /// The value of the subtree over leaves `start ..< start + size`, as the tree splits it.
        func value(_ start: Int, _ size: Int) -> Data {
            if size & (size - 1) == 0, start % size == 0 {
                let level = size.trailingZeroBitCount
                return levels[level][start >> level]
            }
            let k = LogTree.split(size)
            return LogTree.parent(value(start, k), leftSize: k, value(start + k, size - k), rightSize: size - k)
        }

        /// The root over the first `size` leaves (1 … ``count``).
        public func root(size: Int) -> Data {
            precondition(size >= 1 && size <= count, "no tree of \(size) leaves here")
            return value(0, size)
        }

        /// ``LogTree/batchInclusionProof(_:_:)`` over the first `size` leaves.
        public func batchInclusionProof(_ indices: Set<Int>, size: Int) -> [Data] {
            precondition(size >= 1 && size <= count, "no tree of \(size) leaves here")
            func proof(_ start: Int, _ size: Int) -> [Data] {
                let range = start..<(start + size)
                guard indices.contains(where: { range.contains($0) }) else { return [value(start, size)] }
                if size == 1 { return [] }
                let k = LogTree.split(size)
                return proof(start, k) + proof(start + k, size - k)
            }
            return proof(0, size)
        }

        /// ``LogTree/consistencyProof(oldSize:_:)`` from the first `oldSize` leaves to the first
        /// `newSize`.
        public func consistencyProof(oldSize: Int, newSize: Int) -> [Data] {
            precondition(oldSize >= 1 && oldSize <= newSize && newSize <= count, "the old size is 1 … the new size")
            func subproof(_ m: Int, _ start: Int, _ n: Int, _ complete: Bool) -> [Data] {
                if m == n { return complete ? [] : [value(start, n)] }
                let k = LogTree.split(n)
                return m <= k
                    ? subproof(m, start, k, complete) + [value(start + k, n - k)]
                    : [value(start, k)] + subproof(m - k, start + k, n - k, false)
            }
            return subproof(oldSize, 0, newSize, true)
        }
    }
}
