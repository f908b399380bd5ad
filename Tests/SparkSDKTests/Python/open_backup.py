"""Opens SparkSDK's key backup with standard tools, given the passcode and one OPRF evaluation.

Usage: open_backup.py PASSCODE USER_ID OPRF_OUTPUT_HEX MANAGEMENT_JWE_PATH PROFILE_JWE_PATH

OPRF_OUTPUT_HEX is the unblinded VOPRF-P256-SHA256 output for the stretched passcode under the
user's domain key (one evaluation by the domain). The derivation is docs/FORMATS.md's:

    x   = PBKDF2-HMAC-SHA-512(passcode, "spark-passcode-v1" || 0x00 || p2s, p2c, 32)
    KEK = HKDF-SHA-256(ikm = y || x, salt = p2s, info = "spark-passcode-kek-v1" || 0x00 || userID, 32)

and the management blob is then an ordinary A256KW/A256GCM JWE under KEK (jwcrypto opens it).
Prints {"sig": <Ed25519 public x>, "enc": <X25519 public x>} from the unlocked profile keys;
exits 1 when the blob does not open.
"""
import base64
import hashlib
import json
import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from jwcrypto import jwe, jwk
from jwcrypto.common import JWException


def b64u_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64u_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


passcode, user_id, output_hex, management_path, profile_path = sys.argv[1:6]
with open(management_path) as handle:
    management_text = handle.read()
protected = json.loads(b64u_decode(json.loads(management_text)["protected"]))
parameters = protected["spark-oprf"]
assert protected["alg"] == "A256KW" and parameters["suite"] == "VOPRF-P256-SHA256", protected
salt = b64u_decode(parameters["p2s"])
stretched = hashlib.pbkdf2_hmac("sha512", passcode.encode(), b"spark-passcode-v1\x00" + salt, parameters["p2c"], 32)
kek = HKDF(
    algorithm=hashes.SHA256(), length=32, salt=salt, info=b"spark-passcode-kek-v1\x00" + user_id.encode()
).derive(bytes.fromhex(output_hex) + stretched)
try:
    management = jwe.JWE()
    management.deserialize(management_text, key=jwk.JWK(kty="oct", k=b64u_encode(kek)))
except JWException as error:
    print(f"the management blob does not open: {error}", file=sys.stderr)
    sys.exit(1)
management_key = jwk.JWK.from_json(management.payload)
with open(profile_path) as handle:
    profile = jwe.JWE()
    profile.deserialize(handle.read(), key=management_key)
keys = jwk.JWKSet.from_json(profile.payload)
result = {}
for key in keys["keys"]:
    exported = json.loads(key.export_private())
    assert "d" in exported
    result[exported["kid"]] = exported["x"]
print(json.dumps(result))
