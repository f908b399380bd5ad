package import SparkDomain

/// Delivers the domain's mail. The embedded domain's default keeps it in an outbox table that
/// `spark-admin outbox` shows; an SMTP mailer can be plugged in later.
package protocol Mailer: Sendable {
    /// Sends one message.
    func send(_ mail: Mail) async throws
}
