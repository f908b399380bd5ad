public import SparkDomain

/// Opens the domain a configuration names when it names no `domainURL`.
///
/// ``EmbeddedDomainFile`` (the default) opens the embedded domain, one SQLite file for
/// development. An app passes its own to ``BBMAuthController/fromConfigFile(_:dataDirectory:customTokenRefresh:oidcPresenter:keyStorage:storeKey:embeddedDomain:)``
/// or ``ConfigSettings/openDomain(embedded:)`` to serve that case another way (a domain of its
/// tests, say); the configuration and auth code see only this protocol.
public protocol EmbeddedDomainOpener: Sendable {
    /// The domain at `path`, created with `domainID` if there is none yet (a sandbox, with user
    /// authentication off, when `sandbox`), and whether the domain found there is a sandbox
    /// (real accounts are refused on one).
    func open(at path: String, domainID: String, sandbox: Bool) throws -> (domain: any DomainService, isSandbox: Bool)
}
