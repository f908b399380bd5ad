"""spark-bench's PyJWT reference: verify one EdDSA JWT (parse, claims, signature) repeatedly.

Usage: pyjwt_verify.py JWKS_PATH ISSUER AUDIENCE < token
Prints the operations per second.
"""
import json
import sys
import time

import jwt

with open(sys.argv[1]) as handle:
    key = jwt.PyJWKSet.from_dict(json.load(handle)).keys[0].key
token = sys.stdin.read().strip()
issuer, audience = sys.argv[2], sys.argv[3]


def verify():
    return jwt.decode(token, key, algorithms=["EdDSA"], audience=audience, issuer=issuer)


for _ in range(200):
    verify()
operations = 0
start = time.perf_counter()
while True:
    for _ in range(200):
        verify()
    operations += 200
    elapsed = time.perf_counter() - start
    if elapsed >= 1.0:
        break
print(operations / elapsed)
