import Foundation
import SparkCrypto
import SparkMLS
import SparkTestSupport
import Testing

@testable import SparkSDK

/// Safety numbers against libsignal's published vector, and device credentials cross-signed by
/// the identity key, attacked the ways a domain would.
@Suite("Identities: safety numbers and device credentials")
struct IdentityTests {
    // libsignal-protocol-c's tests/test_fingerprint.c: two Curve25519 identity keys (with their
    // 0x05 type byte), the two stable identifiers and the 60-digit display both sides show.
    static let aliceKey = Data(hex: "05 06863bc66d02b40d27b8d49ca7c09e9239236f9d7d25d6fcca5ce13c7064d868")
    static let bobKey = Data(hex: "05 f781b6fb32fed9ba1cf2de978d4d5da28dc34046ae814402b5c0dbd96fda907b")
    static let display = "300354477692869396892869876765458257569162576843440918079131"

    @Test func libsignalsVector() {
        let alice = SafetyNumber(
            localUser: "+14152222222", localKey: Self.aliceKey, remoteUser: "+14153333333", remoteKey: Self.bobKey)
        let bob = SafetyNumber(
            localUser: "+14153333333", localKey: Self.bobKey, remoteUser: "+14152222222", remoteKey: Self.aliceKey)
        #expect(alice.digits == Self.display)
        #expect(bob == alice)
        // The scannable form of version 1 carries the first 32 bytes of each fingerprint hash.
        let aliceHash = SafetyNumber.fingerprint(userID: "+14152222222", key: Self.aliceKey, iterations: 5200)
        #expect(aliceHash.prefix(32) == Data(hex: "1e301a0353dce3dbe7684cb8336e85136cdc0ee96219494ada305d62a7bd61df"))
        let bobHash = SafetyNumber.fingerprint(userID: "+14153333333", key: Self.bobKey, iterations: 5200)
        #expect(bobHash.prefix(32) == Data(hex: "d62cbf73a11592015b6b9f1682ac306fea3aaf3885b84d12bca631e9d4fb3a4d"))
        #expect(alice.groups.count == 12 && alice.groups[0] == "30035")
        #expect(alice.description.hasPrefix("30035 44776 92869"))
    }

    @Test func aSubstitutedKeyOrAnotherUserGivesAnotherNumber() throws {
        let genuine = SafetyNumber(localUser: "alice", localKey: Self.aliceKey, remoteUser: "bob", remoteKey: Self.bobKey)
        var substituted = Self.bobKey
        substituted[32] ^= 1
        #expect(SafetyNumber(localUser: "alice", localKey: Self.aliceKey, remoteUser: "bob", remoteKey: substituted) != genuine)
        #expect(SafetyNumber(localUser: "alice", localKey: Self.aliceKey, remoteUser: "bobby", remoteKey: Self.bobKey) != genuine)
    }

    @Test func typedNumbersAreParsedStrictly() {
        #expect(
            SafetyNumber(digits: "30035 44776 92869 39689 28698 76765 45825 75691 62576 84344 09180 79131")?.digits
                == Self.display)
        #expect(SafetyNumber(digits: String(Self.display.dropLast())) == nil)
        #expect(SafetyNumber(digits: Self.display + "1") == nil)
        #expect(SafetyNumber(digits: "3003544776928693968928698767654582575691625768434409180791x1") == nil)
        #expect(SafetyNumber(digits: "٣" + Self.display.dropFirst()) == nil, "only ASCII digits")
    }

    // MARK: Device credentials

    struct Device {
        let identity: Ed25519.PrivateKey
        let key: Ed25519.PrivateKey
        let credential: DeviceCredential
        var signer: MLSSigner { MLSSigner(credential: credential.mlsCredential, key: key) }

        init(_ user: String, device: String, identity: Ed25519.PrivateKey? = nil) throws {
            self.identity = try identity ?? Ed25519.PrivateKey()
            key = try Ed25519.PrivateKey()
            credential = try DeviceCredential.issue(
                userID: user, deviceID: device, signatureKey: key.publicKey.rawRepresentation, identityKeyVersion: 1,
                identityKey: self.identity)
        }
    }

    @Test func aCredentialRoundTripsAndIsSignedByItsIdentityOnly() throws {
        let device = try Device("alice", device: "laptop")
        let decoded = try DeviceCredential(encoded: device.credential.encoded)
        #expect(decoded == device.credential)
        #expect(decoded.isSigned(by: device.identity.publicKey))
        #expect(!decoded.isSigned(by: try Ed25519.PrivateKey().publicKey))
        // Every byte of the encoding matters: a flipped one is refused or no longer signed.
        let encoded = device.credential.encoded
        for index in encoded.indices {
            var altered = encoded
            altered[index] ^= 0x01
            if let parsed = try? DeviceCredential(encoded: altered) {
                #expect(!parsed.isSigned(by: device.identity.publicKey), "byte \(index)")
            }
        }
    }

    @Test func malformedCredentialsAreRefused() throws {
        let encoded = try Device("alice", device: "laptop").credential.encoded
        #expect(throws: MLSError(.malformed, "")) { try DeviceCredential(encoded: encoded + Data([0])) }
        #expect(throws: MLSError(.malformed, "")) { try DeviceCredential(encoded: encoded.dropLast()) }
        #expect(throws: MLSError(.malformed, "")) { try DeviceCredential(encoded: Data()) }
        var writer = TLSWriter()
        writer.opaque(Data("alice".utf8))
        writer.opaque(Data("laptop".utf8))
        writer.opaque(Data(repeating: 7, count: 31))  // not an Ed25519 key's length
        writer.u32(1)
        writer.opaque(Data(repeating: 0, count: 64))
        #expect(throws: MLSError(.malformed, "")) { try DeviceCredential(encoded: writer.data) }
        #expect(throws: MLSError(.malformed, "")) {
            try DeviceCredential.issue(
                userID: "", deviceID: "d", signatureKey: Data(count: 32), identityKeyVersion: 1,
                identityKey: try Ed25519.PrivateKey())
        }
    }

    @Test func theValidatorWantsTheTrustedIdentityAndTheLeafsOwnKey() throws {
        let alice = try Device("alice", device: "laptop")
        let validator = DeviceCredentialValidator(identityKeys: ["alice": alice.identity.publicKey.rawRepresentation])
        let signatureKey = alice.key.publicKey.rawRepresentation
        #expect(validator.isValid(alice.credential.mlsCredential, signatureKey: signatureKey))
        // Another leaf key with alice's credential (a copied credential).
        #expect(
            !validator.isValid(alice.credential.mlsCredential, signatureKey: try Ed25519.PrivateKey().publicKey.rawRepresentation)
        )
        // A device of alice signed by a key the domain substituted for hers.
        let forged = try Device("alice", device: "phone")
        #expect(!validator.isValid(forged.credential.mlsCredential, signatureKey: forged.key.publicKey.rawRepresentation))
        // A user this device trusts no key for, and a credential that is not a device credential.
        let stranger = try Device("mallory", device: "x")
        #expect(!validator.isValid(stranger.credential.mlsCredential, signatureKey: stranger.key.publicKey.rawRepresentation))
        #expect(!validator.isValid(MLSCredential(identity: Data("alice".utf8)), signatureKey: signatureKey))
    }

    /// In a group checked by the validator: a member whose device is cross-signed joins; a
    /// KeyPackage whose credential is signed by a substituted identity key is refused, and so is
    /// a Welcome whose tree holds such a leaf.
    @Test func aGroupAcceptsOnlyCrossSignedDevices() throws {
        var random = MLSSeededRandom(seed: "cross-signing")
        let alice = try Device("alice", device: "laptop")
        let bob = try Device("bob", device: "phone")
        let impostor = try Device("carol", device: "tablet")  // carol's real key is another
        let carol = try Ed25519.PrivateKey()
        let trusted: [String: Data] = [
            "alice": alice.identity.publicKey.rawRepresentation, "bob": bob.identity.publicKey.rawRepresentation,
            "carol": carol.publicKey.rawRepresentation,
        ]
        let validator = DeviceCredentialValidator(identityKeys: trusted)
        let now = Date()
        let group = try MLSGroup.create(groupID: Data("chat".utf8), signer: alice.signer, validator: validator, random: &random)
        let bobPackage = try MLSKeyPackageBundle(signer: bob.signer, now: now, random: &random)
        let result = try group.commit(adding: [bobPackage.keyPackage], now: now, random: &random)
        let joined = try MLSGroup.join(welcome: try #require(result.welcome), bundle: bobPackage, validator: validator)
        #expect(joined.epoch == result.group.epoch && joined.epochAuthenticator == result.group.epochAuthenticator)

        let impostorPackage = try MLSKeyPackageBundle(signer: impostor.signer, now: now, random: &random)
        #expect(throws: MLSError.self) {
            try result.group.commit(adding: [impostorPackage.keyPackage], now: now, random: &random)
        }

        // A group made without the check adds the impostor; a member who checks refuses its Welcome.
        let lax = try MLSGroup.create(groupID: Data("lax".utf8), signer: alice.signer, random: &random)
        let laxAdd = try lax.commit(adding: [impostorPackage.keyPackage, bobPackage.keyPackage], now: now, random: &random)
        #expect(throws: MLSError.self) {
            try MLSGroup.join(welcome: try #require(laxAdd.welcome), bundle: bobPackage, validator: validator)
        }
    }
}
