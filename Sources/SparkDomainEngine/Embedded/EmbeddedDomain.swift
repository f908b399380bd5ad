import Foundation
package import SparkDomain

/// The embedded domain: ``DomainEngine`` over ``SQLiteDomainStore``, one SQLite file (WAL mode)
/// that every process on the machine opens. Two quick-start processes with different data
/// directories are two devices of one domain; all state lives in the file, none in process
/// memory, so processes see each other's changes. For development on one machine: every
/// process that can write the file is trusted, so it is no trust boundary (`spark-domaind` is).
package typealias EmbeddedDomain = DomainEngine

extension DomainEngine {
    /// Opens an existing domain file.
    ///
    /// - Parameters:
    ///   - mailer: where mail goes; the domain's outbox table by default.
    ///   - allowUnsafePasswordHashing: accept a policy with fewer than OWASP's password-hash
    ///     iterations (tests only).
    ///   - sharedWithOtherProcesses: whether other processes write the file too (the default);
    ///     `spark-domaind`, which owns its file, passes false.
    ///   - passcodeKeys: the passcode-hardening secrets; by default the file
    ///     ``passcodeKeysPath(forDatabase:)`` beside the database, made on first use.
    package static func open(
        at path: String, clock: WallClock = .system, mailer: (any Mailer)? = nil, allowUnsafePasswordHashing: Bool = false,
        sharedWithOtherProcesses: Bool = true, passcodeKeys: PasscodeKeys? = nil
    ) throws -> DomainEngine {
        guard FileManager.default.fileExists(atPath: path) else {
            throw DomainError(.unavailable, "no domain at \(path); create it with `spark-admin create`")
        }
        return try DomainEngine(
            store: try SQLiteDomainStore(path: path), location: path,
            passcodeKeys: try passcodeKeys ?? PasscodeKeys.loadOrCreate(at: passcodeKeysPath(forDatabase: path)), clock: clock,
            mailer: mailer,
            allowUnsafePasswordHashing: allowUnsafePasswordHashing, sharedWithOtherProcesses: sharedWithOtherProcesses)
    }

    /// Creates a domain file with fresh issuer keys. Fails with ``DomainError/Code/conflict`` if
    /// the file already holds a domain.
    ///
    /// - Parameter passcodeKeys: the passcode-hardening secrets; by default the file
    ///   ``passcodeKeysPath(forDatabase:)`` beside the database, made if missing.
    package static func create(
        at path: String, domainID: String, policy: DomainPolicy = DomainPolicy(), clock: WallClock = .system,
        mailer: (any Mailer)? = nil, allowUnsafePasswordHashing: Bool = false, passcodeKeys: PasscodeKeys? = nil
    ) throws -> DomainEngine {
        try policy.validate(allowUnsafePasswordHashing: allowUnsafePasswordHashing)
        let store = try SQLiteDomainStore(path: path)
        do {
            try create(
                in: store, domainID: domainID, policy: policy, allowUnsafePasswordHashing: allowUnsafePasswordHashing,
                clock: clock)
        } catch let error as DomainError where error.code == .conflict {
            throw DomainError(.conflict, "\(path) already holds a domain")
        }
        return try DomainEngine(
            store: store, location: path,
            passcodeKeys: try passcodeKeys ?? PasscodeKeys.loadOrCreate(at: passcodeKeysPath(forDatabase: path)),
            clock: clock, mailer: mailer, allowUnsafePasswordHashing: allowUnsafePasswordHashing, sharedWithOtherProcesses: true)
    }

    /// Where the embedded domain keeps its passcode-hardening secrets: `<database>.passcode-keys`
    /// (mode 0600). On one machine this is no separation from the database (the embedded domain
    /// is for development); `spark-domaind` keeps them apart from its database's host.
    package static func passcodeKeysPath(forDatabase path: String) -> String { path + ".passcode-keys" }

    /// Opens the domain at `path`, creating it with `domainID` and `policy` if the file does not
    /// exist yet (the quick start's embedded default). An existing domain with another id is an
    /// error, so two apps never share a domain by accident.
    package static func openOrCreate(
        at path: String, domainID: String, policy: DomainPolicy = DomainPolicy(), clock: WallClock = .system,
        mailer: (any Mailer)? = nil, allowUnsafePasswordHashing: Bool = false
    ) throws -> DomainEngine {
        let domain: DomainEngine
        do {
            domain = try create(
                at: path, domainID: domainID, policy: policy, clock: clock, mailer: mailer,
                allowUnsafePasswordHashing: allowUnsafePasswordHashing)
        } catch let error as DomainError where error.code == .conflict {
            domain = try open(at: path, clock: clock, mailer: mailer, allowUnsafePasswordHashing: allowUnsafePasswordHashing)
        }
        guard domain.domainID == domainID else {
            throw DomainError(.conflict, "\(path) holds domain '\(domain.domainID)', not '\(domainID)'")
        }
        return domain
    }
}
