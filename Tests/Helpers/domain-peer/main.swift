// A helper for SparkDomainTests: one DomainService call from another process.
// Usage: domain-peer DATABASE signup NAME PASSWORD EMAIL COUNTRY AGE
//        domain-peer DATABASE activate NAME CODE
//        domain-peer DATABASE login NAME PASSWORD          (prints the id token)
//        domain-peer DATABASE validate TOKEN               (prints the user id)
//        domain-peer DATABASE post TOKEN ENDPOINT CHAT TEXT (posts a message)
// Failures print "error <code>" on standard error and exit 1.
import Foundation
import SparkDomain

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: domain-peer DATABASE COMMAND ARGS...\n".utf8))
    exit(64)
}
do {
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
