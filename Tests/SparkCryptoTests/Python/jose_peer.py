"""The Python side of SparkCrypto's interop tests, using jwcrypto (and cryptography).

Commands (JSON on stdout, errors on stderr with exit status 1):
  decrypt-password PASSWORD            JWE JSON on stdin -> plaintext as hex
  encrypt-password PASSWORD HEX        -> JWE JSON (PBES2-HS512+A256KW, A256GCM, p2c 1000)
  verify JWK_JSON                      compact JWS on stdin -> payload as hex
  sign ALG                             payload on stdin -> {"token", "jwk"} signed with a new key
"""
import json
import sys

from jwcrypto import jwe, jwk, jws
from jwcrypto.common import json_encode


def main():
    command = sys.argv[1]
    if command == "decrypt-password":
        token = jwe.JWE()
        token.deserialize(sys.stdin.read(), key=jwk.JWK.from_password(sys.argv[2]))
        print(token.payload.hex())
    elif command == "encrypt-password":
        header = {"alg": "PBES2-HS512+A256KW", "enc": "A256GCM", "p2c": 1000}
        token = jwe.JWE(bytes.fromhex(sys.argv[3]), protected=json_encode(header))
        token.add_recipient(jwk.JWK.from_password(sys.argv[2]))
        print(token.serialize())
    elif command == "verify":
        key = jwk.JWK.from_json(sys.argv[2])
        token = jws.JWS()
        token.deserialize(sys.stdin.read().strip())
        token.verify(key)
        print(token.payload.hex())
    elif command == "sign":
        alg = sys.argv[2]
        key = {
            "EdDSA": lambda: jwk.JWK.generate(kty="OKP", crv="Ed25519", kid="py"),
            "ES256": lambda: jwk.JWK.generate(kty="EC", crv="P-256", kid="py"),
            "RS256": lambda: jwk.JWK.generate(kty="RSA", size=2048, kid="py"),
        }[alg]()
        token = jws.JWS(sys.stdin.buffer.read())
        token.add_signature(key, alg=alg, protected=json_encode({"alg": alg, "kid": "py"}))
        print(json.dumps({"token": token.serialize(compact=True), "jwk": json.loads(key.export_public())}))
    else:
        raise SystemExit("unknown command " + command)


if __name__ == "__main__":
    main()
