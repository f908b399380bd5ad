import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine

/// Token verification: ours against PyJWT on the same token, and against a bare OpenSSL
/// Ed25519 verification as the floor.
enum AuthBenchmarks {
    static let all: [Benchmark] = [
        Benchmark(name: "jwt-verify-eddsa", run: { try jwtVerify(floor: false) }),
        Benchmark(name: "jwt-verify-eddsa-floor", run: { try jwtVerify(floor: true) }),
    ]

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Python/pyjwt_verify.py")

    static func jwtVerify(floor: Bool) throws -> BenchmarkResult {
        let key = try Ed25519.PrivateKey()
        let issuer = TokenIssuer(issuer: "spark-test:bench", key: key, keyID: "bench")
        let token = try issuer.issue(subject: "alice", audience: "bench", lifetime: 3600, now: Date(), email: "alice@example.com")
        let validator = TokenValidator(issuers: [issuer.trusted(audience: "bench", kind: .test)])
        let ours = try Harness.rate {
            let identity = try validator.validate(token.token)
            precondition(identity.userID == "alice")
        }

        let reference: Double
        let referenceName: String
        if floor {
            let output = try Harness.run("openssl", ["speed", "-seconds", "1", "-mr", "ed25519"]).output
            let fields = try Harness.machineReadableLine(output, prefix: "+F6:")
            guard fields.count >= 6, let verifyRate = Double(fields[5]) else {
                throw BenchError("unreadable openssl speed output")
            }
            reference = verifyRate
            referenceName = "openssl speed ed25519 verify (the floor)"
        } else {
            let jwks = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-jwks-\(getpid()).json")
            try issuer.jwks.jsonData().write(to: jwks)
            defer { try? FileManager.default.removeItem(at: jwks) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script.path, jwks.path, "spark-test:bench", "bench"]
            let input = Pipe()
            let output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            input.fileHandleForWriting.write(Data(token.token.utf8))
            try input.fileHandleForWriting.close()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0,
                let rate = Double(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
            else { throw BenchError("the PyJWT reference failed (is PyJWT installed? run scripts/bootstrap.sh)") }
            reference = rate
            referenceName = "PyJWT jwt.decode, same token"
        }
        return Harness.result(
            floor ? "jwt-verify-eddsa-floor" : "jwt-verify-eddsa", unit: "ops/s", ours: ours, reference: reference,
            higherIsBetter: true, referenceName: referenceName)
    }
}
