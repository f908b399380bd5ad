import Foundation
import SparkCrypto
public import SparkDomain

/// The user's identity keys and their passcode protection.
///
/// - A **management key** (random, 256-bit) is stored as a JWE under the passcode
///   (`PBES2-HS512+A256KW`, `A256GCM`, a random 16-byte `p2s`, `p2c` = `passcodeIterations`).
/// - The **profile keys** (Ed25519 + X25519, as a JWK Set) are stored as a JWE under the
///   management key (`A256KW`, `A256GCM`). Changing the passcode re-wraps only the management key.
/// - The public keys are published, self-signed, to the domain's identity directory.
///
/// The exact formats are in `docs/FORMATS.md`; any JOSE library given the passcode can open them.
public final class BBMKeyManager: Sendable {
    /// Who is asking, for the storage and the domain.
    public struct Caller: Sendable {
        /// The user's current token.
        public var token: String
        /// The user id.
        public var userID: String
        /// This endpoint's id.
        public var endpointID: String

        /// A caller.
        public init(token: String, userID: String, endpointID: String) {
            self.token = token
            self.userID = userID
            self.endpointID = endpointID
        }
    }

    /// The shortest passcode accepted.
    public static let minimumPasscodeLength = 8

    let domain: any DomainService
    let storage: any BBMKeyStorageProvider
    let store: EndpointStore
    /// PBKDF2 iterations for new passcode blobs.
    public let passcodeIterations: Int
    let unsafeIterations: Bool

    /// A key manager.
    ///
    /// - Parameters:
    ///   - domain: the domain that publishes identities and, by default, keeps the blobs.
    ///   - store: this device's endpoint store, where the unlocked keys are kept.
    ///   - storage: where blobs are kept; the domain's key store by default.
    ///   - passcodeIterations: `p2c` for new passcode blobs, at least
    ///     ``ConfigSettings/passcodeIterationsFloor``.
    public init(
        domain: any DomainService, store: EndpointStore, storage: (any BBMKeyStorageProvider)? = nil,
        passcodeIterations: Int = ConfigSettings.passcodeIterationsFloor
    ) {
        self.domain = domain
        self.store = store
        self.storage = storage ?? DomainKeyStorage(domain: domain)
        self.passcodeIterations = max(passcodeIterations, ConfigSettings.passcodeIterationsFloor)
        unsafeIterations = false
    }

    /// A key manager with a low PBKDF2 count, for tests.
    ///
    /// - Warning: blobs written with it are cheap to brute-force.
    public init(
        domain: any DomainService, store: EndpointStore, storage: (any BBMKeyStorageProvider)? = nil,
        unsafePasscodeIterations: Int
    ) {
        self.domain = domain
        self.store = store
        self.storage = storage ?? DomainKeyStorage(domain: domain)
        passcodeIterations = unsafePasscodeIterations
        unsafeIterations = true
    }

    // MARK: Passcode policy

    /// Checks a new passcode: at least ``minimumPasscodeLength`` characters, not the user id,
    /// not one repeated character.
    public static func checkPasscode(_ passcode: String, userID: String) throws {
        guard passcode.count >= minimumPasscodeLength else {
            throw KeyManagementError(.passcodeTooWeak, "a passcode needs at least \(minimumPasscodeLength) characters")
        }
        guard passcode.lowercased() != userID.lowercased() else {
            throw KeyManagementError(.passcodeTooWeak, "the passcode must not be the user id")
        }
        guard Set(passcode).count > 1 else {
            throw KeyManagementError(.passcodeTooWeak, "the passcode must not repeat one character")
        }
    }

    // MARK: Keys in the domain

    /// Whether the user already has protected keys (a later device: sync with the passcode).
    public func keysExist(_ caller: Caller) async throws -> Bool {
        try await refusing {
            try await storage.fetch(name: KeyBlob.profileName, token: caller.token, endpointID: caller.endpointID)
        }.blob
            != nil
    }

    /// First device: generates the identity keys and a management key, stores both blobs,
    /// publishes the identity and keeps the keys on this endpoint.
    ///
    /// - Throws: ``KeyManagementError/Code/keysExist`` when another device created keys first.
    public func createKeys(passcode: String, caller: Caller) async throws -> UnlockedKeys {
        try Self.checkPasscode(passcode, userID: caller.userID)
        let version =
            try await refusing { try await domain.identityKeyVersion(token: caller.token, endpointID: caller.endpointID) } + 1
        let keys = try UnlockedKeys.generate(userID: caller.userID, keyVersion: version)
        let managementKey = SymmetricKey(size: .bits256)
        let profile = try JWE.encrypt(
            keys.profileJWKSet().jsonData(), keyEncryptionKey: managementKey, keyID: "management", contentType: "jwk-set+json")
        let management = try protect(managementKey, passcode: passcode)
        do {
            _ = try await storage.store(
                name: KeyBlob.profileName, data: profile, expectedVersion: nil, token: caller.token, endpointID: caller.endpointID
            )
            _ = try await storage.store(
                name: KeyBlob.managementName, data: management, expectedVersion: nil, token: caller.token,
                endpointID: caller.endpointID)
        } catch let error as DomainError where error.code == .conflict {
            throw KeyManagementError(.keysExist, "another device created this user's keys first; unlock them with the passcode")
        } catch let error as DomainError {
            throw KeyManagementError(.refused, error.reason, domainCode: error.code)
        }
        try await refusing {
            try await domain.publishIdentity(
                token: caller.token, endpointID: caller.endpointID, identity: keys.publishedIdentity())
        }
        try store.saveKeys(keys)
        return keys
    }

    /// A later device: unlocks the keys with the passcode, proves it to the domain and keeps
    /// them on this endpoint. A wrong passcode changes nothing.
    ///
    /// - Throws: ``KeyManagementError/Code/incorrectPasscode`` (with the attempts left),
    ///   ``KeyManagementError/Code/tooManyAttempts``, ``KeyManagementError/Code/corruptKeys``.
    public func unlock(passcode: String, caller: Caller) async throws -> UnlockedKeys {
        let (keys, _, fetch) = try await openKeys(passcode: passcode, caller: caller)
        try await prove(fetch, with: keys, caller: caller)
        try store.saveKeys(keys)
        return keys
    }

    /// Changes the passcode: the old one is required; only the management blob is re-written,
    /// and only if nobody changed it meanwhile (otherwise ``KeyManagementError/Code/conflict``).
    public func changePasscode(from old: String, to new: String, caller: Caller) async throws {
        try Self.checkPasscode(new, userID: caller.userID)
        let (keys, managementKey, fetch) = try await openKeys(passcode: old, caller: caller)
        guard let version = fetch.blob?.version else { throw KeyManagementError(.noKeys, "the user has no keys") }
        let rewrapped = try protect(managementKey, passcode: new)
        do {
            _ = try await storage.store(
                name: KeyBlob.managementName, data: rewrapped, expectedVersion: version, token: caller.token,
                endpointID: caller.endpointID)
        } catch let error as DomainError where error.code == .conflict {
            throw KeyManagementError(.conflict, "the passcode was changed on another device at the same time; try again")
        } catch let error as DomainError {
            throw KeyManagementError(.refused, error.reason, domainCode: error.code)
        }
        // The change succeeded; a failed proof only leaves one attempt counted this hour.
        try? await prove(fetch, with: keys, caller: caller)
    }

    /// A forgotten passcode: new identity keys under a new passcode. The user's other endpoints
    /// are deregistered, and chats encrypted to the old keys can no longer be read.
    public func resetKeys(newPasscode: String, caller: Caller) async throws -> UnlockedKeys {
        try Self.checkPasscode(newPasscode, userID: caller.userID)
        try await refusing { try await domain.resetIdentity(token: caller.token, endpointID: caller.endpointID) }
        try store.wipeKeys()
        return try await createKeys(passcode: newPasscode, caller: caller)
    }

    // MARK: Keys on this endpoint

    /// The keys kept on this endpoint, if any (a restart signs in without the passcode).
    public func localKeys(userID: String) throws -> UnlockedKeys? { try store.keys(userID: userID) }

    /// Forgets the keys kept on this endpoint.
    public func wipeLocalKeys() throws { try store.wipeKeys() }

    // MARK: Internals

    private func protect(_ managementKey: SymmetricKey, passcode: String) throws -> Data {
        var jwk = JWK(keyType: .oct)
        jwk.k = managementKey.secureBytes
        jwk.keyID = "management"
        let plaintext = try jwk.jsonData()
        return unsafeIterations
            ? try JWE.encrypt(
                plaintext, password: Data(passcode.utf8), unsafeUncheckedIterations: passcodeIterations, contentType: "jwk+json")
            : try JWE.encrypt(plaintext, password: Data(passcode.utf8), iterations: passcodeIterations, contentType: "jwk+json")
    }

    /// Fetches and opens both blobs; checks them against the published identity.
    private func openKeys(passcode: String, caller: Caller) async throws -> (UnlockedKeys, SymmetricKey, BlobFetch) {
        let fetch: BlobFetch
        do {
            fetch = try await storage.fetch(name: KeyBlob.managementName, token: caller.token, endpointID: caller.endpointID)
        } catch let error as DomainError where error.code == .tooManyAttempts {
            throw KeyManagementError(.tooManyAttempts, error.reason, domainCode: error.code, retryAfter: error.retryAfter)
        } catch let error as DomainError {
            throw KeyManagementError(.refused, error.reason, domainCode: error.code)
        }
        guard let managementBlob = fetch.blob else { throw KeyManagementError(.noKeys, "the user has no keys yet") }
        let managementKey: SymmetricKey
        do {
            let jwk = try JWK(json: JWE.decrypt(managementBlob.data, password: Data(passcode.utf8)).unsafeData())
            managementKey = try jwk.symmetricKey()
            guard managementKey.byteCount == 32 else {
                throw KeyManagementError(.corruptKeys, "the management key has the wrong size")
            }
        } catch let error as CryptoError where error.code == .authenticationFailure {
            throw KeyManagementError(
                .incorrectPasscode, "the passcode is incorrect", attemptsLeft: fetch.attemptsLeft)
        } catch let error as KeyManagementError {
            throw error
        } catch {
            throw KeyManagementError(.corruptKeys, "the stored management key cannot be read: \(error)")
        }
        let profileFetch = try await refusing {
            try await storage.fetch(name: KeyBlob.profileName, token: caller.token, endpointID: caller.endpointID)
        }
        guard let profileBlob = profileFetch.blob else { throw KeyManagementError(.corruptKeys, "the profile keys are missing") }
        let identity = try await refusing {
            try await domain.identity(token: caller.token, endpointID: caller.endpointID, userID: caller.userID)
        }
        let keys: UnlockedKeys
        do {
            let set = try JWKSet(json: JWE.decrypt(profileBlob.data, keyEncryptionKey: managementKey).unsafeData())
            keys = try UnlockedKeys(profile: set, userID: caller.userID, keyVersion: identity?.keyVersion ?? 1)
        } catch let error as KeyManagementError {
            throw error
        } catch {
            throw KeyManagementError(.corruptKeys, "the stored profile keys cannot be opened: \(error)")
        }
        guard let identity, keys.matches(identity) else {
            throw KeyManagementError(.corruptKeys, "the stored keys do not match the user's published identity")
        }
        return (keys, managementKey, fetch)
    }

    /// Signs the fetch's unlock challenge, if the storage issued one, and sends the proof.
    private func prove(_ fetch: BlobFetch, with keys: UnlockedKeys, caller: Caller) async throws {
        guard let challenge = fetch.challenge else { return }
        let signature = try keys.signing.signature(
            for: unlockProofMessage(userID: caller.userID, endpointID: caller.endpointID, challenge: challenge))
        try await refusing {
            try await storage.proveUnlock(
                challenge: challenge, signature: signature, token: caller.token, endpointID: caller.endpointID)
        }
    }

    private func refusing<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as DomainError where error.code == .tooManyAttempts {
            throw KeyManagementError(.tooManyAttempts, error.reason, domainCode: error.code, retryAfter: error.retryAfter)
        } catch let error as DomainError {
            throw KeyManagementError(.refused, error.reason, domainCode: error.code)
        }
    }
}
