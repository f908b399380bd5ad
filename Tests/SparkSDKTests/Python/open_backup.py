"""Opens SparkSDK's key backup with jwcrypto and the passcode alone.

Usage: open_backup.py PASSCODE MANAGEMENT_JWE_PATH PROFILE_JWE_PATH
Prints {"sig": <Ed25519 public x>, "enc": <X25519 public x>} from the unlocked profile keys.
"""
import json
import sys

from jwcrypto import jwe, jwk

passcode, management_path, profile_path = sys.argv[1:4]
with open(management_path) as handle:
    management = jwe.JWE()
    management.deserialize(handle.read(), key=jwk.JWK.from_password(passcode))
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
