/// The array representation of a complete binary tree (RFC 9420 §4.1 and Appendix C): leaves at
/// even indices, parents at odd ones, a node's level is the number of trailing one bits.
enum TreeMath {
    static func log2(_ x: UInt32) -> UInt32 { x == 0 ? 0 : UInt32(31 - x.leadingZeroBitCount) }

    static func level(_ x: UInt32) -> UInt32 { UInt32((~x).trailingZeroBitCount) }

    /// The number of nodes of a tree of `leaves` leaves.
    static func nodeWidth(_ leaves: UInt32) -> UInt32 { leaves == 0 ? 0 : 2 * (leaves - 1) + 1 }

    static func root(_ leaves: UInt32) -> UInt32 { (1 << log2(nodeWidth(leaves))) - 1 }

    static func left(_ x: UInt32) -> UInt32 {
        let k = level(x)
        precondition(k > 0, "a leaf has no children")
        return x ^ (1 << (k - 1))
    }

    static func right(_ x: UInt32) -> UInt32 {
        let k = level(x)
        precondition(k > 0, "a leaf has no children")
        return x ^ (3 << (k - 1))
    }

    static func parent(_ x: UInt32, leaves: UInt32) -> UInt32 {
        precondition(x != root(leaves), "the root has no parent")
        let k = level(x)
        let b = (x >> (k + 1)) & 1
        return (x | (1 << k)) ^ (b << (k + 1))
    }

    static func sibling(_ x: UInt32, leaves: UInt32) -> UInt32 {
        let p = parent(x, leaves: leaves)
        return x < p ? right(p) : left(p)
    }

    /// The ancestors of `x` up to and including the root.
    static func directPath(_ x: UInt32, leaves: UInt32) -> [UInt32] {
        let r = root(leaves)
        var path: [UInt32] = []
        var node = x
        while node != r {
            node = parent(node, leaves: leaves)
            path.append(node)
        }
        return path
    }

    /// The siblings of `x` and of each of its ancestors below the root.
    static func copath(_ x: UInt32, leaves: UInt32) -> [UInt32] {
        let r = root(leaves)
        var path: [UInt32] = []
        var node = x
        while node != r {
            path.append(sibling(node, leaves: leaves))
            node = parent(node, leaves: leaves)
        }
        return path
    }

    /// Whether `x` is in the subtree rooted at `ancestor`.
    static func isInSubtree(_ x: UInt32, of ancestor: UInt32) -> Bool {
        let k = level(ancestor)
        return x >> (k + 1) == ancestor >> (k + 1)
    }

    /// The leaves under `x`, as leaf indices.
    static func leaves(under x: UInt32) -> ClosedRange<UInt32> {
        let k = level(x)
        let first = (x >> k) << k
        let last = first + (1 << (k + 1)) - 2
        return (first / 2)...(last / 2)
    }

    /// The lowest common ancestor of two nodes.
    static func commonAncestor(_ x: UInt32, _ y: UInt32) -> UInt32 {
        let lx = level(x) + 1
        let ly = level(y) + 1
        if lx <= ly, x >> ly == y >> ly { return y }
        if ly <= lx, x >> lx == y >> lx { return x }
        var xn = x
        var yn = y
        var k: UInt32 = 0
        while xn != yn {
            xn >>= 1
            yn >>= 1
            k += 1
        }
        return (xn << k) + (1 << (k - 1)) - 1
    }
}
