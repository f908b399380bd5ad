public import Foundation

/// An email the domain sends (activation and password-reset codes).
public struct Mail: Sendable, Codable, Equatable {
    /// The recipient's address.
    public var to: String
    /// The subject line.
    public var subject: String
    /// The plain-text body.
    public var body: String
    /// When it was sent.
    public var sentAt: Date

    /// A message.
    public init(to: String, subject: String, body: String, sentAt: Date) {
        self.to = to
        self.subject = subject
        self.body = body
        self.sentAt = sentAt
    }
}

/// Delivers the domain's mail. The embedded domain's default keeps it in an outbox table that
/// `spark-admin outbox` shows; an SMTP mailer can be plugged in later.
public protocol Mailer: Sendable {
    /// Sends one message.
    func send(_ mail: Mail) async throws
}
