"""ML-KEM-768, X-Wing and HPKE with X-Wing, from pyca/cryptography (OpenSSL's ML-KEM, a code
base apart from ours), for KEMTests. Bytes go in and out as hex on the command line and stdout.

  keygen SEED64                     -> ek
  encaps EK                         -> ss ct            (a fresh m)
  decaps SEED64 CT                  -> ss
  xwing-open SEED32 PLAINTEXT? ...  see below
  hpke-seal PK1216 INFO PLAINTEXT   -> enc||ct          (pyca's single-shot HPKE: aad empty)
  hpke-open SEED32 INFO ENC||CT     -> plaintext        (the X-Wing key expanded from its seed)
"""

import hashlib
import sys

from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric import mlkem, x25519


def xwing_private_key(seed: bytes) -> hpke.MLKEM768X25519PrivateKey:
    # X-Wing's decapsulation key is a seed: SHAKE256 expands it to ML-KEM's d ‖ z and X25519's scalar.
    expanded = hashlib.shake_256(seed).digest(96)
    return hpke.MLKEM768X25519PrivateKey(
        mlkem.MLKEM768PrivateKey.from_seed_bytes(expanded[:64]),
        x25519.X25519PrivateKey.from_private_bytes(expanded[64:]),
    )


def xwing_public_key(pk: bytes) -> hpke.MLKEM768X25519PublicKey:
    return hpke.MLKEM768X25519PublicKey(
        mlkem.MLKEM768PublicKey.from_public_bytes(pk[:1184]),
        x25519.X25519PublicKey.from_public_bytes(pk[1184:]),
    )


SUITE = hpke.Suite(hpke.KEM.MLKEM768_X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)


def main(arguments: list[str]) -> None:
    command, values = arguments[0], [bytes.fromhex(value) for value in arguments[1:]]
    if command == "keygen":
        key = mlkem.MLKEM768PrivateKey.from_seed_bytes(values[0])
        print(key.public_key().public_bytes_raw().hex())
    elif command == "encaps":
        secret, ciphertext = mlkem.MLKEM768PublicKey.from_public_bytes(values[0]).encapsulate()
        print(secret.hex(), ciphertext.hex())
    elif command == "decaps":
        print(mlkem.MLKEM768PrivateKey.from_seed_bytes(values[0]).decapsulate(values[1]).hex())
    elif command == "hpke-seal":
        print(SUITE.encrypt(values[2], xwing_public_key(values[0]), info=values[1]).hex())
    elif command == "hpke-open":
        print(SUITE.decrypt(values[2], xwing_private_key(values[0]), info=values[1]).hex())
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
