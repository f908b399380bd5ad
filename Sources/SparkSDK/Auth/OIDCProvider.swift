import Foundation
import SparkCrypto
import SparkDomain
import SparkLock

extension BBMOIDCTokenManager {
    /// The provider as one manager talks to it: its metadata and keys (fetched once, the keys
    /// again when a token names a key they lack), the token endpoint's answers, the ID token
    /// checks, and the refresh (this manager's ``TokenSource``).
    final class Provider: TokenSource {
        /// A token endpoint's answer (RFC 6749 §5.1).
        struct TokenResponse: Decodable, Sendable {
            var accessToken: String
            var idToken: String?
            var refreshToken: String?

            enum CodingKeys: String, CodingKey {
                case accessToken = "access_token", idToken = "id_token", refreshToken = "refresh_token"
            }
        }

        /// An OAuth error answer (RFC 6749 §5.2).
        struct ErrorResponse: Decodable {
            var error: String
            var errorDescription: String?

            enum CodingKeys: String, CodingKey {
                case error, errorDescription = "error_description"
            }
        }

        /// The device authorization answer (RFC 8628 §3.2).
        struct DeviceAuthorization: Decodable, Sendable {
            var deviceCode: String
            var userCode: String
            var verificationURI: String
            var verificationURIComplete: String?
            var expiresIn: Int
            var interval: Int?

            enum CodingKeys: String, CodingKey {
                case deviceCode = "device_code", userCode = "user_code", verificationURI = "verification_uri"
                case verificationURIComplete = "verification_uri_complete", expiresIn = "expires_in", interval
            }
        }

        enum Outcome: Sendable {
            case tokens(TokenResponse)
            case error(String, String?)
        }

        let configuration: Configuration
        let client: OpenIDClient
        let check: IDTokenCheck
        let clock: WallClock
        private let cache = Locked<(metadata: OpenIDConfiguration?, keys: [JWS.VerificationKey]?)>((nil, nil))

        init(configuration: Configuration, clock: WallClock, leeway: TimeInterval) throws {
            self.configuration = configuration
            do {
                client = try OpenIDClient(trust: configuration.trust)
            } catch let error as DomainError {
                throw AuthError(.providerError, error.reason)
            }
            check = IDTokenCheck(
                issuer: configuration.issuer, clientID: configuration.clientID, userClaim: configuration.userClaim,
                leeway: leeway)
            self.clock = clock
        }

        /// The provider's metadata, discovered once.
        func metadata() async throws -> OpenIDConfiguration {
            if let known = cache.withLock({ $0.metadata }) { return known }
            let metadata = try await providing { try await client.discover(issuer: configuration.issuer) }
            cache.withLock { $0.metadata = metadata }
            return metadata
        }

        /// The provider's keys; fetched again when `token` names a key they lack (a rotation).
        /// The tokens checked here come from the provider's own token endpoint over TLS, so a
        /// fetch per unknown key costs nothing an attacker can multiply.
        func keys(for token: String) async throws -> [JWS.VerificationKey] {
            if let known = cache.withLock({ $0.keys }), !IDTokenCheck.namesUnknownKey(token, keys: known) { return known }
            let metadata = try await metadata()
            let fetched = try await providing { try await client.keys(at: metadata.jwksURI) }
            cache.withLock { $0.keys = fetched.keys }
            return fetched.keys
        }

        /// A token request that must succeed.
        func token(_ fields: [(String, String)]) async throws -> TokenResponse {
            switch try await tokenOutcome(fields) {
            case .tokens(let response): return response
            case .error(let code, let description):
                throw AuthError(
                    .providerError, "the token endpoint refused: \(code.prefix(64)) \(description?.prefix(200) ?? "")")
            }
        }

        /// A token request: the tokens, or the OAuth error code.
        func tokenOutcome(_ fields: [(String, String)]) async throws -> Outcome {
            let metadata = try await metadata()
            let (status, body) = try await providing {
                try await client.postForm(
                    metadata.tokenEndpoint, fields, clientSecret: secret, what: "the provider's token endpoint")
            }
            if status == 200, let response = try? JSONDecoder().decode(TokenResponse.self, from: body) {
                return .tokens(response)
            }
            if let error = try? JSONDecoder().decode(ErrorResponse.self, from: body) {
                return .error(error.error, error.errorDescription)
            }
            throw AuthError(.providerError, "the token endpoint answered HTTP \(status) without an OAuth answer")
        }

        func deviceAuthorization(_ endpoint: String, scopes: [String]) async throws -> DeviceAuthorization {
            let (status, body) = try await providing {
                try await client.postForm(
                    endpoint, [("client_id", configuration.clientID), ("scope", scopes.joined(separator: " "))],
                    clientSecret: secret, what: "the provider's device endpoint")
            }
            guard status == 200, let answer = try? JSONDecoder().decode(DeviceAuthorization.self, from: body),
                !answer.deviceCode.isEmpty, !answer.userCode.isEmpty, answer.expiresIn > 0
            else {
                let error = try? JSONDecoder().decode(ErrorResponse.self, from: body)
                throw AuthError(
                    .providerError, "the device endpoint refused: HTTP \(status) \(error?.error.prefix(64) ?? "")")
            }
            _ = try providingSync { try client.checkURL(answer.verificationURI, what: "the verification URI") }
            return answer
        }

        /// Revokes `refreshToken` where the provider offers revocation (RFC 7009), the client
        /// authenticated by its secret or else by `accessToken`; failures are ignored (sign-out
        /// still forgets it).
        func revoke(_ refreshToken: String, accessToken: String?) async {
            guard let metadata = try? await metadata(), let endpoint = metadata.revocationEndpoint else { return }
            _ = try? await client.postForm(
                endpoint,
                [("token", refreshToken), ("token_type_hint", "refresh_token"), ("client_id", configuration.clientID)],
                clientSecret: secret, bearer: accessToken, what: "the provider's revocation endpoint")
        }

        /// The credential a token answer makes, once its ID token passed every check. After a
        /// refresh (`previous`), the new token must name the same user (Core §12.2).
        func credential(from response: TokenResponse, nonce: String?, previous: BBMAuthenticatedAccount?) async throws
            -> StoredCredential
        {
            guard let idToken = response.idToken else {
                throw AuthError(
                    previous == nil ? .providerError : .refreshFailed,
                    previous == nil
                        ? "the provider answered without an ID token (is openid among the scopes?)"
                        : "the provider's refresh gave no new ID token (OpenID Connect Core §12.2 allows that): sign in again")
            }
            let keys = try await keys(for: idToken)
            let verified: (claims: JWTClaims, user: String)
            do {
                verified = try check.verify(idToken, keys: keys, nonce: nonce, now: clock.now())
            } catch let error as DomainError {
                throw AuthError(previous == nil ? .providerError : .refreshFailed, error.reason, domainCode: error.code)
            }
            if let previous, previous.accountId != verified.user {
                throw AuthError(.refreshFailed, "the refreshed ID token names another user than the signed-in one")
            }
            let claims = verified.claims
            let account = BBMAuthenticatedAccount(
                accountId: verified.user, idToken: idToken, accessToken: response.accessToken, name: claims.name,
                email: claims.email, avatarURL: claims.picture.flatMap(URL.init(string:)),
                expiresAt: Date(timeIntervalSince1970: TimeInterval(claims.expiresAt ?? 0)))
            return StoredCredential(account: account, refreshSecret: response.refreshToken)
        }

        // MARK: TokenSource

        func refresh(_ credential: StoredCredential) async throws -> StoredCredential {
            guard let refreshToken = credential.refreshSecret else {
                throw AuthError(.refreshFailed, "the provider gave no refresh token: sign in again")
            }
            let outcome = try await tokenOutcome([
                ("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", configuration.clientID),
                ("scope", configuration.scopes.joined(separator: " ")),
            ])
            switch outcome {
            case .tokens(let response):
                var refreshed = try await self.credential(from: response, nonce: nil, previous: credential.account)
                // A provider that does not rotate refresh tokens keeps the one it gave.
                refreshed.refreshSecret = refreshed.refreshSecret ?? refreshToken
                return refreshed
            case .error(let code, let description):
                // invalid_grant: revoked, expired or used; the user must sign in again.
                throw AuthError(
                    code == "invalid_grant" ? .refreshFailed : .providerError,
                    "the provider refused the refresh: \(code.prefix(64)) \(description?.prefix(200) ?? "")")
            }
        }

        func isFinal(_ error: AuthError) -> Bool { error.code == .refreshFailed }

        private var secret: (id: String, secret: String)? {
            configuration.clientSecret.map { (configuration.clientID, $0) }
        }

        /// Runs a provider call, turning its failures into ``AuthError/Code/providerError``.
        private func providing<T>(_ body: () async throws -> T) async throws -> T {
            do {
                return try await body()
            } catch let error as DomainError {
                throw AuthError(.providerError, error.reason, domainCode: error.code)
            }
        }

        private func providingSync<T>(_ body: () throws -> T) throws -> T {
            do {
                return try body()
            } catch let error as DomainError {
                throw AuthError(.providerError, error.reason, domainCode: error.code)
            }
        }
    }
}
