public import Foundation
import SparkCrypto

/// One of a user's registered devices.
public struct EndpointInfo: Sendable, Codable, Equatable, Identifiable {
    /// The endpoint's id, chosen by the device when it first registers.
    public var endpointID: String
    /// Spark's registration id: a number per user, increasing with each registration.
    public var registrationID: Int64
    /// How the device describes itself (`endpointDescription`).
    public var description: String
    /// A name the user gave it.
    public var nickname: String
    /// Whether it holds the profile now (always true when several may be active).
    public var isActive: Bool
    /// When it registered.
    public var createdAt: Date
    /// When it last checked in, to the minute (a check-in within a minute of the time recorded
    /// leaves it).
    public var lastSeen: Date
    /// The device's credential as it published it once set up: its MLS signature key, signed by
    /// the user's identity key (opaque to the domain; nil until published).
    public var credential: Data?
    /// The approvals of this device that the user's other devices signed (opaque to the domain).
    public var approvals: [Data]
    /// Whether the user's devices approved it, as this device sees it. The domain does not say
    /// (it lists ``EndpointApproval/unknown``); the SDK's `endpoints()` fills it in from the
    /// signed credentials and approvals, once the device is set up.
    public var approval: EndpointApproval = .unknown

    /// The endpoint id.
    public var id: String { endpointID }

    /// An endpoint record.
    public init(
        endpointID: String, registrationID: Int64, description: String, nickname: String, isActive: Bool, createdAt: Date,
        lastSeen: Date, credential: Data? = nil, approvals: [Data] = []
    ) {
        self.endpointID = endpointID
        self.registrationID = registrationID
        self.description = description
        self.nickname = nickname
        self.isActive = isActive
        self.createdAt = createdAt
        self.lastSeen = lastSeen
        self.credential = credential
        self.approvals = approvals
    }

    private enum CodingKeys: String, CodingKey {
        case endpointID, registrationID, description, nickname, isActive, createdAt, lastSeen, credential, approvals
    }

    /// Decodes a record; `credential` and `approvals` may be absent (none yet).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        endpointID = try container.decode(String.self, forKey: .endpointID)
        registrationID = try container.decode(Int64.self, forKey: .registrationID)
        description = try container.decode(String.self, forKey: .description)
        nickname = try container.decode(String.self, forKey: .nickname)
        isActive = try container.decode(Bool.self, forKey: .isActive)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        lastSeen = try container.decode(Date.self, forKey: .lastSeen)
        credential = try container.decodeIfPresent(Data.self, forKey: .credential)
        approvals = try container.decodeIfPresent([Data].self, forKey: .approvals) ?? []
    }
}

/// Whether one of the user's devices is approved, as the device that asks sees it.
public enum EndpointApproval: Sendable, Equatable, Hashable {
    /// Not known: the domain's own listing, or a device that is not set up yet.
    case unknown
    /// The device asking.
    case thisDevice
    /// Approved: it is added to the user's chats and gets their history.
    case approved
    /// Not approved by any device this one trusts: it joins nothing until the user approves it
    /// on a device they have, after both screens show `code`.
    case awaitingApproval(code: String)
    /// It has not published a credential signed by the user's identity key (it is not set up,
    /// or what it published does not verify): nothing can approve it.
    case unverified
}

/// What a device sends to register.
public struct EndpointRegistration: Sendable, Codable, Equatable {
    /// The device's endpoint id (kept in its store across restarts).
    public var endpointID: String
    /// How the device describes itself.
    public var description: String
    /// A nickname, possibly empty.
    public var nickname: String
    /// The user confirmed taking the profile over from the active device (device switch).
    public var takeOver: Bool
    /// An endpoint of the user to remove in the same step, when the user has the maximum of
    /// endpoints (``RegistrationOutcome/full(endpoints:maximum:)`` listed them).
    public var replacing: String?

    /// A registration request.
    public init(
        endpointID: String, description: String, nickname: String = "", takeOver: Bool = false, replacing: String? = nil
    ) {
        self.endpointID = endpointID
        self.description = description
        self.nickname = nickname
        self.takeOver = takeOver
        self.replacing = replacing
    }
}

/// The domain's answer to a registration.
public enum RegistrationOutcome: Sendable, Codable, Equatable {
    /// Registered (or already registered) and active.
    case registered(EndpointInfo)
    /// The policy allows one active endpoint and another holds it: ask the user, then register
    /// again with `takeOver`.
    case deviceSwitchRequired(active: [EndpointInfo])
    /// The user has the maximum number of endpoints: remove one, then register again.
    case full(endpoints: [EndpointInfo], maximum: Int)
}

/// A key blob from the key store with its version (for compare-and-swap).
public struct KeyBlob: Sendable, Codable, Equatable {
    /// The name of the passcode-protected management key blob.
    public static let managementName = "management"
    /// The name of the profile (identity) keys blob.
    public static let profileName = "profile"

    /// The blob's name.
    public var name: String
    /// Its bytes (a JWE, opaque to the domain).
    public var data: Data
    /// Its version; each write adds one.
    public var version: Int

    /// A blob.
    public init(name: String, data: Data, version: Int) {
        self.name = name
        self.data = data
        self.version = version
    }
}

/// One blob of a multi-blob write, with the version it must still be at (nil: must not exist).
public struct KeyBlobWrite: Sendable, Codable, Equatable {
    /// The blob's name.
    public var name: String
    /// Its new bytes.
    public var data: Data
    /// The version it must be at now; nil when it must not exist.
    public var expectedVersion: Int?

    /// A write.
    public init(name: String, data: Data, expectedVersion: Int?) {
        self.name = name
        self.data = data
        self.expectedVersion = expectedVersion
    }
}

/// The identity key's consent to a key-blob write: once a user has published an identity, the
/// domain replaces or adds a blob only with this proof, so a stolen token (a thief's own
/// endpoint) cannot overwrite the passcode backup the user's devices rely on.
///
/// `challenge` is the challenge of one of the endpoint's passcode attempts, at most ten minutes
/// old (proven or not: the write's compare-and-swap makes a replay fail); `signature` is an
/// Ed25519 signature by the published identity key over ``keyBlobWriteMessage(userID:endpointID:challenge:writes:)``.
public struct KeyBlobProof: Sendable, Codable, Equatable {
    /// The challenge of a recent passcode attempt of this endpoint, 32 bytes.
    public var challenge: Data
    /// The identity key's signature over ``keyBlobWriteMessage(userID:endpointID:challenge:writes:)``.
    public var signature: Data

    /// A proof.
    public init(challenge: Data, signature: Data) {
        self.challenge = challenge
        self.signature = signature
    }
}

/// What a ``KeyBlobProof`` signs (`docs/FORMATS.md`): `"spark-key-blobs-v1" ‖ 0x00 ‖ userID ‖
/// 0x00 ‖ endpointID ‖ 0x00 ‖ challenge (32 bytes) ‖ count (u8)`, then for each write in order
/// `len(name) (u8) ‖ name ‖ expectedVersion (u64 big-endian, 0 when the blob must not exist) ‖
/// SHA-256(data)`. It names every blob, the version each replaces and the exact new bytes, so the
/// proof is good for that write only.
public func keyBlobWriteMessage(userID: String, endpointID: String, challenge: Data, writes: [KeyBlobWrite]) -> Data {
    var message = endpointMessage("spark-key-blobs-v1", userID: userID, endpointID: endpointID)
    message.append(challenge)
    message.append(UInt8(clamping: writes.count))
    for write in writes {
        let name = Data(write.name.utf8)
        message.append(UInt8(clamping: name.count))
        message.append(name)
        var version = UInt64(max(0, write.expectedVersion ?? 0)).bigEndian
        message.append(Data(bytes: &version, count: 8))
        message.append(SHA256.hash(write.data))
    }
    return message
}

/// A key-blob fetch: the blob, or nil when the user has none yet.
public struct BlobFetch: Sendable, Codable, Equatable {
    /// The blob, or nil when the user has none yet.
    public var blob: KeyBlob?

    /// A fetch result.
    public init(blob: KeyBlob?) { self.blob = blob }
}

/// The domain's answer to one passcode attempt: its OPRF evaluations (RFC 9497,
/// `P256-SHA256`, verifiable) of the device's blinded, stretched passcode, and the challenge
/// that proves the attempt right once the keys open. Each request counts as an attempt.
public struct PasscodeEvaluation: Sendable, Codable, Equatable {
    /// One evaluation under one of the domain's passcode keys.
    public struct Evaluation: Sendable, Codable, Equatable {
        /// The domain's passcode key id (`k1`, …).
        public var keyID: String
        /// The user's OPRF public key under it (a compressed P-256 point).
        public var publicKey: Data
        /// The evaluated element.
        public var element: Data
        /// The DLEQ proof that `element` was made with `publicKey`'s private key.
        public var proof: Data

        /// An evaluation.
        public init(keyID: String, publicKey: Data, element: Data, proof: Data) {
            self.keyID = keyID
            self.publicKey = publicKey
            self.element = element
            self.proof = proof
        }
    }

    /// Under the key the device asked for (the one its backup was made with).
    public var requested: Evaluation
    /// Under the domain's current key, when that is another (the device re-wraps under it).
    public var current: Evaluation?
    /// The 32-byte challenge to sign once the keys open (see `docs/FORMATS.md`).
    public var challenge: Data
    /// Unproven attempts left this hour after this one.
    public var attemptsLeft: Int

    /// An answer.
    public init(requested: Evaluation, current: Evaluation?, challenge: Data, attemptsLeft: Int) {
        self.requested = requested
        self.current = current
        self.challenge = challenge
        self.attemptsLeft = attemptsLeft
    }
}

/// A user's public identity in the domain's directory: their Ed25519 signing key and X25519
/// encryption key, a version that rises when the keys are reset, and a signature by the signing
/// key over both (so the domain cannot swap the encryption key unnoticed).
public struct PublishedIdentity: Sendable, Codable, Equatable {
    /// The user id.
    public var userID: String
    /// The Ed25519 public key, 32 bytes.
    public var signingKey: Data
    /// The X25519 public key, 32 bytes.
    public var encryptionKey: Data
    /// The key version, starting at 1.
    public var keyVersion: Int
    /// Ed25519 signature over ``signedBytes``.
    public var signature: Data

    /// An identity document.
    public init(userID: String, signingKey: Data, encryptionKey: Data, keyVersion: Int, signature: Data) {
        self.userID = userID
        self.signingKey = signingKey
        self.encryptionKey = encryptionKey
        self.keyVersion = keyVersion
        self.signature = signature
    }

    /// What the signature covers: `"spark-identity-v1" ‖ 0 ‖ userID ‖ 0 ‖ keyVersion (8 bytes, big
    /// endian) ‖ signingKey ‖ encryptionKey`.
    public var signedBytes: Data {
        var data = Data("spark-identity-v1".utf8) + [0] + Data(userID.utf8) + [0]
        withUnsafeBytes(of: UInt64(keyVersion).bigEndian) { data.append(contentsOf: $0) }
        return data + signingKey + encryptionKey
    }

    /// Whether the document is well formed and signed by its own signing key.
    public var isSelfSigned: Bool {
        guard signingKey.count == 32, encryptionKey.count == 32, keyVersion >= 1,
            let key = try? Ed25519.PublicKey(rawRepresentation: signingKey)
        else { return false }
        return key.isValidSignature(signature, for: signedBytes)
    }
}

/// What an unlock proof signs: `"spark-unlock-v1" ‖ 0 ‖ userID ‖ 0 ‖ endpointID ‖ 0 ‖ challenge`,
/// so a proof cannot be replayed for another user, endpoint or challenge.
public func unlockProofMessage(userID: String, endpointID: String, challenge: Data) -> Data {
    endpointMessage("spark-unlock-v1", userID: userID, endpointID: endpointID) + challenge
}

/// What every signature an endpoint makes for the domain begins with: `tag ‖ 0x00 ‖ userID ‖ 0x00 ‖
/// endpointID ‖ 0x00`, so no signature serves another purpose, user or endpoint.
private func endpointMessage(_ tag: String, userID: String, endpointID: String) -> Data {
    Data(tag.utf8) + [0] + Data(userID.utf8) + [0] + Data(endpointID.utf8) + [0]
}

/// What an Ed25519 signature by the identity key covers to make `version` the user's passcode
/// key version (`docs/FORMATS.md`): `"spark-passcode-retire-v1" ‖ 0x00 ‖ userID ‖ 0x00 ‖
/// endpointID ‖ 0x00 ‖ version (u64, big-endian) ‖ challenge`. After it the domain no longer
/// evaluates passcodes under the user's older versions: backups made under them open nothing.
public func passcodeRetireMessage(userID: String, endpointID: String, challenge: Data, version: Int) -> Data {
    var number = UInt64(max(0, version)).bigEndian
    var message = endpointMessage("spark-passcode-retire-v1", userID: userID, endpointID: endpointID)
    message.append(Data(bytes: &number, count: 8))
    message.append(challenge)
    return message
}

/// A user's passcode key as a backup names it: the domain's seed (`k1`, `k2`, … rotated by the
/// operator) and the user's own version of it (bumped by each passcode change), written `k1` for
/// version 1 and `k1~3` for version 3.
public struct PasscodeKeyID: Sendable, Hashable, CustomStringConvertible {
    /// The domain's seed id.
    public var seed: String
    /// The user's version, from 1.
    public var version: Int

    /// A key id.
    public init(seed: String, version: Int) {
        self.seed = seed
        self.version = version
    }

    /// Parses `k1` or `k1~3`; nil for anything else (an empty seed, a version below 1 or not a
    /// plain decimal number).
    public init?(_ text: String) {
        let parts = text.split(separator: "~", omittingEmptySubsequences: false)
        guard let seed = parts.first, !seed.isEmpty, parts.count <= 2 else { return nil }
        if parts.count == 2 {
            guard parts[1].allSatisfy(\.isASCII), parts[1].allSatisfy(\.isNumber), parts[1].count <= 9,
                let version = Int(parts[1]), version >= 1
            else { return nil }
            self.init(seed: String(seed), version: version)
        } else {
            self.init(seed: String(seed), version: 1)
        }
    }

    /// `k1` for version 1, `k1~3` otherwise.
    public var description: String { version == 1 ? seed : "\(seed)~\(version)" }
}

/// What an Ed25519 signature by the current identity key covers to reset the identity at once
/// (`docs/FORMATS.md`): `"spark-identity-reset-v1" ‖ 0x00 ‖ userID ‖ 0x00 ‖ endpointID ‖ 0x00 ‖
/// keyVersion (u64, big-endian)`.
public func identityResetMessage(userID: String, endpointID: String, keyVersion: Int) -> Data {
    var version = UInt64(max(0, keyVersion)).bigEndian
    return Data("spark-identity-reset-v1".utf8) + [0] + Data(userID.utf8) + [0] + Data(endpointID.utf8) + [0]
        + Data(bytes: &version, count: 8)
}

/// A reset of a user's identity that waits out the domain's delay.
public struct PendingIdentityReset: Sendable, Codable, Equatable {
    /// The endpoint that asked for it.
    public var endpointID: String
    /// When it was asked for.
    public var requestedAt: Date
    /// When it may be completed, unless cancelled first.
    public var effectiveAt: Date

    /// A pending reset.
    public init(endpointID: String, requestedAt: Date, effectiveAt: Date) {
        self.endpointID = endpointID
        self.requestedAt = requestedAt
        self.effectiveAt = effectiveAt
    }
}

/// The domain's answer to a reset request.
public enum IdentityResetOutcome: Sendable, Codable, Equatable {
    /// The identity and the key backup are gone and the user's other endpoints removed: publish
    /// a new identity now.
    case completed
    /// The reset waits until `effectiveAt`; the user's devices and contacts see it and any of
    /// the user's devices can cancel it. Ask again after that time to complete it.
    case pending(PendingIdentityReset)
}
