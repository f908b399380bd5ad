"""The other side of the HPKE interop tests: RFC 9180 base mode with DHKEM(X25519, HKDF-SHA256),
HKDF-SHA256 and AES-128-GCM (or ChaCha20-Poly1305 after `--chacha`) from PyPI's `pyhpke`
(dajiaji/pyhpke, MIT).

    hpke_peer.py seal PKR INFO AAD PLAINTEXT   -> "ENC CIPHERTEXT EXPORT"
    hpke_peer.py open SKR ENC INFO AAD CIPHERTEXT -> "PLAINTEXT EXPORT"
    hpke_peer.py derive IKM                    -> "SK PK" (DeriveKeyPair)

EXPORT is 32 bytes exported under the context "spark". Every argument and answer is hex; a
ciphertext that does not open exits 1.
"""
import sys

from pyhpke import AEADId, CipherSuite, KDFId, KEMId

def main() -> int:
    arguments = sys.argv[1:]
    aead = AEADId.AES128_GCM
    if arguments and arguments[0] == "--chacha":
        aead = AEADId.CHACHA20_POLY1305
        arguments = arguments[1:]
    global SUITE
    SUITE = CipherSuite.new(KEMId.DHKEM_X25519_HKDF_SHA256, KDFId.HKDF_SHA256, aead)
    command, *args = arguments
    data = [bytes.fromhex(arg) for arg in args]
    if command == "seal":
        public_key = SUITE.kem.deserialize_public_key(data[0])
        enc, sender = SUITE.create_sender_context(public_key, data[1])
        ciphertext = sender.seal(data[3], data[2])
        print(enc.hex(), ciphertext.hex(), sender.export(b"spark", 32).hex())
    elif command == "open":
        private_key = SUITE.kem.deserialize_private_key(data[0])
        recipient = SUITE.create_recipient_context(data[1], private_key, data[2])
        try:
            plaintext = recipient.open(data[4], data[3])
        except Exception:  # pyhpke raises its own error types for a failed open
            return 1
        print(plaintext.hex() or "-", recipient.export(b"spark", 32).hex())
    elif command == "derive":
        pair = SUITE.kem.derive_key_pair(data[0])
        print(pair.private_key.to_private_bytes().hex(), pair.public_key.to_public_bytes().hex())
    else:
        return 64
    return 0


if __name__ == "__main__":
    sys.exit(main())
