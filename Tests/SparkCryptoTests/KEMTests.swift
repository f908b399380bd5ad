import CSparkKEM
import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

/// ML-KEM-768 and X-Wing held to every outside source there is (the files in
/// `Tests/Vectors/mlkem/`, with their sources and licences in `Tests/Vectors/README.md`), to
/// OpenSSL's ML-KEM through pyca/cryptography both ways, and to the attacks the standard's checks
/// exist for.
@Suite("ML-KEM-768 and X-Wing")
struct KEMTests {
    static let directory = Fixtures.repositoryRoot.appendingPathComponent("Tests/Vectors/mlkem")
    static let peer = "Tests/SparkCryptoTests/Python/kem_peer.py"

    static func json(_ name: String) throws -> [[String: Any]] {
        let data = try Data(contentsOf: directory.appendingPathComponent(name))
        let file = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let groups = try #require(file["testGroups"] as? [[String: Any]])
        return groups.flatMap { ($0["tests"] as? [[String: Any]]) ?? [] }
    }

    static func hex(_ test: [String: Any], _ key: String) -> Data { Data(hex: test[key] as? String ?? "") }

    /// `name = hex` lines of a C2SP file, in order (`name = other name = hex` gives the first
    /// name and the hex).
    static func lines(_ name: String) throws -> [(key: String, value: String)] {
        try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8).split(separator: "\n").compactMap {
            let parts = $0.split(separator: "=").map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count >= 2, let value = parts.last else { return nil }
            return (parts[0], value)
        }
    }

    // MARK: Wycheproof

    /// Key generation from the seed `d ‖ z`: the encapsulation and expanded decapsulation keys.
    @Test func wycheproofKeyGeneration() throws {
        let tests = try Self.json("mlkem_768_keygen_seed_test.json")
        #expect(tests.count == 100)
        for test in tests {
            let key = try MLKEM768.PrivateKey(seed: SecureBytes(Self.hex(test, "seed")))
            #expect(key.publicKey.rawRepresentation == Self.hex(test, "ek"), "tcId \(test["tcId"] ?? "")")
            #expect(key.expandedRepresentation.unsafeData() == Self.hex(test, "dk"), "tcId \(test["tcId"] ?? "")")
        }
    }

    /// Decapsulation from a seed (the strcmp case among them): valid tests give `K`; invalid
    /// ones (a seed or ciphertext of the wrong length) are refused, never answered.
    @Test func wycheproofDecapsulation() throws {
        var (valid, refused) = (0, 0)
        for test in try Self.json("mlkem_768_test.json") {
            let id = "tcId \(test["tcId"] ?? "")"
            let outcome = Result {
                let key = try MLKEM768.PrivateKey(seed: SecureBytes(Self.hex(test, "seed")))
                if test["ek"] != nil { #expect(key.publicKey.rawRepresentation == Self.hex(test, "ek"), "\(id)") }
                return try key.decapsulate(Self.hex(test, "c")).unsafeData()
            }
            if test["result"] as? String == "valid" {
                #expect(try outcome.get() == Self.hex(test, "K"), "\(id)")
                valid += 1
            } else {
                #expect(throws: CryptoError.self, "\(id)") { try outcome.get() }
                refused += 1
            }
        }
        #expect(valid == 153 && refused == 40)
    }

    /// Encapsulation with a given `m`: valid tests give `c` and `K`; keys of the wrong length
    /// or with a coefficient not below q are refused (§7.2's modulus check).
    @Test func wycheproofEncapsulation() throws {
        var (valid, refused) = (0, 0)
        for test in try Self.json("mlkem_768_encaps_test.json") {
            let id = "tcId \(test["tcId"] ?? "")"
            let outcome = Result {
                try MLKEM768.PublicKey(rawRepresentation: Self.hex(test, "ek")).encapsulate(
                    unsafeRandomness: SecureBytes(Self.hex(test, "m")))
            }
            if test["result"] as? String == "valid" {
                let (secret, ciphertext) = try outcome.get()
                #expect(ciphertext == Self.hex(test, "c") && secret.unsafeData() == Self.hex(test, "K"), "\(id)")
                valid += 1
            } else {
                #expect(throws: CryptoError.self, "\(id)") { try outcome.get() }
                refused += 1
            }
        }
        #expect(valid == 133 && refused == 132)
    }

    /// Decapsulation with an expanded key: wrong lengths and a key whose hash or embedded
    /// encapsulation key was changed are refused (§7.3's hash check); the malleable ciphertexts,
    /// which a comparison of part of the re-encryption would accept, give the rejection secret.
    @Test func wycheproofExpandedKeys() throws {
        let tests = try Self.json("mlkem_768_semi_expanded_decaps_test.json")
        #expect(tests.count == 9)
        for test in tests {
            let id = "tcId \(test["tcId"] ?? "")"
            let outcome = Result {
                try MLKEM768.PrivateKey(expandedRepresentation: Self.hex(test, "dk")).decapsulate(Self.hex(test, "c"))
                    .unsafeData()
            }
            if test["result"] as? String == "valid" {
                #expect(try outcome.get() == Self.hex(test, "K"), "\(id)")
            } else {
                #expect(throws: CryptoError.self, "\(id)") { try outcome.get() }
            }
        }
    }

    // MARK: NIST ACVP

    /// NIST's ACVP key generation (FIPS 203): 25 pairs of `d`, `z` and their keys.
    @Test func acvpKeyGeneration() throws {
        let tests = try Self.json("acvp-ml-kem-keyGen-768.json")
        #expect(tests.count == 25)
        for test in tests {
            let key = try MLKEM768.PrivateKey(seed: SecureBytes(Self.hex(test, "d") + Self.hex(test, "z")))
            #expect(key.publicKey.rawRepresentation == Self.hex(test, "ek"), "tcId \(test["tcId"] ?? "")")
            #expect(key.expandedRepresentation.unsafeData() == Self.hex(test, "dk"), "tcId \(test["tcId"] ?? "")")
        }
    }

    /// NIST's ACVP encapsulation and decapsulation (FIPS 203): encapsulations with given `m`;
    /// decapsulations from a seed and from an expanded key, of valid and modified ciphertexts
    /// (the implicit rejection's secret); and the two key checks, which pass exactly the keys
    /// ACVP says pass.
    @Test func acvpEncapsulationDecapsulation() throws {
        let data = try Data(contentsOf: Self.directory.appendingPathComponent("acvp-ml-kem-encapDecap-768.json"))
        let file = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let groups = try #require(file["testGroups"] as? [[String: Any]])
        var checked: [String: Int] = [:]
        for group in groups {
            let function = group["function"] as? String ?? ""
            for test in group["tests"] as? [[String: Any]] ?? [] {
                let id = "\(function) tcId \(test["tcId"] ?? "")"
                switch (function, group["keyFormat"] as? String) {
                case ("encapsulation", _):
                    let (secret, ciphertext) = try MLKEM768.PublicKey(rawRepresentation: Self.hex(test, "ek")).encapsulate(
                        unsafeRandomness: SecureBytes(Self.hex(test, "m")))
                    #expect(ciphertext == Self.hex(test, "c") && secret.unsafeData() == Self.hex(test, "k"), "\(id)")
                case ("decapsulation", "seed"):
                    let key = try MLKEM768.PrivateKey(seed: SecureBytes(Self.hex(test, "d") + Self.hex(test, "z")))
                    #expect(try key.decapsulate(Self.hex(test, "c")).unsafeData() == Self.hex(test, "k"), "\(id)")
                case ("decapsulation", _):
                    let key = try MLKEM768.PrivateKey(expandedRepresentation: Self.hex(test, "dk"))
                    #expect(try key.decapsulate(Self.hex(test, "c")).unsafeData() == Self.hex(test, "k"), "\(id)")
                case ("decapsulationKeyCheck", _):
                    let passed = (try? MLKEM768.PrivateKey(expandedRepresentation: Self.hex(test, "dk"))) != nil
                    #expect(passed == (test["testPassed"] as? Bool), "\(id)")
                case ("encapsulationKeyCheck", _):
                    let passed = (try? MLKEM768.PublicKey(rawRepresentation: Self.hex(test, "ek"))) != nil
                    #expect(passed == (test["testPassed"] as? Bool), "\(id)")
                default:
                    Issue.record("an ACVP group of an unknown function: \(function)")
                }
                checked[function, default: 0] += 1
            }
        }
        #expect(
            checked == [
                "encapsulation": 25, "decapsulation": 20, "decapsulationKeyCheck": 10, "encapsulationKeyCheck": 10,
            ])
    }

    // MARK: C2SP CCTV

    /// C2SP's ML-KEM vectors were made for FIPS 203's draft (with the XOF's final argument
    /// order), before the final standard put the parameter byte into key generation's
    /// G(d ‖ k): their keys come from the draft's key generation (`_derand_draft`, for these
    /// vectors only), and everything else (encapsulation, decapsulation, implicit rejection,
    /// the checks) is the final standard's, which did not change them.
    static func draftKey(d: Data, z: Data) throws -> MLKEM768.PrivateKey {
        var ek = [UInt8](repeating: 0, count: MLKEM768.publicKeyByteCount)
        var dk = [UInt8](repeating: 0, count: MLKEM768.expandedPrivateKeyByteCount)
        let status = d.withUnsafeBytes { d in
            z.withUnsafeBytes { z in
                spark_mlkem768_keygen_derand_draft(
                    &ek, &dk, d.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    z.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        try #require(status == 0)
        let key = try MLKEM768.PrivateKey(expandedRepresentation: Data(dk))
        try #require(key.publicKey.rawRepresentation == Data(ek))
        return key
    }

    /// Every value of one run of the algorithms, as C2SP's intermediate file gives it: the keys,
    /// the ciphertext and the secret, and the implicit rejection's secret for a changed
    /// ciphertext (`KBar`).
    @Test func cctvIntermediateValues() throws {
        var values: [String: Data] = [:]
        for (key, value) in try Self.lines("cctv-intermediate-768.txt") where !value.hasPrefix("{") {
            if values[key] == nil { values[key] = Data(hex: value) }
        }
        let key = try Self.draftKey(d: try #require(values["d"]), z: try #require(values["z"]))
        #expect(key.publicKey.rawRepresentation == values["ek"])
        #expect(key.expandedRepresentation.unsafeData() == values["dk"])
        let (secret, ciphertext) = try key.publicKey.encapsulate(unsafeRandomness: SecureBytes(try #require(values["m"])))
        #expect(ciphertext == values["c"] && secret.unsafeData() == values["K"])
        #expect(try key.decapsulate(ciphertext).unsafeData() == values["K"])
    }

    /// Seeds whose matrix needs more than 575 bytes of SHAKE128 (about 2^-38 of seeds): the
    /// sampler reads on past its first squeeze.
    @Test func cctvUnluckySampling() throws {
        var values: [String: Data] = [:]
        for (key, value) in try Self.lines("cctv-unlucky-768.txt") { values[key] = Data(hex: value) }
        let key = try Self.draftKey(d: try #require(values["d"]), z: try #require(values["z"]))
        #expect(key.publicKey.rawRepresentation == values["ek"])
        #expect(key.expandedRepresentation.unsafeData() == values["dk"])
        let (secret, ciphertext) = try key.publicKey.encapsulate(unsafeRandomness: SecureBytes(try #require(values["m"])))
        #expect(ciphertext == values["c"] && secret.unsafeData() == values["K"])
    }

    /// Ciphertexts whose re-encryption differs only after a zero byte: a `strcmp` would accept
    /// them; the rejection secret is the answer.
    @Test func cctvStrcmp() throws {
        var values: [String: Data] = [:]
        for (key, value) in try Self.lines("cctv-strcmp-768.txt") { values[key] = Data(hex: value) }
        let key = try MLKEM768.PrivateKey(expandedRepresentation: try #require(values["dk"]))
        #expect(try key.decapsulate(try #require(values["c"])).unsafeData() == values["K"])
    }

    /// Every value from q to 4095 at every position of an encapsulation key: each is refused.
    @Test func cctvModulusCheck() async throws {
        let path = Self.directory.appendingPathComponent("cctv-modulus-768.txt.gz").path
        let text = try await Fixtures.run(URL(fileURLWithPath: "/usr/bin/env"), ["gzip", "-dc", path])
        try #require(text.status == 0)
        let keys = text.stdout.split(separator: "\n")
        #expect(keys.count >= 768)
        for line in keys {
            #expect(throws: CryptoError.self) { try MLKEM768.PublicKey(rawRepresentation: Data(hex: String(line))) }
        }
    }

    /// C2SP's accumulated test: 10,000 key pairs, encapsulations and decapsulations (of the real
    /// ciphertext and of a random one) from a SHAKE128 stream, everything they output hashed
    /// with SHAKE128 to the digest C2SP publishes for ML-KEM-768.
    @Test func cctvAccumulatedTenThousand() throws {
        let count = 10_000
        let draws = 32 + 32 + 32 + MLKEM768.ciphertextByteCount
        let source = try SHAKE(.shake128)
        let stream = try source.finalize(count: count * draws).unsafeData()
        var accumulated = try SHAKE(.shake128)
        for index in 0..<count {
            let base = stream.startIndex + index * draws
            let d = stream[base..<(base + 32)]
            let z = stream[(base + 32)..<(base + 64)]
            let m = stream[(base + 64)..<(base + 96)]
            let random = stream[(base + 96)..<(base + draws)]
            let key = try Self.draftKey(d: Data(d), z: Data(z))
            let (secret, ciphertext) = try key.publicKey.encapsulate(unsafeRandomness: SecureBytes(m))
            try #require(try key.decapsulate(ciphertext).unsafeData() == secret.unsafeData(), "test \(index)")
            try accumulated.update(key.publicKey.rawRepresentation)
            try accumulated.update(key.expandedRepresentation.unsafeData())
            try accumulated.update(ciphertext)
            try accumulated.update(secret.unsafeData())
            try accumulated.update(try key.decapsulate(Data(random)).unsafeData())
        }
        #expect(
            try accumulated.finalize(count: 32).unsafeData().hexString
                == "f7db260e1137a742e05fe0db9525012812b004d29040a5b606aad3d134b548d3")
    }

    // MARK: X-Wing

    /// The X-Wing draft's vectors: the public key from the seed, the ciphertext and secret from
    /// `eseed`, and decapsulation.
    @Test func xWingDraftVectors() throws {
        let data = try Data(contentsOf: Self.directory.appendingPathComponent("xwing-test-vectors.json"))
        let vectors = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: String]])
        #expect(vectors.count == 3)
        for vector in vectors {
            let value = { (key: String) in Data(hex: vector[key] ?? "") }
            let key = try XWing.PrivateKey(seed: SecureBytes(value("seed")))
            #expect(key.seed.unsafeData() == value("sk"))
            #expect(key.publicKey.rawRepresentation == value("pk"))
            let (secret, ciphertext) = try key.publicKey.encapsulate(unsafeRandomness: SecureBytes(value("eseed")))
            #expect(ciphertext == value("ct") && secret.unsafeData() == value("ss"))
            #expect(try key.decapsulate(value("ct")).unsafeData() == value("ss"))
        }
    }

    // MARK: Attacks

    /// What an attacker sends instead: a changed ciphertext gives a secret unrelated to the real
    /// one (and the same one again for the same ciphertext: the rejection is deterministic); an
    /// encapsulation key with a coefficient of q or more and an expanded key whose hash was
    /// changed are refused before use; ciphertexts and keys of the wrong length are refused.
    @Test func tamperedInputsAreRejected() throws {
        let key = try MLKEM768.PrivateKey()
        let (secret, ciphertext) = try key.publicKey.encapsulate()
        for position in [0, 500, 959, 960, 1087] {
            var changed = ciphertext
            changed[position] ^= 0x01
            let rejected = try key.decapsulate(changed).unsafeData()
            #expect(rejected != secret.unsafeData())
            #expect(try key.decapsulate(changed).unsafeData() == rejected)
        }
        var overflowing = key.publicKey.rawRepresentation
        overflowing[0] = 0xff
        overflowing[1] |= 0x0f  // the first coefficient is 4095
        #expect(throws: CryptoError(.invalidKey, "")) { try MLKEM768.PublicKey(rawRepresentation: overflowing) }
        var expanded = key.expandedRepresentation.unsafeData()
        expanded[2336] ^= 1  // H(ek)
        #expect(throws: CryptoError(.invalidKey, "")) { try MLKEM768.PrivateKey(expandedRepresentation: expanded) }
        #expect(throws: CryptoError.self) { try key.decapsulate(ciphertext.dropLast()) }
        #expect(throws: CryptoError.self) { try MLKEM768.PublicKey(rawRepresentation: Data(count: 1183)) }
        let xwing = try XWing.PrivateKey()
        let (xSecret, xCiphertext) = try xwing.publicKey.encapsulate()
        var changed = xCiphertext
        changed[1100] ^= 1  // the X25519 half
        #expect(try xwing.decapsulate(changed).unsafeData() != xSecret.unsafeData())
        #expect(throws: CryptoError.self) { try xwing.decapsulate(xCiphertext.dropLast()) }
    }

    // MARK: Constant time

    /// `scripts/check-kem-ct.sh`: the library built at -O1, -O2 and -O3 and run under valgrind
    /// with every secret undefined (key generation, encapsulation, decapsulation of a real and
    /// of a changed ciphertext, X-Wing's three) takes no branch and reads no address that
    /// depends on a secret, and no division or remainder by q is in its source.
    @Test func noBranchAddressOrDivisionDependsOnASecret() async throws {
        let script = Fixtures.repositoryRoot.appendingPathComponent("scripts/check-kem-ct.sh").path
        let result = try await Fixtures.run(URL(fileURLWithPath: "/usr/bin/env"), ["bash", script])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.components(separatedBy: "no secret-dependent branch or address").count == 4)
    }

    // MARK: Against OpenSSL's ML-KEM (pyca/cryptography)

    /// Random keys both ways: pyca's key from our seed is ours; pyca encapsulates to our key and
    /// we decapsulate; we encapsulate to pyca's key and pyca decapsulates.
    @Test func roundTripsWithPyca() async throws {
        for _ in 0..<4 {
            let key = try MLKEM768.PrivateKey()
            let seed = key.seed.unsafeData().hexString
            #expect(try await Fixtures.python(Self.peer, ["keygen", seed]) == key.publicKey.rawRepresentation.hexString)
            let theirs = try await Fixtures.python(Self.peer, ["encaps", key.publicKey.rawRepresentation.hexString])
                .split(separator: " ").map { Data(hex: String($0)) }
            try #require(theirs.count == 2)
            #expect(try key.decapsulate(theirs[1]).unsafeData() == theirs[0])
            let (secret, ciphertext) = try key.publicKey.encapsulate()
            #expect(
                try await Fixtures.python(Self.peer, ["decaps", seed, ciphertext.hexString]) == secret.unsafeData().hexString)
        }
    }

    /// HPKE with X-Wing (KEM 0x647A, HKDF-SHA256, AES-128-GCM) both ways with pyca's HPKE, whose
    /// X-Wing is OpenSSL's; and a sealed message changed on the way is refused by both.
    @Test func hpkeWithXWingAgainstPyca() async throws {
        let suite = HPKE.Suite(kem: .xWing, aead: .aes128GCM)
        let key = try XWing.PrivateKey()
        let info = Data("spark x-wing".utf8)
        let plaintext = Data("a message only this key opens".utf8)
        let sealed = Data(
            hex: try await Fixtures.python(
                Self.peer, ["hpke-seal", key.publicKey.rawRepresentation.hexString, info.hexString, plaintext.hexString]))
        try #require(sealed.count == XWing.ciphertextByteCount + plaintext.count + 16)
        let opened = try HPKE.openBase(
            suite: suite, privateKey: key, encapsulatedKey: sealed.prefix(XWing.ciphertextByteCount), info: info,
            authenticating: Data(), ciphertext: sealed.dropFirst(XWing.ciphertextByteCount))
        #expect(opened.unsafeData() == plaintext)

        let (enc, ciphertext) = try HPKE.sealBase(
            suite: suite, recipient: key.publicKey, info: info, authenticating: Data(), plaintext: plaintext)
        #expect(
            try await Fixtures.python(
                Self.peer, ["hpke-open", key.seed.unsafeData().hexString, info.hexString, (enc + ciphertext).hexString])
                == plaintext.hexString)
        var damaged = enc + ciphertext
        damaged[5] ^= 1
        await #expect(throws: PythonPeerError.self) {
            try await Fixtures.python(
                Self.peer, ["hpke-open", key.seed.unsafeData().hexString, info.hexString, damaged.hexString])
        }
        #expect(throws: CryptoError.self) {
            try HPKE.openBase(
                suite: suite, privateKey: key, encapsulatedKey: damaged.prefix(XWing.ciphertextByteCount), info: info,
                authenticating: Data(), ciphertext: damaged.dropFirst(XWing.ciphertextByteCount))
        }
        // A suite of one KEM refuses keys of the other.
        #expect(throws: CryptoError.self) {
            try HPKE.Sender(suite: .x25519SHA256AES128GCM, recipient: key.publicKey, info: info)
        }
        // DeriveKeyPair: the seed SHAKE256(ikm, 32).
        let derived = try HPKE.deriveXWingKeyPair(inputKeyMaterial: Data("ikm".utf8))
        #expect(derived.seed.unsafeData() == (try SHAKE.hash(.shake256, Data("ikm".utf8), count: 32)).unsafeData())
    }
}
