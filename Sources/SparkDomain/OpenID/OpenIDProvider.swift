public import Foundation
public import SparkCrypto

/// How a client of an OpenID provider trusts the provider's TLS certificate.
public enum ProviderTrust: Sendable, Equatable, Codable {
    /// The machine's CA store (Google, Microsoft Entra ID, Okta…).
    case systemStore
    /// Certificates chaining to this CA, given as PEM text (an organisation's own CA).
    case certificateAuthority(pem: String)
    /// Plain HTTP to a loopback address: development only, never a provider on the network.
    case plainLoopback
}

/// An OpenID provider's metadata (OpenID Connect Discovery 1.0 §3), the members SparkSDK uses.
public struct OpenIDConfiguration: Sendable, Equatable, Codable {
    /// `issuer`: equal to the issuer it was discovered from, and to every ID token's `iss`.
    public var issuer: String
    /// Where the browser goes to sign in (the authorization code flow).
    public var authorizationEndpoint: String
    /// Where codes, device codes and refresh tokens are exchanged for tokens.
    public var tokenEndpoint: String
    /// The provider's public signing keys.
    public var jwksURI: String
    /// The device authorization grant's endpoint (RFC 8628), if the provider has one.
    public var deviceAuthorizationEndpoint: String?
    /// Token revocation (RFC 7009), if the provider has it.
    public var revocationEndpoint: String?
    /// The PKCE methods the provider supports (`S256` is required here when listed).
    public var codeChallengeMethodsSupported: [String]?

    enum CodingKeys: String, CodingKey {
        case issuer
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case jwksURI = "jwks_uri"
        case deviceAuthorizationEndpoint = "device_authorization_endpoint"
        case revocationEndpoint = "revocation_endpoint"
        case codeChallengeMethodsSupported = "code_challenge_methods_supported"
    }

    /// Metadata with the given endpoints.
    public init(
        issuer: String, authorizationEndpoint: String, tokenEndpoint: String, jwksURI: String,
        deviceAuthorizationEndpoint: String? = nil, revocationEndpoint: String? = nil,
        codeChallengeMethodsSupported: [String]? = nil
    ) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.jwksURI = jwksURI
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.codeChallengeMethodsSupported = codeChallengeMethodsSupported
    }
}

/// A provider's signing keys as fetched: the JWKS document, its verification keys (each bound
/// to one algorithm, RFC 8725 §3.1), and how long the provider says they may be cached.
public struct ProviderKeys: Sendable {
    /// The JWKS document as served.
    public var document: Data
    /// Its signature keys (encryption keys and unknown types are skipped).
    public var keys: [JWS.VerificationKey]
    /// `Cache-Control: max-age`, if the provider sent one (`no-store`/`no-cache`: zero).
    public var maxAge: TimeInterval?
}

/// The HTTP side of OpenID Connect that the device and the domain share: discovery, the JWKS,
/// and form posts to the token endpoints. Every URL is `https` (or, with
/// ``ProviderTrust/plainLoopback``, `http` to a loopback address); answers are size-capped; a
/// redirect is never followed.
public final class OpenIDClient: Sendable {
    /// The largest document accepted from a provider, in bytes.
    public static let maximumDocumentSize = 256 * 1024

    let transport: HTTPTransport
    /// How the provider's certificate is trusted.
    public let trust: ProviderTrust
    /// How long one request may take.
    public let timeout: Duration

    /// A client trusting the provider as `trust` says.
    public init(trust: ProviderTrust, timeout: Duration = .seconds(10)) throws {
        switch trust {
        case .systemStore: transport = try HTTPTransport(trust: .plainLoopback, systemStore: true, connectTimeout: .seconds(5))
        case .certificateAuthority(let pem):
            guard pem.hasPrefix("-----BEGIN") else {
                throw DomainError(.invalidRequest, "the provider's CA must be PEM text (-----BEGIN CERTIFICATE-----)")
            }
            transport = try HTTPTransport(
                trust: .certificateAuthority(path: pem), systemStore: false, connectTimeout: .seconds(5))
        case .plainLoopback: transport = try HTTPTransport(trust: .plainLoopback, systemStore: false, connectTimeout: .seconds(5))
        }
        self.trust = trust
        self.timeout = timeout
    }

    /// Refuses a URL this client may not call: not `https` (or loopback `http` in development),
    /// with credentials, or with a fragment.
    public func checkURL(_ string: String, what: String) throws -> URL {
        guard string.utf8.count <= 2048, let url = URL(string: string), let scheme = url.scheme?.lowercased(),
            let host = url.host, !host.isEmpty, url.user == nil, url.password == nil, url.fragment == nil
        else { throw DomainError(.invalidRequest, "\(what) is not an absolute URL without credentials or fragment") }
        switch scheme {
        case "https": return url
        case "http" where trust == .plainLoopback && Self.isLoopback(host): return url
        default: throw DomainError(.invalidRequest, "\(what) must be https (\(string.prefix(200)))")
        }
    }

    /// Whether `host` is a loopback address (RFC 8252 §8.3: the IP literal, and `localhost`).
    public static func isLoopback(_ host: String) -> Bool {
        host == "127.0.0.1" || host == "::1" || host == "[::1]" || host == "localhost"
    }

    /// The provider's metadata, from `ISSUER/.well-known/openid-configuration`; its `issuer`
    /// must be exactly `issuer` and its endpoints must be URLs this client may call.
    public func discover(issuer: String) async throws -> OpenIDConfiguration {
        _ = try checkURL(issuer, what: "the issuer")
        let base = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        let (body, _) = try await get(base + "/.well-known/openid-configuration", what: "the discovery document")
        let configuration: OpenIDConfiguration
        do {
            configuration = try JSONDecoder().decode(OpenIDConfiguration.self, from: body)
        } catch {
            throw DomainError(.unavailable, "\(issuer)'s discovery document is not valid OpenID provider metadata")
        }
        // OpenID Connect Discovery §4.3: the issuer must be identical, or tokens from another
        // provider could be taken for this one's.
        guard configuration.issuer == issuer else {
            throw DomainError(
                .unavailable, "the discovery document names issuer \(configuration.issuer.prefix(200)), not \(issuer)")
        }
        _ = try checkURL(configuration.authorizationEndpoint, what: "the authorization endpoint")
        _ = try checkURL(configuration.tokenEndpoint, what: "the token endpoint")
        _ = try checkURL(configuration.jwksURI, what: "the JWKS URI")
        if let device = configuration.deviceAuthorizationEndpoint { _ = try checkURL(device, what: "the device endpoint") }
        if let revocation = configuration.revocationEndpoint { _ = try checkURL(revocation, what: "the revocation endpoint") }
        return configuration
    }

    /// The provider's signing keys at `jwksURI`. A document with no usable signature key is an
    /// error (never an empty trust).
    public func keys(at jwksURI: String) async throws -> ProviderKeys {
        let (body, cacheControl) = try await get(jwksURI, what: "the JWKS")
        let keys = try Self.verificationKeys(in: body, source: jwksURI)
        return ProviderKeys(document: body, keys: keys, maxAge: cacheControl.flatMap(Self.maxAge))
    }

    /// The verification keys of a JWKS document; an error if it holds none.
    public static func verificationKeys(in document: Data, source: String) throws -> [JWS.VerificationKey] {
        let set: JWKSet
        do {
            set = try JWKSet(json: document)
        } catch {
            throw DomainError(.unavailable, "\(source.prefix(200)) is not a JWK Set")
        }
        let keys = set.keys.compactMap { try? JWS.VerificationKey(jwk: $0) }
        guard !keys.isEmpty else { throw DomainError(.unavailable, "\(source.prefix(200)) holds no signature key") }
        return keys
    }

    /// The `max-age` a `Cache-Control` value allows, in seconds (`no-store`, `no-cache`: 0).
    public static func maxAge(_ cacheControl: String) -> TimeInterval? {
        var maxAge: TimeInterval?
        for directive in cacheControl.lowercased().split(separator: ",") {
            let parts = directive.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            switch parts.first {
            case "no-store", "no-cache": return 0
            case "max-age" where parts.count == 2:
                if let seconds = Int(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\" "))), seconds >= 0 {
                    maxAge = TimeInterval(seconds)
                }
            default: continue
            }
        }
        return maxAge
    }

    /// A GET of a JSON document; the body and the `Cache-Control` header.
    func get(_ urlString: String, what: String) async throws -> (Data, String?) {
        let url = try checkURL(urlString, what: what)
        let response = try await send("GET", url, headers: ["Accept: application/json"], body: nil, what: what)
        guard response.status == 200 else {
            throw DomainError(.unavailable, "\(what) at \(url.host ?? "") answered HTTP \(response.status)")
        }
        return (response.body, response.cacheControl)
    }

    /// A form POST (`application/x-www-form-urlencoded`) to a token, device or revocation
    /// endpoint: the status and the body, whatever the status (the caller reads OAuth errors).
    /// The client authenticates with `clientSecret` (`client_secret_basic`) or, failing that,
    /// with `bearer` (an access token, which some providers ask of public clients that revoke).
    public func postForm(
        _ urlString: String, _ fields: [(String, String)], clientSecret: (id: String, secret: String)? = nil,
        bearer: String? = nil, what: String
    ) async throws -> (status: Int, body: Data) {
        let url = try checkURL(urlString, what: what)
        var headers = ["Content-Type: application/x-www-form-urlencoded", "Accept: application/json"]
        if clientSecret == nil, let bearer { headers.append("Authorization: Bearer " + bearer) }
        if let clientSecret {
            // RFC 6749 §2.3.1: client_secret_basic, each part form-encoded first.
            let pair = Self.formEncode(clientSecret.id) + ":" + Self.formEncode(clientSecret.secret)
            headers.append("Authorization: Basic " + Data(pair.utf8).base64EncodedString())
        }
        let body = Data(fields.map { Self.formEncode($0.0) + "=" + Self.formEncode($0.1) }.joined(separator: "&").utf8)
        let response = try await send("POST", url, headers: headers, body: body, what: what)
        return (response.status, response.body)
    }

    private func send(_ method: String, _ url: URL, headers: [String], body: Data?, what: String) async throws
        -> HTTPTransport.Response
    {
        let response: HTTPTransport.Response
        do {
            response = try await transport.send(
                method: method, url: url.absoluteString, headers: headers, body: body, timeout: timeout,
                maximumResponse: Self.maximumDocumentSize)
        } catch let failure as HTTPTransport.Failure {
            // Said in general terms: the provider's URL is the operator's (or, by discovery, a
            // document's), and libcurl's own text names hosts and ports, which turns these
            // errors into a port scanner of the domain's network.
            let told =
                failure.reason.contains("larger than")
                ? "is larger than \(Self.maximumDocumentSize) bytes"
                : failure.nothingSent ? "cannot be reached" : "did not answer"
            throw DomainError(.unavailable, "\(what) at \(url.host ?? "") \(told)")
        }
        guard response.body.count <= Self.maximumDocumentSize else {
            throw DomainError(.unavailable, "\(what) at \(url.host ?? "") is larger than \(Self.maximumDocumentSize) bytes")
        }
        return response
    }

    /// `application/x-www-form-urlencoded` encoding of one name or value.
    public static func formEncode(_ string: String) -> String {
        var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)..<Unicode.Scalar(128)))
        allowed.insert(charactersIn: "-._~")
        return string.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}
