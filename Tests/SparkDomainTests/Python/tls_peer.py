"""A TLS peer of spark-domaind (TLS by OpenSSL, every record), for DaemonTests.

usage: tls_peer.py PORT CA_FILE

Prints one line per check, "name value", from Python's ssl (OpenSSL underneath, but a client
the server does not share code with) and openssl s_client:
  tls13-cipher          the suite a TLS 1.3 connection negotiated
  tls12                 the status of /healthz over TLS 1.2, and the suite (an AEAD)
  tls12-cbc             whether a TLS 1.2 client offering only CBC suites gets a handshake
  large-answer          whether /v1/openapi.json (many records) came whole and parses
  large-request         the status of a 12 KB body and of a 200 KB one (refused: no token)
  pipelined             the statuses of three requests sent in one write
  tampered              what came back for a request whose record was altered: "alert" (one
                        record of an alert's size, then the close) or what else
  close-notify          the status of a request sent in one write with the client's close_notify,
                        and whether the server's close_notify followed
  key-update            the statuses s_client saw around a KeyUpdate it asked the server to answer
"""
import json
import socket
import ssl
import os
import select
import subprocess
import sys
import time

port, ca = int(sys.argv[1]), sys.argv[2]


def context(maximum=None):
    made = ssl.create_default_context(cafile=ca)
    if maximum:
        made.maximum_version = maximum
    return made


def answers(stream, count):
    """Reads `count` answers (Content-Length framed): their statuses and bodies."""
    buffer, out = b"", []
    while len(out) < count:
        while b"\r\n\r\n" not in buffer:
            chunk = stream.recv(65536)
            if not chunk:
                return out
            buffer += chunk
        head, _, rest = buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            chunk = stream.recv(65536)
            if not chunk:
                return out
            rest += chunk
        out.append((int(head.split(b" ")[1]), rest[:length]))
        buffer = rest[length:]
    return out


def connect(maximum=None):
    raw = socket.create_connection(("127.0.0.1", port))
    return context(maximum).wrap_socket(raw, server_hostname="127.0.0.1")


def request(method, path, body=b"", close=False):
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
    head += "Connection: close\r\n" if close else ""
    return head.encode() + b"\r\n" + body


with connect() as stream:
    print("tls13-cipher", stream.cipher()[0], stream.version())
    stream.sendall(request("GET", "/v1/openapi.json"))
    [(status, body)] = answers(stream, 1)
    document = json.loads(body)
    print("large-answer", status, len(body) > 16384 and "paths" in document)
    stream.sendall(request("POST", "/v1/test-tokens", b"x" * 12_000))
    [(small, _)] = answers(stream, 1)
    print("large-request", small)
with connect() as stream:
    stream.sendall(request("POST", "/v1/test-tokens", b"x" * 200_000))
    [(status, _)] = answers(stream, 1)
    print("large-request-anonymous", status)
with connect() as stream:
    stream.sendall(request("GET", "/healthz") * 2 + request("GET", "/v1/nowhere"))
    print("pipelined", ",".join(str(status) for status, _ in answers(stream, 3)))

with connect(ssl.TLSVersion.TLSv1_2) as stream:
    stream.sendall(request("GET", "/healthz", close=True))
    [(status, _)] = answers(stream, 1)
    print("tls12", status, stream.version(), stream.cipher()[0])

# TLS 1.2 with CBC suites only (Lucky13's): no suite in common, so no handshake.
cbc = context(ssl.TLSVersion.TLSv1_2)
cbc.set_ciphers("ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-ECDSA-AES128-SHA256:ECDHE-RSA-AES128-SHA")
try:
    with cbc.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1") as stream:
        print("tls12-cbc", "accepted", stream.cipher()[0])
except ssl.SSLError:
    print("tls12-cbc", "refused")

def handshake():
    """A TLS client over memory BIOs on a raw socket, its handshake done."""
    raw = socket.create_connection(("127.0.0.1", port))
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            raw.sendall(outgoing.read())
            data = raw.recv(65536)
            if not data:
                break
            incoming.write(data)
    raw.sendall(outgoing.read())
    return raw, incoming, outgoing, tls


# A request and the client's close_notify in one write: the request is answered, then the
# server's close_notify (RFC 8446 section 6.1).
raw, incoming, outgoing, tls = handshake()
tls.write(request("GET", "/healthz"))
try:
    tls.unwrap()
except ssl.SSLWantReadError:
    pass
raw.sendall(outgoing.read())
raw.settimeout(10)
plain, closed = b"", False
try:
    while not closed:
        chunk = raw.recv(65536)
        if not chunk:
            break
        incoming.write(chunk)
        while True:
            try:
                data = tls.read(65536)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                closed = True
                break
            if not data:
                closed = True
                break
            plain += data
except (ConnectionResetError, socket.timeout):
    pass
status = plain.split(b" ")[1].decode() if plain.startswith(b"HTTP/1.1 ") else "none"
print("close-notify", status, "closed" if closed else "not-closed")
raw.close()

# A record altered on the way: the server must answer with an alert, not an answer.
raw, incoming, outgoing, tls = handshake()
tls.write(request("GET", "/healthz"))
record = bytearray(outgoing.read())
record[-5] ^= 0x01  # inside the tag
raw.sendall(bytes(record))
raw.settimeout(10)
received = b""
try:
    while True:
        chunk = raw.recv(65536)
        if not chunk:
            break
        received += chunk
except (ConnectionResetError, socket.timeout):
    pass
# Whatever arrives is ciphertext: one record of an alert's size (5 + 2 + 1 + 16: bad_record_mac,
# sealed), never an answer.
is_alert = len(received) == 24 and received[:3] == b"\x17\x03\x03"
print("tampered", "alert" if is_alert else f"{len(received)} bytes")

# KeyUpdate: s_client's "K" asks the server to update its keys too.
client = subprocess.Popen(
    ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile", ca],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
ask = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
output = ""


def until(text, count, seconds=20):
    """Reads s_client's output until `text` has appeared `count` times (or the time is up)."""
    global output
    deadline = time.monotonic() + seconds
    while output.count(text) < count and time.monotonic() < deadline:
        ready, _, _ = select.select([client.stdout], [], [], 0.2)
        if ready:
            chunk = os.read(client.stdout.fileno(), 65536)
            if not chunk:
                break
            output += chunk.decode(errors="replace")


# Each line goes once s_client has acted on the one before (its answer, or its KEYUPDATE), so
# that a slow peer never reads a command and a request as one.
for line, text, count in [(ask, "HTTP/1.1", 1), (b"K\n", "KEYUPDATE", 1), (ask, "HTTP/1.1", 2),
                          (b"k\n", "KEYUPDATE", 2), (ask, "HTTP/1.1", 3)]:
    client.stdin.write(line)
    client.stdin.flush()
    until(text, count)
client.stdin.close()
output += client.stdout.read().decode(errors="replace")
client.wait()
print("key-update", ",".join(line.split(" ")[1] for line in output.splitlines() if line.startswith("HTTP/1.1")),
      output.count("KEYUPDATE"))
