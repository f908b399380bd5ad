"""Slow and unauthenticated clients against spark-domaind (plain HTTP on loopback), for DaemonTests,
from a process of its own (it holds hundreds of descriptors).

usage: slow_clients.py heads PORT SECONDS
       slow_clients.py bodies PORT TOKEN ENDPOINT PID

heads: two attacking addresses, 127.0.0.2 and 127.0.0.3, each open 200 connections and trickle
their heads a byte every half second, for SECONDS; meanwhile a third client, 127.0.0.1, asks
for /healthz on a new connection every 0.2 s. Prints
  "served S of T admitted A open-at-end E"
S of T: the third client's answers; A: the most attacking connections open at once (past the
per-address share each address is closed at once); E: attacking connections still open at the
end (the head deadline closes them, however they trickle).

bodies: from 127.0.0.2, 60 connections each send the head of a 1 MiB - 1 post with a valid token
and one byte of it, then hold; from 127.0.0.3, 60 the same with a forged token. Prints
  "admitted A refused-busy B unauthorized U rss-growth-kb G"
A: valid ones the daemon kept reading (within the per-address body budget); B: valid ones refused
429 at once; U: forged ones answered 401 before their body (none sent); G: the daemon's resident
growth while they are held.
"""
import select
import socket
import sys
import time


def connect(port, source):
    connection = socket.socket()
    connection.bind((source, 0))
    connection.settimeout(5)
    connection.connect(("127.0.0.1", port))
    connection.setblocking(False)
    return connection


def closed(connection):
    """Whether the server closed it (EOF or reset): what it sent is read and dropped."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        if not readable:
            return False
        return connection.recv(65536) == b""
    except (ConnectionResetError, BrokenPipeError, OSError):
        return True


def answer_status(connection, timeout):
    """The status of an answer that arrives within `timeout`, 0 for none (closed or silent)."""
    connection.setblocking(True)
    connection.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = connection.recv(4096)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionResetError, OSError):
        pass
    connection.setblocking(False)
    return int(data.split(b" ")[1]) if data.startswith(b"HTTP/1.1 ") else 0


def heads(port, seconds):
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4000 + b"\r\n\r\n"
    attackers = []
    for source in ["127.0.0.2", "127.0.0.3"]:
        for _ in range(200):
            try:
                attackers.append([connect(port, source), 0])
            except OSError:
                pass
    # The server closes what passes an address's share as it accepts it; a close still on its
    # way would be counted as held, so the count starts a second later.
    time.sleep(1)
    served, tried, admitted = 0, 0, 0
    start = time.monotonic()
    next_byte = start
    while time.monotonic() - start < seconds:
        now = time.monotonic()
        if now >= next_byte:
            next_byte = now + 0.5
            for attacker in attackers:
                connection, sent = attacker
                if connection is None:
                    continue
                if closed(connection):
                    connection.close()
                    attacker[0] = None
            admitted = max(admitted, sum(1 for connection, _ in attackers if connection is not None))
            for attacker in attackers:
                connection, sent = attacker
                if connection is None:
                    continue
                try:
                    connection.send(head[sent:sent + 1])
                    attacker[1] = sent + 1
                except (BlockingIOError, BrokenPipeError, ConnectionResetError, OSError):
                    connection.close()
                    attacker[0] = None
        tried += 1
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as client:
                client.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                data = client.recv(4096)
                served += data.startswith(b"HTTP/1.1 200")
        except OSError:
            pass
        time.sleep(0.2)
    for attacker in attackers:
        if attacker[0] is not None and closed(attacker[0]):
            attacker[0].close()
            attacker[0] = None
    still = sum(1 for connection, _ in attackers if connection is not None)
    print(f"served {served} of {tried} admitted {admitted} open-at-end {still}")


def resident_kb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def bodies(port, token, endpoint, pid):
    length = (1 << 20) - 1

    def head(bearer):
        return (f"POST /v1/chats/post HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {bearer}\r\n"
                f"Spark-Endpoint: {endpoint}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {length}\r\n\r\n{{").encode()

    before = resident_kb(pid)
    valid = []
    for _ in range(60):
        connection = connect(port, "127.0.0.2")
        connection.sendall(head(token))
        valid.append(connection)
    forged = []
    for _ in range(60):
        connection = connect(port, "127.0.0.3")
        connection.sendall(head(token[:-4] + "AAAA"))
        forged.append(connection)
    time.sleep(1.5)
    busy = 0
    for connection in valid:
        if select.select([connection], [], [], 0)[0]:
            busy += answer_status(connection, 2) == 429
    unauthorized = sum(answer_status(connection, 5) == 401 for connection in forged)
    admitted = sum(1 for connection in valid if not closed(connection))
    growth = resident_kb(pid) - before
    print(f"admitted {admitted} refused-busy {busy} unauthorized {unauthorized} rss-growth-kb {growth}")


def main():
    if sys.argv[1] == "heads":
        heads(int(sys.argv[2]), float(sys.argv[3]))
    else:
        bodies(int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]))


if __name__ == "__main__":
    main()
