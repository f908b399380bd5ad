import Foundation
import SparkDomain
import SparkDomainEngine
import SparkDomainServer
import SparkTestSupport
import Testing

/// The whole contract, run against every implementation: the embedded domain in process and
/// spark-domaind over TLS through RemoteDomain.
@Suite("Domain conformance")
struct ConformanceTests {
    @Test("embedded", arguments: DomainConformance.names)
    func embedded(_ check: String) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let domain = try EmbeddedDomain.create(
                at: directory.appendingPathComponent("domain.sqlite").path, domainID: "conformance")
            try await DomainConformance.run(check, on: DomainUnderTest(service: domain, admin: domain))
        }
    }

    @Test("engine on PostgreSQL", arguments: DomainConformance.names)
    func postgres(_ check: String) async throws {
        let conninfo = try await PostgresCluster.newDatabase()
        let store = try await Fixtures.blocking { try PostgreSQLDomainStore(conninfo: conninfo) }
        try DomainEngine.create(in: store, domainID: "conformance", policy: DomainPolicy())
        let domain = try DomainEngine(store: store, location: store.redactedConnection, passcodeKeys: .generate())
        defer { store.stopListening() }
        try await DomainConformance.run(check, on: DomainUnderTest(service: domain, admin: domain))
    }

    @Test("spark-domaind on PostgreSQL over TLS", arguments: DomainConformance.names)
    func remotePostgres(_ check: String) async throws {
        try await Self.throughDaemon(check, database: try await PostgresCluster.newDatabase())
    }

    @Test("spark-domaind over TLS", arguments: DomainConformance.names)
    func remote(_ check: String) async throws {
        try await Self.throughDaemon(check, database: nil)
    }

    /// Runs `check` against a `spark-domaind` over TLS (on PostgreSQL when `database` is given):
    /// it passes, the daemon exits cleanly, and no request got a 5xx.
    static func throughDaemon(_ check: String, database: String?) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let daemon = try await DomainDaemon.start(in: directory, domainID: "conformance", database: database)
            do {
                try await DomainConformance.run(
                    check, on: DomainUnderTest(service: try daemon.client(), admin: try daemon.administration()))
            } catch {
                await daemon.stop()
                throw error
            }
            #expect(await daemon.stop() == 0, "the daemon exits cleanly on SIGTERM")
            #expect(!daemon.log.contains(#""status":5"#), "no request got a 5xx:\n\(daemon.log)")
        }
    }
}
