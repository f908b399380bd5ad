// A helper for SparkDomainTests: one DomainService call from another process.
// Usage: domain-peer DATABASE signup NAME PASSWORD EMAIL COUNTRY AGE
//        domain-peer DATABASE activate NAME CODE
//        domain-peer DATABASE login NAME PASSWORD          (prints the id token)
//        domain-peer DATABASE validate TOKEN               (prints the user id)
//        domain-peer DATABASE post TOKEN ENDPOINT CHAT TEXT (posts a message)
//        domain-peer remote URL[,URL…] CAFILE|- DOMAINID burst USER CHAT COUNT   (- : plain loopback)
//            (through spark-domaind instances: takes a test token for USER, registers an
//            endpoint, then posts COUNT messages with client ids USER-1…USER-COUNT, each retried
//            until acknowledged; prints "ack CLIENTID NUMBER" per message)
// Failures print "error <code>" on standard error and exit 1.
import Foundation
import SparkDomain
import SparkDomainEngine

/// The burst: every post retried (same client id) until the domain acknowledges it.
func burst(urls: [URL], caFile: String, domainID: String, user: String, chat: String, count: Int) async throws {
    let trust: DomainTrust = caFile == "-" ? .plainLoopback : .certificateAuthority(path: caFile)
    let domain = try RemoteDomain(urls: urls, domainID: domainID, trust: trust)
    func retrying<T>(_ body: () async throws -> T) async throws -> T {
        let deadline = Date().addingTimeInterval(120)
        while true {
            do {
                return try await body()
            } catch let error as DomainError where error.code == .unavailable || error.code == .storageFailure {
                guard Date() < deadline else { throw error }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }
    let token = try await retrying { try await domain.testToken(userID: user).token }
    let endpoint = "\(user)-endpoint"
    _ = try await retrying {
        try await domain.registerEndpoint(token: token, registration: .init(endpointID: endpoint, description: user))
    }
    for index in 1...count {
        let clientID = "\(user)-\(index)"
        let receipt = try await retrying {
            try await domain.post(
                token: token, endpointID: endpoint, chatID: chat, kind: .message, payload: Data(clientID.utf8), recipient: nil,
                clientID: clientID)
        }
        FileHandle.standardOutput.write(Data("ack \(clientID) \(receipt.messageNumber ?? 0)\n".utf8))
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: domain-peer DATABASE COMMAND ARGS...\n".utf8))
    exit(64)
}
do {
    if arguments[0] == "remote" {
        guard arguments.count == 8, arguments[4] == "burst", let count = Int(arguments[7]) else {
            FileHandle.standardError.write(Data("usage: domain-peer remote URLS CAFILE DOMAINID burst USER CHAT COUNT\n".utf8))
            exit(64)
        }
        let urls = arguments[1].split(separator: ",").compactMap { URL(string: String($0)) }
        try await burst(
            urls: urls, caFile: arguments[2], domainID: arguments[3], user: arguments[5], chat: arguments[6], count: count)
        exit(0)
    }
    let domain = try EmbeddedDomain.open(at: arguments[0])
    let rest = Array(arguments.dropFirst(2))
    switch (arguments[1], rest.count) {
    case ("signup", 5):
        guard let age = Int(rest[4]) else { throw DomainError(.invalidRequest, "age must be a number") }
        try await domain.signUp(SignUpRequest(userName: rest[0], password: rest[1], email: rest[2], country: rest[3], age: age))
        print("signed up \(rest[0])")
    case ("activate", 2):
        try await domain.activate(userName: rest[0], code: rest[1])
        print("activated \(rest[0])")
    case ("login", 2):
        print(try await domain.logIn(userName: rest[0], password: rest[1]).token)
    case ("validate", 1):
        print(try await domain.validate(token: rest[0]).userID)
    case ("post", 4):
        let receipt = try await domain.post(
            token: rest[0], endpointID: rest[1], chatID: rest[2], kind: .message, payload: Data(rest[3].utf8), recipient: nil,
            clientID: nil)
        print("posted \(receipt.messageNumber ?? 0)")
    default:
        FileHandle.standardError.write(Data("domain-peer: unknown command or arguments\n".utf8))
        exit(64)
    }
} catch let error as DomainError {
    FileHandle.standardError.write(Data("error \(error.code): \(error.reason)\n".utf8))
    exit(1)
} catch {
    FileHandle.standardError.write(Data("error \(error)\n".utf8))
    exit(1)
}
