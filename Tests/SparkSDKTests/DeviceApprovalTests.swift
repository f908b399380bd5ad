import Foundation
import SparkCrypto
import SparkDomain
import SparkDomainEngine
import SparkMLS
import SparkTestSupport
import Testing

@testable import SparkSDK

/// Security review 1: a new device of the user joins nothing until a device the user has approves
/// it. The attacker holds the user's identity key (a stolen phone's store, a guessed passcode) and
/// a token, so every credential they make verifies; what they cannot make is an approval signed
/// by a device the user has.
@Suite("Device approval")
struct DeviceApprovalTests {
    /// A device of alice: its credential and signer, as `OwnDevices` sees it listed.
    struct Device {
        let id: String
        let registration: Int64
        let signer: MLSSigner
        let credential: DeviceCredential

        init(_ id: String, _ registration: Int64, identity: Ed25519.PrivateKey, user: String = "alice") throws {
            self.id = id
            self.registration = registration
            let key = try Ed25519.PrivateKey()
            credential = try DeviceCredential.issue(
                userID: user, deviceID: id, signatureKey: key.publicKey.rawRepresentation, identityKeyVersion: 1,
                identityKey: identity)
            signer = MLSSigner(credential: credential.mlsCredential, key: key)
        }

        var key: Data { signer.signatureKey }
        var trusted: OwnDevices.Trusted { OwnDevices.Trusted(endpointID: id, key: key) }

        func approve(_ other: Device) throws -> Data {
            try DeviceApproval.sign(approving: other.credential, by: signer, approverID: id).encoded
        }

        func listed(approvals: [Data] = []) -> EndpointInfo {
            EndpointInfo(
                endpointID: id, registrationID: registration, description: id, nickname: "", isActive: true,
                createdAt: Date(), lastSeen: Date(), credential: credential.encoded, approvals: approvals)
        }
    }

    let identity: Ed25519.PrivateKey
    let laptop: Device
    let phone: Device
    let thief: Device

    init() throws {
        identity = try Ed25519.PrivateKey()
        laptop = try Device("laptop", 1, identity: identity)
        phone = try Device("phone", 2, identity: identity)
        thief = try Device("thief", 3, identity: identity)
    }

    func devices(as device: Device, _ policy: OwnDeviceApproval = .required) -> OwnDevices {
        OwnDevices(user: "alice", endpointID: device.id, identityKey: identity.publicKey, policy: policy)
    }

    // MARK: The format and the rules, without a domain

    @Test func anApprovalVerifiesOnlyAsSignedAndDecodesStrictly() throws {
        let bytes = try laptop.approve(phone)
        let approval = try DeviceApproval(encoded: bytes)
        #expect(approval.isSigned && approval.approverID == "laptop" && approval.approvedKey == phone.key)
        #expect(approval.encoded == bytes)
        // Any flipped byte of the signed fields or the signature: refused or unsigned.
        for index in stride(from: 0, to: bytes.count, by: 7) {
            var altered = bytes
            altered[index] ^= 0x01
            #expect((try? DeviceApproval(encoded: altered))?.isSigned != true, "byte \(index)")
        }
        #expect(throws: MLSError.self) { try DeviceApproval(encoded: bytes + Data([0])) }
        #expect(throws: MLSError.self) { try DeviceApproval(encoded: bytes.dropLast()) }
    }

    @Test func bothScreensShowTheSameCodeAndAnotherDeviceShowsAnother() {
        let code = DeviceApproval.code(user: "alice", laptop.key, phone.key)
        #expect(code == DeviceApproval.code(user: "alice", phone.key, laptop.key))
        #expect(code.count == 14 && code.filter(\.isNumber).count == 12)
        #expect(code != DeviceApproval.code(user: "alice", laptop.key, thief.key))
        #expect(code != DeviceApproval.code(user: "bob", laptop.key, phone.key))
    }

    @Test func aDeviceMadeWithTheIdentityKeyIsTrustedByNoOne() throws {
        // The thief's device approves itself through a second device of theirs.
        let accomplice = try Device("accomplice", 4, identity: identity)
        let listing = [
            laptop.listed(), phone.listed(approvals: [try laptop.approve(phone)]),
            thief.listed(approvals: [try accomplice.approve(thief)]),
            accomplice.listed(approvals: [try thief.approve(accomplice)]),
        ]
        let view = devices(as: laptop).evaluate(listing, myKey: laptop.key, remembered: [laptop.trusted])
        #expect(view.approvedIDs == ["laptop", "phone"])
        let annotated = view.annotated(user: "alice", me: "laptop")
        #expect(annotated.map(\.approval)[0] == .thisDevice && annotated[1].approval == .approved)
        #expect(annotated[2].approval == .awaitingApproval(code: DeviceApproval.code(user: "alice", laptop.key, thief.key)))
        // A new device's first look follows the approvals made from the user's oldest device.
        let newcomer = try Device("tablet", 5, identity: identity)
        let first = devices(as: newcomer).evaluate(listing + [newcomer.listed()], myKey: newcomer.key, remembered: [])
        #expect(first.approvedIDs == ["laptop", "phone", "tablet"])
    }

    @Test func anApprovalCountsOnlyForTheKeysItNames() throws {
        // Signed by the laptop, but naming another key for the phone (or by a key the laptop does
        // not have): each refused.
        let other = try Device("phone", 2, identity: identity)
        let forged = try DeviceApproval.sign(approving: phone.credential, by: thief.signer, approverID: "laptop").encoded
        var unsigned = try laptop.approve(phone)
        unsigned[unsigned.count - 1] ^= 0x01
        for approvals in [[try laptop.approve(other)], [forged], [unsigned]] {
            let view = devices(as: laptop).evaluate(
                [laptop.listed(), phone.listed(approvals: approvals)], myKey: laptop.key, remembered: [laptop.trusted])
            #expect(view.approvedIDs == ["laptop"])
        }
        // A credential not signed by the identity key: not set up, whatever approves it.
        let stranger = try Device("stranger", 6, identity: try Ed25519.PrivateKey())
        let view = devices(as: laptop).evaluate(
            [laptop.listed(), stranger.listed(approvals: [try laptop.approve(stranger)])], myKey: laptop.key,
            remembered: [laptop.trusted])
        #expect(view.approvedIDs == ["laptop"] && view.annotated(user: "alice", me: "laptop")[1].approval == .unverified)
    }

    @Test func aRemovedDevicesApprovalsAddNothingAndWhatItApprovedStays() throws {
        // The phone approved the tablet, and was removed: its key is the thief's now.
        let tablet = try Device("tablet", 4, identity: identity)
        let before = devices(as: laptop).evaluate(
            [
                laptop.listed(), phone.listed(approvals: [try laptop.approve(phone)]),
                tablet.listed(approvals: [try phone.approve(tablet)]),
            ], myKey: laptop.key, remembered: [laptop.trusted])
        #expect(before.approvedIDs == ["laptop", "phone", "tablet"])
        let after = devices(as: laptop).evaluate(
            [laptop.listed(), tablet.listed(), thief.listed(approvals: [try phone.approve(thief)])], myKey: laptop.key,
            remembered: before.trusted)
        #expect(after.approvedIDs == ["laptop", "tablet"])
        #expect(!after.trusted.contains(phone.trusted), "a device no longer listed is forgotten")
    }

    @Test func automaticTrustsEveryDeviceTheIdentityKeySigned() {
        let view = devices(as: laptop, .automatic).evaluate(
            [laptop.listed(), thief.listed()], myKey: laptop.key, remembered: [laptop.trusted])
        #expect(view.approvedIDs == ["laptop", "thief"])
    }

    // MARK: End to end, on a domain

    @Test(arguments: MessagingStoreKind.tested) func aDeviceSetUpWithThePasscodeJoinsNothingUntilApprovedAndThenGetsTheHistory(
        messaging: MessagingStoreKind
    ) async throws {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory, messaging: messaging)
            let (_, laptop) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let events = EventRecorder(laptop)
            let chat = try await laptop.startChat(with: ["bob"], subject: "Plans")
            try await laptop.sendMessage("before the new device", to: chat.chatID)
            #expect(await waitFor("bob has it") { bob.chats.value.count == 1 })

            // A device set up with alice's passcode and a token: the attacker's, or hers.
            let (newService, newDevice) = try await world.endpoint("alice", "alice-new")
            let newID = try await newService.endpointID
            #expect(
                await waitFor("the laptop announces it with its code") {
                    events.value.contains { if case .deviceAwaitingApproval(newID, _) = $0 { true } else { false } }
                })
            try await laptop.refresh()
            try await newDevice.refresh()
            #expect(newDevice.chats.value.isEmpty, "no chat adds it")
            #expect(try await laptop.messenger.chats.groupDevices(of: chat.chatID).allSatisfy { $0.device != newID })
            // Nor a chat the laptop starts now.
            let later = try await laptop.startChat(with: ["bob"], subject: "Later")
            #expect(try await laptop.messenger.chats.groupDevices(of: later.chatID).allSatisfy { $0.device != newID })
            let listed = try #require(try await laptop.devices().first { $0.endpointID == newID })
            guard case .awaitingApproval(let code) = listed.approval else {
                Issue.record("the new device is \(listed.approval)")
                return
            }
            let laptopID = try await laptop.devices().first { $0.approval == .thisDevice }?.endpointID
            #expect(try await newDevice.approvalCode(with: #require(laptopID)) == code, "both screens show the same code")

            // A wrong code approves nothing.
            await #expect(throws: MessagingError(.deviceCodeMismatch, "")) {
                try await laptop.approveDevice(newID, code: "0000 0000 0000")
            }
            #expect(newDevice.chats.value.isEmpty)

            // Approved: it joins the chat with its history, and bob's messages reach it.
            try await laptop.approveDevice(newID, code: code)
            #expect(
                await waitFor("the new device joins both chats") {
                    Set(newDevice.chats.value.map(\.chatID)) == [chat.chatID, later.chatID]
                })
            let messages = try await newDevice.messages(in: chat.chatID)
            #expect(await waitFor("with the history") { messages.value.map(\.content) == ["before the new device"] })
            try await bob.sendMessage("after", to: chat.chatID)
            #expect(await waitFor("and what follows") { messages.value.map(\.content) == ["before the new device", "after"] })
            #expect(try await laptop.devices().first { $0.endpointID == newID }?.approval == .approved)
        }
    }

    @Test(arguments: MessagingStoreKind.tested) func aRemovedDevicesKeyApprovesNoDeviceOfTheThief(messaging: MessagingStoreKind)
        async throws
    {
        try await Fixtures.withTemporaryDirectory { directory in
            let world = try ChatWorld(directory, messaging: messaging)
            let (laptopService, laptop) = try await world.endpoint("alice", "alice-laptop")
            let (_, bob) = try await world.endpoint("bob", "bob-phone")
            let chat = try await laptop.startChat(with: ["bob"], subject: "Plans")
            let (phoneService, phone) = try await world.endpoint("alice", "alice-phone")
            let phoneID = try await phoneService.endpointID
            try await laptop.approveDevice(phoneID, code: try await phone.approvalCode(with: try await laptopService.endpointID))
            #expect(await waitFor("the phone joins") { phone.chats.value.count == 1 })
            // The phone is stolen: the thief keeps its device key and alice's identity key.
            let phoneSigner = try await phone.messenger.identities.deviceSigner()
            try await laptopService.deregisterEndpoint(phoneID)
            try await laptop.refresh()
            #expect(try await laptop.messenger.chats.groupDevices(of: chat.chatID).allSatisfy { $0.device != phoneID })

            // The thief sets up a device with the passcode and has the phone's key approve it,
            // posted from a second device of theirs.
            let (thiefService, thief) = try await world.endpoint("alice", "thief")
            let (accompliceService, _) = try await world.endpoint("alice", "accomplice")
            let thiefID = try await thiefService.endpointID
            let credential = try #require(try await laptop.devices().first { $0.endpointID == thiefID }?.credential)
            let forged = try DeviceApproval.sign(
                approving: try DeviceCredential(encoded: credential), by: phoneSigner, approverID: phoneID)
            let token = try await world.domain.testToken(userID: "alice").token
            try await world.domain.approveEndpoint(
                token: token, endpointID: try await accompliceService.endpointID, target: thiefID, approval: forged.encoded)
            try await laptop.refresh()
            try await bob.sendMessage("only for alice's own devices", to: chat.chatID)
            try await thief.refresh()
            #expect(thief.chats.value.isEmpty)
            #expect(try await laptop.messenger.chats.groupDevices(of: chat.chatID).allSatisfy { $0.device != thiefID })
            #expect(try await laptop.devices().first { $0.endpointID == thiefID }?.approval != .approved)
        }
    }
}
