import Foundation
import SparkCrypto

/// ML-KEM-768 and X-Wing (CSparkKEM): ours against pyca/cryptography's in the same run (OpenSSL's
/// ML-KEM, and for X-Wing its parts in OpenSSL: ML-KEM-768 and the X25519 operations). Goal for
/// the ML-KEM rows: at most 1.5 times the reference's time.
enum KEMBenchmarks {
    static let all: [Benchmark] = [
        Benchmark(name: "mlkem768-keygen", run: { try row("keygen") }),
        Benchmark(name: "mlkem768-encaps", run: { try row("encaps") }),
        Benchmark(name: "mlkem768-decaps", run: { try row("decaps") }),
        Benchmark(name: "xwing-encaps", run: { try row("xwing-encaps") }),
        Benchmark(name: "xwing-decaps", run: { try row("xwing-decaps") }),
    ]

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Python/mlkem_reference.py")

    nonisolated(unsafe) static var references: [String: Double]?

    /// pyca's rates, measured once a run.
    static func reference(_ name: String) throws -> Double {
        if references == nil {
            let output = try Harness.run("python3", [script.path]).output
            var rates: [String: Double] = [:]
            for line in output.split(separator: "\n") {
                let parts = line.split(separator: " ")
                if parts.count == 2, let value = Double(parts[1]) { rates[String(parts[0])] = value }
            }
            references = rates
        }
        guard let rate = references?[name] else {
            throw BenchError("the pyca/cryptography reference printed no \(name) (cryptography ≥ 47? run scripts/bootstrap.sh)")
        }
        return rate
    }

    static func row(_ name: String) throws -> BenchmarkResult {
        let seed = SecureBytes(Data((0..<64).map { UInt8($0) }))
        let key = try MLKEM768.PrivateKey(seed: seed)
        let (_, ciphertext) = try key.publicKey.encapsulate()
        let xwing = try XWing.PrivateKey(seed: SecureBytes(Data(repeating: 3, count: 32)))
        let (_, xwingCiphertext) = try xwing.publicKey.encapsulate()
        let ours: Double =
            switch name {
            case "keygen": try Harness.rate { _ = try MLKEM768.PrivateKey(seed: seed) }
            case "encaps": try Harness.rate { _ = try key.publicKey.encapsulate() }
            case "decaps": try Harness.rate { _ = try key.decapsulate(ciphertext) }
            case "xwing-encaps": try Harness.rate { _ = try xwing.publicKey.encapsulate() }
            default: try Harness.rate { _ = try xwing.decapsulate(xwingCiphertext) }
            }
        let reference = try reference(name)
        let label = name.hasPrefix("xwing") ? name : "mlkem768-\(name)"
        let referenceName =
            name.hasPrefix("xwing")
            ? "its parts in pyca/cryptography's OpenSSL (ML-KEM-768 and X25519)"
            : "pyca/cryptography's ML-KEM-768 (OpenSSL); goal ≥ 0.67 (≤ 1.5x the time)"
        return Harness.result(
            label, unit: "ops/s", ours: ours, reference: reference, higherIsBetter: true, referenceName: referenceName)
    }
}
