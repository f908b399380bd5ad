import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkSDK

/// The path from a token to a ready endpoint, at the production passcode cost (600,000
/// PBKDF2-HMAC-SHA-512 iterations).
enum SetupBenchmarks {
    static let all: [Benchmark] = [
        Benchmark(name: "passcode-unlock", run: passcodeUnlock),
        Benchmark(name: "setup-new-user", run: setupNewUser),
        Benchmark(name: "silent-sign-in", run: silentSignIn),
    ]

    /// A scratch domain in a temporary directory, removed afterwards.
    static func withDomain<T>(_ body: (URL, EmbeddedDomain) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let domain = try EmbeddedDomain.create(
            at: directory.appendingPathComponent("domain.sqlite").path, domainID: "bench",
            policy: DomainPolicy.bench)
        return try await body(directory, domain)
    }

    /// `openssl kdf` PBKDF2-HMAC-SHA512 at 600,000 iterations, its start-up subtracted.
    static func opensslKDF(repeats: Int = 3) throws -> Double {
        func run(_ iterations: Int) throws -> Double {
            try Harness.bestTime(repeats: repeats) {
                _ = try Harness.run(
                    "openssl",
                    [
                        "kdf", "-keylen", "32", "-kdfopt", "digest:SHA512", "-kdfopt", "pass:passcode", "-kdfopt",
                        "hexsalt:00112233445566778899aabbccddeeff", "-kdfopt", "iter:\(iterations)", "PBKDF2",
                    ])
            }
        }
        return try run(600_000) - run(1)
    }

    static func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Locked<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let value: Result<T, any Error>
            do { value = .success(try await body()) } catch { value = .failure(error) }
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0 }!.get()
    }

    /// Through spark-domaind over TLS: fetch, PBKDF2, blind, the domain's OPRF evaluation
    /// (counted), finalize, unwrap, import and the proof, against the bare KDF. The two are
    /// measured in turns, best of fifteen each, since this machine's clock speed drifts by a third
    /// within a minute.
    static func passcodeUnlock() throws -> BenchmarkResult {
        let served = try DomainServerBenchmarks.Served()
        defer { served.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (ours, reference) = try blocking { () -> (Double, Double) in
            try await served.administration().setPolicy(DomainPolicy.bench)
            let domain = try served.client()
            let token = try await domain.testToken(userID: "alice").token
            // Five devices in turn: the daemon allows each endpoint ten blob reads a minute.
            var devices: [(BBMKeyManager, BBMKeyManager.Caller)] = []
            for name in ["a", "b", "c", "d", "e"] {
                _ = try await domain.registerEndpoint(token: token, registration: .init(endpointID: name, description: name))
                let store = try EndpointStore(directory: directory.appendingPathComponent(name))
                devices.append(
                    (BBMKeyManager(domain: domain, store: store), .init(token: token, userID: "alice", endpointID: name)))
            }
            _ = try await devices[0].0.createKeys(passcode: "bench-passcode", caller: devices[0].1)
            var (ours, reference) = (Double.infinity, Double.infinity)
            for round in 0..<15 {
                let (manager, caller) = devices[round % devices.count]
                let start = ContinuousClock.now
                _ = try await manager.unlock(passcode: "bench-passcode", caller: caller)
                ours = min(ours, (ContinuousClock.now - start).seconds)
                reference = min(reference, try opensslKDF(repeats: 1))
            }
            return (ours, reference)
        }
        return Harness.result(
            "passcode-unlock", unit: "ms", ours: ours * 1000, reference: reference * 1000, higherIsBetter: false,
            referenceName: "openssl kdf PBKDF2 (the KDF alone)")
    }

    /// Token to `success` for a new user choosing a passcode, against the bare KDF.
    static func setupNewUser() throws -> BenchmarkResult {
        let ours = try blocking {
            try await withDomain { directory, domain in
                var best = Double.infinity
                for run in 0..<3 {
                    let user = "user\(run)"
                    let token = try await domain.testToken(userID: user).token
                    let service = BBMEnterpriseService(
                        store: try EndpointStore(directory: directory.appendingPathComponent(user)), endpointDescription: "bench")
                    try await service.start(domain: domain, environment: .sandbox)
                    let start = ContinuousClock.now
                    await service.sendAuthToken(token, userIdentifier: user)
                    try await service.syncStart(passcode: "bench-passcode", action: .new)
                    let state = await service.waitForSettledState()
                    best = min(best, (ContinuousClock.now - start).seconds)
                    guard state.setupState == .success else { throw BenchError("setup ended in \(state)") }
                    await service.stop()
                }
                return best
            }
        }
        return Harness.result(
            "setup-new-user", unit: "ms", ours: ours * 1000, reference: try opensslKDF() * 1000, higherIsBetter: false,
            referenceName: "openssl kdf PBKDF2 (the KDF alone)")
    }

    /// Process start to setup `success` with cached credentials and keys, against starting the
    /// same binary to do nothing.
    static func silentSignIn() throws -> BenchmarkResult {
        let (directory, domainPath) = try blocking {
            try await withPersistentDomain()
        }
        defer { try? FileManager.default.removeItem(at: directory) }
        let binary = Harness.executablePath
        let ours = try Harness.bestTime(repeats: 5) {
            let output = try Harness.spawn(
                binary, ["--child-silent-sign-in", domainPath, directory.appendingPathComponent("device").path])
            guard output.hasPrefix("Success") else { throw BenchError("the child ended in \(output)") }
        }
        let bare = try Harness.bestTime(repeats: 5) { _ = try Harness.spawn(binary, ["--child-noop"]) }
        return Harness.result(
            "silent-sign-in", unit: "ms", ours: ours * 1000, reference: bare * 1000, higherIsBetter: false,
            referenceName: "starting spark-bench to do nothing")
    }

    /// A domain and a device that has been set up once (credentials and keys cached).
    static func withPersistentDomain() async throws -> (URL, String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spark-bench-\(UUID().uuidString)")
        let path = directory.appendingPathComponent("domain.sqlite").path
        let domain = try EmbeddedDomain.create(at: path, domainID: "bench", policy: .bench)
        let store = try EndpointStore(directory: directory.appendingPathComponent("device"))
        let manager = BBMTestTokenManager(domain: domain, store: store)
        let account = try await manager.signIn(userID: "alice")
        let service = BBMEnterpriseService(store: store, endpointDescription: "bench")
        try await service.start(domain: domain, environment: .sandbox)
        await service.sendAuthToken(account.idToken, userIdentifier: "alice")
        try await service.syncStart(passcode: "bench-passcode", action: .new)
        guard await service.waitForSettledState().setupState == .success else { throw BenchError("setup failed") }
        await service.stop()
        return (directory, path)
    }

    /// The child process of `silent-sign-in`: sign in silently and wait for setup.
    static func childSilentSignIn(domainPath: String, dataDirectory: String) async -> Int32 {
        do {
            let domain = try EmbeddedDomain.open(at: domainPath)
            let store = try EndpointStore(directory: URL(fileURLWithPath: dataDirectory))
            let manager = BBMTestTokenManager(domain: domain, store: store)
            let service = BBMEnterpriseService(store: store, endpointDescription: "bench")
            try await service.start(domain: domain, environment: .sandbox)
            guard let account = try await manager.signInSilently() else { throw BenchError("nothing cached") }
            await service.sendAuthToken(account.idToken, userIdentifier: account.accountId)
            print(await service.waitForSettledState().setupState)
            return 0
        } catch {
            print("failed: \(error)")
            return 1
        }
    }
}
