public import Foundation

/// Oblivious pseudorandom functions (RFC 9497): the OPRF and VOPRF modes of the `P256-SHA256`
/// and `P384-SHA384` suites.
///
/// A client blinds its input, the server evaluates the blinded element with its private key,
/// and the client unblinds the result to `PRF(key, input)` without the server learning the
/// input or the output. In the verifiable mode the server also proves (a DLEQ proof, §2.2) that
/// it used the key whose public half the client holds.
///
/// ```swift
/// let oprf = OPRF(suite: .p256SHA256, mode: .verifiable)
/// let key = try oprf.deriveKey(seed: secret, info: Data("alice".utf8))  // the server
/// let blinded = try oprf.blind(Data("input".utf8))                      // the client
/// let evaluation = try oprf.blindEvaluate([blinded.element], key: key)  // the server
/// let output = try oprf.finalize([blinded], evaluation, publicKey: key.publicKey)[0]
/// ```
public struct OPRF: Sendable, Hashable, CustomStringConvertible {
    /// The protocol variant, which is part of every derivation (`contextString`).
    public enum Mode: UInt8, Sendable, Hashable {
        /// The base OPRF: no proof.
        case oprf = 0
        /// The verifiable OPRF: each evaluation comes with a proof against the server's public key.
        case verifiable = 1
    }

    /// A prime-order group and hash (RFC 9497 §4).
    public struct Suite: Sendable, Hashable, CustomStringConvertible {
        /// The suite id, e.g. `P256-SHA256`.
        public let identifier: String
        /// The RFC 9380 suite behind `HashToGroup`.
        public let hashToCurve: HashToCurve.Suite

        /// `P256-SHA256` (RFC 9497 §4.3).
        public static let p256SHA256 = Suite(identifier: "P256-SHA256", hashToCurve: .p256)
        /// `P384-SHA384` (RFC 9497 §4.4).
        public static let p384SHA384 = Suite(identifier: "P384-SHA384", hashToCurve: .p384)

        var curve: PrimeCurve { hashToCurve.curve }
        var hash: HashFunction { hashToCurve.hash }
        /// Bytes of a serialized element (Ne) and scalar (Ns).
        public var elementByteCount: Int { curve.elementByteCount }
        /// Bytes of a serialized scalar (Ns).
        public var scalarByteCount: Int { curve.scalarByteCount }
        /// Bytes of an output (Nh).
        public var outputByteCount: Int { hash.digestCount }

        /// The suite id.
        public var description: String { identifier }
        /// Suites are equal when their ids are.
        public static func == (lhs: Suite, rhs: Suite) -> Bool { lhs.identifier == rhs.identifier }
        /// Hashes the id.
        public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }
    }

    /// The group and hash.
    public let suite: Suite
    /// OPRF or VOPRF.
    public let mode: Mode

    /// An instance of the protocol.
    public init(suite: Suite, mode: Mode) {
        self.suite = suite
        self.mode = mode
    }

    /// The passcode hardening of the key backup: `P256-SHA256`, verifiable.
    public static let passcodeHardening = OPRF(suite: .p256SHA256, mode: .verifiable)

    /// `OPRFV1-<mode>-<suite>`.
    public var description: String { "OPRFV1-\(mode.rawValue)-\(suite.identifier)" }

    /// RFC 9497 §3.1's contextString.
    var contextString: Data { Data("OPRFV1-".utf8) + [mode.rawValue] + Data("-\(suite.identifier)".utf8) }

    /// The most elements one evaluation may carry (the proof numbers them in two bytes).
    public static let maximumBatch = 65_535

    // MARK: Keys

    /// A server's private key.
    public struct PrivateKey: Sendable {
        /// The protocol this key belongs to (the mode is part of its derivation).
        public let oprf: OPRF
        let scalar: SecureBytes
        /// The serialized public key, `pkS = skS · G`.
        public let publicKey: Data

        /// The private scalar, big-endian (for storage; keep it secret).
        public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            try scalar.withUnsafeBytes(body)
        }
    }

    /// `DeriveKeyPair(seed, info)` (RFC 9497 §3.2.1).
    ///
    /// - Throws: ``CryptoError/Code/invalidParameter`` for a seed shorter than 32 bytes or an
    ///   info longer than 65,535 bytes.
    public func deriveKey(seed: some ContiguousBytes, info: some ContiguousBytes) throws -> PrivateKey {
        let info = info.withUnsafeBytes { Data($0) }
        guard seed.withUnsafeBytes({ $0.count }) >= 32 else {
            throw CryptoError(.invalidParameter, "an OPRF seed has at least 32 bytes")
        }
        guard info.count <= 65_535 else { throw CryptoError(.invalidParameter, "an OPRF key info is at most 65,535 bytes") }
        var input = seed.withUnsafeBytes { SecureBytes($0) }
        input.append(Self.lengthPrefixed(info))
        return try suite.curve.compute { s in
            for counter in 0...255 {
                var attempt = input
                attempt.append([UInt8(counter)])
                let scalar = try hashToScalar(attempt, domain: Data("DeriveKeyPair".utf8) + contextString, s)
                if !s.isZero(scalar) { return try privateKey(scalar, s) }
            }
            throw CryptoError(.invalidParameter, "DeriveKeyPair found no key in 256 attempts")
        }
    }

    /// A private key from its big-endian scalar, in [1, n - 1].
    public func privateKey(rawRepresentation: some ContiguousBytes) throws -> PrivateKey {
        try suite.curve.compute { s in
            let scalar = try readScalar(rawRepresentation.withUnsafeBytes { Data($0) }, s)
            guard !s.isZero(scalar) else { throw CryptoError(.invalidKey, "an OPRF private key is not zero") }
            return try privateKey(scalar, s)
        }
    }

    /// A new random private key.
    public func generateKey() throws -> PrivateKey {
        try suite.curve.compute { s in try privateKey(try s.randomScalar(), s) }
    }

    // MARK: The client

    /// The client's state between ``blind(_:unsafeBlind:)`` and ``finalize(_:_:publicKey:)``:
    /// the input and the blind (both secret) and the blinded element to send.
    public struct Blinded: Sendable {
        let input: SecureBytes
        let blind: SecureBytes
        /// The serialized blinded element, for the server.
        public let element: Data
    }

    /// `Blind(input)` (RFC 9497 §3.3.1): a random blind r and `r · HashToGroup(input)`.
    ///
    /// - Parameter unsafeBlind: a fixed blind, for the RFC's test vectors only.
    /// - Warning: a fixed blind links the client's requests; never pass one outside tests.
    /// - Throws: ``CryptoError/Code/invalidParameter`` for an input longer than 65,535 bytes.
    public func blind(_ input: some ContiguousBytes, unsafeBlind: Data? = nil) throws -> Blinded {
        let input = input.withUnsafeBytes { SecureBytes($0) }
        guard input.count <= 65_535 else { throw CryptoError(.invalidParameter, "an OPRF input is at most 65,535 bytes") }
        return try suite.curve.compute { s in
            let blind = try unsafeBlind.map { try readScalar($0, s) } ?? s.randomScalar()
            guard !s.isZero(blind) else { throw CryptoError(.invalidParameter, "a blind is not zero") }
            let element = try hashToGroup(input, s)
            return Blinded(
                input: input, blind: try s.secretBytes(blind, count: suite.scalarByteCount),
                element: try s.encode(try s.multiply(element, by: blind)))
        }
    }

    /// `Finalize` (RFC 9497 §3.3.1, §3.3.2): checks the proof in the verifiable mode, then
    /// unblinds each evaluated element and hashes it with its input.
    ///
    /// - Throws: ``CryptoError/Code/malformedInput`` for an element that is not a point,
    ///   ``CryptoError/Code/invalidSignature`` when the proof does not verify against `publicKey`
    ///   (the server used another key), ``CryptoError/Code/invalidParameter`` when the counts
    ///   differ or the verifiable mode has no public key or proof.
    public func finalize(_ blinded: [Blinded], _ evaluation: Evaluation, publicKey: Data? = nil) throws -> [SecureBytes] {
        guard !blinded.isEmpty, blinded.count == evaluation.elements.count, blinded.count <= Self.maximumBatch else {
            throw CryptoError(.invalidParameter, "\(blinded.count) blinded inputs for \(evaluation.elements.count) evaluations")
        }
        return try suite.curve.compute { s in
            let evaluated = try evaluation.elements.map { try s.decode($0) }
            if mode == .verifiable {
                guard let publicKey, let proof = evaluation.proof else {
                    throw CryptoError(.invalidParameter, "the verifiable mode needs the server's public key and a proof")
                }
                let blindedPoints = try blinded.map { try s.decode($0.element) }
                let c = Composite(points: blindedPoints, encoded: blinded.map(\.element))
                let d = Composite(points: evaluated, encoded: evaluation.elements)
                guard try verifyProof(publicKey: try s.decode(publicKey), encoded: publicKey, c, d, proof: proof, s) else {
                    throw CryptoError(.invalidSignature, "the evaluation's proof does not verify against the server's key")
                }
            }
            return try zip(blinded, evaluated).map { state, element in
                let blind = try state.blind.withUnsafeBytes { try s.number($0) }
                let unblinded = try s.multiply(element, by: try s.invertScalar(blind))
                return try finalHash(state.input, try s.encode(unblinded))
            }
        }
    }

    // MARK: The server

    /// A server's answer: one evaluated element per blinded element and, in the verifiable mode,
    /// one proof for all of them (`c ‖ s`).
    public struct Evaluation: Sendable, Hashable {
        /// The serialized evaluated elements, in the order of the request.
        public var elements: [Data]
        /// The DLEQ proof, `2 · Ns` bytes; nil in the base mode.
        public var proof: Data?

        /// An evaluation as received.
        public init(elements: [Data], proof: Data?) {
            self.elements = elements
            self.proof = proof
        }
    }

    /// `BlindEvaluate` (RFC 9497 §3.3.1, §3.3.2; batched as §3.3.2 allows).
    ///
    /// - Parameter unsafeProofRandom: a fixed proof nonce, for the RFC's test vectors only.
    /// - Warning: a repeated proof nonce reveals the private key; never pass one outside tests.
    /// - Throws: ``CryptoError/Code/malformedInput`` for an element that is not a point (the
    ///   identity included), ``CryptoError/Code/invalidKey`` for a key of another suite or mode.
    public func blindEvaluate(_ elements: [Data], key: PrivateKey, unsafeProofRandom: Data? = nil) throws -> Evaluation {
        guard key.oprf == self else { throw CryptoError(.invalidKey, "the key belongs to \(key.oprf), not \(self)") }
        guard !elements.isEmpty, elements.count <= Self.maximumBatch else {
            throw CryptoError(.invalidParameter, "an evaluation takes 1...\(Self.maximumBatch) elements")
        }
        return try suite.curve.compute { s in
            let k = try key.scalar.withUnsafeBytes { try s.number($0) }
            let blinded = try elements.map { try s.decode($0) }
            let evaluated = try blinded.map { try s.multiply($0, by: k) }
            let encoded = try evaluated.map { try s.encode($0) }
            guard mode == .verifiable else { return Evaluation(elements: encoded, proof: nil) }
            // The elements as received and as sent are their encodings: the proof's transcripts
            // reuse them rather than encode each point again. (A decoded element encodes to the
            // same bytes: compressed, with x below p.)
            let proof = try generateProof(
                k, publicKey: key.publicKey, Composite(points: blinded, encoded: elements),
                Composite(points: evaluated, encoded: encoded), random: unsafeProofRandom, s)
            return Evaluation(elements: encoded, proof: proof)
        }
    }

    /// `Evaluate(input)`: the PRF computed directly by the key's holder (RFC 9497 §3.3.1).
    public func evaluate(_ input: some ContiguousBytes, key: PrivateKey) throws -> SecureBytes {
        guard key.oprf == self else { throw CryptoError(.invalidKey, "the key belongs to \(key.oprf), not \(self)") }
        let input = input.withUnsafeBytes { SecureBytes($0) }
        guard input.count <= 65_535 else { throw CryptoError(.invalidParameter, "an OPRF input is at most 65,535 bytes") }
        return try suite.curve.compute { s in
            let k = try key.scalar.withUnsafeBytes { try s.number($0) }
            return try finalHash(input, try s.encode(try s.multiply(try hashToGroup(input, s), by: k)))
        }
    }

    // MARK: Internals

    private func privateKey(_ scalar: OpaquePointer, _ s: ECScratch) throws -> PrivateKey {
        PrivateKey(
            oprf: self, scalar: try s.secretBytes(scalar, count: suite.scalarByteCount),
            publicKey: try s.encode(try s.multiplyGenerator(scalar)))
    }

    /// DeserializeScalar: exactly Ns bytes, below the order.
    private func readScalar(_ data: Data, _ s: ECScratch) throws -> OpaquePointer {
        guard data.count == suite.scalarByteCount else {
            throw CryptoError(.malformedInput, "a scalar is \(suite.scalarByteCount) bytes, got \(data.count)")
        }
        let scalar = try s.number(data)
        guard s.isReduced(scalar, suite.curve.order) else {
            throw CryptoError(.malformedInput, "the scalar is not below the order")
        }
        return scalar
    }

    private func hashToGroup(_ input: SecureBytes, _ s: ECScratch) throws -> OpaquePointer {
        let point = try HashToCurve.hashToCurve(
            input, domain: Data("HashToGroup-".utf8) + contextString, suite: suite.hashToCurve, scratch: s)
        guard !s.isIdentity(point) else { throw CryptoError(.invalidParameter, "the input hashes to the identity") }
        return point
    }

    private func hashToScalar(_ input: some ContiguousBytes, domain: Data? = nil, _ s: ECScratch) throws -> OpaquePointer {
        try HashToCurve.fieldElements(
            input, domain: domain ?? Data("HashToScalar-".utf8) + contextString, count: 1,
            length: suite.hashToCurve.fieldLength, hash: suite.hash, scratch: s, modulus: suite.curve.order)[0]
    }

    /// `Hash(I2OSP(len(input), 2) ‖ input ‖ I2OSP(len(element), 2) ‖ element ‖ "Finalize")`.
    private func finalHash(_ input: SecureBytes, _ element: Data) throws -> SecureBytes {
        var transcript = SecureBytes(Self.lengthPrefix(input.count))
        transcript.append(input)
        transcript.append(Self.lengthPrefixed(element) + Data("Finalize".utf8))
        return SecureBytes(transcript.withUnsafeBytes { suite.hash.hash($0) })
    }

    /// The elements of one side of a proof (the C or the D of §2.2), as points and as their
    /// encodings.
    private struct Composite {
        var points: [OpaquePointer]
        var encoded: [Data]
    }

    /// ComputeComposites (§2.2.1): M = Σ dᵢ Cᵢ and Z = Σ dᵢ Dᵢ, or Z = k M with the key
    /// (ComputeCompositesFast).
    private func composites(
        key: OpaquePointer?, publicKey: Data, _ c: Composite, _ d: Composite, _ s: ECScratch
    ) throws -> (m: OpaquePointer, z: OpaquePointer) {
        let seedDomain = Data("Seed-".utf8) + contextString
        let seed = suite.hash.hash(Self.lengthPrefixed(publicKey) + Self.lengthPrefixed(seedDomain))
        var m = try s.point()
        var z = try s.point()
        for index in c.points.indices {
            let transcript =
                Self.lengthPrefixed(seed) + Self.lengthPrefix(index) + Self.lengthPrefixed(c.encoded[index])
                + Self.lengthPrefixed(d.encoded[index]) + Data("Composite".utf8)
            let weight = try hashToScalar(transcript, s)
            m = try s.add(try s.multiply(c.points[index], by: weight), m)
            if key == nil { z = try s.add(try s.multiply(d.points[index], by: weight), z) }
        }
        if let key { z = try s.multiply(m, by: key) }
        return (m, z)
    }

    private func challenge(
        _ publicKey: Data, _ m: OpaquePointer, _ z: OpaquePointer, _ t2: OpaquePointer, _ t3: OpaquePointer,
        _ s: ECScratch
    ) throws -> OpaquePointer {
        var transcript = Self.lengthPrefixed(publicKey)
        for element in [m, z, t2, t3] { transcript += Self.lengthPrefixed(try s.encode(element)) }
        return try hashToScalar(transcript + Data("Challenge".utf8), s)
    }

    /// GenerateProof (§2.2.1) with A = G and B = pkS.
    private func generateProof(
        _ k: OpaquePointer, publicKey: Data, _ c: Composite, _ d: Composite, random: Data?, _ s: ECScratch
    ) throws -> Data {
        let (m, z) = try composites(key: k, publicKey: publicKey, c, d, s)
        let r = try random.map { try readScalar($0, s) } ?? s.randomScalar()
        let t2 = try s.multiplyGenerator(r)
        let t3 = try s.multiply(m, by: r)
        let challenge = try challenge(publicKey, m, z, t2, t3, s)
        let response = try s.subtract(r, try s.multiply(challenge, k, suite.curve.order), suite.curve.order)
        return try s.bytes(challenge, count: suite.scalarByteCount) + s.bytes(response, count: suite.scalarByteCount)
    }

    /// VerifyProof (§2.2.2).
    private func verifyProof(
        publicKey: OpaquePointer, encoded: Data, _ c: Composite, _ d: Composite, proof: Data, _ s: ECScratch
    ) throws -> Bool {
        let count = suite.scalarByteCount
        guard proof.count == 2 * count else {
            throw CryptoError(.malformedInput, "a proof is \(2 * count) bytes, got \(proof.count)")
        }
        let challenge = try readScalar(proof.prefix(count), s)
        let response = try readScalar(proof.suffix(count), s)
        let (m, z) = try composites(key: nil, publicKey: encoded, c, d, s)
        let t2 = try s.add(try s.multiplyGenerator(response), try s.multiply(publicKey, by: challenge))
        let t3 = try s.add(try s.multiply(m, by: response), try s.multiply(z, by: challenge))
        guard !s.isIdentity(t2), !s.isIdentity(t3), !s.isIdentity(m), !s.isIdentity(z) else { return false }
        return s.equal(try self.challenge(encoded, m, z, t2, t3, s), challenge)
    }

    static func lengthPrefix(_ count: Int) -> Data { Data([UInt8(count >> 8 & 0xff), UInt8(count & 0xff)]) }
    static func lengthPrefixed(_ data: Data) -> Data { lengthPrefix(data.count) + data }
}
