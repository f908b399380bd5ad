"""The Python side of SparkDomain's token interop tests, using PyJWT.

Commands:
  make ALG ISS AUD SUB JWKS_PATH   new key; writes its public JWKS to JWKS_PATH; prints a token
  verify JWKS_PATH ISS AUD         token on stdin; prints its sub, or fails with exit status 1
"""
import json
import sys
import time

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm


def make(alg, iss, aud, sub, jwks_path):
    if alg == "RS256":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    elif alg == "ES256":
        key = ec.generate_private_key(ec.SECP256R1())
        public = json.loads(ECAlgorithm.to_jwk(key.public_key()))
    elif alg == "EdDSA":
        key = ed25519.Ed25519PrivateKey.generate()
        public = json.loads(OKPAlgorithm.to_jwk(key.public_key()))
    else:
        raise SystemExit("unknown alg " + alg)
    kid = "py-" + alg.lower()
    public.update({"kid": kid, "alg": alg, "use": "sig"})
    with open(jwks_path, "w") as handle:
        json.dump({"keys": [public]}, handle)
    now = int(time.time())
    claims = {"iss": iss, "aud": aud, "sub": sub, "iat": now, "nbf": now, "exp": now + 300}
    print(jwt.encode(claims, key, algorithm=alg, headers={"kid": kid}))


def verify(jwks_path, iss, aud):
    token = sys.stdin.read().strip()
    with open(jwks_path) as handle:
        keys = jwt.PyJWKSet.from_dict(json.load(handle))
    kid = jwt.get_unverified_header(token)["kid"]
    key = next(k for k in keys.keys if k.key_id == kid)
    claims = jwt.decode(token, key.key, algorithms=["EdDSA"], audience=aud, issuer=iss)
    print(claims["sub"])


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(*sys.argv[2:7])
    elif sys.argv[1] == "verify":
        verify(*sys.argv[2:5])
    else:
        raise SystemExit("unknown command")
