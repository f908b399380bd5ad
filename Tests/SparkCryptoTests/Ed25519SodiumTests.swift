import Foundation
import SparkTestSupport
import Testing

@testable import SparkCrypto

/// What libsodium's verification refuses by itself, with no check of ours in front of it
/// (`Sodium.verify` is called directly). ``Ed25519/PublicKey`` relies on it for every check of a
/// signature's `R` and `S`, and keeps its own check of keys where they come in (see
/// `Ed25519KeyValidationTests`, which goes through the public API).
@Suite("Ed25519: what libsodium refuses by itself")
struct Ed25519SodiumTests {
    /// The group order L, little-endian.
    static let order = Data(hex: "edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")

    /// A 256-bit little-endian sum (no overflow for the values used here).
    static func add(_ a: Data, _ b: Data) -> Data {
        var sum = Data(count: 32)
        var carry = 0
        for index in 0..<32 {
            let total = Int(a[a.startIndex + index]) + Int(b[b.startIndex + index]) + carry
            sum[index] = UInt8(total & 0xff)
            carry = total >> 8
        }
        return sum
    }

    @Test func anHonestSignatureVerifiesAndAnyChangeIsRefused() throws {
        let key = try Ed25519.PrivateKey()
        let message = Data("hello".utf8)
        let signature = try key.signature(for: message)
        let publicKey = key.publicKey.rawRepresentation
        #expect(Sodium.verify(signature: signature, message: message, publicKey: publicKey))
        for index in [0, 31, 32, 63] {
            var altered = signature
            altered[index] ^= 0x01
            #expect(!Sodium.verify(signature: altered, message: message, publicKey: publicKey), "byte \(index)")
        }
        #expect(!Sodium.verify(signature: signature, message: Data("hellO".utf8), publicKey: publicKey))
        #expect(!Sodium.verify(signature: signature.prefix(63), message: message, publicKey: publicKey))
        #expect(!Sodium.verify(signature: signature + [0], message: message, publicKey: publicKey))
        #expect(!Sodium.verify(signature: signature, message: message, publicKey: publicKey.prefix(31)))
    }

    @Test func anSThatIsNotBelowTheOrderIsRefused() throws {
        // S + L satisfies the same equation as S (L·B is the identity): only the range check refuses it.
        let key = try Ed25519.PrivateKey()
        let message = Data("malleable?".utf8)
        let signature = try key.signature(for: message)
        let malleated = signature.prefix(32) + Self.add(signature.suffix(32), Self.order)
        #expect(malleated != signature)
        #expect(!Sodium.verify(signature: malleated, message: message, publicKey: key.publicKey.rawRepresentation))
        #expect(!key.publicKey.isValidSignature(malleated, for: message))
    }

    @Test func weakKeysAreRefusedEvenWithTheUniversalSignature() {
        // (R = identity, S = 0) satisfies S·B = R + h·A for every message when A is of small
        // order: OpenSSL 3.0 accepted it; libsodium refuses the key at every verification.
        let universal = Data(hex: "01" + String(repeating: "00", count: 63))
        for key in Ed25519KeyValidationTests.smallOrder + Ed25519KeyValidationTests.nonCanonical {
            #expect(!Sodium.verify(signature: universal, message: Data("any".utf8), publicKey: key), "\(key.hexString)")
            #expect(
                !Sodium.verify(signature: key + Data(count: 32), message: Data("any".utf8), publicKey: key), "\(key.hexString)")
        }
    }

    @Test func aKeyHoldersSignatureWithAnRofSmallOrderIsRefused() throws {
        // Made with the secret scalar a of the seed 7…7 (by Python, outside this code): R the
        // identity, canonically (y = 1) and not (y = p + 1), and S = H(R ‖ A ‖ M)·a mod L, so that
        // the verification equation holds. An honest signer never makes such an R.
        let key = try Ed25519.PrivateKey(rawRepresentation: Data(repeating: 7, count: 32))
        let publicKey = key.publicKey.rawRepresentation
        #expect(publicKey.hexString == "ea4a6c63e29c520abef5507b132ec5f9954776aebebe7b92421eea691446d22c")
        let cases: [(message: String, signature: String)] = [
            (
                "a signature whose R is the identity",
                "0100000000000000000000000000000000000000000000000000000000000000"
                    + "36988c3bf8d5af706bb3a929fa8f357740b10d9128aaafa0caa628b63f4fdc00"
            ),
            (
                "a signature whose R is a non-canonical identity",
                "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"
                    + "5bfab0b16283ced3d02e2886aa317ae88b6d22fa5213f44400e7692e2f20c806"
            ),
        ]
        for (message, signature) in cases {
            #expect(
                !Sodium.verify(signature: Data(hex: signature), message: Data(message.utf8), publicKey: publicKey), "\(message)")
        }
    }

    @Test func anyRofSmallOrderOrNonCanonicalEncodingIsRefused() throws {
        let key = try Ed25519.PrivateKey()
        let message = Data("hello".utf8)
        let good = try key.signature(for: message)
        for r in Ed25519KeyValidationTests.smallOrder + Ed25519KeyValidationTests.nonCanonical {
            for s in [good.suffix(32), Data(count: 32)] {
                #expect(!Sodium.verify(signature: r + s, message: message, publicKey: key.publicKey.rawRepresentation))
            }
        }
    }
}
