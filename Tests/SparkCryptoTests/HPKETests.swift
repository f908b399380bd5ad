import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

/// HPKE (RFC 9180) base mode, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM: the RFC's
/// Appendix A.1 vector, and interop with PyPI's `pyhpke` both ways.
@Suite("HPKE (RFC 9180)")
struct HPKETests {
    static let suite = HPKE.Suite.x25519SHA256AES128GCM
    static let peer = "Tests/SparkCryptoTests/Python/hpke_peer.py"

    /// RFC 9180 Appendix A.1.1 (base mode), sequence number 0 and the first exports.
    @Test func rfcAppendixA1() throws {
        let info = Data(hex: "4f6465206f6e2061204772656369616e2055726e")
        let ephemeral = try HPKE.deriveKeyPair(
            suite: Self.suite, inputKeyMaterial: Data(hex: "7268600d403fce431561aef583ee1613527cff655c1343f29812e66706df3234"))
        let recipient = try HPKE.deriveKeyPair(
            suite: Self.suite, inputKeyMaterial: Data(hex: "6db9df30aa07dd42ee5e8181afdb977e538f5e1fec8a06223f33f7013e525037"))
        #expect(
            recipient.rawRepresentation.unsafeData()
                == Data(hex: "4612c550263fc8ad58375df3f557aac531d26850903e55a9f23f21d8534e8ac8"))
        #expect(
            recipient.publicKey.rawRepresentation == Data(hex: "3948cfe0ad1ddb695d780e59077195da6c56506b027329794ab02bca80815c4d")
        )
        var sender = try HPKE.Sender(suite: Self.suite, recipient: recipient.publicKey, info: info, unsafeEphemeral: ephemeral)
        #expect(sender.encapsulatedKey == Data(hex: "37fda3567bdbd628e88668c3c8d7e97d1d1253b6d4ea6d44c150f741f1bf4431"))
        let plaintext = Data(hex: "4265617574792069732074727574682c20747275746820626561757479")
        let ciphertext = try sender.seal(plaintext, authenticating: Data(hex: "436f756e742d30"))
        #expect(
            ciphertext
                == Data(hex: "f938558b5d72f1a23810b4be2ab4f84331acc02fc97babc53a52ae8218a355a96d8770ac83d07bea87e13c512a"))
        var receiver = try HPKE.Recipient(
            suite: Self.suite, privateKey: recipient, encapsulatedKey: sender.encapsulatedKey, info: info)
        #expect(try receiver.open(ciphertext, authenticating: Data(hex: "436f756e742d30")).unsafeData() == plaintext)
        // The next message uses the next nonce: the first ciphertext does not open again.
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try receiver.open(ciphertext, authenticating: Data(hex: "436f756e742d30"))
        }
        #expect(
            try sender.export(context: Data(), length: 32).unsafeData()
                == Data(hex: "3853fe2b4035195a573ffc53856e77058e15d9ea064de3e59f4961d0095250ee"))
    }

    @Test func refusesWhatDoesNotOpen() throws {
        let recipient = try X25519.PrivateKey()
        let (enc, ciphertext) = try HPKE.sealBase(
            suite: Self.suite, recipient: recipient.publicKey, info: Data("i".utf8), authenticating: Data("a".utf8),
            plaintext: Data("p".utf8))
        for (info, aad) in [("j", "a"), ("i", "b")] {
            #expect(throws: CryptoError(.authenticationFailure, "")) {
                try HPKE.openBase(
                    suite: Self.suite, privateKey: recipient, encapsulatedKey: enc, info: Data(info.utf8),
                    authenticating: Data(aad.utf8), ciphertext: ciphertext)
            }
        }
        // A low-order encapsulated key gives no shared secret, and a short one is no key.
        #expect(throws: CryptoError(.invalidKey, "")) {
            try HPKE.openBase(
                suite: Self.suite, privateKey: recipient, encapsulatedKey: Data(count: 32), info: Data(), authenticating: Data(),
                ciphertext: ciphertext)
        }
        #expect(throws: CryptoError(.invalidKey, "")) {
            try HPKE.Recipient(suite: Self.suite, privateKey: recipient, encapsulatedKey: Data(count: 31), info: Data())
        }
    }

    /// pyhpke seals, we open and export; we seal, pyhpke opens and exports; DeriveKeyPair agrees.
    @Test(arguments: [false, true])
    func interopWithPyHPKE(chacha: Bool) async throws {
        let suite: HPKE.Suite = chacha ? .x25519SHA256ChaChaPoly : .x25519SHA256AES128GCM
        let flag = chacha ? ["--chacha"] : []
        let recipient = try X25519.PrivateKey()
        let info = Data("spark info".utf8)
        let aad = Data("aad".utf8)
        let plaintext = Data("to and from pyhpke".utf8)
        let sealed = try await Fixtures.python(
            Self.peer,
            flag + ["seal", recipient.publicKey.rawRepresentation.hexString, info.hexString, aad.hexString, plaintext.hexString]
        ).split(separator: " ").map { Data(hex: String($0)) }
        try #require(sealed.count == 3)
        var receiver = try HPKE.Recipient(suite: suite, privateKey: recipient, encapsulatedKey: sealed[0], info: info)
        #expect(try receiver.open(sealed[1], authenticating: aad).unsafeData() == plaintext)
        #expect(try receiver.export(context: Data("spark".utf8), length: 32).unsafeData() == sealed[2])

        var sender = try HPKE.Sender(suite: suite, recipient: recipient.publicKey, info: info)
        let ciphertext = try sender.seal(plaintext, authenticating: aad)
        let opened = try await Fixtures.python(
            Self.peer,
            flag + [
                "open", recipient.rawRepresentation.unsafeData().hexString, sender.encapsulatedKey.hexString, info.hexString,
                aad.hexString, ciphertext.hexString,
            ]
        ).split(separator: " ").map { Data(hex: String($0)) }
        #expect(opened == [plaintext, try sender.export(context: Data("spark".utf8), length: 32).unsafeData()])
        // A ciphertext pyhpke must refuse.
        var damaged = ciphertext
        damaged[0] ^= 1
        await #expect(throws: PythonPeerError.self) {
            try await Fixtures.python(
                Self.peer,
                flag + [
                    "open", recipient.rawRepresentation.unsafeData().hexString, sender.encapsulatedKey.hexString, info.hexString,
                    aad.hexString, damaged.hexString,
                ])
        }
        let ikm = Data("derive a key pair from this".utf8)
        let derived = try await Fixtures.python(Self.peer, flag + ["derive", ikm.hexString]).split(separator: " ").map {
            Data(hex: String($0))
        }
        let ours = try HPKE.deriveKeyPair(suite: suite, inputKeyMaterial: ikm)
        #expect(derived == [ours.rawRepresentation.unsafeData(), ours.publicKey.rawRepresentation])
    }
}

/// ChaCha20-Poly1305 (RFC 8439 §2.8.2's AEAD example), the AEAD of MLS's suite 3.
@Suite("ChaCha20-Poly1305 (RFC 8439)")
struct ChaChaPolyTests {
    @Test func rfcExample() throws {
        let key = SymmetricKey(data: Data((0x80...0x9f).map { UInt8($0) }))
        let nonce = Data(hex: "070000004041424344454647")
        let aad = Data(hex: "50515253c0c1c2c3c4c5c6c7")
        let plaintext = Data(
            "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it."
                .utf8)
        let sealed = try ChaChaPoly.seal(plaintext, using: key, nonce: nonce, authenticating: aad)
        #expect(sealed.prefix(16) == Data(hex: "d31a8d34648e60db7b86afbc53ef7ec2"))
        #expect(sealed.suffix(16) == Data(hex: "1ae10b594f09e26a7e902ecbd0600691"))
        #expect(try ChaChaPoly.open(sealed, using: key, nonce: nonce, authenticating: aad).unsafeData() == plaintext)
        var damaged = sealed
        damaged[5] ^= 1
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try ChaChaPoly.open(damaged, using: key, nonce: nonce, authenticating: aad)
        }
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try ChaChaPoly.open(sealed, using: key, nonce: nonce, authenticating: Data())
        }
        #expect(throws: CryptoError(.invalidNonce, "")) {
            try ChaChaPoly.seal(plaintext, using: key, nonce: Data(count: 8), authenticating: aad)
        }
        #expect(throws: CryptoError(.invalidKey, "")) {
            try ChaChaPoly.seal(plaintext, using: SymmetricKey(data: Data(count: 16)), nonce: nonce, authenticating: aad)
        }
    }
}

extension Data {
    fileprivate var hexString: String { map { String(format: "%02x", $0) }.joined() }
}
