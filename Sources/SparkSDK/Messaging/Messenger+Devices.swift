import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS
import SparkStore

/// The user's own devices: which of them this device trusts (`OwnDevices`), the approvals it
/// signs, and the news of a device awaiting one. Only a trusted device is added to the user's
/// chats or sent their history (`reconcile`, `startChat`).
extension Messenger {
    /// Publishes this device's credential, for the user's other devices to approve it by.
    func publishCredential() async throws {
        let credential = try await deviceSigner().credential.identity
        _ = try await domainCall {
            try await domain.publishEndpointCredential(token: try await token(), endpointID: endpointID, credential: credential)
        }
    }

    /// The user's devices as the domain lists them now, and which of them this device trusts
    /// (kept for the next look). A device newer than this one and awaiting approval is announced
    /// once a run; this device's own credential is published again when the listing lacks it.
    func ownDeviceView() async throws -> OwnDevices.View {
        let endpoints = try await domainCall { try await domain.endpoints(token: try await token(), endpointID: endpointID) }
        let signer = try await deviceSigner()
        let (ownDevices, myKey) = (self.ownDevices, signer.signatureKey)
        let view = try await write { store -> OwnDevices.View in
            let remembered = try store.trustedOwnDevices()
            let view = ownDevices.evaluate(endpoints, myKey: myKey, remembered: remembered)
            if view.trusted != remembered { try store.setTrustedOwnDevices(view.trusted) }
            return view
        }
        let mine = endpoints.first { $0.endpointID == endpointID }
        if mine?.credential != signer.credential.identity { try? await publishCredential() }
        let registered = mine?.registrationID ?? .max
        for device in view.listed where device.endpoint.registrationID > registered {
            guard case .awaitingApproval(let code) = OwnDevices.View.approval(of: device, in: view, user: me, me: endpointID),
                announcedDevices.insert(device.endpoint.endpointID).inserted
            else { continue }
            eventSinks.yield(.deviceAwaitingApproval(endpointID: device.endpoint.endpointID, code: code))
        }
        return view
    }

    /// The user's devices, each with its approval as this device sees it.
    func devices() async throws -> [EndpointInfo] {
        try requireRunning()
        return try await ownDeviceView().annotated(user: me, me: endpointID)
    }

    /// This device's signature of the removal of the user's device `target`, which the domain
    /// asks of a device removing another (see `EndpointRemoval`).
    func removalSignature(of target: String) async throws -> Data {
        try await deviceSigner().signature(
            forStatement: EndpointRemoval.signedBytes(user: me, remover: endpointID, target: target))
    }

    /// The code this device and the user's device `target` both show (see `DeviceApproval.code`).
    func approvalCode(with target: String) async throws -> String {
        try requireRunning()
        let view = try await ownDeviceView()
        guard let device = view.listed.first(where: { $0.endpoint.endpointID == target }), let key = device.key else {
            throw MessagingError(.unknownUser, "the user has no set-up device \(target)")
        }
        return DeviceApproval.code(user: me, view.myKey, key)
    }

    /// Approves the user's device `target` once the user saw `code` on both screens: signs the
    /// approval, has the domain list it (the user's other devices follow it), trusts the device,
    /// and adds it to every chat. A code that is not the two devices' refuses and signs nothing.
    func approveDevice(_ target: String, code: String) async throws {
        try requireRunning()
        guard target != endpointID else { throw MessagingError(.refused, "a device does not approve itself") }
        let view = try await ownDeviceView()
        guard let device = view.listed.first(where: { $0.endpoint.endpointID == target }) else {
            throw MessagingError(.unknownUser, "the user has no registered device \(target)")
        }
        guard let key = device.key, let bytes = device.endpoint.credential else {
            throw MessagingError(
                .forged, "device \(target) has no credential signed by the user's identity key: it cannot be approved")
        }
        let expected = DeviceApproval.code(user: me, view.myKey, key)
        guard code.filter(\.isNumber) == expected.filter(\.isNumber) else {
            throw MessagingError(
                .deviceCodeMismatch, "that is not the code of this device and \(target): compare the two screens again")
        }
        let approval = try DeviceApproval.sign(
            approving: try DeviceCredential(encoded: bytes), by: try await deviceSigner(), approverID: endpointID)
        _ = try await domainCall {
            try await domain.approveEndpoint(
                token: try await token(), endpointID: endpointID, target: target, approval: approval.encoded)
        }
        try await write { store in try store.trustOwnDevice(OwnDevices.Trusted(endpointID: target, key: key)) }
        await reconcile(force: true)
    }
}
