// swift-tools-version:6.0
// The Spark SDK core for Linux. See ARCHITECTURE in docs/ for the layers; dependencies point down only.
import Foundation
import PackageDescription

/// Settings every Swift target shares: Swift 6 mode plus the upcoming features the project relies on.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "SparkSDK",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "SparkCrypto", targets: ["SparkCrypto"]),
        .library(name: "SparkMLS", targets: ["SparkMLS"]),
        .library(name: "SparkStore", targets: ["SparkStore"]),
        .library(name: "SparkObservable", targets: ["SparkObservable"]),
        // The domain's contract: the service protocol, its types and errors, the remote client.
        .library(name: "SparkDomain", targets: ["SparkDomain"]),
        .library(name: "SparkSDK", targets: ["SparkSDK"]),
        // The C API (spark/spark.h) as libsparksdk.so; scripts/install.sh installs it with its header.
        .library(name: "sparksdk", type: .dynamic, targets: ["SparkC"]),
        .executable(name: "quickstart", targets: ["quickstart"]),
        .executable(name: "ChatApp", targets: ["ChatApp"]),
        .executable(name: "spark-admin", targets: ["spark-admin"]),
        .executable(name: "spark-bench", targets: ["spark-bench"]),
        .executable(name: "spark-load", targets: ["spark-load"]),
        .executable(name: "spark-domaind", targets: ["spark-domaind"]),
        .executable(name: "spark-mls", targets: ["spark-mls"]),
        .executable(name: "spark-kt-auditor", targets: ["spark-kt-auditor"]),
    ],
    targets: [
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // Ed25519 signing and verification (libsodium is about twice OpenSSL 3.0's speed at both).
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CPostgreSQL",
            path: "Sources/CPostgreSQL",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // A constructor that initialises OpenSSL without its exit-time cleanup (see the file).
        .target(name: "COpenSSLRuntime", linkerSettings: [.linkedLibrary("crypto")]),
        // The one lock of the project: a pthread mutex, which ThreadSanitizer sees (see the file).
        .target(name: "SparkLock", swiftSettings: swiftSettings),
        // The one shape of the project's errors (`CodedError`): a code, a reason.
        .target(name: "SparkError", swiftSettings: swiftSettings),
        // ML-KEM-768 and X-Wing, written from FIPS 203 and the X-Wing draft (the one primitive of
        // our own: Debian 12 has none); Keccak is OpenSSL's, X25519 libsodium's.
        .target(name: "CSparkKEM", linkerSettings: [.linkedLibrary("crypto"), .linkedLibrary("sodium")]),
        .target(
            name: "SparkCrypto",
            dependencies: ["COpenSSL", "COpenSSLRuntime", "CSodium", "CSparkKEM", "SparkLock", "SparkError"],
            swiftSettings: swiftSettings),
        // Messaging Layer Security (RFC 9420): sans-I/O group state over SparkCrypto (and the one lock).
        .target(name: "SparkMLS", dependencies: ["SparkCrypto", "SparkLock", "SparkError"], swiftSettings: swiftSettings),
        .target(name: "SparkStore", dependencies: ["CSQLite", "SparkError"], swiftSettings: swiftSettings),
        .target(name: "CSparkThreadLocal"),
        // The power-cut VFS of the durability tests (see the file); tests only.
        .target(name: "CSparkPowerCut", dependencies: ["CSQLite"]),
        .target(name: "SparkObservable", dependencies: ["CSparkThreadLocal", "SparkLock"], swiftSettings: swiftSettings),
        // The domain client's HTTP transport: libcurl's multi interface (see the header).
        .target(name: "CSparkCurl", linkerSettings: [.linkedLibrary("curl")]),
        // spark-domaind's HTTP server (epoll, TLS by OpenSSL), and its certificates.
        .target(name: "CSparkHTTP", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        // What an app sees of the domain: the service protocol, its types and errors, the wire
        // (package access only) and RemoteDomain.
        .target(
            name: "SparkDomain",
            dependencies: ["SparkCrypto", "SparkMLS", "SparkLock", "SparkError", "CSparkCurl"],
            swiftSettings: swiftSettings
        ),
        // What the domain runs: its rules, stores and the embedded domain. Linked by SparkSDK for
        // the embedded mode, never re-exported; no product, so no app names it.
        .target(
            name: "SparkDomainEngine",
            dependencies: ["SparkDomain", "SparkCrypto", "SparkMLS", "SparkStore", "SparkLock"],
            swiftSettings: swiftSettings
        ),
        // The domain as a network service: routes, limits, metrics, the domain directory.
        .target(
            name: "SparkDomainServer",
            dependencies: [
                "SparkDomain", "SparkDomainEngine", "SparkCrypto", "SparkStore", "SparkLock", "CSparkHTTP", "CPostgreSQL",
            ],
            swiftSettings: swiftSettings
        ),
        // The command-line conventions the tools share (positional words, options, exit 64).
        .target(name: "SparkCLI", swiftSettings: swiftSettings),
        .executableTarget(
            name: "spark-domaind",
            dependencies: ["SparkDomainServer", "SparkDomain", "SparkDomainEngine", "SparkCLI"],
            swiftSettings: swiftSettings
        ),
        // The desktop Secret Service through libsecret, loaded at run time (see the file).
        .target(name: "CSparkSecret", linkerSettings: [.linkedLibrary("dl")]),
        .target(
            name: "SparkSDK",
            dependencies: [
                "SparkCrypto", "SparkMLS", "SparkStore", "SparkObservable", "SparkDomain", "SparkDomainEngine", "CSparkSecret",
                "SparkLock", "SparkError",
            ],
            swiftSettings: swiftSettings
        ),
        // The C API: its header and the parts that are plain C (Sources/CSparkAPI/include/spark/spark.h).
        .target(name: "CSparkAPI"),
        // The C API's Swift side: every function of spark.h over SparkSDK.
        .target(
            name: "SparkC",
            dependencies: ["CSparkAPI", "SparkSDK", "SparkDomain", "SparkObservable", "SparkLock"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SparkTestSupport",
            dependencies: [
                "SparkCrypto", "SparkMLS", "SparkStore", "SparkDomain", "SparkDomainEngine", "SparkLock", "CSparkPowerCut",
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "quickstart",
            dependencies: ["SparkSDK", "SparkDomain", "SparkDomainEngine", "SparkObservable", "SparkCrypto"],
            path: "Examples/QuickStart",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "ChatApp",
            dependencies: ["SparkSDK"],
            path: "Examples/ChatApp",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "spark-kt-auditor", dependencies: ["SparkCrypto", "SparkDomain", "SparkCLI"], swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "spark-admin",
            dependencies: ["SparkCrypto", "SparkDomain", "SparkDomainEngine", "SparkSDK", "SparkCLI"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "spark-bench",
            dependencies: [
                "SparkCrypto", "SparkObservable", "SparkDomain", "SparkDomainEngine", "SparkDomainServer", "SparkSDK",
                "SparkStore", "SparkLock",
                "SparkMLS", "SparkTestSupport",
            ],
            path: "Benchmarks/SparkBench",
            exclude: ["Python"],
            swiftSettings: swiftSettings
        ),
        // An organisation's load on two instances behind haproxy (see its main.swift).
        .executableTarget(
            name: "spark-load",
            dependencies: ["SparkCrypto", "SparkDomain", "SparkMLS", "SparkCLI", "SparkTestSupport"],
            path: "Benchmarks/SparkLoad",
            exclude: ["load.py"],
            swiftSettings: swiftSettings
        ),
        // The replay driver the fuzzers use when libFuzzer is not linked (see the file).
        .target(name: "CSparkFuzz", path: "Sources/CSparkFuzz"),
        .executableTarget(
            name: "spark-fuzz",
            dependencies: [
                "CSparkFuzz", "SparkCrypto", "SparkDomain", "SparkDomainEngine", "SparkDomainServer", "SparkLock", "SparkSDK",
                "SparkMLS",
            ],
            path: "Tests/Fuzz/spark-fuzz",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "store-writer",
            dependencies: ["SparkStore"],
            path: "Tests/Helpers/store-writer",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "crypto-exit",
            dependencies: ["SparkCrypto"],
            path: "Tests/Helpers/crypto-exit",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SparkCryptoTests",
            dependencies: ["SparkCrypto", "CSparkKEM", "SparkTestSupport", "crypto-exit"],
            exclude: ["Python", "Vectors"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "domain-peer",
            dependencies: ["SparkDomain", "SparkDomainEngine"],
            path: "Tests/Helpers/domain-peer",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SparkDomainTests",
            dependencies: [
                "SparkDomain", "SparkDomainEngine", "SparkDomainServer", "SparkStore", "SparkTestSupport", "domain-peer",
                "spark-domaind", "spark-kt-auditor", "spark-admin",
            ],
            exclude: ["Python"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sdk-peer",
            dependencies: ["SparkSDK", "SparkDomain", "SparkDomainEngine", "SparkCrypto", "SparkObservable"],
            path: "Tests/Helpers/sdk-peer",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SparkSDKTests",
            dependencies: [
                "SparkSDK", "SparkDomain", "SparkDomainEngine", "SparkStore", "SparkTestSupport", "SparkLock", "spark-admin",
                "sdk-peer",
                "spark-domaind",
            ],
            exclude: ["Python"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "QuickStartTests",
            dependencies: [
                "SparkDomain", "SparkDomainEngine", "SparkTestSupport", "SparkLock", "quickstart", "spark-admin", "ChatApp",
                "spark-fuzz",
                "spark-domaind",
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "spark-mls",
            dependencies: ["SparkMLS", "SparkCrypto", "SparkCLI"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SparkMLSTests",
            dependencies: ["SparkMLS", "SparkCrypto", "SparkTestSupport", "SparkLock", "spark-mls"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SparkObservableTests",
            dependencies: ["SparkObservable", "SparkTestSupport", "SparkLock"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SparkStoreTests",
            dependencies: ["SparkStore", "SparkTestSupport", "SparkLock", "store-writer"],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The mutation tests (scripts/mutants/run.py) build only the test modules that hold a mutant's
// tests, named in SPARK_MUTANT_TEST_MODULES: another test module would be type-checked again,
// for nothing, whenever a mutation changes an interface it imports.
if let wanted = ProcessInfo.processInfo.environment["SPARK_MUTANT_TEST_MODULES"]?.split(separator: ",").map(String.init) {
    package.targets.removeAll { $0.type == .test && !wanted.contains($0.name) }
}
