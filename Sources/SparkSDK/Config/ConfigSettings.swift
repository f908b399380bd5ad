public import Foundation
public import SparkDomain

/// The SDK's configuration, read from `ConfigSettings.plist` (Spark's file and keys, plus what
/// this SDK adds). Every key and its default is listed in the README.
///
/// ```swift
/// let settings = try ConfigSettings.load(from: URL(fileURLWithPath: "ConfigSettings.plist"))
/// ```
public struct ConfigSettings: Sendable, Equatable {
    /// Who proves the user's identity.
    public enum AuthProvider: String, Sendable, CaseIterable {
        /// Spark's sandbox: any user id gets a token from the domain's test issuer.
        case testAuth
        /// The domain's sign-up and login assistant (real accounts).
        case accounts
        /// The app's own identity provider hands the SDK a JWT.
        case custom
        /// The organisation's OpenID Connect provider (``BBMOIDCTokenManager``).
        case oidc
    }

    /// Spark's environments.
    public enum Environment: String, Sendable, CaseIterable {
        /// Spark's sandbox.
        case sandbox
        /// Production.
        case production
    }

    /// One identity provider's dictionary (`testAuth`, `accounts`, `custom` or `oidc`).
    public struct Provider: Sendable, Equatable {
        /// The OAuth client id (Spark's `clientId`), when the provider has one.
        public var clientID: String?
        /// The domain id.
        public var domain: String
        /// The environment.
        public var environment: Environment
        /// For `custom`: the `iss` of the app's tokens; for `oidc`: the provider's issuer.
        public var issuer: String?
        /// For `oidc`: everything else the token manager needs (`issuer` and `clientId` too).
        public var openID: BBMOIDCTokenManager.Configuration?
    }

    /// The lowest passcode iteration count the plist may set (OWASP's figure for PBKDF2).
    public static let passcodeIterationsFloor = 600_000
    /// The highest passcode iteration count the plist may set.
    public static let passcodeIterationsCeiling = 5_000_000

    /// `authProvider`.
    public var authProvider: AuthProvider
    /// `useBlackBerryKMS`: keys are kept, passcode-protected, in the domain's key store (true,
    /// the default) or by the app through a `BBMKeyStorageProvider` (false).
    public var useBlackBerryKMS: Bool
    /// `testAuth`.
    public var testAuth: Provider?
    /// `accounts`.
    public var accounts: Provider?
    /// `custom`.
    public var custom: Provider?
    /// `oidc`.
    public var oidc: Provider? = nil
    /// `dataDirectory`: this device's data (its endpoint store).
    public var dataDirectory: URL
    /// `embeddedDomainPath`: the embedded domain's SQLite file (used when there is no
    /// `domainURL`).
    public var embeddedDomainPath: URL
    /// `domainURL`: the `spark-domaind` serving the domain (`https://HOST:PORT`); without it the
    /// domain is the embedded file, for development on one machine. With `domainURLs`, the
    /// first of them.
    public var domainURL: URL? { domainURLs.first }
    /// `domainURLs` (or `domainURL` alone): every `spark-domaind` instance serving the domain,
    /// tried in order; the client moves to the next when one fails.
    public var domainURLs: [URL]
    /// How the client trusts `domainURL`'s certificate: `domainCAFile` (a PEM CA; relative to
    /// the plist's folder) and/or `domainPublicKeyPin` (the server key's SHA-256, base64).
    public var domainTrust: DomainTrust?
    /// `tokenLeewaySeconds`: refresh tokens this long before they expire.
    public var tokenLeeway: Int
    /// `passcodeIterations`: PBKDF2 iterations (`p2c`) for new passcode-protected key blobs.
    public var passcodeIterations: Int
    /// `endpointDescription`: how this device is listed among the user's endpoints.
    public var endpointDescription: String
    /// `ownDeviceApproval`: `required` (the default: a new device of the user joins chats once a
    /// device the user has approves it) or `automatic` (Spark's model; weaker, see the README).
    public var ownDeviceApproval: OwnDeviceApproval = .required
    /// `transparencyAuditorKey`: a third-party auditor's public key (P-256 `x ‖ y`, 64 bytes,
    /// base64, as `spark-kt-auditor init` prints it); the device then accepts only transparency
    /// heads that auditor co-signed. Absent: none required.
    public var transparencyAuditorKey: Data?
    /// `postQuantumChats`: whether this device runs post-quantum chats (true, the default): it
    /// publishes KeyPackages of the X-Wing MLS suite beside the classic ones, and its new chats
    /// are post-quantum when every member device can be. False: classic MLS only, as a device of
    /// an earlier release (docs/SECURITY.md, "Post-quantum chats").
    public var postQuantumChats = true

    /// The selected provider's dictionary.
    public var provider: Provider {
        switch authProvider {
        case .testAuth: testAuth!
        case .accounts: accounts!
        case .custom: custom!
        case .oidc: oidc!
        }
    }

    /// The domain id of the selected provider.
    public var domain: String { provider.domain }

    /// The domain this configuration names: a `RemoteDomain` at `domainURL`, or else what
    /// `embedded` opens at `embeddedDomainPath` (by default the embedded domain's file, created
    /// on first use, a sandbox for `testAuth`).
    public func openDomain(embedded: any EmbeddedDomainOpener = EmbeddedDomainFile()) throws -> any DomainService {
        try openDomain(configFile: nil, embedded: embedded)
    }

    /// ``openDomain(embedded:)``; with the `configFile` it was read from, an embedded domain
    /// that is a sandbox (its policy has user authentication off, so it signs a test token for
    /// any name) is refused for any provider but `testAuth`: real accounts or an app's own
    /// tokens on it would be no authentication at all. (A remote domain's policy is its
    /// operator's.)
    func openDomain(configFile: String?, embedded opener: any EmbeddedDomainOpener) throws -> any DomainService {
        if !domainURLs.isEmpty, let domainTrust {
            return try RemoteDomain(urls: domainURLs, domainID: domain, trust: domainTrust)
        }
        let (embedded, isSandbox) = try opener.open(
            at: embeddedDomainPath.path, domainID: domain, sandbox: authProvider == .testAuth)
        if let configFile, authProvider != .testAuth, isSandbox {
            throw ConfigError(
                .domainMismatch, file: configFile, keyPath: "authProvider",
                "is '\(authProvider.rawValue)', but the domain at \(embeddedDomainPath.path) is a sandbox: its policy has user authentication off, so it signs a test token for any user name. Turn it on with `spark-admin policy set --user-auth on`, or use authProvider testAuth"
            )
        }
        return embedded
    }

    /// Reads and checks a plist file.
    ///
    /// - Parameters:
    ///   - url: the plist file; relative paths in it are relative to its folder.
    ///   - environment: where `XDG_DATA_HOME` and `HOME` are read for the defaults.
    /// - Throws: ``ConfigError`` naming the file and key.
    public static func load(
        from url: URL, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> ConfigSettings {
        let name = url.path
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw ConfigError(.missingFile, file: name, keyPath: "", "cannot be read (does the file exist?)")
        }
        return try decode(data, file: name, baseDirectory: url.deletingLastPathComponent(), environment: environment)
    }

    /// Checks plist data; `file` names it in errors and relative paths are resolved against
    /// `baseDirectory`.
    public static func decode(
        _ data: Data, file: String, baseDirectory: URL, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> ConfigSettings {
        let root: [String: Any]
        do {
            guard let dictionary = try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any] else {
                throw ConfigError(.notAPlist, file: file, keyPath: "", "is a property list but its root is not a dictionary")
            }
            root = dictionary
        } catch let error as ConfigError {
            throw error
        } catch {
            throw ConfigError(.notAPlist, file: file, keyPath: "", "is not a property list (XML, binary or OpenStep)")
        }
        try checkUnknownKeys(root, file: file)
        let raw: RawSettings
        do {
            raw = try PropertyListDecoder().decode(RawSettings.self, from: data)
        } catch let error as DecodingError {
            throw ConfigError(decoding: error, file: file)
        }
        return try raw.settings(file: file, baseDirectory: baseDirectory, environment: environment)
    }

    static let knownKeys: [String: String] = [
        "authProvider": "a string: testAuth, accounts, custom or oidc",
        "useBlackBerryKMS": "a boolean",
        "testAuth": "a dictionary with clientId, domain and environment",
        "accounts": "a dictionary with domain and environment",
        "custom": "a dictionary with domain, environment and issuer",
        "oidc": "a dictionary with domain, environment, issuer and clientId",
        "dataDirectory": "a string: a directory path",
        "embeddedDomainPath": "a string: a file path",
        "domainURL": "a string: https://HOST:PORT of the domain's spark-domaind",
        "domainURLs": "an array of strings: https://HOST:PORT of each spark-domaind instance serving the domain",
        "domainCAFile": "a string: the domain's CA certificate (PEM), relative to this file",
        "domainPublicKeyPin": "a string: the SHA-256 of the domain's public key, base64",
        "tokenLeewaySeconds": "an integer, 0 to 600",
        "passcodeIterations": "an integer, \(passcodeIterationsFloor) to \(passcodeIterationsCeiling)",
        "endpointDescription": "a string",
        "ownDeviceApproval": "a string: required or automatic",
        "transparencyAuditorKey": "a string: the auditor's public key, 64 bytes in base64 (spark-kt-auditor init prints it)",
        "postQuantumChats": "a boolean",
    ]
    static let knownProviderKeys: [String: String] = [
        "clientId": "a string", "domain": "a string: the domain id", "environment": "a string: sandbox or production",
        "issuer": "a string: the iss of your tokens",
    ]
    static let knownOpenIDKeys: [String: String] = [
        "clientId": "a string: this app's client id at the provider", "domain": "a string: the domain id",
        "environment": "a string: sandbox or production", "issuer": "a string: the provider's issuer URL",
        "clientSecret": "a string", "scopes": "an array of strings", "userClaim": "a string: sub, email or preferred_username",
        "caFile": "a string: the provider's CA certificate (PEM), relative to this file", "flow": "a string: browser or device",
    ]

    private static func checkUnknownKeys(_ root: [String: Any], file: String) throws {
        for key in root.keys.sorted() where knownKeys[key] == nil {
            throw ConfigError(
                .unknownKey, file: file, keyPath: key,
                "is not a known key; known keys: \(knownKeys.keys.sorted().joined(separator: ", "))")
        }
        for providerKey in ["testAuth", "accounts", "custom", "oidc"] {
            guard let dictionary = root[providerKey] as? [String: Any] else { continue }
            let known = providerKey == "oidc" ? knownOpenIDKeys : knownProviderKeys
            for key in dictionary.keys.sorted() where known[key] == nil {
                throw ConfigError(
                    .unknownKey, file: file, keyPath: "\(providerKey).\(key)",
                    "is not a known key; known keys: \(known.keys.sorted().joined(separator: ", "))")
            }
        }
    }
}

/// The plist as written, before defaults and checks.
private struct RawSettings: Decodable {
    struct RawProvider: Decodable {
        var clientId: String?
        var domain: String
        var environment: String
        var issuer: String?
        var clientSecret: String?
        var scopes: [String]?
        var userClaim: String?
        var caFile: String?
        var flow: String?
    }

    var authProvider: String
    var useBlackBerryKMS: Bool?
    var testAuth: RawProvider?
    var accounts: RawProvider?
    var custom: RawProvider?
    var oidc: RawProvider?
    var dataDirectory: String?
    var embeddedDomainPath: String?
    var domainURL: String?
    var domainURLs: [String]?
    var domainCAFile: String?
    var domainPublicKeyPin: String?
    var tokenLeewaySeconds: Int?
    var passcodeIterations: Int?
    var endpointDescription: String?
    var ownDeviceApproval: String?
    var transparencyAuditorKey: String?
    var postQuantumChats: Bool?

    func settings(file: String, baseDirectory: URL, environment: [String: String]) throws -> ConfigSettings {
        guard let provider = ConfigSettings.AuthProvider(rawValue: authProvider) else {
            throw ConfigError(
                .outOfRange, file: file, keyPath: "authProvider",
                "is '\(authProvider)'; expected testAuth, accounts, custom or oidc")
        }
        func checked(_ raw: RawProvider?, _ key: String) throws -> ConfigSettings.Provider? {
            guard let raw else { return nil }
            guard let environmentValue = ConfigSettings.Environment(rawValue: raw.environment) else {
                throw ConfigError(
                    .outOfRange, file: file, keyPath: "\(key).environment",
                    "is '\(raw.environment)'; expected sandbox or production")
            }
            guard !raw.domain.isEmpty, raw.domain.count <= 128, !raw.domain.contains(where: { $0.isWhitespace || $0 == "/" })
            else {
                throw ConfigError(
                    .outOfRange, file: file, keyPath: "\(key).domain", "must be 1 to 128 characters without spaces or '/'")
            }
            return ConfigSettings.Provider(
                clientID: raw.clientId, domain: raw.domain, environment: environmentValue, issuer: raw.issuer)
        }
        let testAuth = try checked(testAuth, "testAuth")
        let accounts = try checked(accounts, "accounts")
        let custom = try checked(custom, "custom")
        var oidc = try checked(oidc, "oidc")
        if oidc != nil, let raw = self.oidc {
            oidc?.openID = try openID(raw, file: file, baseDirectory: baseDirectory)
        }
        let selected: ConfigSettings.Provider? =
            switch provider {
            case .testAuth: testAuth
            case .accounts: accounts
            case .custom: custom
            case .oidc: oidc
            }
        guard let selected else {
            throw ConfigError(
                .missingKey, file: file, keyPath: provider.rawValue,
                "is missing: authProvider is \(provider.rawValue), so its dictionary (domain, environment) is required")
        }
        if provider == .custom, (selected.issuer ?? "").isEmpty {
            throw ConfigError(
                .missingKey, file: file, keyPath: "custom.issuer", "is missing (expected a string: the iss of your tokens)")
        }
        let leeway = tokenLeewaySeconds ?? 60
        guard (0...600).contains(leeway) else {
            throw ConfigError(.outOfRange, file: file, keyPath: "tokenLeewaySeconds", "is \(leeway); expected 0 to 600")
        }
        let iterations = passcodeIterations ?? ConfigSettings.passcodeIterationsFloor
        guard iterations >= ConfigSettings.passcodeIterationsFloor else {
            throw ConfigError(
                .securityFloor, file: file, keyPath: "passcodeIterations",
                "is \(iterations), below the security floor of \(ConfigSettings.passcodeIterationsFloor)")
        }
        guard iterations <= ConfigSettings.passcodeIterationsCeiling else {
            throw ConfigError(
                .outOfRange, file: file, keyPath: "passcodeIterations",
                "is \(iterations); at most \(ConfigSettings.passcodeIterationsCeiling)")
        }
        let dataHome = Self.dataHome(environment)
        func path(_ value: String?, key: String, default fallback: URL) throws -> URL {
            guard let value else { return fallback }
            guard !value.isEmpty else { throw ConfigError(.outOfRange, file: file, keyPath: key, "is empty; expected a path") }
            if value.hasPrefix("~/"), let home = environment["HOME"] {
                return URL(fileURLWithPath: home).appendingPathComponent(String(value.dropFirst(2)))
            }
            if value.hasPrefix("/") { return URL(fileURLWithPath: value).standardizedFileURL }
            return baseDirectory.appendingPathComponent(value).standardizedFileURL
        }
        let sdkHome = dataHome.appendingPathComponent("spark-sdk")
        let description = endpointDescription ?? "SparkSDK on \(ProcessInfo.processInfo.hostName)"
        guard !description.isEmpty, description.count <= 128 else {
            throw ConfigError(.outOfRange, file: file, keyPath: "endpointDescription", "must be 1 to 128 characters")
        }
        let (urls, trust) = try remote(file: file, path: path)
        guard let approval = OwnDeviceApproval(rawValue: ownDeviceApproval ?? OwnDeviceApproval.required.rawValue) else {
            throw ConfigError(
                .outOfRange, file: file, keyPath: "ownDeviceApproval",
                "is '\(ownDeviceApproval ?? "")'; expected required or automatic")
        }
        var settings = ConfigSettings(
            authProvider: provider, useBlackBerryKMS: useBlackBerryKMS ?? true, testAuth: testAuth, accounts: accounts,
            custom: custom,
            dataDirectory: try path(
                dataDirectory, key: "dataDirectory",
                default: sdkHome.appendingPathComponent(selected.domain).appendingPathComponent("device")),
            embeddedDomainPath: try path(
                embeddedDomainPath, key: "embeddedDomainPath",
                default: sdkHome.appendingPathComponent("domains").appendingPathComponent("\(selected.domain).sqlite")),
            domainURLs: urls, domainTrust: trust, tokenLeeway: leeway, passcodeIterations: iterations,
            endpointDescription: description)
        settings.oidc = oidc
        settings.ownDeviceApproval = approval
        if let encoded = transparencyAuditorKey {
            guard let key = Data(base64Encoded: encoded), key.count == 64 else {
                throw ConfigError(
                    .outOfRange, file: file, keyPath: "transparencyAuditorKey",
                    "is not 64 bytes of base64 (the P-256 key spark-kt-auditor init prints)")
            }
            settings.transparencyAuditorKey = key
        }
        settings.postQuantumChats = postQuantumChats ?? true
        return settings
    }

    /// The `oidc` dictionary as a token manager's configuration, each key checked.
    func openID(_ raw: RawProvider, file: String, baseDirectory: URL) throws -> BBMOIDCTokenManager.Configuration {
        guard let issuer = raw.issuer, let url = URL(string: issuer), let scheme = url.scheme?.lowercased(),
            let host = url.host, !host.isEmpty, url.query == nil, url.fragment == nil,
            scheme == "https" || (scheme == "http" && OpenIDClient.isLoopback(host))
        else {
            throw ConfigError(
                .outOfRange, file: file, keyPath: "oidc.issuer",
                "is \(raw.issuer.map { "'\($0)'" } ?? "missing"); expected the provider's https issuer URL")
        }
        guard let clientID = raw.clientId, !clientID.isEmpty, clientID.utf8.count <= 512 else {
            throw ConfigError(
                .missingKey, file: file, keyPath: "oidc.clientId", "is missing (this app's client id at the provider)")
        }
        let userClaim = raw.userClaim ?? "sub"
        guard JWTClaims.userClaims.contains(userClaim) else {
            throw ConfigError(
                .outOfRange, file: file, keyPath: "oidc.userClaim",
                "is '\(userClaim)'; expected \(JWTClaims.userClaims.joined(separator: ", "))")
        }
        guard let flow = BBMOIDCTokenManager.Flow(rawValue: raw.flow ?? "browser") else {
            throw ConfigError(.outOfRange, file: file, keyPath: "oidc.flow", "is '\(raw.flow ?? "")'; expected browser or device")
        }
        let scopes = raw.scopes ?? ["openid", "profile", "email"]
        guard scopes.allSatisfy({ !$0.isEmpty && !$0.contains(where: \.isWhitespace) }) else {
            throw ConfigError(.outOfRange, file: file, keyPath: "oidc.scopes", "holds an empty scope or one with spaces")
        }
        var trust = ProviderTrust.systemStore
        if let caFile = raw.caFile {
            let path = caFile.hasPrefix("/") ? caFile : baseDirectory.appendingPathComponent(caFile).path
            guard let pem = FileManager.default.contents(atPath: path).map({ String(decoding: $0, as: UTF8.self) }),
                pem.hasPrefix("-----BEGIN")
            else {
                throw ConfigError(
                    .outOfRange, file: file, keyPath: "oidc.caFile", "is '\(caFile)', which is not a readable PEM file")
            }
            trust = .certificateAuthority(pem: pem)
        } else if scheme == "http" {
            trust = .plainLoopback
        }
        return BBMOIDCTokenManager.Configuration(
            issuer: issuer, clientID: clientID, clientSecret: raw.clientSecret, scopes: scopes, userClaim: userClaim,
            trust: trust, flow: flow)
    }

    /// `domainURL` (or `domainURLs`) and how to trust it, checked: https with a CA file that
    /// exists or a pin; http only to a loopback address; every URL of one kind.
    func remote(file: String, path: (String?, String, URL) throws -> URL) throws -> ([URL], DomainTrust?) {
        let texts: [(key: String, text: String)]
        switch (domainURL, domainURLs) {
        case (nil, nil):
            for key in ["domainCAFile", "domainPublicKeyPin"]
            where (key == "domainCAFile" ? domainCAFile : domainPublicKeyPin) != nil {
                throw ConfigError(.outOfRange, file: file, keyPath: key, "is set but domainURL is not; it has nothing to trust")
            }
            return ([], nil)
        case (let one?, nil): texts = [("domainURL", one)]
        case (nil, let many?):
            guard !many.isEmpty else {
                throw ConfigError(.outOfRange, file: file, keyPath: "domainURLs", "is empty; list at least one URL")
            }
            texts = many.enumerated().map { ("domainURLs.\($0.offset)", $0.element) }
        case (.some, .some):
            throw ConfigError(.outOfRange, file: file, keyPath: "domainURLs", "is set with domainURL; use one of them")
        }
        var urls: [URL] = []
        var schemes = Set<String>()
        for (key, text) in texts {
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
                url.path.isEmpty || url.path == "/", url.query == nil, ["https", "http"].contains(scheme)
            else {
                throw ConfigError(.outOfRange, file: file, keyPath: key, "is '\(text)'; expected https://HOST:PORT")
            }
            if scheme == "http", !["127.0.0.1", "::1", "localhost"].contains(host.lowercased()) {
                throw ConfigError(
                    .securityFloor, file: file, keyPath: key, "is plain http to \(host); plain http is for loopback only")
            }
            schemes.insert(scheme)
            urls.append(url)
        }
        guard schemes.count == 1, let scheme = schemes.first else {
            throw ConfigError(
                .outOfRange, file: file, keyPath: "domainURLs",
                "mixes https and http; the instances of one domain are served alike")
        }
        if let pin = domainPublicKeyPin, Data(base64Encoded: pin)?.count != 32 {
            throw ConfigError(
                .outOfRange, file: file, keyPath: "domainPublicKeyPin", "is not a base64 SHA-256 (32 bytes)")
        }
        guard scheme == "https" else { return (urls, .plainLoopback) }
        let caFile = try domainCAFile.map { try path($0, "domainCAFile", URL(fileURLWithPath: "/")) }
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile.path) {
            throw ConfigError(.missingFile, file: file, keyPath: "domainCAFile", "names \(caFile.path), which cannot be read")
        }
        switch (caFile, domainPublicKeyPin) {
        case (let ca?, let pin?): return (urls, .certificateAuthorityAndPin(path: ca.path, sha256: pin))
        case (let ca?, nil): return (urls, .certificateAuthority(path: ca.path))
        case (nil, let pin?): return (urls, .pinnedKey(sha256: pin))
        case (nil, nil):
            throw ConfigError(
                .missingKey, file: file, keyPath: "domainCAFile",
                "is missing: an https domainURL needs domainCAFile (the ca.pem spark-domaind init made) or domainPublicKeyPin"
            )
        }
    }

    /// `$XDG_DATA_HOME`, else `$HOME/.local/share` (the XDG Base Directory default).
    static func dataHome(_ environment: [String: String]) -> URL {
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") { return URL(fileURLWithPath: xdg) }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".local/share")
    }
}

extension ConfigError {
    /// Maps a decoder error to the key path and expectation it concerns.
    init(decoding error: DecodingError, file: String) {
        func path(_ codingPath: [any CodingKey], _ key: (any CodingKey)? = nil) -> String {
            (codingPath + (key.map { [$0] } ?? [])).map(\.stringValue).joined(separator: ".")
        }
        func expectation(_ keyPath: String) -> String {
            let last = keyPath.split(separator: ".").last.map(String.init) ?? keyPath
            let known = keyPath.contains(".") ? ConfigSettings.knownProviderKeys[last] : ConfigSettings.knownKeys[last]
            return known.map { "expected \($0)" } ?? "see the README for its type"
        }
        switch error {
        case .keyNotFound(let key, let context):
            let keyPath = path(context.codingPath, key)
            self.init(.missingKey, file: file, keyPath: keyPath, "is missing (\(expectation(keyPath)))")
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            let keyPath = path(context.codingPath)
            self.init(.wrongType, file: file, keyPath: keyPath, "has the wrong type (\(expectation(keyPath)))")
        case .dataCorrupted(let context):
            let keyPath = path(context.codingPath)
            self.init(.wrongType, file: file, keyPath: keyPath, "cannot be read (\(expectation(keyPath)))")
        @unknown default:
            self.init(.notAPlist, file: file, keyPath: "", "cannot be decoded")
        }
    }
}
