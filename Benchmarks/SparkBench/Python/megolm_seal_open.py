"""spark-bench's Megolm reference: vodozemac's group session encrypting and decrypting one
200-byte message (Megolm signs each message with Ed25519 and the inbound side verifies it).
Prints the round trips per second."""
import time

import vodozemac

outbound = vodozemac.GroupSession()
inbound = vodozemac.InboundGroupSession(outbound.session_key)
plaintext = b"x" * 200


def round_trip():
    message = outbound.encrypt(plaintext)
    assert inbound.decrypt(message).plaintext == plaintext


for _ in range(200):
    round_trip()
operations = 0
start = time.perf_counter()
while True:
    for _ in range(200):
        round_trip()
    operations += 200
    elapsed = time.perf_counter() - start
    if elapsed >= 1.0:
        break
print(operations / elapsed)
