import Foundation
import SparkCrypto
import SparkDomain
import SparkTestSupport
import Testing

/// Ed25519 public keys and signature `R`s of small order or with a non-canonical encoding are
/// refused wherever they come in: OpenSSL 3.0 alone accepts them.
@Suite("Ed25519: weak keys")
struct Ed25519KeyValidationTests {
    /// The eight points of order dividing 8, each with both x signs (where x ≠ 0 the sign bit
    /// picks the point; where x = 0 the set bit is also a non-canonical encoding).
    static let smallOrder: [Data] = [
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    ].flatMap { hex -> [Data] in
        var negative = Data(hex: hex)
        negative[31] |= 0x80
        return [Data(hex: hex), negative]
    }

    /// y = p, p + 1, …, 2²⁵⁵ − 1: encodings of y mod p that are not the canonical one.
    static let nonCanonical: [Data] = (0xed...0xff).map { low in
        var y = Data(repeating: 0xff, count: 32)
        y[0] = UInt8(low)
        y[31] = 0x7f
        return y
    }

    @Test func smallOrderAndNonCanonicalKeysAreRefused() {
        for encoding in Self.smallOrder + Self.nonCanonical {
            #expect(throws: CryptoError(.invalidKey, ""), "\(encoding.hexString)") {
                try Ed25519.PublicKey(rawRepresentation: encoding)
            }
        }
        #expect(Self.nonCanonical.count == 19)
    }

    @Test func theIdentityKeyCannotVerifyTheUniversalSignature() throws {
        // With the identity as the key, (R = identity, S = 0) satisfies the verification
        // equation for every message: the key must never be usable.
        let identity = Data(hex: "0100000000000000000000000000000000000000000000000000000000000000")
        #expect(throws: CryptoError(.invalidKey, "")) { try Ed25519.PublicKey(rawRepresentation: identity) }
        let jwk = try JWK(json: Data(#"{"kty":"OKP","crv":"Ed25519","x":"\#(identity.base64URLEncodedString())"}"#.utf8))
        #expect(throws: CryptoError(.invalidKey, ""), "nor through a JWK") { try jwk.ed25519PublicKey() }
    }

    @Test func aSignatureWhoseRIsOfSmallOrderIsInvalid() throws {
        let key = try Ed25519.PrivateKey()
        let message = Data("hello".utf8)
        let good = try key.signature(for: message)
        #expect(key.publicKey.isValidSignature(good, for: message))
        for r in Self.smallOrder + Self.nonCanonical.prefix(3) {
            #expect(!key.publicKey.isValidSignature(r + good.suffix(32), for: message), "\(r.hexString)")
            #expect(!key.publicKey.isValidSignature(r + Data(count: 32), for: message))
        }
    }

    @Test func theKeyHoldersSignatureWithRTheIdentityIsRefused() throws {
        // Made with the secret scalar a: R = identity, S = H(R ‖ A ‖ M)·a mod L, so that
        // S·B = R + H(R ‖ A ‖ M)·A holds and OpenSSL 3.0 alone accepts it (checked with Python's
        // `cryptography`). An honest signer never makes such an R.
        let key = try Ed25519.PrivateKey(rawRepresentation: Data(repeating: 7, count: 32))
        #expect(key.publicKey.rawRepresentation.hexString == "ea4a6c63e29c520abef5507b132ec5f9954776aebebe7b92421eea691446d22c")
        let message = Data("a signature whose R is the identity".utf8)
        let signature = Data(
            hex: "0100000000000000000000000000000000000000000000000000000000000000"
                + "36988c3bf8d5af706bb3a929fa8f357740b10d9128aaafa0caa628b63f4fdc00")
        #expect(!key.publicKey.isValidSignature(signature, for: message))
        #expect(key.publicKey.isValidSignature(try key.signature(for: message), for: message))
    }

    @Test func aPublishedIdentityWithAWeakKeyIsNotSelfSigned() throws {
        let real = try Ed25519.PrivateKey()
        var identity = PublishedIdentity(
            userID: "mallory", signingKey: real.publicKey.rawRepresentation, encryptionKey: Data(count: 32), keyVersion: 1,
            signature: Data())
        identity.signature = try real.signature(for: identity.signedBytes)
        #expect(identity.isSelfSigned)
        identity.signingKey = Data(hex: "0100000000000000000000000000000000000000000000000000000000000000")
        identity.signature = Data(hex: "01" + String(repeating: "00", count: 63))
        #expect(!identity.isSelfSigned, "the identity key with the universal signature")
    }

    @Test func ordinaryKeysStillWork() throws {
        // RFC 8032 §7.1, test 1.
        let key = try Ed25519.PublicKey(
            rawRepresentation: Data(hex: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"))
        let signature = Data(
            hex:
                "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        )
        #expect(key.isValidSignature(signature, for: Data()))
    }
}
