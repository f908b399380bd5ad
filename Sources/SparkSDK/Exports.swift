// `import SparkSDK` alone gives an app everything SparkSDK's API mentions: the domain's contract
// (DomainService, its types and errors, RemoteDomain: EndpointInfo, SignUpRequest, …) and the
// observable core (ObservableMonitor, StateFlow's `value`), whose members would otherwise need
// imports of their own under MemberImportVisibility. The domain's engine (its rules, stores and
// the embedded domain) is imported here without export: the embedded mode runs it, and no app
// names it (scripts/check-consumer.sh proves both).
@_exported public import SparkDomain
@_exported public import SparkObservable
