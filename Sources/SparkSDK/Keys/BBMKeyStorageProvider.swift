public import Foundation
public import SparkDomain

/// Where the user's protected key blobs are kept. The default is the domain's key store
/// (``DomainKeyStorage``, what Spark called its KMS); an app that keeps them elsewhere implements
/// this (and sets `useBlackBerryKMS` to false). The blobs are JWEs: opaque to the storage.
public protocol BBMKeyStorageProvider: Sendable {
    /// Reads a blob; for the management blob, also an unlock challenge when the storage issues
    /// them.
    func fetch(name: String, token: String, endpointID: String) async throws -> BlobFetch
    /// Writes a blob if its version is still `expectedVersion` (nil: must not exist).
    func store(name: String, data: Data, expectedVersion: Int?, token: String, endpointID: String) async throws -> Int
    /// Proves an unlock to storages that rate-limit passcode attempts (a no-op elsewhere).
    func proveUnlock(challenge: Data, signature: Data, token: String, endpointID: String) async throws
}

/// The domain's key store.
public struct DomainKeyStorage: BBMKeyStorageProvider {
    let domain: any DomainService

    /// Storage in `domain`'s key store.
    public init(domain: any DomainService) { self.domain = domain }

    /// Reads a blob from the domain.
    public func fetch(name: String, token: String, endpointID: String) async throws -> BlobFetch {
        try await domain.fetchKeyBlob(token: token, endpointID: endpointID, name: name)
    }

    /// Writes a blob to the domain with compare-and-swap.
    public func store(name: String, data: Data, expectedVersion: Int?, token: String, endpointID: String) async throws -> Int {
        try await domain.putKeyBlob(
            token: token, endpointID: endpointID, name: name, data: data, expectedVersion: expectedVersion)
    }

    /// Sends the unlock proof to the domain.
    public func proveUnlock(challenge: Data, signature: Data, token: String, endpointID: String) async throws {
        try await domain.proveUnlock(token: token, endpointID: endpointID, challenge: challenge, signature: signature)
    }
}
