/// Key transparency's implicit binary search tree over the log's entries, and its binary
/// ladders (draft-ietf-keytrans-protocol, "Searching the Tree"): every user searching for the
/// same label visits the same entries, so that checking a few of them checks the log for
/// everyone. Leaves sit at even positions, intermediate entries at odd ones.
public enum SearchTree {
    /// The exponent of the largest power of two at most `x` (0 for 0).
    static func log2(_ x: UInt64) -> Int { x == 0 ? 0 : 63 - x.leadingZeroBitCount }

    /// The level of entry `x`: 0 for a leaf (even), otherwise the count of its trailing one bits.
    public static func level(_ x: UInt64) -> Int { x.trailingZeroBitCount == 0 ? (~x).trailingZeroBitCount : 0 }

    /// Where a search starts in a log of `n` entries (`n` ≥ 1).
    public static func root(_ n: UInt64) -> UInt64 { (1 << UInt64(log2(n))) - 1 }

    /// The left child of intermediate entry `x`; nil for a leaf.
    public static func left(_ x: UInt64) -> UInt64? {
        let k = level(x)
        return k == 0 ? nil : x ^ (1 << UInt64(k - 1))
    }

    /// The right child of intermediate entry `x` in a log of `n` entries (the nearest present
    /// one); nil for a leaf.
    public static func right(_ x: UInt64, _ n: UInt64) -> UInt64? {
        let k = level(x)
        guard k > 0 else { return nil }
        var child = x ^ (3 << UInt64(k - 1))
        while child >= n, let next = left(child) { child = next }
        return child < n ? child : nil
    }

    /// The frontier of a log of `n` entries: its root, then right children to the last entry.
    public static func frontier(_ n: UInt64) -> [UInt64] {
        guard n > 0 else { return [] }
        var path = [root(n)]
        while let next = right(path[path.count - 1], n) { path.append(next) }
        return path
    }

    /// The versions a binary ladder for `target` looks up, in order: 0, 1, 3, 7, … up to the
    /// largest such value at most `target`, then that plus smaller powers of two up to `target`
    /// (20: 0, 1, 3, 7, 15, 19, 20). A search stops at the first one that is absent.
    public static func ladder(_ target: UInt32) -> [UInt32] {
        var versions: [UInt32] = []
        var x: UInt64 = 0
        while x <= UInt64(target) {
            versions.append(UInt32(x))
            x = (x << 1) | 1
        }
        var base = UInt64(versions[versions.count - 1])
        var step: UInt64 = (base + 1) >> 1
        while base < UInt64(target), step > 0 {
            if base + step <= UInt64(target) {
                base += step
                versions.append(UInt32(base))
            }
            step >>= 1
        }
        return versions
    }

    /// The versions a full binary ladder looks up given which versions exist (`exists`, true
    /// for 0 … highest), and the highest version found (nil when version 0 is absent): powers of
    /// two minus one until the first absent one, then a binary search between the last present
    /// and the first absent.
    public static func fullLadder(_ exists: (UInt32) -> Bool) -> (lookups: [UInt32], highest: UInt32?) {
        var lookups: [UInt32] = []
        var present: UInt64?
        var absent: UInt64?
        var x: UInt64 = 0
        while x <= UInt64(UInt32.max) {
            lookups.append(UInt32(x))
            guard exists(UInt32(x)) else {
                absent = x
                break
            }
            present = x
            x = (x << 1) | 1
        }
        guard var low = present else { return (lookups, nil) }
        // Every version up to the largest a version number holds exists.
        guard var high = absent else { return (lookups, UInt32(low)) }
        while high - low > 1 {
            let middle = low + (high - low) / 2
            lookups.append(UInt32(middle))
            if exists(UInt32(middle)) { low = middle } else { high = middle }
        }
        return (lookups, UInt32(low))
    }
}
