import Foundation
import SparkCrypto
import SparkTestSupport
import Testing

/// Project Wycheproof's vectors for every primitive SparkCrypto ships. Each test checks every
/// case of its file and asserts that valid, invalid and (where present) acceptable cases were
/// all exercised, so a file that fails to load cannot pass silently.
/// The files are in the repository (`Tests/Vectors/wycheproof`): a missing one fails, never skips.
@Suite("Wycheproof")
struct WycheproofTests {
    @Test func aesGCM() throws {
        var tally = Wycheproof.Tally()
        var unsupported = 0
        // Boxes opened in place under 256-bit keys (libsodium's path where the CPU has AES-NI):
        // valid and forged.
        var inPlace256 = (valid: 0, invalid: 0)
        for group in try Wycheproof.groups("aes_gcm_test.json") {
            for test in group.tests {
                tally.count(test)
                let key = SymmetricKey(data: test.hex("key"))
                let aad = test.hex("aad")
                let iv = test.hex("iv")
                guard let nonce = try? AESGCM.Nonce(iv) else {
                    // Refused nonces: the empty one (invalid) and those over OpenSSL's 128-byte
                    // limit (valid in GCM, but a parameter SparkCrypto does not offer).
                    #expect(iv.isEmpty ? test.result == "invalid" : iv.count > 128, "\(test)")
                    if !iv.isEmpty { unsupported += 1 }
                    continue
                }
                let box = try AESGCM.SealedBox(nonce: nonce, ciphertext: test.hex("ct"), tag: test.hex("tag"))
                let opened = Result { try AESGCM.open(box, using: key, authenticating: aad) }
                // The same box opened in place (12-byte nonces: the layout the endpoint store uses).
                if iv.count == 12 {
                    let combined = iv + test.hex("ct") + test.hex("tag")
                    let inPlace = Result {
                        var output = Data(count: max(1, test.hex("ct").count))
                        let count = try combined.withUnsafeBytes { combined in
                            try aad.withUnsafeBytes { aad in
                                try output.withUnsafeMutableBytes {
                                    try AESGCM.open(combined: combined, using: key, authenticating: aad, into: $0)
                                }
                            }
                        }
                        return output.prefix(count)
                    }
                    if key.byteCount == 32 {
                        if test.result == "valid" { inPlace256.valid += 1 } else { inPlace256.invalid += 1 }
                    }
                    if test.result == "valid" {
                        #expect(try inPlace.get() == test.hex("msg"), "in place: \(test)")
                    } else {
                        #expect(throws: CryptoError(.authenticationFailure, ""), "in place: \(test)") { try inPlace.get() }
                    }
                }
                if test.result == "valid" {
                    #expect(try opened.get().unsafeData() == test.hex("msg"), "\(test)")
                    let sealed = try AESGCM.seal(test.hex("msg"), using: key, nonce: nonce, authenticating: aad)
                    #expect(sealed.ciphertext == test.hex("ct") && sealed.tag == test.hex("tag"), "\(test)")
                } else {
                    #expect(throws: CryptoError(.authenticationFailure, ""), "\(test)") { try opened.get() }
                }
            }
        }
        #expect(tally.valid > 200 && tally.invalid > 80 && unsupported < 10, "\(tally), \(unsupported) unsupported")
        #expect(inPlace256.valid > 20 && inPlace256.invalid > 10, "\(inPlace256)")
    }

    @Test func aesKeyWrap() throws {
        var tally = Wycheproof.Tally()
        for group in try Wycheproof.groups("aes_wrap_test.json") {
            for test in group.tests {
                tally.count(test)
                let kek = SymmetricKey(data: test.hex("key"))
                let unwrapped = Result { try AESKeyWrap.unwrap(test.hex("ct"), using: kek) }
                switch test.result {
                case "valid":
                    #expect(try unwrapped.get().unsafeData() == test.hex("msg"), "\(test)")
                    #expect(try AESKeyWrap.wrap(test.hex("msg"), using: kek) == test.hex("ct"), "\(test)")
                case "invalid":
                    #expect(throws: CryptoError.self, "\(test)") { try unwrapped.get() }
                default:
                    // Acceptable: wrapping an 8-byte key. RFC 3394 needs two blocks; we refuse both ways.
                    #expect(test.flags.contains("ShortKey"), "\(test)")
                    #expect(throws: CryptoError.self, "\(test)") { try unwrapped.get() }
                    #expect(throws: CryptoError(.invalidParameter, ""), "\(test)") {
                        try AESKeyWrap.wrap(test.hex("msg"), using: kek)
                    }
                }
            }
        }
        #expect(tally.valid > 30 && tally.invalid > 100 && tally.acceptable == 3, "\(tally)")
    }

    @Test func ed25519() throws {
        var tally = Wycheproof.Tally()
        for group in try Wycheproof.groups("ed25519_test.json") {
            let keyFields = group.fields["publicKey"] as? [String: Any] ?? [:]
            let key = try Ed25519.PublicKey(rawRepresentation: Data(hex: keyFields["pk"] as? String ?? ""))
            for test in group.tests {
                tally.count(test)
                let valid = key.isValidSignature(test.hex("sig"), for: test.hex("msg"))
                #expect(valid == (test.result == "valid"), "\(test)")
            }
        }
        #expect(tally.valid > 80 && tally.invalid > 60, "\(tally)")
    }

    @Test func x25519() throws {
        var tally = Wycheproof.Tally()
        for group in try Wycheproof.groups("x25519_test.json") {
            for test in group.tests {
                tally.count(test)
                let key = try X25519.PrivateKey(rawRepresentation: test.hex("private"))
                let shared = Result { try key.sharedSecret(with: X25519.PublicKey(rawRepresentation: test.hex("public"))) }
                if test.hex("shared") == Data(count: 32) {
                    // Low-order points: RFC 7748 §6.1's all-zero check refuses them.
                    #expect(test.result == "acceptable", "\(test)")
                    #expect(throws: CryptoError(.invalidKey, ""), "\(test)") { try shared.get() }
                } else {
                    // Valid cases and acceptable ones (twist points, non-canonical encodings)
                    // compute the published result, as RFC 7748 §5 specifies.
                    #expect(try shared.get().unsafeData() == test.hex("shared"), "\(test)")
                }
            }
        }
        #expect(tally.valid > 250 && tally.acceptable > 250, "\(tally)")
    }

    @Test func ecdsaP256P1363() throws {
        var tally = Wycheproof.Tally()
        for group in try Wycheproof.groups("ecdsa_secp256r1_sha256_p1363_test.json") {
            let point = Data(hex: (group.fields["publicKey"] as? [String: Any])?["uncompressed"] as? String ?? "")
            let key = try P256.PublicKey(x: point.dropFirst().prefix(32), y: point.suffix(32))
            if let jwk = group.fields["publicKeyJwk"] as? [String: Any] {
                // Where the group also gives the key as a JWK, it must decode to the same key.
                let decoded = try JWK(json: JSONSerialization.data(withJSONObject: jwk))
                #expect(try decoded.p256PublicKey() == key)
                #expect(try JWS.VerificationKey(jwk: decoded).algorithm == .es256)
            }
            for test in group.tests {
                tally.count(test)
                let valid = key.isValidSignature(test.hex("sig"), for: test.hex("msg"))
                #expect(valid == (test.result == "valid"), "\(test)")
            }
        }
        #expect(tally.valid > 150 && tally.invalid > 80, "\(tally)")
    }

    @Test func rsaPKCS1SHA256() throws {
        var tally = Wycheproof.Tally()
        for group in try Wycheproof.groups("rsa_signature_2048_sha256_test.json") {
            let jwk = try JWK(json: JSONSerialization.data(withJSONObject: group.fields["keyJwk"] as? [String: Any] ?? [:]))
            let key = try jwk.rsaPublicKey()
            #expect(try JWS.VerificationKey(jwk: jwk).algorithm == .rs256)
            #expect(key.modulusBits == 2048)
            for test in group.tests {
                tally.count(test)
                let valid = key.isValidSignature(test.hex("sig"), for: test.hex("msg"))
                if test.result == "acceptable" {
                    // A DigestInfo without the NULL parameter: refused, the strict reading.
                    #expect(!valid, "\(test)")
                } else {
                    #expect(valid == (test.result == "valid"), "\(test)")
                }
            }
        }
        #expect(tally.valid >= 9 && tally.invalid > 200 && tally.acceptable == 1, "\(tally)")
    }

    @Test func hkdf() throws {
        for (file, hash) in [("hkdf_sha256_test.json", HashFunction.sha256), ("hkdf_sha512_test.json", .sha512)] {
            var tally = Wycheproof.Tally()
            for group in try Wycheproof.groups(file) {
                for test in group.tests {
                    tally.count(test)
                    let derived = Result {
                        try HKDF.deriveKey(
                            inputKeyMaterial: test.hex("ikm"), salt: test.hex("salt"), info: test.hex("info"),
                            outputByteCount: test.int("size"), hash: hash)
                    }
                    if test.result == "valid" {
                        #expect(try derived.get().unsafeData() == test.hex("okm"), "\(file) \(test)")
                    } else {
                        #expect(throws: CryptoError(.invalidParameter, ""), "\(file) \(test)") { try derived.get() }
                    }
                }
            }
            #expect(tally.valid > 75 && tally.invalid == 3, "\(file) \(tally)")
        }
    }

    @Test func hmac() throws {
        for (file, hash) in [("hmac_sha256_test.json", HashFunction.sha256), ("hmac_sha512_test.json", .sha512)] {
            var tally = Wycheproof.Tally()
            for group in try Wycheproof.groups(file) {
                for test in group.tests {
                    tally.count(test)
                    let valid = HMAC.isValidAuthenticationCode(
                        test.hex("tag"), for: test.hex("msg"), using: test.hex("key"), hash: hash)
                    #expect(valid == (test.result == "valid"), "\(file) \(test)")
                }
            }
            #expect(tally.valid > 60 && tally.invalid > 100, "\(file) \(tally)")
        }
    }

    @Test func pbkdf2() throws {
        for (file, hash) in [("pbkdf2_hmacsha256_test.json", HashFunction.sha256), ("pbkdf2_hmacsha512_test.json", .sha512)] {
            var tally = Wycheproof.Tally()
            for group in try Wycheproof.groups(file) {
                for test in group.tests {
                    tally.count(test)
                    let derived = try PBKDF2.deriveKey(
                        fromPassword: test.hex("password"), salt: test.hex("salt"), hash: hash,
                        outputByteCount: test.int("dkLen"), unsafeUncheckedRounds: test.int("iterationCount"))
                    #expect((derived.unsafeData() == test.hex("dk")) == (test.result == "valid"), "\(file) \(test)")
                }
            }
            #expect(tally.valid > 50, "\(file) \(tally)")
        }
    }
}
