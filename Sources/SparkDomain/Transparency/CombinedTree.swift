public import Foundation
public import SparkCrypto

/// Key transparency's combined tree, in memory (draft-ietf-keytrans-protocol, "Combined Tree"):
/// each update of a label appends one log entry, the commitment to the label's new value and
/// the root of the prefix tree after the label-version pair (its VRF output) was inserted. Every
/// entry's prefix tree is kept (the trees share what did not change), so a proof can be given
/// at any entry.
///
/// What the domain's log and the auditor build on, and the reference the tests and the bench
/// check proofs against. A search for a label's latest version proves, at each entry of the
/// log's frontier, a full binary ladder (so the versions seen only grow along it and the last
/// entry fixes the highest), then opens the commitment of the entry that added that version.
public struct CombinedTree: Sendable {
    struct Entry: Sendable {
        let commitment: Data
        let prefix: PrefixTree
        var leaf: Data { LogTree.leafValue(commitment: commitment, prefixRoot: prefix.root) }
    }

    struct Update: Sendable {
        let opening: Data
        let value: Data
        let position: UInt64
    }

    /// The VRF key that hides labels.
    let vrf: ECVRF.PrivateKey
    var entries: [Entry] = []
    /// The log tree's leaves and complete subtrees (``LogTree/Nodes``).
    var nodes = LogTree.Nodes()
    var updates: [Data: [Update]] = [:]

    /// An empty log whose labels are hidden by `vrf`.
    public init(vrf: ECVRF.PrivateKey) { self.vrf = vrf }

    /// The number of entries.
    public var size: UInt64 { UInt64(entries.count) }

    /// The log tree's root (nil while empty).
    public var root: Data? { nodes.count == 0 ? nil : nodes.root(size: nodes.count) }

    /// One update as the log keeps it: what a replica needs to append it again without the VRF
    /// key's work or a new opening (the domain's rows, an instance catching up).
    public struct Logged: Sendable, Equatable {
        /// The entry's position in the log.
        public var position: UInt64
        /// The label.
        public var label: Data
        /// The label's version the entry adds.
        public var version: UInt32
        /// The VRF output of (label, version): the prefix tree's key.
        public var vrfOutput: Data
        /// The commitment's opening.
        public var opening: Data
        /// The value.
        public var value: Data

        /// An update as logged.
        public init(position: UInt64, label: Data, version: UInt32, vrfOutput: Data, opening: Data, value: Data) {
            (self.position, self.label, self.version) = (position, label, version)
            (self.vrfOutput, self.opening, self.value) = (vrfOutput, opening, value)
        }
    }

    /// The versions `label` has in the log.
    public func versionCount(of label: Data) -> UInt32 { UInt32(updates[label]?.count ?? 0) }

    /// The log tree's root over its first `size` entries.
    public func root(at size: UInt64) -> Data? {
        size == 0 || size > self.size ? nil : nodes.root(size: Int(size))
    }

    /// The proof that the log of `oldSize` entries is a prefix of the log of `newSize` entries.
    public func consistencyProof(from oldSize: UInt64, to newSize: UInt64) -> [Data]? {
        guard oldSize >= 1, oldSize <= newSize, newSize <= size else { return nil }
        return nodes.consistencyProof(oldSize: Int(oldSize), newSize: Int(newSize))
    }

    /// Appends `value` as `label`'s next version; returns the version.
    @discardableResult
    public mutating func append(label: Data, value: Data) throws -> UInt32 {
        try append(epoch: [(label, value)])[0]
    }

    /// Appends updates logged elsewhere (another instance's epoch, read back from the domain's
    /// rows), each at the position and version it names.
    ///
    /// - Throws: ``CryptoError/Code/invalidParameter`` when an update is not the next entry or not
    ///   its label's next version: the rows are not this log's continuation.
    public mutating func append(logged: [Logged]) throws {
        for update in logged {
            guard update.position == size, update.version == versionCount(of: update.label) else {
                throw CryptoError(
                    .invalidParameter, "logged update \(update.position) is not the log's next entry or its label's next version")
            }
            try insert(update)
        }
    }

    private mutating func insert(_ update: Logged) throws {
        let commitment = try TransparencyCommitment.commitment(opening: update.opening, label: update.label, value: update.value)
        var prefix = entries.last?.prefix ?? PrefixTree()
        try prefix.insert(update.vrfOutput, index: update.position)
        updates[update.label, default: []].append(
            Update(opening: update.opening, value: update.value, position: update.position))
        let entry = Entry(commitment: commitment, prefix: prefix)
        entries.append(entry)
        nodes.append(entry.leaf)
    }

    /// Appends an epoch's updates in order (a label may appear several times: each is its next
    /// version); returns their versions. The VRF outputs, independent of each other and most of
    /// the work, are proved on every core first.
    @discardableResult
    public mutating func append(epoch: [(label: Data, value: Data)]) throws -> [UInt32] {
        try appendLogging(epoch: epoch).map(\.version)
    }

    /// Appends an epoch's updates as ``append(epoch:)`` does and returns them as logged (what
    /// the domain writes in its rows).
    public mutating func appendLogging(epoch: [(label: Data, value: Data)]) throws -> [Logged] {
        var next: [Data: UInt32] = [:]
        let inputs = try epoch.map { update -> (input: Data, version: UInt32) in
            let version = next[update.label] ?? versionCount(of: update.label)
            next[update.label] = version + 1
            return (try TransparencyCommitment.vrfInput(label: update.label, version: version), version)
        }
        let keys = try Self.outputs(of: inputs.map(\.input), under: vrf)
        var logged: [Logged] = []
        logged.reserveCapacity(epoch.count)
        for (index, update) in epoch.enumerated() {
            let record = Logged(
                position: size, label: update.label, version: inputs[index].version, vrfOutput: keys[index],
                opening: TransparencyCommitment.opening(), value: update.value)
            try insert(record)
            logged.append(record)
        }
        return logged
    }

    /// The VRF outputs of `inputs`, computed on every core (each a few P-256 multiplications).
    static func outputs(of inputs: [Data], under vrf: ECVRF.PrivateKey) throws -> [Data] {
        guard inputs.count > 1 else { return try inputs.map { try vrf.prove($0).output } }
        let workers = min(inputs.count, max(1, ProcessInfo.processInfo.activeProcessorCount))
        let results = UnsafeMutableBufferPointer<Result<Data, any Error>>.allocate(capacity: inputs.count)
        results.initialize(repeating: .failure(CryptoError(.invalidParameter, "not computed")))
        defer {
            results.deinitialize()
            results.deallocate()
        }
        // Each worker writes its own contiguous range of the buffer, and only that.
        nonisolated(unsafe) let shared = results
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            let range = (inputs.count * worker / workers)..<(inputs.count * (worker + 1) / workers)
            for index in range { shared[index] = Result { try vrf.prove(inputs[index]).output } }
        }
        return try results.map { try $0.get() }
    }

    /// The proof of `label`'s latest value in the log as it is now.
    public func searchLatest(_ label: Data) throws -> SearchProof { try searchLatest(label, size: size) }

    /// The proof of `label`'s latest value in the log as it was at `size` entries (a signed
    /// head the readers hold, which later entries may have passed).
    ///
    /// `abridged`: the full binary ladder at the last entry only, for a reader that requires an
    /// auditor's co-signature on the head (the auditor has checked that every prefix tree only
    /// adds keys, so the last one holds every version there is; see ``verifyLatest(_:label:size:root:vrfKey:abridged:)``).
    public func searchLatest(_ label: Data, size: UInt64, abridged: Bool = false) throws -> SearchProof {
        guard size > 0, size <= self.size else { throw CryptoError(.invalidParameter, "the log has no entry \(size)") }
        // Each version's VRF output is proved once, whichever entries look it up.
        var vrfProofs: [UInt32: Data] = [:]
        var vrfOutputs: [UInt32: Data] = [:]
        func lookups(at position: UInt64) throws -> [Lookup] {
            let prefix = entries[Int(position)].prefix
            var results: [Lookup] = []
            var failure: (any Error)?
            _ = SearchTree.fullLadder { version in
                do {
                    if vrfOutputs[version] == nil {
                        let (proof, output) = try vrf.prove(try TransparencyCommitment.vrfInput(label: label, version: version))
                        (vrfProofs[version], vrfOutputs[version]) = (proof, output)
                    }
                } catch {
                    failure = failure ?? error
                    return false
                }
                let proof = prefix.search(vrfOutputs[version]!)
                results.append(Lookup(version: version, proof: proof))
                if case .inclusion = proof.result { return true }
                return false
            }
            if let failure { throw failure }
            return results
        }
        let frontier = try (abridged ? [size - 1] : SearchTree.frontier(size)).map { position in
            FrontierEntry(
                position: position, commitment: entries[Int(position)].commitment,
                prefixRoot: entries[Int(position)].prefix.root, lookups: try lookups(at: position))
        }
        var opened: Opened?
        if let latest = updates[label]?.last(where: { $0.position < size }) {
            let entry = entries[Int(latest.position)]
            opened = Opened(
                position: latest.position, opening: latest.opening, value: latest.value, prefixRoot: entry.prefix.root)
        }
        // One proof for every entry the search visits: their copaths share most nodes.
        let visited = Set(frontier.map { Int($0.position) } + (opened.map { [Int($0.position)] } ?? []))
        return SearchProof(
            size: size, vrfProofs: vrfProofs, frontier: frontier, opened: opened,
            inclusion: nodes.batchInclusionProof(visited, size: Int(size)))
    }

    /// One lookup of a binary ladder: a version and the prefix tree's answer for it.
    public struct Lookup: Sendable, Equatable {
        /// The label's version looked up.
        public var version: UInt32
        /// The prefix tree's proof for its VRF output.
        public var proof: PrefixTree.SearchProof
    }

    /// A frontier entry with its full binary ladder.
    public struct FrontierEntry: Sendable, Equatable {
        /// Its position in the log.
        public var position: UInt64
        /// Its commitment and prefix tree root (its leaf value follows).
        public var commitment: Data
        /// The root of the entry's prefix tree.
        public var prefixRoot: Data
        /// The full binary ladder's lookups, in order.
        public var lookups: [Lookup]
    }

    /// The entry that added the latest version, opened.
    public struct Opened: Sendable, Equatable {
        /// Its position in the log.
        public var position: UInt64
        /// The commitment's opening.
        public var opening: Data
        /// The label's value at that version.
        public var value: Data
        /// The root of the entry's prefix tree.
        public var prefixRoot: Data
    }

    /// A proof of a label's latest value.
    public struct SearchProof: Sendable, Equatable {
        /// The log's size the proof is for.
        public var size: UInt64
        /// The VRF proof of each version looked up.
        public var vrfProofs: [UInt32: Data]
        /// The frontier's entries, in order.
        public var frontier: [FrontierEntry]
        /// The latest version's entry, opened; nil when the label has none.
        public var opened: Opened?
        /// The log tree's proof of every entry above (``LogTree/batchInclusionProof(_:_:)``).
        public var inclusion: [Data]
    }

    /// What a verified search proves: the label's latest version and its value, or nothing.
    public struct Verified: Sendable, Equatable {
        /// The latest version (nil: the label is not in the log).
        public var version: UInt32?
        /// Its value.
        public var value: Data?
    }

    /// Verifies `proof` for `label` against a log of `size` entries with root `root`, whose
    /// labels the VRF key `vrfKey` hides.
    ///
    /// `abridged`: the proof walks the last entry only (``searchLatest(_:size:abridged:)``); sound
    /// only for a head an auditor co-signed, having rebuilt the log and seen every prefix tree
    /// only add keys. Without it, the walk along the frontier shows that no entry ever held more
    /// versions than the last, which no auditor is then needed for.
    ///
    /// - Throws: ``CryptoError/Code/invalidSignature`` naming the check that failed.
    public static func verifyLatest(
        _ proof: SearchProof, label: Data, size: UInt64, root: Data, vrfKey: ECVRF.PublicKey, abridged: Bool = false
    ) throws -> Verified {
        func fail(_ reason: String) -> CryptoError { CryptoError(.invalidSignature, "the search proof \(reason)") }
        guard proof.size == size, size > 0 else { throw fail("is for another log size") }
        let expected = abridged ? [size - 1] : SearchTree.frontier(size)
        guard proof.frontier.map(\.position) == expected else { throw fail("does not follow the log's frontier") }
        var keys: [UInt32: Data] = [:]
        for (version, vrfProof) in proof.vrfProofs {
            keys[version] = try vrfKey.verify(
                vrfProof, for: try TransparencyCommitment.vrfInput(label: label, version: version))
        }
        var highest: UInt32?
        var previous: UInt32? = nil
        // Every entry's leaf, checked against the log's root at the end, in one proof.
        var leaves: [Int: Data] = [:]
        for entry in proof.frontier {
            leaves[Int(entry.position)] = LogTree.leafValue(commitment: entry.commitment, prefixRoot: entry.prefixRoot)
            // The lookups must be exactly the full ladder their own answers call for.
            var answers: [UInt32: Bool] = [:]
            for lookup in entry.lookups {
                guard let key = keys[lookup.version], PrefixTree.verify(lookup.proof, key: key, root: entry.prefixRoot)
                else { throw fail("has a lookup of version \(lookup.version) that does not verify") }
                if case .inclusion = lookup.proof.result {
                    answers[lookup.version] = true
                } else {
                    answers[lookup.version] = false
                }
            }
            var asked: [UInt32] = []
            let ladder = SearchTree.fullLadder { version in
                asked.append(version)
                return answers[version] ?? false
            }
            guard asked == entry.lookups.map(\.version) else { throw fail("skips a lookup of the ladder") }
            // Versions only grow along the frontier: a log cannot show an older version later.
            let wentBack = previous.map { before in ladder.highest.map({ $0 < before }) ?? true } ?? false
            if wentBack {
                throw fail("shows the label's versions going back along the frontier")
            }
            previous = ladder.highest
            highest = ladder.highest
        }
        func checkLeaves() throws {
            guard LogTree.verifyBatchInclusion(leaves, size: Int(size), proof: proof.inclusion, root: root) else {
                throw fail("names entries that are not the log's")
            }
        }
        guard let version = highest else {
            guard proof.opened == nil else { throw fail("opens a label it proved absent") }
            try checkLeaves()
            return Verified(version: nil, value: nil)
        }
        guard let opened = proof.opened, let key = keys[version] else { throw fail("does not open the latest version") }
        // The entry that added it: the prefix leaf of its key names that entry.
        let last = proof.frontier[proof.frontier.count - 1]
        guard let found = last.lookups.first(where: { $0.version == version }),
            case .inclusion(let position) = found.proof.result, position == opened.position,
            PrefixTree.verify(found.proof, key: key, root: last.prefixRoot)
        else { throw fail("opens another entry than the one that added the version") }
        let commitment = try TransparencyCommitment.commitment(opening: opened.opening, label: label, value: opened.value)
        let leaf = LogTree.leafValue(commitment: commitment, prefixRoot: opened.prefixRoot)
        if let shown = leaves[Int(opened.position)], shown != leaf {
            throw fail("opens a value the log did not commit to")
        }
        leaves[Int(opened.position)] = leaf
        do {
            try checkLeaves()
        } catch {
            throw fail("opens a value the log did not commit to, or names entries that are not the log's")
        }
        return Verified(version: version, value: opened.value)
    }
}
