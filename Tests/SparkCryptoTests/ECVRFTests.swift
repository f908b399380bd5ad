import Foundation
import SparkTestSupport
import Testing

@testable import SparkCrypto

/// ECVRF-P256-SHA256-TAI against RFC 9381 Appendix B.1 (Examples 10–12), and tried by an
/// attacker: a proof for another input, under another key, or with any byte changed.
@Suite("ECVRF-P256-SHA256-TAI (RFC 9381)")
struct ECVRFTests {
    struct Vector {
        let secret: String
        let publicKey: String
        let alpha: String
        let nonce: String?
        let proof: String
        let output: String
    }

    /// RFC 9381 Appendix B.1.
    static let vectors = [
        Vector(
            secret: "c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721",
            publicKey: "0360fed4ba255a9d31c961eb74c6356d68c049b8923b61fa6ce669622e60f29fb6", alpha: "sample",
            nonce: "0d90591273453d2dc67312d39914e3a93e194ab47a58cd598886897076986f77",
            proof:
                "035b5c726e8c0e2c488a107c600578ee75cb702343c153cb1eb8dec77f4b5071b4a53f0a46f018bc2c56e58d383f2305e0975972c26feea0eb122fe7893c15af376b33edf7de17c6ea056d4d82de6bc02f",
            output: "a3ad7b0ef73d8fc6655053ea22f9bede8c743f08bbed3d38821f0e16474b505e"),
        Vector(
            secret: "c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721",
            publicKey: "0360fed4ba255a9d31c961eb74c6356d68c049b8923b61fa6ce669622e60f29fb6", alpha: "test",
            nonce: "5852353a868bdce26938cde1826723e58bf8cb06dd2fed475213ea6f3b12e961",
            proof:
                "034dac60aba508ba0c01aa9be80377ebd7562c4a52d74722e0abae7dc3080ddb56c19e067b15a8a8174905b13617804534214f935b94c2287f797e393eb0816969d864f37625b443f30f1a5a33f2b3c854",
            output: "a284f94ceec2ff4b3794629da7cbafa49121972671b466cab4ce170aa365f26d"),
        Vector(
            secret: "2ca1411a41b17b24cc8c3b089cfd033f1920202a6c0de8abb97df1498d50d2c8",
            publicKey: "03596375e6ce57e0f20294fc46bdfcfd19a39f8161b58695b3ec5b3d16427c274d",
            alpha: "Example using ECDSA key from Appendix L.4.2 of ANSI.X9-62-2005", nonce: nil,
            proof:
                "03d03398bf53aa23831d7d1b2937e005fb0062cbefa06796579f2a1fc7e7b8c667d091c00b0f5c3619d10ecea44363b5a599cadc5b2957e223fec62e81f7b4825fc799a771a3d7334b9186bdbee87316b1",
            output: "90871e06da5caa39a3c61578ebb844de8635e27ac0b13e829997d0d95dd98c19"),
    ]

    @Test(arguments: vectors.indices)
    func theRFCsExamplesProveAndVerify(_ index: Int) throws {
        let vector = Self.vectors[index]
        let key = try ECVRF.PrivateKey(rawRepresentation: Data(hex: vector.secret))
        #expect(key.publicKey.compressed == Data(hex: vector.publicKey))
        let alpha = Data(vector.alpha.utf8)
        if let nonce = vector.nonce {
            // RFC 6979's nonce for h_string, an intermediate value the RFC lists.
            let k = try PrimeCurve.p256.compute { scratch in
                let h = try ECVRF.encodeToCurve(key.publicKey.compressed, alpha, scratch)
                return try scratch.bytes(
                    try ECVRF.nonce(secret: key.rawRepresentation, hString: try scratch.encode(h), scratch), count: 32)
            }
            #expect(k == Data(hex: nonce))
        }
        let (proof, output) = try key.prove(alpha)
        #expect(proof == Data(hex: vector.proof))
        #expect(output == Data(hex: vector.output))
        let publicKey = try ECVRF.PublicKey(compressedRepresentation: Data(hex: vector.publicKey))
        #expect(try publicKey.verify(Data(hex: vector.proof), for: alpha) == Data(hex: vector.output))
    }

    @Test func aProofForAnythingElseIsRefused() throws {
        let key = try ECVRF.PrivateKey()
        let (proof, output) = try key.prove(Data("alice".utf8))
        #expect(try key.publicKey.verify(proof, for: Data("alice".utf8)) == output)
        #expect(throws: CryptoError.self) { try key.publicKey.verify(proof, for: Data("bob".utf8)) }
        #expect(throws: CryptoError.self) { try ECVRF.PrivateKey().publicKey.verify(proof, for: Data("alice".utf8)) }
        // Any one byte changed: refused (a bad point, a bad scalar, or a failed check).
        for index in stride(from: 0, to: proof.count, by: 7) {
            var forged = proof
            forged[index] ^= 0x01
            #expect(throws: CryptoError.self) { try key.publicKey.verify(forged, for: Data("alice".utf8)) }
        }
        #expect(throws: CryptoError.self) { try key.publicKey.verify(proof.dropLast(), for: Data("alice".utf8)) }
        // s not below the order.
        var overflow = proof
        overflow.replaceSubrange(49..<81, with: Data(repeating: 0xFF, count: 32))
        #expect(throws: CryptoError.self) { try key.publicKey.verify(overflow, for: Data("alice".utf8)) }
        #expect(throws: CryptoError.self) { try ECVRF.PrivateKey(rawRepresentation: Data(count: 32)) }
        #expect(throws: CryptoError.self) { try ECVRF.PublicKey(compressedRepresentation: Data(count: 33)) }
    }
}

/// P-256 ECDSA signing (the transparency log's tree heads): RFC 6979 A.2.5's key gives its
/// public key, signatures verify under it and under nothing else.
@Suite("P-256 ECDSA signing")
struct P256SigningTests {
    @Test func signaturesVerifyAndForgeriesDoNot() throws {
        let key = try P256.SigningKey(
            rawRepresentation: Data(hex: "c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721"))
        #expect(key.publicKey.x == Data(hex: "60fed4ba255a9d31c961eb74c6356d68c049b8923b61fa6ce669622e60f29fb6"))
        #expect(key.publicKey.y == Data(hex: "7903fe1008b8bc99a41ae9e95628bc64f2f1b20c2d7e9f5177a3c294d4462299"))
        let message = Data("tree head 42".utf8)
        for _ in 0..<20 {
            let signature = try key.signature(for: message)
            #expect(signature.count == 64)
            #expect(key.publicKey.isValidSignature(signature, for: message))
            #expect(!key.publicKey.isValidSignature(signature, for: Data("tree head 43".utf8)))
            var forged = signature
            forged[63] ^= 1
            #expect(!key.publicKey.isValidSignature(forged, for: message))
        }
        #expect(!(try P256.SigningKey()).publicKey.isValidSignature(try key.signature(for: message), for: message))
        #expect(throws: CryptoError.self) { try P256.SigningKey(rawRepresentation: Data(count: 32)) }
        #expect(throws: CryptoError.self) { try P256.SigningKey(rawRepresentation: Data(repeating: 0xFF, count: 32)) }
    }
}
