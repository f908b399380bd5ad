// `import SparkSDK` alone gives an app everything SparkSDK's API mentions: the domain's types
// (EndpointInfo, DomainService, EmbeddedDomain, SignUpRequest, …) and the observable core
// (ObservableMonitor, StateFlow's `value`), whose members would otherwise need imports of their
// own under MemberImportVisibility.
@_exported public import SparkDomain
@_exported public import SparkObservable
