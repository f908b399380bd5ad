public import SparkDomain
import SparkDomainEngine

/// The embedded domain: the domain engine `spark-domaind` runs, in process, on one SQLite file
/// that every process on the machine opens (for development: every process that can write the
/// file is trusted). The default ``EmbeddedDomainOpener``, and the one file of SparkSDK that
/// reaches the engine.
public struct EmbeddedDomainFile: EmbeddedDomainOpener {
    /// The embedded domain opener.
    public init() {}

    /// Opens the file at `path`, creating the domain `domainID` in it if it has none (an
    /// existing domain with another id is an error, so two apps never share one by accident).
    public func open(at path: String, domainID: String, sandbox: Bool) throws -> (domain: any DomainService, isSandbox: Bool) {
        let domain = try EmbeddedDomain.openOrCreate(
            at: path, domainID: domainID, policy: DomainPolicy(userAuthenticationEnabled: !sandbox))
        return (domain, try !domain.storedPolicy().userAuthenticationEnabled)
    }
}
