import Foundation
import Glibc
import SparkDomain
import SparkDomainEngine
import SparkLock

/// One thread with a connection of its own that `LISTEN`s on the mailbox channel and wakes the
/// users each notification names, on the entries channel and hands on the entries each carries
/// (``EntryNotifications``), and on the settings channel and says the settings changed. It checks the connection at least every second; when it is
/// lost it connects again (every second until it can) and then wakes everyone, since what was
/// announced meanwhile was missed: a lost notification costs at most about a second and one
/// read per waiting long-poll.
final class MailboxListener: Sendable {
    private let stopped = Locked(false)
    private let wake: @Sendable (Announcement) -> Void
    private let conninfo: String
    private let channel: String
    private let entriesChannel: String
    private let settingsChannel: String
    /// How long one wait for the socket lasts before the connection is checked.
    static let heartbeat: Duration = .seconds(1)

    init(
        conninfo: String, channel: String, entriesChannel: String, settingsChannel: String,
        wake: @escaping @Sendable (Announcement) -> Void
    ) {
        self.conninfo = conninfo
        self.channel = channel
        self.entriesChannel = entriesChannel
        self.settingsChannel = settingsChannel
        self.wake = wake
        let thread = Thread { [self] in run() }
        thread.name = "spark-mailbox-listener"
        thread.start()
    }

    func stop() { stopped.withLock { $0 = true } }

    private var isStopped: Bool { stopped.withLock { $0 } }

    private func run() {
        while !isStopped {
            guard let connection = try? PostgreSQLConnection(conninfo: conninfo),
                (try? connection.simple("LISTEN \(channel)")) != nil, (try? connection.simple("LISTEN \(entriesChannel)")) != nil,
                (try? connection.simple("LISTEN \(settingsChannel)")) != nil
            else {
                Thread.sleep(forTimeInterval: 1)
                continue
            }
            // Whatever was announced before this LISTEN took effect was not heard.
            wake(.everyone)
            listen(on: connection)
            // Deaf until connected again: what the engine keeps may no longer stand.
            wake(.settings)
        }
    }

    /// Delivers notifications until the connection fails or the listener stops.
    private func listen(on connection: PostgreSQLConnection) {
        while !isStopped {
            var descriptor = pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(Self.heartbeat.components.seconds * 1000))
            if ready < 0, errno != EINTR { return }
            guard let notices = try? connection.notifications() else { return }
            var users: [String] = []
            // The entries of the notifications that came together, in the order they came (the
            // order their transactions committed): one user's entries from several transactions
            // are then one run, handed on together.
            var entries = AppendedEntries()
            for notice in notices {
                if notice.channel == channel {
                    users.append(contentsOf: notice.payload.split(separator: "\n").map(String.init))
                } else if notice.channel == entriesChannel {
                    if let carried = EntryNotifications.entries(notice.payload) {
                        entries.add(carried)
                    } else {
                        // Not from a writer of ours: whose entries it names is unknown, so
                        // every waiter reads.
                        wake(.everyone)
                    }
                }
            }
            if notices.contains(where: { $0.channel == settingsChannel }) { wake(.settings) }
            if !entries.byUser.isEmpty { wake(.entries(entries)) }
            if !users.isEmpty { wake(.users(users)) }
            // A quiet second: make sure the server is still there (a dead peer's socket can stay
            // silent).
            if ready == 0, (try? connection.simple("SELECT 1")) == nil { return }
        }
    }
}
