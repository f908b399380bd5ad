package import Foundation
package import SparkCrypto
package import SparkDomain
import SparkLock

/// The domain's passcode-hardening secrets: the seeds of its OPRF keys (RFC 9497,
/// `P256-SHA256`, verifiable), kept **outside the database** so that a copy of the database
/// alone cannot test a single passcode guess.
///
/// Each user gets their own key, `DeriveKeyPair(seed, "spark-passcode-v1" ‖ 0x00 ‖ userID)`, so
/// an evaluation for one user says nothing about another's; each passcode change moves the user
/// to a new version of it (`… ‖ 0x00 ‖ "v" ‖ n`, key id `k1~n`), and the domain evaluates under
/// no older version, so a backup made before the change opens nothing. The file is JSON, mode 0600:
///
/// ```json
/// {"current": "k2", "keys": {"k1": "<32 bytes, base64url>", "k2": "<32 bytes, base64url>"}}
/// ```
///
/// Rotation adds a key and makes it current; blobs made under an older key still open (the
/// device names the key it used), and each device re-wraps under the current key at its next
/// unlock. Retiring a key makes the blobs still under it unopenable: retire only once every
/// user has unlocked since the rotation (`docs/SERVER.md`).
package struct PasscodeKeys: Sendable {
    /// The id of the key new blobs are made under.
    package let currentKeyID: String
    /// Every key's seed by id.
    let seeds: [String: SecureBytes]
    /// The key-transparency keys (the VRF's and the tree heads'), kept in the same file; nil in
    /// a file written before key transparency (``withTransparency()`` adds them).
    package let transparency: TransparencySecrets?
    /// Users' keys derived lately (a derivation is a hash to a scalar and a multiplication of
    /// the generator, a twentieth of an evaluation's cost), for this set of seeds only.
    private let derived = DerivedKeys()
    /// The file the set was read from, if any: the transparency log keeps its last signed head
    /// beside it (``TransparencyHeadPin``), where an edit of the database cannot roll it back.
    package private(set) var location: String?

    /// The ids of the keys held, sorted.
    package var keyIDs: [String] { seeds.keys.sorted() }

    init(currentKeyID: String, seeds: [String: SecureBytes], transparency: TransparencySecrets?) {
        self.currentKeyID = currentKeyID
        self.seeds = seeds
        self.transparency = transparency
    }

    /// A fresh set with one random key, `k1`, and fresh transparency keys.
    package static func generate() -> PasscodeKeys {
        PasscodeKeys(
            currentKeyID: "k1", seeds: ["k1": SecureBytes(randomCount: 32)], transparency: try? TransparencySecrets.generate())
    }

    /// The set with transparency keys (fresh ones if it had none).
    package func withTransparency() throws -> PasscodeKeys {
        if transparency != nil { return self }
        return PasscodeKeys(currentKeyID: currentKeyID, seeds: seeds, transparency: try TransparencySecrets.generate())
    }

    /// The set with a new random key, which becomes current (ids count up: `k2`, `k3`, …).
    package func rotated() -> PasscodeKeys {
        let next = (seeds.keys.compactMap { Int($0.dropFirst()) }.max() ?? 0) + 1
        var seeds = seeds
        seeds["k\(next)"] = SecureBytes(randomCount: 32)
        return PasscodeKeys(currentKeyID: "k\(next)", seeds: seeds, transparency: transparency)
    }

    /// The set without `keyID`, which must not be current.
    package func retiring(_ keyID: String) throws -> PasscodeKeys {
        guard seeds[keyID] != nil else { throw DomainError(.notFound, "there is no passcode key \(keyID)") }
        guard keyID != currentKeyID else {
            throw DomainError(.conflict, "\(keyID) is the current passcode key; rotate first, then retire the old one")
        }
        var seeds = seeds
        seeds[keyID] = nil
        return PasscodeKeys(currentKeyID: currentKeyID, seeds: seeds, transparency: transparency)
    }

    /// The user's OPRF key under `keyID`.
    ///
    /// - Throws: ``DomainError/Code/notFound`` for a key this domain does not hold (retired).
    package func userKey(_ keyID: String, userID: String) throws -> OPRF.PrivateKey {
        guard let id = PasscodeKeyID(keyID) else {
            throw DomainError(.invalidRequest, "'\(keyID.prefix(64))' is no passcode key id")
        }
        guard let seed = seeds[id.seed] else {
            throw DomainError(
                .notFound, "the domain no longer holds passcode key \(id.seed); the backup made under it cannot be opened")
        }
        let name = "\(id)\u{0}\(userID)"
        if let known = derived.key(name) { return known }
        do {
            let key = try OPRF.passcodeHardening.deriveKey(seed: seed, info: Self.keyInfo(userID: userID, version: id.version))
            derived.keep(key, as: name)
            return key
        } catch {
            throw DomainError(.invalidRequest, "no passcode key can be derived for that user id: \(error)")
        }
    }

    /// `"spark-passcode-v1" ‖ 0x00 ‖ UTF8(userID)`, the info of each user's key at version 1;
    /// from version 2, followed by `0x00 ‖ "v" ‖ version` in decimal (a passcode change bumps it).
    package static func keyInfo(userID: String, version: Int = 1) -> Data {
        var info = Data("spark-passcode-v1".utf8) + [0] + Data(userID.utf8)
        if version > 1 { info += [0] + Data("v\(version)".utf8) }
        return info
    }

    // MARK: The file

    private struct File: Codable {
        var current: String
        var keys: [String: String]
        /// The transparency keys' scalars, base64url: `{"vrf": …, "head": …}`.
        var transparency: [String: String]?
    }

    /// Reads the set from `path`; a file that others can read is refused.
    package static func load(from path: String) throws -> PasscodeKeys {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let data = FileManager.default.contents(atPath: path)
        else { throw DomainError(.unavailable, "the passcode keys at \(path) cannot be read") }
        let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? 0
        guard mode & 0o077 == 0 else {
            throw DomainError(.unavailable, "\(path) is readable by others (mode \(String(mode, radix: 8))); make it 0600")
        }
        guard let file = try? JSONDecoder().decode(File.self, from: data) else {
            throw DomainError(.unavailable, "\(path) is not a passcode key file ({\"current\": …, \"keys\": {…}})")
        }
        var seeds: [String: SecureBytes] = [:]
        for (id, encoded) in file.keys {
            guard let seed = try? Data(base64URLEncoded: encoded), seed.count == 32 else {
                throw DomainError(.unavailable, "\(path): key \(id) is not 32 bytes of base64url")
            }
            seeds[id] = SecureBytes(seed)
        }
        guard seeds[file.current] != nil else {
            throw DomainError(.unavailable, "\(path): the current key \(file.current) is not among its keys")
        }
        var transparency: TransparencySecrets?
        if let keys = file.transparency {
            guard let vrf = keys["vrf"].flatMap({ try? Data(base64URLEncoded: $0) }),
                let head = keys["head"].flatMap({ try? Data(base64URLEncoded: $0) }),
                let secrets = try? TransparencySecrets(vrf: SecureBytes(vrf), head: SecureBytes(head))
            else { throw DomainError(.unavailable, "\(path): the transparency keys are not two P-256 scalars") }
            transparency = secrets
        }
        var keys = PasscodeKeys(currentKeyID: file.current, seeds: seeds, transparency: transparency)
        keys.location = path
        return keys
    }

    /// Writes the set to `path` with mode 0600, replacing the file atomically.
    package func write(to path: String) throws {
        let temporary = try writeTemporary(beside: path)
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw DomainError(.storageFailure, "cannot replace \(path)")
        }
    }

    /// Writes the set to a new file beside `path` (mode 0600) and returns its path.
    private func writeTemporary(beside path: String) throws -> String {
        func encoded(_ secret: SecureBytes) -> String { secret.withUnsafeBytes { Data($0) }.base64URLEncodedString() }
        let file = File(
            current: currentKeyID, keys: seeds.mapValues(encoded),
            transparency: transparency.map {
                ["vrf": encoded($0.vrf.rawRepresentation), "head": encoded($0.head.rawRepresentation)]
            })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let temporary = "\(path).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).new"
        let previous = umask(0o077)
        defer { umask(previous) }
        do {
            guard FileManager.default.createFile(atPath: temporary, contents: try encoder.encode(file)) else {
                throw DomainError(.storageFailure, "cannot write \(temporary)")
            }
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: temporary)
            return temporary
        } catch let error as DomainError {
            throw error
        } catch {
            throw DomainError(.storageFailure, "cannot write \(path): \(error.localizedDescription)")
        }
    }

    /// The set at `path`, made there first if there is none (the embedded domain's file beside
    /// its database).
    package static func loadOrCreate(at path: String) throws -> PasscodeKeys {
        if FileManager.default.fileExists(atPath: path) {
            let keys = try load(from: path)
            guard keys.transparency == nil else { return keys }
            // A file from before key transparency: the keys added, then read back (of two
            // processes adding them at once, both end up with the one renamed last).
            try keys.withTransparency().write(to: path)
            return try load(from: path)
        }
        // link(2) fails if the name exists: of two processes creating it at once, one wins and
        // the other reads the winner's keys.
        var keys = generate()
        let temporary = try keys.writeTemporary(beside: path)
        defer { unlink(temporary) }
        keys.location = path
        return link(temporary, path) == 0 ? keys : try load(from: path)
    }
}

/// Users' OPRF keys as derived, by key id and user id; at most `capacity`, all forgotten when
/// full (a derivation again costs little).
private final class DerivedKeys: Sendable {
    private let keys = Locked<[String: OPRF.PrivateKey]>([:])
    private let capacity = 10_000

    func key(_ name: String) -> OPRF.PrivateKey? { keys.withLock { $0[name] } }

    func keep(_ key: OPRF.PrivateKey, as name: String) {
        keys.withLock { keys in
            if keys.count >= capacity { keys.removeAll(keepingCapacity: true) }
            keys[name] = key
        }
    }
}

/// The domain's key-transparency secrets: the VRF key that hides the log's labels and the P-256
/// key that signs its tree heads.
package struct TransparencySecrets: Sendable {
    /// The VRF key.
    package let vrf: ECVRF.PrivateKey
    /// The tree-head signing key.
    package let head: P256.SigningKey

    /// The keys from their scalars.
    package init(vrf: SecureBytes, head: SecureBytes) throws {
        self.vrf = try ECVRF.PrivateKey(rawRepresentation: vrf)
        self.head = try P256.SigningKey(rawRepresentation: head)
    }

    init(vrf: ECVRF.PrivateKey, head: P256.SigningKey) {
        self.vrf = vrf
        self.head = head
    }

    /// Fresh random keys.
    package static func generate() throws -> TransparencySecrets {
        TransparencySecrets(vrf: try ECVRF.PrivateKey(), head: try P256.SigningKey())
    }

    /// The public keys devices check against.
    package var publicKeys: TransparencyKeys {
        TransparencyKeys(vrfKey: vrf.publicKey.compressed, headKey: head.publicKey.x + head.publicKey.y)
    }
}
