public import Foundation
import SparkCrypto
import SparkDomain
public import SparkMLS
import SparkStore

/// One of the user's devices approving another, as Matrix's cross-signing has an existing device
/// verify a new one: signed by the approving device's own MLS key, naming both devices' keys.
/// Whoever holds the user's identity key (a thief who read a phone's store, an operator who
/// guessed the passcode) can make a device credential, but not an approval by a device the user
/// has, so a device of theirs joins none of the user's chats (``OwnDevices``).
///
/// Its bytes are in `docs/FORMATS.md`:
///
/// ```text
/// struct {
///     opaque user_id<V>;         // 1 to 255 bytes of UTF-8
///     opaque approver_id<V>;     // 1 to 64 bytes
///     opaque approver_key<V>;    // 32 bytes, the approver's MLS signature key
///     opaque approved_id<V>;     // 1 to 64 bytes
///     opaque approved_key<V>;    // 32 bytes, the approved device's MLS signature key
///     opaque signature<V>;       // 64 bytes: Ed25519 by approver_key over
/// } DeviceApproval;              //   "Spark DeviceApproval v1" ‖ the fields above
/// ```
public struct DeviceApproval: Sendable, Hashable {
    /// The user both devices belong to.
    public let userID: String
    /// The approving device.
    public let approverID: String
    /// Its MLS signature key.
    public let approverKey: Data
    /// The approved device.
    public let approvedID: String
    /// Its MLS signature key.
    public let approvedKey: Data
    /// The approver's signature over ``signedBytes``.
    public let signature: Data

    static let label = "Spark DeviceApproval v1"

    /// What the approver signs.
    public var signedBytes: Data {
        var writer = TLSWriter()
        writer.raw(Data(Self.label.utf8))
        writeFields(to: &writer)
        return writer.data
    }

    /// An approval of `approved`, signed by `signer` (this device, `approverID`).
    public static func sign(approving approved: DeviceCredential, by signer: MLSSigner, approverID: String) throws
        -> DeviceApproval
    {
        let unsigned = try DeviceApproval(
            userID: approved.userID, approverID: approverID, approverKey: signer.signatureKey, approvedID: approved.deviceID,
            approvedKey: approved.signatureKey, signature: Data(count: 64))
        return try DeviceApproval(
            userID: unsigned.userID, approverID: approverID, approverKey: unsigned.approverKey, approvedID: unsigned.approvedID,
            approvedKey: unsigned.approvedKey, signature: try signer.signature(forStatement: unsigned.signedBytes))
    }

    private init(
        userID: String, approverID: String, approverKey: Data, approvedID: String, approvedKey: Data, signature: Data
    ) throws {
        guard (1...255).contains(userID.utf8.count), (1...64).contains(approverID.utf8.count),
            (1...64).contains(approvedID.utf8.count)
        else { throw MLSError(.malformed, "a device approval names a user of 1 to 255 bytes and devices of 1 to 64") }
        guard approverKey.count == 32, approvedKey.count == 32, signature.count == 64 else {
            throw MLSError(.malformed, "a device approval holds two 32-byte Ed25519 keys and a 64-byte signature")
        }
        self.userID = userID
        self.approverID = approverID
        self.approverKey = approverKey
        self.approvedID = approvedID
        self.approvedKey = approvedKey
        self.signature = signature
    }

    /// Decodes an approval strictly (no trailing bytes, every length in range); its signature is
    /// checked by ``isSigned``, not here.
    public init(encoded: Data) throws {
        var reader = TLSReader(encoded)
        let user = try reader.opaque("device approval user id")
        let approver = try reader.opaque("device approval approver id")
        let approverKey = try reader.opaque("device approval approver key")
        let approved = try reader.opaque("device approval approved id")
        let approvedKey = try reader.opaque("device approval approved key")
        let signature = try reader.opaque("device approval signature")
        try reader.finish("device approval")
        guard let userID = String(data: user, encoding: .utf8), let approverID = String(data: approver, encoding: .utf8),
            let approvedID = String(data: approved, encoding: .utf8)
        else { throw MLSError(.malformed, "a device approval's user and device ids are UTF-8") }
        try self.init(
            userID: userID, approverID: approverID, approverKey: approverKey, approvedID: approvedID, approvedKey: approvedKey,
            signature: signature)
    }

    /// The bytes, as the domain keeps and lists them.
    public var encoded: Data {
        var writer = TLSWriter()
        writeFields(to: &writer)
        writer.opaque(signature)
        return writer.data
    }

    /// Whether the approver's key signed it.
    public var isSigned: Bool {
        guard let key = try? Ed25519.PublicKey(rawRepresentation: approverKey) else { return false }
        return key.isValidSignature(signature, for: signedBytes)
    }

    private func writeFields(to writer: inout TLSWriter) {
        writer.opaque(Data(userID.utf8))
        writer.opaque(Data(approverID.utf8))
        writer.opaque(approverKey)
        writer.opaque(Data(approvedID.utf8))
        writer.opaque(approvedKey)
    }

    /// The short code two devices of `user` show before one approves the other: 12 digits from
    /// SHA-256 over a label, the user and both devices' MLS keys (in byte order, so both screens
    /// compute the same). A device that shows the same code holds the key the approval names; to
    /// pass as another, a device key would have to be ground to a 40-bit match.
    public static func code(user: String, _ first: Data, _ second: Data) -> String {
        let (low, high) = first.lexicographicallyPrecedes(second) ? (first, second) : (second, first)
        var writer = TLSWriter()
        writer.raw(Data("Spark device approval code v1".utf8))
        writer.opaque(Data(user.utf8))
        writer.opaque(low)
        writer.opaque(high)
        let digest = SHA256.hash(writer.data)
        let value = digest.prefix(5).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 1_000_000_000_000
        let digits = String(value).leftPadded(to: 12)
        return stride(from: 0, to: 12, by: 4).map { start in
            let from = digits.index(digits.startIndex, offsetBy: start)
            return String(digits[from..<digits.index(from, offsetBy: 4)])
        }.joined(separator: " ")
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}

/// Whether a device of the user is added to chats and sent history without the user approving it.
public enum OwnDeviceApproval: String, Sendable, Codable, CaseIterable {
    /// Only a device approved on one the user has (the default): a device set up with the
    /// passcode alone joins nothing until then.
    case required
    /// Every device whose credential the user's identity key signed (Spark's model). Weaker:
    /// whoever holds the identity key and a token (a thief who read a device's store, an operator
    /// who guessed the passcode) joins every chat and reads its history.
    case automatic
}

/// Which of the user's devices this device trusts, from the credentials and approvals the domain
/// lists (each checked here; the domain only carries them) and what this device trusted before.
///
/// - A device trusts itself, and every device an approval signed by a device it trusts names
///   (with the key that approval names), so the user's devices follow one another's approvals.
/// - A device's first look trusts, besides, the devices approved from the user's oldest listed
///   device: a new device follows the approvals its user made before it came. A device the
///   thief registers later is approved by none of those.
/// - What it trusted is kept: a device stays trusted when the one that approved it is removed.
///   A device the domain no longer lists is forgotten (endpoint ids are never reused), so what a
///   removed device kept, its key and its approvals, adds nothing.
///
/// With ``OwnDeviceApproval/automatic`` every listed device with a valid credential is trusted.
struct OwnDevices: Sendable {
    let user: String
    let endpointID: String
    let identityKey: Ed25519.PublicKey
    let policy: OwnDeviceApproval

    /// One of the user's devices as it checked out.
    struct Listed: Sendable, Equatable {
        var endpoint: EndpointInfo
        /// Its MLS key, when its credential is signed by the identity key and names it.
        var key: Data?
    }

    /// A trusted device: an endpoint id with the key it was trusted with.
    struct Trusted: Hashable, Sendable {
        var endpointID: String
        var key: Data
    }

    /// What this device makes of the listing.
    struct View: Sendable {
        var listed: [Listed]
        var trusted: Set<Trusted>
        /// This device's key.
        var myKey: Data

        /// The listed devices this device trusts (itself included).
        var approvedIDs: Set<String> {
            Set(
                listed.filter { device in
                    device.key.map { trusted.contains(Trusted(endpointID: device.endpoint.endpointID, key: $0)) } ?? false
                }
                .map(\.endpoint.endpointID))
        }

        /// The endpoints, each with its approval as this device sees it.
        func annotated(user: String, me: String) -> [EndpointInfo] {
            listed.map { device in
                var endpoint = device.endpoint
                endpoint.approval = Self.approval(of: device, in: self, user: user, me: me)
                return endpoint
            }
        }

        static func approval(of device: Listed, in view: View, user: String, me: String) -> EndpointApproval {
            if device.endpoint.endpointID == me { return .thisDevice }
            guard let key = device.key else { return .unverified }
            if view.trusted.contains(Trusted(endpointID: device.endpoint.endpointID, key: key)) { return .approved }
            return .awaitingApproval(code: DeviceApproval.code(user: user, view.myKey, key))
        }
    }

    /// The view of `endpoints` for this device (key `myKey`), given what it trusted before
    /// (`remembered`, empty at its first look).
    func evaluate(_ endpoints: [EndpointInfo], myKey: Data, remembered: Set<Trusted>) -> View {
        let listed = endpoints.map { endpoint in
            Listed(endpoint: endpoint, key: key(of: endpoint))
        }
        let me = Trusted(endpointID: endpointID, key: myKey)
        var keys: [String: Data] = [:]
        for device in listed { if let key = device.key { keys[device.endpoint.endpointID] = key } }
        keys[endpointID] = myKey
        let present = Set(keys.map { Trusted(endpointID: $0.key, key: $0.value) })
        if policy == .automatic { return View(listed: listed, trusted: present, myKey: myKey) }
        // Approval edges, each checked: signed by the approver's listed key, naming the
        // approved device's listed key.
        var edges: [Trusted: [Trusted]] = [:]
        for device in listed {
            guard let approvedKey = device.key else { continue }
            let approved = Trusted(endpointID: device.endpoint.endpointID, key: approvedKey)
            for bytes in device.endpoint.approvals {
                guard let approval = try? DeviceApproval(encoded: bytes), approval.userID == user,
                    approval.approvedID == approved.endpointID, approval.approvedKey == approvedKey,
                    approval.approverID != approved.endpointID, keys[approval.approverID] == approval.approverKey,
                    approval.isSigned
                else { continue }
                edges[Trusted(endpointID: approval.approverID, key: approval.approverKey), default: []].append(approved)
            }
        }
        func closure(from roots: Set<Trusted>) -> Set<Trusted> {
            var reached = roots
            var queue = Array(roots)
            while let next = queue.popLast() {
                for approved in edges[next] ?? [] where reached.insert(approved).inserted { queue.append(approved) }
            }
            return reached
        }
        var roots = remembered.intersection(present)
        roots.insert(me)
        if remembered.isEmpty,
            let oldest = listed.filter({ $0.key != nil }).min(by: { $0.endpoint.registrationID < $1.endpoint.registrationID }),
            let key = oldest.key
        {
            roots.formUnion(closure(from: [Trusted(endpointID: oldest.endpoint.endpointID, key: key)]))
        }
        return View(listed: listed, trusted: closure(from: roots).intersection(present), myKey: myKey)
    }

    /// The device's MLS key from its credential, when the user's identity key signed it for it.
    func key(of endpoint: EndpointInfo) -> Data? {
        guard let bytes = endpoint.credential, let credential = try? DeviceCredential(encoded: bytes),
            credential.userID == user, credential.deviceID == endpoint.endpointID, credential.isSigned(by: identityKey)
        else { return nil }
        return credential.signatureKey
    }

    // MARK: Kept in the endpoint store

    /// The devices this device trusted at its last look.
    static func remembered(_ db: Database) throws -> Set<Trusted> {
        Set(
            try db.rows("SELECT endpoint_id, signature_key FROM own_devices").map {
                Trusted(endpointID: try $0.get(0), key: try $0.get(1))
            })
    }

    /// Keeps `trusted` as what this device trusts.
    static func remember(_ db: Database, _ trusted: Set<Trusted>) throws {
        try db.execute("DELETE FROM own_devices")
        for device in trusted {
            try db.execute("INSERT INTO own_devices(endpoint_id, signature_key) VALUES (?, ?)", [device.endpointID, device.key])
        }
    }

    /// Adds `device` to what this device trusts (it approved it).
    static func trust(_ db: Database, _ device: Trusted) throws {
        try db.execute(
            "INSERT INTO own_devices(endpoint_id, signature_key) VALUES (?, ?) ON CONFLICT(endpoint_id) DO UPDATE SET signature_key = excluded.signature_key",
            [device.endpointID, device.key])
    }
}
