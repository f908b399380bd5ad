"""spark-bench's ML-KEM reference: pyca/cryptography's ML-KEM-768 (OpenSSL's), and X-Wing's parts
in OpenSSL (ML-KEM-768 and two X25519 operations). Prints, one per line, `name rate` in
operations per second for keygen, encaps, decaps, xwing-encaps and xwing-decaps."""
import time

from cryptography.hazmat.primitives.asymmetric import mlkem, x25519


def rate(operation, batch=100):
    for _ in range(batch):
        operation()
    operations = 0
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            operation()
        operations += batch
        elapsed = time.perf_counter() - start
        if elapsed >= 1.0:
            return operations / elapsed


seed = bytes(range(64))
key = mlkem.MLKEM768PrivateKey.from_seed_bytes(seed)
public = key.public_key()
_, ciphertext = public.encapsulate()
x_key = x25519.X25519PrivateKey.generate()
x_public = x_key.public_key()


def xwing_encaps():
    public.encapsulate()
    ephemeral = x25519.X25519PrivateKey.generate()
    ephemeral.public_key()
    ephemeral.exchange(x_public)


def xwing_decaps():
    key.decapsulate(ciphertext)
    x_key.exchange(x_public)


print("keygen", rate(lambda: mlkem.MLKEM768PrivateKey.from_seed_bytes(seed)))
print("encaps", rate(public.encapsulate))
print("decaps", rate(lambda: key.decapsulate(ciphertext)))
print("xwing-encaps", rate(xwing_encaps))
print("xwing-decaps", rate(xwing_decaps))
