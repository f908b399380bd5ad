public import Foundation
public import SparkDomain

/// Where the user's protected key blobs are kept. The default is the domain's key store
/// (``DomainKeyStorage``, what Spark called its KMS); an app that keeps them elsewhere implements
/// this (and sets `useBlackBerryKMS` to false). The blobs are JWEs: opaque to the storage.
/// Passcode attempts are always the domain's (its OPRF evaluation), wherever the blobs are.
///
/// Every write after the user's identity is published carries a `KeyBlobProof`: the identity
/// key's signature over exactly that write. The domain's store refuses a write without one, so a
/// stolen token cannot replace the backup; an app's own storage should check it the same way
/// (`keyBlobWriteMessage(userID:endpointID:challenge:writes:)` against the published identity).
public protocol BBMKeyStorageProvider: Sendable {
    /// Reads a blob.
    func fetch(name: String, token: String, endpointID: String) async throws -> BlobFetch
    /// Writes a blob if its version is still `expectedVersion` (nil: must not exist).
    func store(name: String, data: Data, expectedVersion: Int?, proof: KeyBlobProof?, token: String, endpointID: String)
        async throws -> Int
    /// Writes several blobs, each if its version is still the expected one: all or none.
    func store(_ writes: [KeyBlobWrite], proof: KeyBlobProof?, token: String, endpointID: String) async throws
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
    public func store(name: String, data: Data, expectedVersion: Int?, proof: KeyBlobProof?, token: String, endpointID: String)
        async throws -> Int
    {
        try await domain.putKeyBlob(
            token: token, endpointID: endpointID, name: name, data: data, expectedVersion: expectedVersion, proof: proof)
    }

    /// Writes several blobs to the domain in one transaction.
    public func store(_ writes: [KeyBlobWrite], proof: KeyBlobProof?, token: String, endpointID: String) async throws {
        _ = try await domain.putKeyBlobs(token: token, endpointID: endpointID, writes: writes, proof: proof)
    }
}
