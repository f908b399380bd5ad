import CSparkHTTP
package import Foundation
import SparkCrypto
import SparkDomain
package import SparkDomainEngine

/// The directory `spark-domaind init` makes and `serve` serves (mode 0700, every file 0600):
///
/// | File | What |
/// |---|---|
/// | `domain.sqlite` | the domain's database (with its issuers' private keys), unless… |
/// | `database.conninfo` | …the domain is in PostgreSQL: the libpq connection string |
/// | `passcode.keys` | the OPRF secrets that harden users' passcodes (``PasscodeKeys``): never in the database |
/// | `operator.credential` | the operator's credential for `spark-admin --operator` |
/// | `ca.pem`, `ca.key` | the domain's private CA; clients trust `ca.pem` |
/// | `server.pem`, `server.key` | the server certificate for the host names, signed by the CA (824 days; `serve` renews it 60 days before its end) |
/// | `ConfigSettings.plist` | a client configuration pointing at the domain |
///
/// Nothing in it is for clients except `ca.pem` and the plist, which the operator copies to
/// them; the daemon's user alone can read the rest.
package struct DomainDirectory: Sendable {
    /// The directory.
    package let url: URL

    /// The database file (SQLite).
    package var databasePath: String { url.appendingPathComponent("domain.sqlite").path }
    /// The file holding the PostgreSQL connection string, when the domain is there.
    package var connectionPath: String { url.appendingPathComponent("database.conninfo").path }
    /// The passcode-hardening secrets' file.
    package var passcodeKeysPath: String { url.appendingPathComponent("passcode.keys").path }
    /// The operator credential's file.
    package var credentialPath: String { url.appendingPathComponent("operator.credential").path }
    /// The CA certificate clients trust.
    package var caPath: String { url.appendingPathComponent("ca.pem").path }
    /// The server certificate chain.
    package var certificatePath: String { url.appendingPathComponent("server.pem").path }
    /// The server key.
    package var keyPath: String { url.appendingPathComponent("server.key").path }
    /// The ready client configuration.
    package var clientConfigurationPath: String { url.appendingPathComponent("ConfigSettings.plist").path }

    /// The port `init` records in the client configuration unless told otherwise.
    package static let defaultPort = 8443

    /// An existing domain directory.
    package init(existing url: URL) throws {
        self.url = url
        guard FileManager.default.fileExists(atPath: databasePath) || FileManager.default.fileExists(atPath: connectionPath)
        else {
            throw DomainError(
                .notFound,
                "\(url.path) is not a domain directory (no domain.sqlite or database.conninfo); make one with `spark-domaind init`"
            )
        }
    }

    /// The PostgreSQL connection string, when the domain is there (nil: SQLite).
    package func databaseConnection() throws -> String? {
        guard FileManager.default.fileExists(atPath: connectionPath) else { return nil }
        guard let data = FileManager.default.contents(atPath: connectionPath) else {
            throw DomainError(.notFound, "\(connectionPath) cannot be read")
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Opens the domain for serving: the engine over PostgreSQL (a pool of `connections`) when
    /// the directory names a database, over `domain.sqlite` otherwise.
    package func openDomain(connections: Int = 8) throws -> DomainEngine {
        guard FileManager.default.fileExists(atPath: passcodeKeysPath) else {
            throw DomainError(
                .unavailable,
                "\(passcodeKeysPath) is missing: the domain's passcode keys (make them with `spark-domaind passcode-keys \(url.path) rotate`; every instance needs the same file)"
            )
        }
        if let conninfo = try databaseConnection() {
            let store = try PostgreSQLDomainStore(conninfo: conninfo, connections: connections)
            return try DomainEngine(
                store: store, location: store.redactedConnection, passcodeKeys: try PasscodeKeys.load(from: passcodeKeysPath))
        }
        return try EmbeddedDomain.open(
            at: databasePath, sharedWithOtherProcesses: false, passcodeKeys: try PasscodeKeys.load(from: passcodeKeysPath))
    }

    /// Makes a domain directory: the database with fresh issuer keys, the operator credential,
    /// a CA and a server certificate for `hostnames`, and a client configuration naming
    /// `https://HOSTNAMES[0]:PORT`. With `database` (a libpq connection string) the domain is
    /// made in that PostgreSQL database, which must hold none yet, and the string is kept in
    /// `database.conninfo`. Refuses a directory that is not empty.
    package static func create(
        at url: URL, domainID: String, sandbox: Bool, hostnames: [String], port: Int = defaultPort, database: String? = nil
    ) throws -> DomainDirectory {
        let manager = FileManager.default
        if let existing = try? manager.contentsOfDirectory(atPath: url.path), !existing.isEmpty {
            throw DomainError(.conflict, "\(url.path) is not empty; a domain is made in a new or empty directory")
        }
        guard !hostnames.isEmpty, hostnames.allSatisfy(Self.isHostname) else {
            throw DomainError(
                .invalidRequest, "host names are DNS names or IP addresses, not '\(hostnames.joined(separator: " "))'")
        }
        guard (1...65535).contains(port) else { throw DomainError(.invalidRequest, "the port is 1 to 65535, not \(port)") }
        if let database { try PostgreSQLDomainStore.check(database) }
        do {
            try manager.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try manager.setAttributes([.posixPermissions: 0o700], ofItemAtPath: url.path)
        } catch {
            throw DomainError(.storageFailure, "cannot make \(url.path): \(error.localizedDescription)")
        }
        let directory = DomainDirectory(url: url)
        // Files made from here on are the daemon user's alone.
        let previous = umask(0o077)
        defer { umask(previous) }
        let policy = DomainPolicy(userAuthenticationEnabled: !sandbox)
        try PasscodeKeys.generate().write(to: directory.passcodeKeysPath)
        if let database {
            let store = try PostgreSQLDomainStore(conninfo: database, connections: 1)
            try DomainEngine.create(in: store, domainID: domainID, policy: policy)
            try directory.write(Data((database + "\n").utf8), to: directory.connectionPath)
        } else {
            _ = try EmbeddedDomain.create(
                at: directory.databasePath, domainID: domainID, policy: policy,
                passcodeKeys: try PasscodeKeys.load(from: directory.passcodeKeysPath))
        }

        let credential = "spark-operator-v1." + SecureBytes(randomCount: 32).withUnsafeBytes { Data($0) }.base64URLEncodedString()
        try directory.write(Data((credential + "\n").utf8), to: directory.credentialPath)

        let certificates = try makeCertificates(commonName: hostnames[0], names: hostnames)
        try directory.write(Data(certificates.caCertificate.utf8), to: directory.caPath)
        try directory.write(Data(certificates.caKey.utf8), to: url.appendingPathComponent("ca.key").path)
        try directory.write(Data(certificates.serverCertificate.utf8), to: directory.certificatePath)
        try directory.write(Data(certificates.serverKey.utf8), to: directory.keyPath)

        let host = hostnames[0].contains(":") ? "[\(hostnames[0])]" : hostnames[0]
        let provider = sandbox ? "testAuth" : "accounts"
        let plist: [String: Any] = [
            "authProvider": provider,
            provider: ["domain": domainID, "environment": sandbox ? "sandbox" : "production"],
            "domainURL": "https://\(host):\(port)",
            "domainCAFile": "ca.pem",
        ]
        let data = try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
        try directory.write(data, to: directory.clientConfigurationPath)
        return directory
    }

    private init(url: URL) { self.url = url }

    /// The operator credential.
    package func operatorCredential() throws -> String {
        guard let data = FileManager.default.contents(atPath: credentialPath) else {
            throw DomainError(.notFound, "\(credentialPath) cannot be read")
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Reads a PEM file of the directory (or elsewhere).
    package static func readPEM(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8),
            text.contains("-----BEGIN")
        else { throw DomainError(.invalidRequest, "\(path) is not a readable PEM file") }
        return text
    }

    private func write(_ data: Data, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw DomainError(.storageFailure, "cannot write \(path)")
        }
    }

    static func isHostname(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 253
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "." || $0 == ":") }
    }

    struct Certificates {
        var caCertificate: String
        var caKey: String
        var serverCertificate: String
        var serverKey: String
    }

    /// How long a server certificate made here is valid: 824 days, since it is backdated an hour
    /// and 825 is the most CA/Browser Forum rules (and testssl.sh) accept;
    /// ``renewCertificateIfDue(within:)`` makes the next.
    package static let serverCertificateDays: UInt32 = 824
    /// How long before its end ``renewCertificateIfDue(now:)`` replaces it.
    package static let renewalDays: UInt32 = 60

    /// Replaces the server certificate with a new key and certificate for the same names, signed
    /// by the directory's CA, when the CA issued it and it ends within ``renewalDays`` (a
    /// certificate the operator gave, `--certificate`, or one of another CA, is left alone):
    /// whether it did. `serve` calls it at start; clients trust the CA, so nothing changes for
    /// them. `within` overrides ``renewalDays`` (tests).
    @discardableResult
    package func renewCertificateIfDue(within: UInt32 = DomainDirectory.renewalDays) throws -> Bool {
        guard FileManager.default.fileExists(atPath: caPath),
            FileManager.default.fileExists(atPath: url.appendingPathComponent("ca.key").path)
        else { return false }
        let authority = try Self.readPEM(caPath)
        let authorityKey = try Self.readPEM(url.appendingPathComponent("ca.key").path)
        let current = try Self.readPEM(certificatePath)
        var error = [CChar](repeating: 0, count: 256)
        var certificate: UnsafeMutablePointer<CChar>?
        var key: UnsafeMutablePointer<CChar>?
        let renewed = spark_tls_renew_certificate(
            authority, authorityKey, current, Self.serverCertificateDays, within, &certificate, &key, &error, error.count)
        defer { for text in [certificate, key] { free(text) } }
        guard renewed >= 0 else {
            throw DomainError(
                .unavailable, String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        guard renewed == 1, let certificate, let key else { return false }
        try write(Data(String(cString: key).utf8), to: keyPath)
        try write(Data(String(cString: certificate).utf8), to: certificatePath)
        return true
    }

    /// A CA (ten years) and a server certificate for `names` (``serverCertificateDays``), through
    /// OpenSSL.
    static func makeCertificates(commonName: String, names: [String]) throws -> Certificates {
        var error = [CChar](repeating: 0, count: 256)
        var caCertificate: UnsafeMutablePointer<CChar>?
        var caKey: UnsafeMutablePointer<CChar>?
        var serverCertificate: UnsafeMutablePointer<CChar>?
        var serverKey: UnsafeMutablePointer<CChar>?
        let copies = names.map { strdup($0) }
        defer { for copy in copies { free(copy) } }
        let ok = spark_tls_make_certificates(
            commonName, copies.map { UnsafePointer($0) }, copies.count, 3650, Self.serverCertificateDays, &caCertificate, &caKey,
            &serverCertificate, &serverKey, &error, error.count)
        defer { for text in [caCertificate, caKey, serverCertificate, serverKey] { free(text) } }
        guard ok == 1, let caCertificate, let caKey, let serverCertificate, let serverKey else {
            throw DomainError(
                .unavailable, String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return Certificates(
            caCertificate: String(cString: caCertificate), caKey: String(cString: caKey),
            serverCertificate: String(cString: serverCertificate), serverKey: String(cString: serverKey))
    }
}
