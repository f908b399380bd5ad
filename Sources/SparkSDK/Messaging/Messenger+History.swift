import Foundation
import SparkCrypto
import SparkDomain
import SparkLock
import SparkMLS
import SparkStore

/// History transfer: when this device adds another device of its user to a chat, it hands the
/// new device the chat's messages so far, sealed to that device's leaf key alone and posted to
/// this user's own mailbox (`ChatHistory`). Without a device of the user online no one adds the
/// new device, and it sees the chat once one comes online; messages from before the user's own
/// first device joined are never anyone's to hand over (forward secrecy).
extension Messenger {
    /// Hands the chat's history to each of `devices` (this user's, just added).
    func sendHistory(of chatID: String, to devices: [ChatGroup.Device]) async {
        guard !devices.isEmpty,
            let chunks = try? await read({ store in ChatHistory.chunks(of: try store.numbered(chatID: chatID)) })
        else { return }
        for device in devices {
            for chunk in chunks {
                do {
                    try await postHistory(chunk, of: chatID, to: device)
                } catch {
                    eventSinks.yield(
                        .dropped(chatID: chatID, reason: "the chat's history did not reach \(device.device): \(error)"))
                    break
                }
            }
        }
    }

    private func postHistory(_ history: ChatHistory, of chatID: String, to device: ChatGroup.Device) async throws {
        let groups = self.groups
        for attempt in 0..<5 {
            let sealed = try await write { store -> Data in
                guard
                    let stored = try groups.load(store, chatID: chatID, validator: try self.groupValidator(store)),
                    let leaf = stored.group.group.members.first(where: { ChatGroup.device(of: $0) == device })?.leafIndex
                else { throw MessagingError(.unknownChat, "\(device.device) is not in chat \(chatID)") }
                var random = MLSSystemRandom()
                let records = try stored.group.group.seal(
                    toMember: leaf, context: ChatHistory.sealContext(device: device.device), history.encoded, random: &random)
                let payload = ChatPayload(
                    kind: .history, id: Self.newID(), data: records.base64EncodedString(), ref: device.device)
                return try self.sealNext(payload, chatID: chatID, localID: nil, in: store, requireTrusted: false)
            }
            do {
                _ = try await domainCall {
                    try await domain.post(
                        token: try await token(), endpointID: endpointID, chatID: chatID, kind: .event, payload: sealed,
                        recipient: me, clientID: nil)
                }
                return
            } catch let error as MessagingError where error.domainCode == .conflict && attempt < 4 {
                try? await write { store in try store.forgetSent(payload: sealed) }
                _ = try await syncOnce()
            }
        }
    }

    /// Applies a history transfer meant for this device: its messages are kept as the sibling
    /// had them (states included), each once.
    nonisolated func applyHistory(_ payload: ChatPayload, group: ChatGroup, chatID: String, in store: any MessagingStore) throws
        -> Effects
    {
        guard let data = payload.data, let sealed = Data(base64Encoded: data) else {
            return Effects(notices: [.dropped(chatID: chatID, reason: "a history transfer without its records")])
        }
        let history: ChatHistory
        do {
            let opened = try group.group.openSealedToSelf(sealed, context: ChatHistory.sealContext(device: endpointID))
            history = try ChatHistory(encoded: opened.unsafeData())
        } catch {
            return Effects(notices: [
                .dropped(chatID: chatID, reason: "a history transfer this device cannot open: \(error)"),
                .historyUnavailable(chatID: chatID),
            ])
        }
        for record in history.records {
            try store.insertReceived(record, chatID: chatID, incoming: record.sender != me, ignoringTaken: true)
            try store.touchChat(chatID, at: record.timestamp)
        }
        return Effects()
    }
}
