import Foundation
import SparkCrypto
public import SparkDomain

/// The user's identity keys and their passcode protection.
///
/// - A **management key** (random, 256-bit) is stored as a JWE (`A256KW`, `A256GCM`) under a
///   key-encryption key derived from the passcode *and* the domain's OPRF evaluation of it
///   (`docs/FORMATS.md`), so a copy of the blob, or of the whole
///   database, cannot test a guess: every guess is a request the domain counts.
/// - The **profile keys** (Ed25519 + X25519, as a JWK Set) are stored as a JWE under the
///   management key (`A256KW`, `A256GCM`). Changing the passcode makes a new management key and
///   re-wraps both, in one write.
/// - The public keys are published, self-signed, to the domain's identity directory.
///
/// The exact formats are in `docs/FORMATS.md`; any JOSE library given the passcode and one
/// evaluation can open them.
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

    /// The common passwords a passcode must not be (``checkPasscode(_:userID:)``).
    static let commonPasscodes: Set<Substring> = Set(commonPasscodeList.split(whereSeparator: { $0 == " " || $0 == "\n" }))

    /// Checks a new passcode: at least ``minimumPasscodeLength`` characters, not the user id,
    /// not one repeated character, and not one of the 11,611 common passwords the SDK ships
    /// (zxcvbn's list; `docs/CRYPTO.md`), in any letter case.
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
        guard !commonPasscodes.contains(Substring(passcode.lowercased())) else {
            throw KeyManagementError(
                .passcodeTooWeak, "that passcode is one of the most common passwords, which attackers try first; choose another")
        }
    }

    // MARK: Keys in the domain

    /// Whether the user already has protected keys (a later device: sync with the passcode).
    public func keysExist(_ caller: Caller) async throws -> Bool {
        try await KeyManagementError.refusing {
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
            try await KeyManagementError.refusing {
                try await domain.identityKeyVersion(token: caller.token, endpointID: caller.endpointID)
            } + 1
        let keys = try UnlockedKeys.generate(userID: caller.userID, keyVersion: version)
        let managementKey = SymmetricKey(size: .bits256)
        let (management, attempt) = try await protect(managementKey, passcode: passcode, caller: caller)
        let profile = try Self.wrapProfile(keys, under: managementKey)
        do {
            try await storage.store(
                [
                    KeyBlobWrite(name: KeyBlob.profileName, data: profile, expectedVersion: nil),
                    KeyBlobWrite(name: KeyBlob.managementName, data: management, expectedVersion: nil),
                ], proof: nil, token: caller.token, endpointID: caller.endpointID)
        } catch let error as DomainError where error.code == .conflict {
            throw KeyManagementError(.keysExist, "another device created this user's keys first; unlock them with the passcode")
        } catch let error as DomainError {
            throw KeyManagementError(.refused, error.reason, domainCode: error.code)
        }
        try await KeyManagementError.refusing {
            try await domain.publishIdentity(
                token: caller.token, endpointID: caller.endpointID, identity: keys.publishedIdentity())
        }
        try await prove(attempt.challenge, with: keys, caller: caller)
        try store.saveKeys(keys)
        return keys
    }

    /// A later device: unlocks the keys with the passcode (one attempt the domain counts),
    /// proves it to the domain and keeps them on this endpoint. A wrong passcode changes
    /// nothing. A backup made under an older domain key, or before the OPRF, is re-wrapped.
    ///
    /// - Throws: ``KeyManagementError/Code/incorrectPasscode`` (with the attempts left),
    ///   ``KeyManagementError/Code/tooManyAttempts``, ``KeyManagementError/Code/corruptKeys``,
    ///   ``KeyManagementError/Code/domainKeyMismatch``.
    public func unlock(passcode: String, caller: Caller) async throws -> UnlockedKeys {
        let opened = try await openKeys(passcode: passcode, caller: caller)
        try await prove(opened.attempt.challenge, with: opened.keys, caller: caller)
        try store.saveKeys(opened.keys)
        // Re-wrapping is an upgrade: the keys are unlocked whether or not it succeeds now.
        try? await upgrade(opened, passcode: passcode, caller: caller)
        return opened.keys
    }

    /// Changes the passcode: the old one is required. A new management key is made under the
    /// user's next passcode key version and both blobs are re-written in one step; then the
    /// domain retires the older versions, so a backup copied before, even with the old passcode,
    /// opens nothing (the domain no longer evaluates passcodes for it). Refused with
    /// ``KeyManagementError/Code/conflict`` if another device changed them meanwhile.
    public func changePasscode(from old: String, to new: String, caller: Caller) async throws {
        try Self.checkPasscode(new, userID: caller.userID)
        let changedElsewhere = KeyManagementError(
            .conflict, "the passcode was changed on another device at the same time; try again")
        let opened: Opened
        do {
            opened = try await openKeys(passcode: old, caller: caller)
        } catch let error as KeyManagementError where error.code == .refused && error.domainCode == .notFound {
            // The backup read here was retired before this device's attempt reached the domain:
            // another device changed the passcode meanwhile.
            throw changedElsewhere
        }
        // The backup's version, and the domain's (its current key, when the backup is not under it).
        let backup = PasscodeKeyID(opened.attempt.parameters.keyID)
        let domainKey = opened.attempt.current.flatMap { PasscodeKeyID($0.parameters.keyID) } ?? backup
        var version = domainKey?.version ?? 1
        let next: PasscodeKeyID?
        let managementKey = SymmetricKey(size: .bits256)
        let management: Data
        let attempt: PasscodeProtection.Attempt
        do {
            if let backup, backup.version > version {
                // A change interrupted before its retirement: finish it with this unlock's proof.
                try await retire(opened.attempt.challenge, version: backup.version, with: opened.keys, caller: caller)
                version = backup.version
            } else {
                try await prove(opened.attempt.challenge, with: opened.keys, caller: caller)
            }
            // A backup from before the OPRF names no key: the new one is made under the current key.
            next = domainKey.map { PasscodeKeyID(seed: $0.seed, version: version + 1) }
            (management, attempt) = try await protect(managementKey, passcode: new, caller: caller, keyID: next)
        } catch let error as KeyManagementError where error.code == .refused {
            // Refused because another device's change went first (its key retired the one this
            // attempt was made under): the management key is no longer the one read here.
            let now = try? await storage.fetch(name: KeyBlob.managementName, token: caller.token, endpointID: caller.endpointID)
            if let now, now.blob?.version != opened.managementVersion { throw changedElsewhere }
            throw error
        }
        let profile = try Self.wrapProfile(opened.keys, under: managementKey)
        do {
            let writes = [
                KeyBlobWrite(name: KeyBlob.profileName, data: profile, expectedVersion: opened.profileVersion),
                KeyBlobWrite(name: KeyBlob.managementName, data: management, expectedVersion: opened.managementVersion),
            ]
            try await storage.store(
                writes, proof: try Self.consent(to: writes, challenge: attempt.challenge, keys: opened.keys, caller: caller),
                token: caller.token, endpointID: caller.endpointID)
        } catch let error as DomainError where error.code == .conflict {
            throw changedElsewhere
        } catch let error as DomainError {
            throw KeyManagementError(.refused, error.reason, domainCode: error.code)
        }
        guard let next else {
            // The change succeeded; a failed proof only leaves one attempt counted this hour.
            try? await prove(attempt.challenge, with: opened.keys, caller: caller)
            return
        }
        do {
            try await retire(attempt.challenge, version: next.version, with: opened.keys, caller: caller)
        } catch let error as KeyManagementError {
            throw KeyManagementError(
                .refused,
                "the passcode changed, but the backup made under the old one is not retired yet (\(error.reason)); the next passcode change retires it",
                domainCode: error.domainCode)
        }
    }

    /// Writes the backup again from the keys kept on this endpoint, under `passcode` (the user's
    /// current one or a new one): the repair for a backup that no longer opens (damaged, or
    /// overwritten through a storage that took unsigned writes). Needs no old passcode and no
    /// reset: this endpoint holds the identity keys the backup protects, and signs the write with
    /// them. One counted attempt (the evaluation the new backup is made with), then proved.
    ///
    /// - Throws: ``KeyManagementError/Code/noKeys`` when this endpoint keeps no keys,
    ///   ``KeyManagementError/Code/corruptKeys`` when they are not the user's published identity,
    ///   ``KeyManagementError/Code/conflict`` when another device wrote the backup meanwhile.
    public func restoreBackup(passcode: String, caller: Caller) async throws {
        try Self.checkPasscode(passcode, userID: caller.userID)
        guard let keys = try store.keys(userID: caller.userID) else {
            throw KeyManagementError(.noKeys, "this endpoint keeps no keys to back up")
        }
        let identity = try await KeyManagementError.refusing {
            try await domain.identity(token: caller.token, endpointID: caller.endpointID, userID: caller.userID)
        }
        guard let published = identity, keys.matches(published) else {
            throw KeyManagementError(
                .corruptKeys, "this endpoint's keys are not the user's published identity: they cannot restore its backup")
        }
        let managementKey = SymmetricKey(size: .bits256)
        let (management, attempt) = try await protect(managementKey, passcode: passcode, caller: caller)
        let profile = try Self.wrapProfile(keys, under: managementKey)
        let profileVersion = try await KeyManagementError.refusing {
            try await storage.fetch(name: KeyBlob.profileName, token: caller.token, endpointID: caller.endpointID).blob?.version
        }
        let managementVersion = try await KeyManagementError.refusing {
            try await storage.fetch(name: KeyBlob.managementName, token: caller.token, endpointID: caller.endpointID).blob?
                .version
        }
        let writes = [
            KeyBlobWrite(name: KeyBlob.profileName, data: profile, expectedVersion: profileVersion),
            KeyBlobWrite(name: KeyBlob.managementName, data: management, expectedVersion: managementVersion),
        ]
        do {
            try await storage.store(
                writes, proof: try Self.consent(to: writes, challenge: attempt.challenge, keys: keys, caller: caller),
                token: caller.token, endpointID: caller.endpointID)
        } catch let error as DomainError where error.code == .conflict {
            throw KeyManagementError(.conflict, "another device wrote the backup meanwhile; try again")
        } catch let error as DomainError {
            throw KeyManagementError(.refused, error.reason, domainCode: error.code)
        }
        try await prove(attempt.challenge, with: keys, caller: caller)
    }

    /// A forgotten passcode: new identity keys under a new passcode. Without the current keys
    /// the domain makes the reset wait (`DomainPolicy.identityResetDelay`, 7 days by default)
    /// so the user's other devices and contacts see it and any device can cancel it
    /// (``cancelReset(caller:)``): the first call starts the wait and throws
    /// ``KeyManagementError/Code/resetPending`` with the date; a call after it completes the reset.
    /// Then the user's other endpoints are deregistered, and chats encrypted to the old keys can
    /// no longer be read.
    public func resetKeys(newPasscode: String, caller: Caller) async throws -> UnlockedKeys {
        try Self.checkPasscode(newPasscode, userID: caller.userID)
        let outcome = try await KeyManagementError.refusing {
            try await domain.resetIdentity(token: caller.token, endpointID: caller.endpointID, signature: nil)
        }
        if case .pending(let pending) = outcome {
            throw KeyManagementError(
                .resetPending,
                "the reset takes effect at \(pending.effectiveAt.formatted(.iso8601)) unless cancelled from one of the user's devices; ask again then"
            )
        }
        try store.wipeKeys()
        return try await createKeys(passcode: newPasscode, caller: caller)
    }

    /// The user's pending identity reset, if any: a device that sees one it did not ask for
    /// should tell the user, who can cancel it (``cancelReset(caller:)``).
    public func pendingReset(caller: Caller) async throws -> PendingIdentityReset? {
        try await KeyManagementError.refusing {
            try await domain.pendingIdentityReset(token: caller.token, endpointID: caller.endpointID, userID: caller.userID)
        }
    }

    /// Cancels the user's pending identity reset.
    public func cancelReset(caller: Caller) async throws {
        try await KeyManagementError.refusing {
            try await domain.cancelIdentityReset(token: caller.token, endpointID: caller.endpointID)
        }
    }

    // MARK: Keys on this endpoint

    /// The keys kept on this endpoint, if any (a restart signs in without the passcode).
    public func localKeys(userID: String) throws -> UnlockedKeys? { try store.keys(userID: userID) }

    /// Forgets the keys kept on this endpoint.
    public func wipeLocalKeys() throws { try store.wipeKeys() }

    // MARK: Internals

    /// The keys as opened, with what an upgrade or a change needs.
    private struct Opened {
        let keys: UnlockedKeys
        let managementKey: SymmetricKey
        let attempt: PasscodeProtection.Attempt
        let managementVersion: Int
        let profileVersion: Int
        /// Made before the OPRF (PBES2 alone): re-wrap at once.
        let isLegacy: Bool
    }

    /// The management key under `passcode`: a fresh salt, one evaluation (the domain's current
    /// key, pinned in the header from now on).
    private func protect(_ managementKey: SymmetricKey, passcode: String, caller: Caller, keyID: PasscodeKeyID? = nil)
        async throws -> (Data, PasscodeProtection.Attempt)
    {
        let salt = SystemRandom.bytes(count: 16)
        let attempt = try await PasscodeProtection(domain: domain, caller: caller).attempt(
            passcode: passcode, salt: salt, iterations: passcodeIterations, keyID: keyID?.description, pinned: nil)
        return (try Self.wrapManagement(managementKey, under: attempt.key, parameters: attempt.parameters), attempt)
    }

    private static func wrapManagement(_ managementKey: SymmetricKey, under key: SymmetricKey, parameters: JWE.OPRFParameters)
        throws -> Data
    {
        var jwk = JWK(keyType: .oct)
        jwk.k = managementKey.secureBytes
        jwk.keyID = "management"
        return try JWE.encrypt(
            jwk.jsonData(), keyEncryptionKey: key, keyID: "passcode", contentType: "jwk+json", oprf: parameters)
    }

    private static func wrapProfile(_ keys: UnlockedKeys, under managementKey: SymmetricKey) throws -> Data {
        try JWE.encrypt(
            keys.profileJWKSet().jsonData(), keyEncryptionKey: managementKey, keyID: "management", contentType: "jwk-set+json")
    }

    /// Re-wraps the management key under the domain's current passcode key (a rotation: the
    /// attempt already carries its evaluation) or, for a pre-OPRF blob, under the OPRF.
    private func upgrade(_ opened: Opened, passcode: String, caller: Caller) async throws {
        let blob: Data
        var challenge = opened.attempt.challenge
        if opened.isLegacy {
            let (management, attempt) = try await protect(opened.managementKey, passcode: passcode, caller: caller)
            try await prove(attempt.challenge, with: opened.keys, caller: caller)
            blob = management
            challenge = attempt.challenge
        } else if let current = opened.attempt.current {
            blob = try Self.wrapManagement(opened.managementKey, under: current.key, parameters: current.parameters)
        } else {
            return
        }
        let write = KeyBlobWrite(name: KeyBlob.managementName, data: blob, expectedVersion: opened.managementVersion)
        _ = try await storage.store(
            name: write.name, data: write.data, expectedVersion: write.expectedVersion,
            proof: try Self.consent(to: [write], challenge: challenge, keys: opened.keys, caller: caller), token: caller.token,
            endpointID: caller.endpointID)
    }

    /// Fetches and opens both blobs (one counted attempt); checks them against the published
    /// identity.
    private func openKeys(passcode: String, caller: Caller) async throws -> Opened {
        let fetch = try await KeyManagementError.refusing {
            try await storage.fetch(name: KeyBlob.managementName, token: caller.token, endpointID: caller.endpointID)
        }
        guard let managementBlob = fetch.blob else { throw KeyManagementError(.noKeys, "the user has no keys yet") }
        let header: JWE.Header
        do {
            header = try JWE.header(of: managementBlob.data)
        } catch {
            throw KeyManagementError(.corruptKeys, "the stored management key cannot be read: \(error)")
        }
        if header.oprf == nil {
            // A blob from before the OPRF: checked before an attempt is spent on it.
            guard header.algorithm == JWE.KeyManagement.pbes2HS512A256KW.rawValue, let count = header.pbes2Count,
                (1...JWE.defaultMaximumIterations).contains(count)
            else { throw KeyManagementError(.corruptKeys, "the stored management key has no usable passcode parameters") }
        }
        let protection = PasscodeProtection(domain: domain, caller: caller)
        let attempt: PasscodeProtection.Attempt
        let opened: SecureBytes?
        do {
            if let parameters = header.oprf {
                let (salt, pinned) = try checked(parameters)
                attempt = try await protection.attempt(
                    passcode: passcode, salt: salt, iterations: parameters.iterations, keyID: parameters.keyID, pinned: pinned)
                let key = attempt.key
                opened = try Self.opening { try JWE.decrypt(managementBlob.data, keyEncryptionKey: key) }
            } else {
                attempt = try await protection.countedLegacyAttempt()
                opened = try Self.opening { try JWE.decrypt(managementBlob.data, password: Data(passcode.utf8)) }
            }
        } catch let error as KeyManagementError {
            throw error
        } catch {
            throw KeyManagementError(.corruptKeys, "the stored management key cannot be read: \(error)")
        }
        guard let plaintext = opened else {
            throw KeyManagementError(.incorrectPasscode, "the passcode is incorrect", attemptsLeft: attempt.attemptsLeft)
        }
        let managementKey: SymmetricKey
        do {
            managementKey = try JWK(json: plaintext.unsafeData()).symmetricKey()
        } catch {
            throw KeyManagementError(.corruptKeys, "the stored management key cannot be read: \(error)")
        }
        guard managementKey.byteCount == 32 else {
            throw KeyManagementError(.corruptKeys, "the management key has the wrong size")
        }
        let profileFetch = try await KeyManagementError.refusing {
            try await storage.fetch(name: KeyBlob.profileName, token: caller.token, endpointID: caller.endpointID)
        }
        guard let profileBlob = profileFetch.blob else { throw KeyManagementError(.corruptKeys, "the profile keys are missing") }
        let identity = try await KeyManagementError.refusing {
            try await domain.identity(token: caller.token, endpointID: caller.endpointID, userID: caller.userID)
        }
        let keys: UnlockedKeys
        do {
            let set = try JWKSet(json: JWE.decrypt(profileBlob.data, keyEncryptionKey: managementKey).unsafeData())
            keys = try UnlockedKeys(profile: set, userID: caller.userID, keyVersion: identity?.keyVersion ?? 1)
        } catch let error as KeyManagementError {
            throw error
        } catch {
            // A passcode change on another device between the two reads re-wraps both blobs
            // (in one write): a management key older than the profile is a race, not damage.
            let again = try? await storage.fetch(name: KeyBlob.managementName, token: caller.token, endpointID: caller.endpointID)
            if let version = again?.blob?.version, version != managementBlob.version {
                throw KeyManagementError(.conflict, "the keys were re-protected on another device meanwhile; try again")
            }
            throw KeyManagementError(.corruptKeys, "the stored profile keys cannot be opened: \(error)")
        }
        guard let identity, keys.matches(identity) else {
            // The backup holds the very keys this device keeps: the domain serves an identity
            // none of the user's devices published (a substitution), not a damaged backup.
            if let kept = try? store.keys(userID: caller.userID), kept.signing.publicKey == keys.signing.publicKey {
                throw KeyManagementError(
                    .identitySubstituted,
                    "ALARM: the domain serves an identity for \(caller.userID) (key version \(identity?.keyVersion ?? 0)) that none of your devices published, while your backup and this device hold your keys; they are kept, and nothing is replaced"
                )
            }
            throw KeyManagementError(.corruptKeys, "the stored keys do not match the user's published identity")
        }
        return Opened(
            keys: keys, managementKey: managementKey, attempt: attempt, managementVersion: managementBlob.version,
            profileVersion: profileBlob.version, isLegacy: header.oprf == nil)
    }

    /// The salt and the pinned key of a `spark-oprf` header, checked before any work.
    private func checked(_ parameters: JWE.OPRFParameters) throws -> (Data, Data) {
        guard parameters.suite == PasscodeProtection.suite else {
            throw KeyManagementError(
                .corruptKeys, "the backup uses OPRF suite '\(parameters.suite.prefix(32))', not \(PasscodeProtection.suite)")
        }
        guard let salt = try? Data(base64URLEncoded: parameters.salt), (16...64).contains(salt.count),
            let pinned = try? Data(base64URLEncoded: parameters.publicKey), pinned.count == 33, !parameters.keyID.isEmpty,
            parameters.keyID.count <= 64
        else { throw KeyManagementError(.corruptKeys, "the backup's OPRF parameters are malformed") }
        let floor = unsafeIterations ? 1 : JWE.minimumDecryptIterations
        guard (floor...JWE.defaultMaximumIterations).contains(parameters.iterations) else {
            throw KeyManagementError(
                .corruptKeys,
                "the backup's PBKDF2 count \(parameters.iterations) is outside \(floor)...\(JWE.defaultMaximumIterations)")
        }
        return (salt, pinned)
    }

    /// Opens a JWE; nil when it fails authentication (a wrong key: a wrong passcode).
    private static func opening(_ body: () throws -> SecureBytes) throws -> SecureBytes? {
        do {
            return try body()
        } catch let error as CryptoError where error.code == .authenticationFailure {
            return nil
        }
    }

    /// Signs a passcode attempt's challenge with `version` and sends it: the proof of unlock that
    /// makes `version` the user's passcode key version and retires the older ones.
    private func retire(_ challenge: Data, version: Int, with keys: UnlockedKeys, caller: Caller) async throws {
        let signature = try keys.signing.signature(
            for: passcodeRetireMessage(
                userID: caller.userID, endpointID: caller.endpointID, challenge: challenge, version: version))
        try await KeyManagementError.refusing {
            try await domain.retirePasscodeKeys(
                token: caller.token, endpointID: caller.endpointID, challenge: challenge, signature: signature,
                version: version)
        }
    }

    /// The identity key's consent to `writes` (`KeyBlobProof`), with a recent attempt's challenge.
    private static func consent(to writes: [KeyBlobWrite], challenge: Data, keys: UnlockedKeys, caller: Caller) throws
        -> KeyBlobProof
    {
        let message = keyBlobWriteMessage(
            userID: caller.userID, endpointID: caller.endpointID, challenge: challenge, writes: writes)
        return KeyBlobProof(challenge: challenge, signature: try keys.signing.signature(for: message))
    }

    /// Signs a passcode attempt's challenge and sends the proof.
    private func prove(_ challenge: Data, with keys: UnlockedKeys, caller: Caller) async throws {
        let signature = try keys.signing.signature(
            for: unlockProofMessage(userID: caller.userID, endpointID: caller.endpointID, challenge: challenge))
        try await KeyManagementError.refusing {
            try await domain.proveUnlock(
                token: caller.token, endpointID: caller.endpointID, challenge: challenge, signature: signature)
        }
    }

}
