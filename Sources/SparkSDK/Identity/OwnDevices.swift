import Foundation
import SparkCrypto
import SparkDomain
import SparkStore

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
    typealias Trusted = DeviceApprovalGraph.Device

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
                }.map(\.endpoint.endpointID))
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
        let graph = DeviceApprovalGraph(endpoints, user: user, identityKey: identityKey)
        let listed = endpoints.map { Listed(endpoint: $0, key: graph.keys[$0.endpointID]) }
        let me = Trusted(endpointID: endpointID, key: myKey)
        let present = graph.present.union([me])
        if policy == .automatic { return View(listed: listed, trusted: present, myKey: myKey) }
        var roots = remembered.intersection(present)
        roots.insert(me)
        if remembered.isEmpty { roots.formUnion(graph.approvedFromOldest) }
        return View(listed: listed, trusted: graph.closure(from: roots).intersection(present), myKey: myKey)
    }
}
