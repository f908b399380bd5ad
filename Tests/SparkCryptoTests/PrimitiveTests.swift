import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

/// SecureBytes and the guarded paths of the primitives.
@Suite("Primitives")
struct PrimitiveTests {
    @Test func secureBytesNeverPrintsItsContents() {
        let secret = SecureBytes(Data("hunter2-hunter2".utf8))
        for text in [String(describing: secret), String(reflecting: secret), "\(secret)"] {
            #expect(!text.contains("hunter2") && text.contains("15 bytes"))
        }
        var dumped = ""
        dump(secret, to: &dumped)
        #expect(!dumped.contains("104"))  // 'h' as a byte value
        let key = SymmetricKey(data: Data("hunter2-hunter2-hunter2-hunter2!".utf8))
        #expect(!String(describing: key).contains("hunter2"))
    }

    @Test func secureBytesEqualityAndCopyOnWrite() {
        let a = SecureBytes(Data([1, 2, 3]))
        var b = a
        #expect(a == b)
        b.withUnsafeMutableBytes { $0[0] = 9 }
        #expect(a != b)
        #expect(a.unsafeData() == Data([1, 2, 3]))
        #expect(SecureBytes(Data([1, 2])) != SecureBytes(Data([1, 2, 3])))
        #expect(SecureBytes(zeroes: 0) == SecureBytes(Data()))
        var joined = SecureBytes(Data([1]))
        joined.append(Data([2, 3]))
        #expect(joined.unsafeData() == Data([1, 2, 3]))
        #expect(joined.slice(1..<3).unsafeData() == Data([2, 3]))
        #expect(SecureBytes(randomCount: 32) != SecureBytes(randomCount: 32))
    }

    @Test func aesGCMGuardedPaths() throws {
        let key = SymmetricKey(size: .bits256)
        let aad = Data("chat-1|alice|7".utf8)
        let box = try AESGCM.seal(Data("hello".utf8), using: key, authenticating: aad)
        #expect(box.nonce.bytes.count == 12)
        #expect(try AESGCM.open(box, using: key, authenticating: aad).unsafeData() == Data("hello".utf8))
        var tag = box.tag
        tag[15] ^= 0x01
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try AESGCM.open(
                AESGCM.SealedBox(nonce: box.nonce, ciphertext: box.ciphertext, tag: tag), using: key, authenticating: aad)
        }
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try AESGCM.open(box, using: key, authenticating: Data("chat-2|alice|7".utf8))
        }
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try AESGCM.open(box, using: SymmetricKey(size: .bits256), authenticating: aad)
        }
        #expect(throws: CryptoError(.invalidKey, "")) { try AESGCM.seal(Data(), using: SymmetricKey(data: Data(count: 31))) }
        #expect(throws: CryptoError(.invalidNonce, "")) { try AESGCM.Nonce(Data()) }
        #expect(throws: CryptoError(.malformedInput, "")) {
            try AESGCM.SealedBox(nonce: box.nonce, ciphertext: Data(), tag: Data(count: 15))
        }
        #expect(throws: CryptoError(.malformedInput, "")) { try AESGCM.SealedBox(combined: Data(count: 27)) }
        let combined = try AESGCM.SealedBox(combined: box.combined)
        #expect(try AESGCM.open(combined, using: key, authenticating: aad).unsafeData() == Data("hello".utf8))
        // The empty plaintext seals and opens too.
        let empty = try AESGCM.seal(Data(), using: key)
        #expect(try AESGCM.open(empty, using: key).isEmpty)
    }

    /// One key sealing and opening from many tasks at once shares its pool of keyed contexts; a
    /// failed open must not poison a context that a later call reuses.
    @Test func oneKeyUsedConcurrently() async throws {
        let key = SymmetricKey(size: .bits256)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for n in 0..<200 {
                        let message = Data("worker \(worker) message \(n)".utf8)
                        let box = try AESGCM.seal(message, using: key, authenticating: Data([UInt8(worker)]))
                        if n % 7 == 0 {
                            #expect(throws: CryptoError(.authenticationFailure, "")) {
                                try AESGCM.open(box, using: key, authenticating: Data([UInt8(worker + 1)]))
                            }
                        }
                        #expect(try AESGCM.open(box, using: key, authenticating: Data([UInt8(worker)])).unsafeData() == message)
                    }
                }
            }
            try await group.waitForAll()
        }
        // A nonce of another length re-sets the pooled context's IV length, then back again.
        let long = try AESGCM.seal(Data("x".utf8), using: key, nonce: AESGCM.Nonce(Data(count: 16)))
        let short = try AESGCM.seal(Data("x".utf8), using: key)
        #expect(try AESGCM.open(long, using: key).unsafeData() == Data("x".utf8))
        #expect(try AESGCM.open(short, using: key).unsafeData() == Data("x".utf8))
    }

    @Test func curveKeyLengthsAreChecked() throws {
        #expect(throws: CryptoError(.invalidKey, "")) { try Ed25519.PrivateKey(rawRepresentation: Data(count: 31)) }
        #expect(throws: CryptoError(.invalidKey, "")) { try Ed25519.PublicKey(rawRepresentation: Data(count: 33)) }
        #expect(throws: CryptoError(.invalidKey, "")) { try X25519.PrivateKey(rawRepresentation: Data(count: 16)) }
        #expect(throws: CryptoError(.invalidKey, "")) { try X25519.PublicKey(rawRepresentation: Data(count: 0)) }
        let low = try X25519.PublicKey(rawRepresentation: Data(count: 32))
        #expect(throws: CryptoError(.invalidKey, "")) { try X25519.PrivateKey().sharedSecret(with: low) }
        let key = try Ed25519.PrivateKey()
        let signature = try key.signature(for: Data("m".utf8))
        #expect(key.publicKey.isValidSignature(signature, for: Data("m".utf8)))
        #expect(!key.publicKey.isValidSignature(signature + [0], for: Data("m".utf8)))
        #expect(try Ed25519.PrivateKey(rawRepresentation: key.rawRepresentation).publicKey == key.publicKey)
        #expect(!String(describing: key).contains(key.rawRepresentation.base64URLEncodedString()))
    }

    @Test func cryptoErrorsCompareByCodeAndDescribeThemselves() {
        let error = CryptoError(.authenticationFailure, "wrong passcode")
        #expect(error == CryptoError(.authenticationFailure, "something else"))
        #expect(error != CryptoError(.invalidKey, "wrong passcode"))
        #expect(error.description == "CryptoError.authenticationFailure: wrong passcode")
    }
}
