import Foundation

/// Reading and writing the terminal: prompts, secrets without echo when the input is a
/// terminal, and lines from standard input (or a file descriptor) for scripts.
final class Console: @unchecked Sendable {
    // @unchecked Sendable: used from the main flow only; output goes through a lock.
    private let lock = NSLock()
    private let secretSource: FileHandle?

    /// `passcodeDescriptor`: where secrets are read when given (`--passcode-fd`), else stdin.
    init(passcodeDescriptor: Int32?) {
        secretSource = passcodeDescriptor.map { FileHandle(fileDescriptor: $0, closeOnDealloc: false) }
    }

    var isInteractive: Bool { isatty(STDIN_FILENO) == 1 }

    func say(_ text: String) {
        lock.lock()
        defer { lock.unlock() }
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    /// Prints `prompt` and reads one line; nil at the end of input.
    func ask(_ prompt: String) -> String? {
        lock.lock()
        FileHandle.standardOutput.write(Data(prompt.utf8))
        lock.unlock()
        guard let line = Swift.readLine(strippingNewline: true) else { return nil }
        return line.trimmingCharacters(in: .whitespaces)
    }

    /// Reads a secret: without echo on a terminal, else a line from the secret source.
    func askSecret(_ prompt: String) -> String? {
        lock.lock()
        FileHandle.standardOutput.write(Data(prompt.utf8))
        lock.unlock()
        if let secretSource { return Self.line(from: secretSource) }
        guard isInteractive else { return Swift.readLine(strippingNewline: true) }
        var original = termios()
        tcgetattr(STDIN_FILENO, &original)
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &silent)
        defer {
            tcsetattr(STDIN_FILENO, TCSANOW, &original)
            say("")
        }
        return Swift.readLine(strippingNewline: true)
    }

    /// Asks a yes/no question; anything but y/yes is no.
    func confirm(_ prompt: String) -> Bool {
        guard let answer = ask(prompt + " [y/N] ") else { return false }
        return ["y", "yes"].contains(answer.lowercased())
    }

    private static func line(from handle: FileHandle) -> String? {
        var bytes = Data()
        while true {
            let byte = handle.readData(ofLength: 1)
            if byte.isEmpty { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if byte == Data([10]) { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }
}
