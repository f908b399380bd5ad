public import Foundation

extension HKDF {
    /// HKDF-Extract (RFC 5869 §2.2): the pseudorandom key `HMAC(salt, inputKeyMaterial)`. An empty
    /// salt stands for a string of zeros of the hash's length, as the RFC says.
    public static func extract(
        salt: some ContiguousBytes, inputKeyMaterial: some ContiguousBytes, hash: HashFunction
    ) -> SecureBytes {
        let saltCount = salt.withUnsafeBytes { $0.count }
        let key = saltCount == 0 ? SecureBytes(zeroes: hash.digestCount) : SecureBytes(salt)
        var mac = HMAC.authenticationCode(for: inputKeyMaterial, using: key, hash: hash)
        defer { mac.resetBytes(in: 0..<mac.count) }
        return SecureBytes(mac)
    }

    /// HKDF-Expand (RFC 5869 §2.3): `outputByteCount` bytes from the pseudorandom key `prk` and
    /// `info`. The output is at most 255 times the hash's length.
    public static func expand(
        pseudoRandomKey prk: some ContiguousBytes, info: some ContiguousBytes, outputByteCount: Int, hash: HashFunction
    ) throws -> SecureBytes {
        guard outputByteCount >= 0, outputByteCount <= 255 * hash.digestCount else {
            throw CryptoError(.invalidParameter, "HKDF output length must be 0...\(255 * hash.digestCount) bytes")
        }
        let infoBytes = info.withUnsafeBytes { [UInt8]($0) }
        var output = SecureBytes(zeroes: 0)
        var block = [UInt8]()
        var counter: UInt8 = 1
        while output.count < outputByteCount {
            var input = block
            input.append(contentsOf: infoBytes)
            input.append(counter)
            var mac = HMAC.authenticationCode(for: input, using: prk, hash: hash)
            block = [UInt8](mac)
            mac.resetBytes(in: 0..<mac.count)
            for index in input.indices { input[index] = 0 }
            output.append(block.prefix(outputByteCount - output.count))
            counter &+= 1
        }
        for index in block.indices { block[index] = 0 }
        return output
    }
}
