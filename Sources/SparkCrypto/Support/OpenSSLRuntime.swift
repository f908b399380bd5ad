internal import COpenSSLRuntime

/// How OpenSSL was set up for this process (see `Sources/COpenSSLRuntime`).
enum OpenSSLRuntime {
    /// Whether OpenSSL was initialised before `main` without registering its exit-time cleanup,
    /// so a process may exit while other threads still use it.
    static var exitCleanupDisabled: Bool { spark_openssl_runtime_status() == 1 }
}
