import Foundation
import SparkLock

/// The two credential validators messaging judges devices by, built once per version of the
/// contacts (``MessagingStore/contactsVersion()``) instead of at every load of a group:
///
/// - `group`: what a chat's group follows, each contact's trusted key or the changed one while
///   the user has not decided (the group must follow what the other members commit);
/// - `trusted`: what this device sends to and adds, trusted keys only.
///
/// Both hold this user's own identity key. A version is random and never reused, so validators
/// built inside a transaction that rolled back are never matched again.
final class CredentialValidators: Sendable {
    struct Current: Sendable {
        /// The contacts' version these were built from (nil: a store without one; never kept).
        let contacts: Data?
        let group: DeviceCredentialValidator
        let trusted: DeviceCredentialValidator
    }

    private let user: String
    private let identityKey: Data
    private let current = Locked<Current?>(nil)

    init(user: String, identityKey: Data) {
        self.user = user
        self.identityKey = identityKey
    }

    /// The validators for the contacts as `store` holds them now.
    func current(_ store: some MessagingStore) throws -> Current {
        let version = try store.contactsVersion()
        if let version, let known = current.withLock({ $0 }), known.contacts == version { return known }
        var groupKeys = try store.contactGroupKeys()
        groupKeys[user] = [identityKey]
        var trustedKeys = try store.trustedContactKeys()
        trustedKeys[user] = identityKey
        let built = Current(
            contacts: version, group: DeviceCredentialValidator(identityKeySets: groupKeys),
            trusted: DeviceCredentialValidator(identityKeys: trustedKeys))
        if version != nil { current.withLock { $0 = built } }
        return built
    }
}
