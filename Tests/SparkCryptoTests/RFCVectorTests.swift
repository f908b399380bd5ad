import Foundation
import SparkCrypto
import SparkLock
import SparkTestSupport
import Testing

/// The RFCs' own test vectors.
@Suite("RFC vectors")
struct RFCVectorTests {
    // RFC 7914 §11: PBKDF2-HMAC-SHA256.
    @Test(arguments: [
        (
            "passwd", "salt", 1,
            "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783"
        ),
        (
            "Password", "NaCl", 80000,
            "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56a1d425a1225833549adb841b51c9b3176a272bdebba1d078478f62b397f33c8d"
        ),
    ])
    func pbkdf2RFC7914(password: String, salt: String, rounds: Int, expected: String) throws {
        let key = try PBKDF2.deriveKey(
            fromPassword: Data(password.utf8), salt: Data(salt.utf8), hash: .sha256, outputByteCount: 64,
            unsafeUncheckedRounds: rounds)
        #expect(key.unsafeData().hex == expected)
    }

    @Test func pbkdf2RefusesLowRoundsWithoutTheEscapeHatch() {
        #expect(throws: CryptoError(.weakParameters, "")) {
            try PBKDF2.deriveKey(
                fromPassword: Data("pw".utf8), salt: Data("salt".utf8), hash: .sha512, outputByteCount: 32, rounds: 80_000)
        }
        #expect(throws: CryptoError(.invalidParameter, "")) {
            try PBKDF2.deriveKey(
                fromPassword: Data("pw".utf8), salt: Data("salt".utf8), hash: .sha512, outputByteCount: 32,
                unsafeUncheckedRounds: 0)
        }
        #expect(throws: CryptoError(.invalidParameter, "")) {
            try PBKDF2.deriveKey(
                fromPassword: Data("pw".utf8), salt: Data("salt".utf8), hash: .sha512, outputByteCount: 0,
                unsafeUncheckedRounds: 1)
        }
    }

    // RFC 5869 Appendix A.1–A.3 (SHA-256).
    @Test(arguments: [
        (
            "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "000102030405060708090a0b0c", "f0f1f2f3f4f5f6f7f8f9", 42,
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
        ),
        (
            "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f",
            "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aaabacadaeaf",
            "b0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",
            82,
            "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87"
        ),
        (
            "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "", "", 42,
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
        ),
    ])
    func hkdfRFC5869(ikm: String, salt: String, info: String, length: Int, okm: String) throws {
        let key = try HKDF.deriveKey(
            inputKeyMaterial: Data(hex: ikm), salt: Data(hex: salt), info: Data(hex: info), outputByteCount: length, hash: .sha256
        )
        #expect(key.unsafeData().hex == okm)
    }

    @Test func hkdfRefusesOutputLongerThan255Blocks() {
        #expect(throws: CryptoError(.invalidParameter, "")) {
            try HKDF.deriveKey(
                inputKeyMaterial: Data([1]), salt: Data(), info: Data(), outputByteCount: 255 * 32 + 1, hash: .sha256)
        }
    }

    // RFC 7748 §5.2 and §6.1.
    @Test func x25519RFC7748() throws {
        let vectors = [
            (
                "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
                "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
                "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"
            ),
            (
                "4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
                "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
                "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"
            ),
        ]
        for (scalar, u, output) in vectors {
            let key = try X25519.PrivateKey(rawRepresentation: Data(hex: scalar))
            let shared = try key.sharedSecret(with: X25519.PublicKey(rawRepresentation: Data(hex: u)))
            #expect(shared.unsafeData().hex == output)
        }
        let alice = try X25519.PrivateKey(
            rawRepresentation: Data(hex: "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
        let bob = try X25519.PrivateKey(
            rawRepresentation: Data(hex: "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"))
        #expect(alice.publicKey.rawRepresentation.hex == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        #expect(bob.publicKey.rawRepresentation.hex == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        let shared = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
        #expect(try alice.sharedSecret(with: bob.publicKey).unsafeData().hex == shared)
        #expect(try bob.sharedSecret(with: alice.publicKey).unsafeData().hex == shared)
    }

    // RFC 7748 §5.2, the iterated test: after 1 and 1,000 iterations.
    @Test func x25519RFC7748Iterated() throws {
        var k = Data(hex: "0900000000000000000000000000000000000000000000000000000000000000")
        var u = k
        for iteration in 1...1000 {
            let result = try X25519.PrivateKey(rawRepresentation: k).sharedSecret(with: X25519.PublicKey(rawRepresentation: u))
            u = k
            k = result.unsafeData()
            if iteration == 1 { #expect(k.hex == "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079") }
        }
        #expect(k.hex == "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51")
    }

    // RFC 8032 §7.1, tests 1–3.
    @Test(arguments: [
        (
            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        ),
        (
            "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
            "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
        ),
        (
            "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
            "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
            "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"
        ),
    ])
    func ed25519RFC8032(secret: String, public: String, message: String, signature: String) throws {
        let key = try Ed25519.PrivateKey(rawRepresentation: Data(hex: secret))
        #expect(key.publicKey.rawRepresentation.hex == `public`)
        let signed = try key.signature(for: Data(hex: message))
        #expect(signed.hex == signature)
        let publicKey = try Ed25519.PublicKey(rawRepresentation: Data(hex: `public`))
        #expect(publicKey.isValidSignature(signed, for: Data(hex: message)))
        var altered = signed
        altered[0] ^= 1
        #expect(!publicKey.isValidSignature(altered, for: Data(hex: message)))
        #expect(!publicKey.isValidSignature(signed, for: Data(hex: message) + [0]))
        #expect(!publicKey.isValidSignature(signed.prefix(63), for: Data(hex: message)))
    }

    // RFC 3394 §4.1, §4.3, §4.6.
    @Test(arguments: [
        (
            "000102030405060708090A0B0C0D0E0F", "00112233445566778899AABBCCDDEEFF",
            "1FA68B0A8112B447AEF34BD8FB5A7B829D3E862371D2CFE5"
        ),
        (
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F", "00112233445566778899AABBCCDDEEFF",
            "64E8C3F9CE0F5BA263E9777905818A2A93C8191E7D6E8AE7"
        ),
        (
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F",
            "00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F",
            "28C9F404C4B810F4CBCCB35CFB87F8263F5786E2D80ED326CBC7F0E71A99F43BFB988B9B7A02DD21"
        ),
    ])
    func aesKeyWrapRFC3394(kek: String, keyData: String, wrapped: String) throws {
        let kek = SymmetricKey(data: Data(hex: kek))
        #expect(try AESKeyWrap.wrap(Data(hex: keyData), using: kek).hex == wrapped.lowercased())
        #expect(try AESKeyWrap.unwrap(Data(hex: wrapped), using: kek).unsafeData().hex == keyData.lowercased())
        var altered = Data(hex: wrapped)
        altered[altered.count - 1] ^= 0x80
        #expect(throws: CryptoError(.authenticationFailure, "")) { try AESKeyWrap.unwrap(altered, using: kek) }
    }

    @Test func aesKeyWrapGuards() {
        let kek = SymmetricKey(size: .bits256)
        #expect(throws: CryptoError(.invalidParameter, "")) { try AESKeyWrap.wrap(Data(count: 8), using: kek) }
        #expect(throws: CryptoError(.invalidParameter, "")) { try AESKeyWrap.wrap(Data(count: 20), using: kek) }
        #expect(throws: CryptoError(.malformedInput, "")) { try AESKeyWrap.unwrap(Data(count: 16), using: kek) }
        #expect(throws: CryptoError(.malformedInput, "")) { try AESKeyWrap.unwrap(Data(count: 41), using: kek) }
        #expect(throws: CryptoError(.invalidKey, "")) {
            try AESKeyWrap.wrap(Data(count: 16), using: SymmetricKey(data: Data(count: 20)))
        }
    }

    // FIPS 180-4 examples ("abc").
    @Test func sha2() {
        #expect(SHA256.hash(Data("abc".utf8)).hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA512.hash(Data("abc".utf8)).hex
                == "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
        )
        #expect(SHA256.hash(Data()).hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    /// SHA-256 keeps a context per thread: many threads at once, and threads that end (their
    /// context freed), each get the digest of what they hashed, never another thread's.
    @Test func sha256OnManyThreadsAndThreadsThatEnd() {
        let inputs = (0..<64).map { Data("message \($0)".utf8) + Data(repeating: UInt8($0), count: $0 * 7) }
        let expected = inputs.map { SHA256.hash($0) }
        let results = Locked([Data?](repeating: nil, count: inputs.count))
        DispatchQueue.concurrentPerform(iterations: inputs.count) { index in
            var digest = Data()
            for _ in 0..<50 { digest = SHA256.hash(inputs[index]) }
            results.withLock { $0[index] = digest }
        }
        #expect(results.withLock { $0 } == expected)
        let ended = DispatchGroup()
        let fromThreads = Locked([Data]())
        for index in 0..<8 {
            ended.enter()
            Thread.detachNewThread {
                let digest = SHA256.hash(inputs[index])
                fromThreads.withLock { $0.append(digest) }
                ended.leave()
            }
        }
        ended.wait()
        #expect(Set(fromThreads.withLock { $0 }) == Set(expected.prefix(8)))
        #expect(SHA256.hash(Data("abc".utf8)).hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    // RFC 4231 test case 2 ("what do ya want for nothing?").
    @Test func hmacRFC4231() {
        let key = Data("Jefe".utf8)
        let message = Data("what do ya want for nothing?".utf8)
        let mac = HMAC.authenticationCode(for: message, using: key, hash: .sha256)
        #expect(mac.hex == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(HMAC.isValidAuthenticationCode(mac, for: message, using: key, hash: .sha256))
        var altered = mac
        altered[5] ^= 1
        #expect(!HMAC.isValidAuthenticationCode(altered, for: message, using: key, hash: .sha256))
        #expect(!HMAC.isValidAuthenticationCode(mac.prefix(8), for: message, using: key, hash: .sha256))
    }

    /// SipHash-2-4: the paper's vector (key 00…0f, message 00…0e) and the reference
    /// implementation's first (the empty message); a key of another length is refused.
    @Test func sipHash24() throws {
        let hash = try SipHash24(key: SymmetricKey(data: Data(0..<16)))
        #expect(hash.value(of: Data(0..<15)) == 0xa129_ca61_49be_45e5)
        #expect(hash.value(of: Data()) == UInt64(littleEndian: 0x726f_db47_dd0e_0e31))
        #expect(hash.value(of: Data([1])) != hash.value(of: Data([2])))
        #expect(throws: CryptoError.self) { try SipHash24(key: SymmetricKey(size: .bits256)) }
    }
}
