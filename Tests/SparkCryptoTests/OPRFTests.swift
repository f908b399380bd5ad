import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

/// RFC 9380's hash-to-curve vectors (in `Vectors/`, from cfrg/draft-irtf-cfrg-hash-to-curve,
/// the RFC's Appendix J and K.1) and RFC 9497's OPRF vectors (`Tests/Vectors/oprf/`).
@Suite("Hash to curve (RFC 9380)")
struct HashToCurveTests {
    static func vectors(_ name: String) throws -> [String: Any] {
        let url = Fixtures.repositoryRoot.appendingPathComponent("Tests/SparkCryptoTests/Vectors/\(name).json")
        return try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    static func hex(_ text: Any?) -> Data {
        let text = text as? String ?? ""
        return Data(hex: text.hasPrefix("0x") ? String(text.dropFirst(2)) : text)
    }

    @Test(arguments: ["expand_message_xmd_SHA256_38", "expand_message_xmd_SHA256_256"])
    func expandMessageXMD(file: String) throws {
        let root = try Self.vectors(file)
        let tag = Data((root["DST"] as? String ?? "").utf8)
        let tests = try #require(root["tests"] as? [[String: Any]])
        #expect(tests.count == 10)
        for test in tests {
            let length = Int((test["len_in_bytes"] as? String ?? "").dropFirst(2), radix: 16) ?? 0
            let output = try HashToCurve.expandMessageXMD(
                Data((test["msg"] as? String ?? "").utf8), domain: tag, length: length, hash: .sha256)
            #expect(output.unsafeData() == Self.hex(test["uniform_bytes"]), "\(file) msg \(test["msg"] ?? "")")
        }
    }

    @Test(arguments: [("P256_XMD_SHA-256_SSWU_RO_", HashToCurve.Suite.p256), ("P384_XMD_SHA-384_SSWU_RO_", .p384)])
    func hashToCurve(file: String, suite: HashToCurve.Suite) throws {
        let root = try Self.vectors(file)
        #expect(root["ciphersuite"] as? String == suite.identifier)
        let tag = Data((root["dst"] as? String ?? "").utf8)
        let vectors = try #require(root["vectors"] as? [[String: Any]])
        #expect(vectors.count == 5)
        for vector in vectors {
            let message = Data((vector["msg"] as? String ?? "").utf8)
            let u = try HashToCurve.hashToField(message, domain: tag, count: 2, suite: suite)
            #expect(u == (vector["u"] as? [String] ?? []).map { Self.hex($0) }, "u for \(message.count) bytes")
            let point = try HashToCurve.hash(message, domain: tag, suite: suite)
            let expected = try #require(vector["P"] as? [String: String])
            #expect(point.x == Self.hex(expected["x"]), "P.x for \(message.count) bytes")
            #expect(point.y == Self.hex(expected["y"]), "P.y for \(message.count) bytes")
        }
    }

    @Test func expandMessageRefusesWhatTheRFCForbids() {
        #expect(throws: CryptoError(.invalidParameter, "")) {
            try HashToCurve.expandMessageXMD(Data(), domain: Data("D".utf8), length: 255 * 32 + 1, hash: .sha256)
        }
        #expect(throws: CryptoError(.invalidParameter, "")) {
            try HashToCurve.expandMessageXMD(Data(), domain: Data("D".utf8), length: 0, hash: .sha256)
        }
    }
}

@Suite("OPRF (RFC 9497)")
struct OPRFTests {
    /// The suites and modes shipped; RFC 9497's other entries are counted as unsupported.
    static let shipped: [String: OPRF.Suite] = ["P256-SHA256": .p256SHA256, "P384-SHA384": .p384SHA384]

    static var vectorFile: URL {
        let directory =
            ProcessInfo.processInfo.environment["SPARK_OPRF_VECTORS_DIR"].map { URL(fileURLWithPath: $0) }
            ?? Fixtures.repositoryRoot.appendingPathComponent("Tests/Vectors/oprf")
        return directory.appendingPathComponent("allVectors.json")
    }

    static func entries() throws -> [[String: Any]] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: vectorFile)) as? [[String: Any]])
    }

    static func list(_ field: Any?) -> [Data] {
        (field as? String ?? "").split(separator: ",").map { Data(hex: String($0)) }
    }

    @Test func everyShippedVectorPasses() throws {
        var passed: [String: Int] = [:]
        var unsupported: [String: Int] = [:]
        for entry in try Self.entries() {
            let identifier = entry["identifier"] as? String ?? ""
            let modeNumber = entry["mode"] as? Int ?? -1
            let vectors = entry["vectors"] as? [[String: Any]] ?? []
            let name = "\(identifier) mode \(modeNumber)"
            guard let suite = Self.shipped[identifier], let mode = OPRF.Mode(rawValue: UInt8(modeNumber)) else {
                unsupported[name] = vectors.count
                continue
            }
            let oprf = OPRF(suite: suite, mode: mode)
            let key = try oprf.deriveKey(
                seed: Data(hex: entry["seed"] as? String ?? ""), info: Data(hex: entry["keyInfo"] as? String ?? ""))
            #expect(key.withUnsafeBytes { Data($0) } == Data(hex: entry["skSm"] as? String ?? ""), "\(name) skSm")
            if let publicKey = entry["pkSm"] as? String { #expect(key.publicKey == Data(hex: publicKey), "\(name) pkSm") }
            for vector in vectors {
                let inputs = Self.list(vector["Input"])
                let blinds = Self.list(vector["Blind"])
                let blinded = try zip(inputs, blinds).map { try oprf.blind($0, unsafeBlind: $1) }
                #expect(blinded.map(\.element) == Self.list(vector["BlindedElement"]), "\(name) BlindedElement")
                let proof = vector["Proof"] as? [String: String]
                let evaluation = try oprf.blindEvaluate(
                    blinded.map(\.element), key: key, unsafeProofRandom: proof.map { Data(hex: $0["r"] ?? "") })
                #expect(evaluation.elements == Self.list(vector["EvaluationElement"]), "\(name) EvaluationElement")
                #expect(evaluation.proof == proof.map { Data(hex: $0["proof"] ?? "") }, "\(name) proof")
                let outputs = try oprf.finalize(blinded, evaluation, publicKey: key.publicKey).map { $0.unsafeData() }
                #expect(outputs == Self.list(vector["Output"]), "\(name) Output")
                #expect(try inputs.map { try oprf.evaluate($0, key: key).unsafeData() } == outputs, "\(name) Evaluate")
                passed[name, default: 0] += 1
            }
        }
        print(
            "OPRF vectors passed: \(passed.sorted { $0.key < $1.key }); unsupported (not run): \(unsupported.sorted { $0.key < $1.key })"
        )
        #expect(passed == ["P256-SHA256 mode 0": 2, "P256-SHA256 mode 1": 3, "P384-SHA384 mode 0": 2, "P384-SHA384 mode 1": 3])
    }

    // MARK: What a client or a server must refuse

    static let oprf = OPRF.passcodeHardening

    static func key(_ info: String = "alice") throws -> OPRF.PrivateKey {
        try oprf.deriveKey(seed: Data(repeating: 7, count: 32), info: Data(info.utf8))
    }

    @Test func aProofFromAnotherKeyIsRefused() throws {
        let blinded = try Self.oprf.blind(Data("passcode".utf8))
        let evaluation = try Self.oprf.blindEvaluate([blinded.element], key: try Self.key("mallory"))
        #expect(throws: CryptoError(.invalidSignature, "")) {
            try Self.oprf.finalize([blinded], evaluation, publicKey: try Self.key().publicKey)
        }
    }

    @Test func aTamperedEvaluationOrProofIsRefused() throws {
        let key = try Self.key()
        let blinded = try Self.oprf.blind(Data("passcode".utf8))
        let honest = try Self.oprf.blindEvaluate([blinded.element], key: key)
        var proof = try #require(honest.proof)
        proof[proof.count - 1] ^= 1
        #expect(throws: CryptoError(.invalidSignature, "")) {
            try Self.oprf.finalize([blinded], .init(elements: honest.elements, proof: proof), publicKey: key.publicKey)
        }
        // Another valid point in place of the evaluation: the proof no longer matches.
        let other = try Self.oprf.blindEvaluate([try Self.oprf.blind(Data("x".utf8)).element], key: key)
        #expect(throws: CryptoError(.invalidSignature, "")) {
            try Self.oprf.finalize([blinded], .init(elements: other.elements, proof: honest.proof), publicKey: key.publicKey)
        }
        #expect(throws: CryptoError(.invalidParameter, "")) {
            try Self.oprf.finalize([blinded], .init(elements: honest.elements, proof: nil), publicKey: key.publicKey)
        }
        #expect(throws: CryptoError(.malformedInput, "")) {
            try Self.oprf.finalize([blinded], .init(elements: honest.elements, proof: proof.dropLast()), publicKey: key.publicKey)
        }
        // A proof scalar at or above the group order is not a scalar.
        #expect(throws: CryptoError(.malformedInput, "")) {
            try Self.oprf.finalize(
                [blinded], .init(elements: honest.elements, proof: Data(repeating: 0xff, count: 64)), publicKey: key.publicKey)
        }
        #expect(try Self.oprf.finalize([blinded], honest, publicKey: key.publicKey).count == 1)
    }

    @Test func aServerRefusesElementsThatAreNotPoints() throws {
        let key = try Self.key()
        let good = try Self.oprf.blind(Data("passcode".utf8)).element
        var offCurve = good
        offCurve[5] ^= 0x40
        let hostile: [Data] = [
            Data([0x00]),  // the identity, SEC1's point at infinity
            Data(), good.dropLast(), good + [0], Data([0x04]) + good.dropFirst(),
            Data([0x02]) + Data(repeating: 0xff, count: 32),  // x above the field prime
        ]
        for element in hostile + [offCurve] where element != good {
            do {
                _ = try Self.oprf.blindEvaluate([element], key: key)
                // A flipped bit can land on another x with a point; it must then be a valid one.
                #expect(element == offCurve, "\(element.hexString) was evaluated")
            } catch let error as CryptoError {
                #expect(error.code == .malformedInput, "\(element.hexString): \(error)")
            }
        }
        #expect(throws: CryptoError(.invalidParameter, "")) { try Self.oprf.blindEvaluate([], key: key) }
    }

    @Test func keysAreBoundToTheirSuiteAndMode() throws {
        let base = OPRF(suite: .p256SHA256, mode: .oprf)
        let key = try base.deriveKey(seed: Data(repeating: 1, count: 32), info: Data())
        #expect(throws: CryptoError(.invalidKey, "")) {
            try Self.oprf.blindEvaluate([try Self.oprf.blind(Data()).element], key: key)
        }
        #expect(throws: CryptoError(.invalidParameter, "")) { try Self.oprf.deriveKey(seed: Data(count: 31), info: Data()) }
        #expect(throws: CryptoError(.invalidKey, "")) { try Self.oprf.privateKey(rawRepresentation: Data(count: 32)) }
        #expect(throws: CryptoError(.malformedInput, "")) { try Self.oprf.privateKey(rawRepresentation: Data(count: 31)) }
        let raw = try Self.key().withUnsafeBytes { Data($0) }
        #expect(try Self.oprf.privateKey(rawRepresentation: raw).publicKey == (try Self.key()).publicKey)
    }

    @Test func randomBlindsGiveTheSameOutput() throws {
        let key = try Self.key()
        let outputs = try (0..<3).map { _ in
            let blinded = try Self.oprf.blind(Data("passcode".utf8))
            return try Self.oprf.finalize(
                [blinded], try Self.oprf.blindEvaluate([blinded.element], key: key), publicKey: key.publicKey)[0]
        }
        #expect(Set(outputs.map { $0.unsafeData() }).count == 1)
        #expect(outputs[0] == (try Self.oprf.evaluate(Data("passcode".utf8), key: key)))
        #expect(outputs[0] != (try Self.oprf.evaluate(Data("passcode".utf8), key: try Self.key("bob"))))
    }
}

/// Interop with PyPI's `voprf` (RFC 9497, P384-SHA384: the only NIST suite on PyPI), both ways:
/// its server with our client, our server with its client, and the PRF compared directly.
/// `scripts/bootstrap.sh` installs it; without it these tests fail saying so.
@Suite("OPRF interop with voprf")
struct OPRFInteropTests {
    static let oprf = OPRF(suite: .p384SHA384, mode: .verifiable)
    static let seed = Data((0..<32).map { UInt8($0) })
    static let info = Data("spark interop".utf8)

    static func python(_ arguments: [String]) async throws -> String {
        try await Fixtures.python("Tests/SparkCryptoTests/Python/oprf_peer.py", arguments)
    }

    @Test func theSameKeyAndTheSamePRF() async throws {
        let key = try Self.oprf.deriveKey(seed: Self.seed, info: Self.info)
        #expect(try await Self.python(["public-key", Self.seed.hexString, Self.info.hexString]) == key.publicKey.hexString)
        let input = Data("correct horse".utf8)
        #expect(
            try await Self.python(["output", Self.seed.hexString, Self.info.hexString, input.hexString])
                == (try Self.oprf.evaluate(input, key: key)).unsafeData().hexString)
    }

    @Test func itsServerOurClient() async throws {
        let key = try Self.oprf.deriveKey(seed: Self.seed, info: Self.info)
        let input = Data("battery staple".utf8)
        let blinded = try Self.oprf.blind(input)
        let answer = try await Self.python(["evaluate", Self.seed.hexString, Self.info.hexString, blinded.element.hexString])
            .split(separator: " ").map { Data(hex: String($0)) }
        try #require(answer.count == 2)
        let evaluation = OPRF.Evaluation(elements: [answer[0]], proof: answer[1])
        let output = try Self.oprf.finalize([blinded], evaluation, publicKey: key.publicKey)[0]
        #expect(output == (try Self.oprf.evaluate(input, key: key)))
        let stranger = try Self.oprf.deriveKey(seed: Data(repeating: 9, count: 32), info: Self.info)
        #expect(throws: CryptoError(.invalidSignature, "")) {
            try Self.oprf.finalize([blinded], evaluation, publicKey: stranger.publicKey)
        }
    }

    @Test func ourServerItsClient() async throws {
        let key = try Self.oprf.deriveKey(seed: Self.seed, info: Self.info)
        let input = Data("tr0ub4dor".utf8)
        let expected = try Self.oprf.evaluate(input, key: key).unsafeData().hexString
        #expect(try await Self.client(input: input, publicKey: key.publicKey, evaluator: key) == expected)
        // Evaluated with another key, its client refuses our proof.
        let other = try Self.oprf.deriveKey(seed: Data(repeating: 9, count: 32), info: Self.info)
        await #expect(throws: PythonPeerError.self) {
            try await Self.client(input: input, publicKey: key.publicKey, evaluator: other)
        }
    }

    /// Runs the peer's client: it prints its blinded element, we answer with our evaluation.
    static func client(input: Data, publicKey: Data, evaluator: OPRF.PrivateKey) async throws -> String {
        try await Fixtures.onThread { Result { try runClient(input: input, publicKey: publicKey, evaluator: evaluator) } }.get()
    }

    static func runClient(input: Data, publicKey: Data, evaluator: OPRF.PrivateKey) throws -> String {
        do {
            let script = Fixtures.repositoryRoot.appendingPathComponent("Tests/SparkCryptoTests/Python/oprf_peer.py").path
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script, "client", input.hexString, publicKey.hexString]
            let (stdin, stdout, stderr) = (Pipe(), Pipe(), Pipe())
            (process.standardInput, process.standardOutput, process.standardError) = (stdin, stdout, stderr)
            try process.run()
            var line = Data()
            while let byte = try stdout.fileHandleForReading.read(upToCount: 1), let first = byte.first, first != 10 {
                line.append(first)
            }
            let blinded = Data(hex: String(decoding: line, as: UTF8.self))
            let evaluation = try oprf.blindEvaluate([blinded], key: evaluator)
            let reply = "\(evaluation.elements[0].hexString) \(evaluation.proof?.hexString ?? "")\n"
            try stdin.fileHandleForWriting.write(contentsOf: Data(reply.utf8))
            try stdin.fileHandleForWriting.close()
            let output = stdout.fileHandleForReading.readDataToEndOfFile()
            let errors = stderr.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw PythonPeerError(script: "oprf_peer.py client", stderr: String(decoding: errors, as: UTF8.self))
            }
            return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }
}
