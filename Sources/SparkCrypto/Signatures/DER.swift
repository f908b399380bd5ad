import Foundation

/// The few DER (X.690) encodings SparkCrypto builds: SubjectPublicKeyInfo for EC and RSA keys
/// given as JWK numbers, and ECDSA-Sig-Value from a raw r‖s signature.
enum DER {
    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var value = count
        while value > 0 {
            bytes.insert(UInt8(value & 0xFF), at: 0)
            value >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag] + length(content.count) + content }

    static func sequence(_ parts: [UInt8]...) -> [UInt8] { tlv(0x30, parts.flatMap { $0 }) }

    /// A non-negative INTEGER from big-endian magnitude bytes (leading zeros stripped, a zero
    /// byte added when the top bit is set).
    static func unsignedInteger(_ magnitude: some Collection<UInt8>) -> [UInt8] {
        var bytes = Array(magnitude.drop { $0 == 0 })
        if bytes.isEmpty { bytes = [0] }
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return tlv(0x02, bytes)
    }

    static func bitString(_ content: [UInt8]) -> [UInt8] { tlv(0x03, [0] + content) }

    /// OID 1.2.840.10045.2.1 (id-ecPublicKey) with 1.2.840.10045.3.1.7 (prime256v1).
    static let p256AlgorithmIdentifier: [UInt8] = sequence(
        [0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01],
        [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07])

    /// OID 1.2.840.113549.1.1.1 (rsaEncryption) with NULL parameters.
    static let rsaAlgorithmIdentifier: [UInt8] = sequence(
        [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01], [0x05, 0x00])
}
