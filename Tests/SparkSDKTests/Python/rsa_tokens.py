"""Signs JWTs with RSA as an OpenID provider would, with jwcrypto (an implementation not ours).

Usage: rsa_tokens.py CLAIMS_JSON

Prints {"rs_jwk", "ps_jwk", "rs256", "ps256", "hs256"}: one RSA-2048 key published twice, once
as an RS256 key and once (another kid) as a PS256 key; the claims signed RS256 under the first
kid and PS256 under the second; and an HS256 token whose secret is the public key's JWK text
under the first kid (the algorithm-confusion attack, RFC 8725 §2.1).
"""
import json
import sys

from jwcrypto import jwk, jws

claims = sys.argv[1]
key = jwk.JWK.generate(kty="RSA", size=2048)
public = json.loads(key.export_public())
rs_jwk = dict(public, kid="rs", alg="RS256", use="sig")
ps_jwk = dict(public, kid="ps", alg="PS256", use="sig")


def sign(signing_key, alg, kid):
    token = jws.JWS(claims.encode())
    token.add_signature(signing_key, alg=alg, protected=json.dumps({"alg": alg, "kid": kid, "typ": "JWT"}))
    return token.serialize(compact=True)


secret = jwk.JWK(kty="oct", k=jwk.base64url_encode(json.dumps(rs_jwk).encode()))
print(json.dumps({"rs_jwk": rs_jwk, "ps_jwk": ps_jwk, "rs256": sign(key, "RS256", "rs"),
                  "ps256": sign(key, "PS256", "ps"), "hs256": sign(secret, "HS256", "rs")}))
