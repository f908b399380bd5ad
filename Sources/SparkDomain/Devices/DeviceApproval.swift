public import Foundation
public import SparkCrypto
public import SparkMLS

/// One of the user's devices approving another, as Matrix's cross-signing has an existing device
/// verify a new one: signed by the approving device's own MLS key, naming both devices' keys.
/// Whoever holds the user's identity key (a thief who read a phone's store, an operator who
/// guessed the passcode) can make a device credential, but not an approval by a device the user
/// has, so a device of theirs joins none of the user's chats (see ``DeviceApprovalGraph``).
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

/// The approvals among one user's listed devices, each checked: an edge from the approver (its id
/// and the key the approval names) to the approved device only when the approval decodes, names
/// the user, is signed by that key and names the approved device's listed credential key. A credential counts only when the
/// user's identity key signed it for that endpoint. The user's devices and the domain read the
/// same listing with it: a device decides whom it trusts from it (the SDK's `OwnDevices`), and
/// the domain which devices may remove others.
public struct DeviceApprovalGraph: Sendable {
    /// A device: an endpoint id with its MLS key.
    public struct Device: Hashable, Sendable {
        /// The endpoint id.
        public var endpointID: String
        /// Its MLS signature key.
        public var key: Data

        /// A device.
        public init(endpointID: String, key: Data) {
            self.endpointID = endpointID
            self.key = key
        }
    }

    /// Each listed endpoint's MLS key, for those with a valid credential.
    public let keys: [String: Data]
    /// The oldest listed device with a valid credential.
    public let oldest: Device?
    private let edges: [Device: [Device]]

    /// The graph of `endpoints`, the devices of `user` whose identity key is `identityKey`.
    public init(_ endpoints: [EndpointInfo], user: String, identityKey: Ed25519.PublicKey) {
        var keys: [String: Data] = [:]
        var oldest: (registration: Int64, device: Device)?
        for endpoint in endpoints {
            guard let bytes = endpoint.credential, let credential = try? DeviceCredential(encoded: bytes),
                credential.userID == user, credential.deviceID == endpoint.endpointID, credential.isSigned(by: identityKey)
            else { continue }
            keys[endpoint.endpointID] = credential.signatureKey
            if oldest.map({ endpoint.registrationID < $0.registration }) ?? true {
                oldest = (endpoint.registrationID, Device(endpointID: endpoint.endpointID, key: credential.signatureKey))
            }
        }
        var edges: [Device: [Device]] = [:]
        for endpoint in endpoints {
            guard let approvedKey = keys[endpoint.endpointID] else { continue }
            let approved = Device(endpointID: endpoint.endpointID, key: approvedKey)
            for bytes in endpoint.approvals {
                // The edge starts at the approver's id with the key the approval names: only a
                // listed, trusted device with that key reaches it (a key the approver's listing
                // does not show starts an edge nothing reaches).
                guard let approval = try? DeviceApproval(encoded: bytes), approval.userID == user,
                    approval.approvedID == approved.endpointID, approval.approvedKey == approvedKey,
                    approval.approverID != approved.endpointID, approval.isSigned
                else { continue }
                edges[Device(endpointID: approval.approverID, key: approval.approverKey), default: []].append(approved)
            }
        }
        self.keys = keys
        self.oldest = oldest?.device
        self.edges = edges
    }

    /// The listed devices with a valid credential.
    public var present: Set<Device> { Set(keys.map { Device(endpointID: $0.key, key: $0.value) }) }

    /// `roots` and every device an approval by one of them names, and so on.
    public func closure(from roots: Set<Device>) -> Set<Device> {
        var reached = roots
        var queue = Array(roots)
        while let next = queue.popLast() {
            for approved in edges[next] ?? [] where reached.insert(approved).inserted { queue.append(approved) }
        }
        return reached
    }

    /// The devices approved from the user's oldest listed device (that device included): the
    /// user's approved devices as anyone reading the listing can tell them. A device registered
    /// while the user had another is never the oldest, so no approval of its own makes it one.
    public var approvedFromOldest: Set<Device> { oldest.map { closure(from: [$0]) } ?? [] }
}

/// A device's request to remove another device of its user, signed by its MLS key: the domain
/// removes another endpoint only for a device approved from the user's oldest one
/// (``DeviceApprovalGraph/approvedFromOldest``), or for the operator, so a stolen token evicts
/// no device.
public enum EndpointRemoval {
    /// What the removing device signs: the ASCII label "Spark endpoint removal v1" then
    /// `opaque user_id<V>`, `opaque remover_id<V>`, `opaque target_id<V>`.
    public static func signedBytes(user: String, remover: String, target: String) -> Data {
        var writer = TLSWriter()
        writer.raw(Data("Spark endpoint removal v1".utf8))
        writer.opaque(Data(user.utf8))
        writer.opaque(Data(remover.utf8))
        writer.opaque(Data(target.utf8))
        return writer.data
    }
}
