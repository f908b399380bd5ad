"""Holds many connections to spark-domaind (plain HTTP on loopback) for the connection test,
from a process of its own so the test process never holds a thousand descriptors.

usage: hold_connections.py PORT COUNT EXTRA TOKEN ENDPOINT

Opens COUNT connections (every second one sends half a request and stalls), then, with all of
them open: an authenticated checkIn on a new connection, the daemon's connection gauge, and
EXTRA more connections each asking for /healthz, counting those closed without an answer.
Prints "checkin STATUS connections N refused R of EXTRA".
"""
import resource
import socket
import sys


def request(port, text):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(text.encode())
        data = b""
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
        return data.decode(errors="replace")


def main():
    port, count, extra, token, endpoint = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    operator = sys.argv[6]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held = []
    for index in range(count):
        connection = socket.create_connection(("127.0.0.1", port), timeout=30)
        if index % 2 == 1:
            connection.sendall(b"POST /v1/policy HTTP/1.1\r\nContent-Length: 50\r\n\r\n{")
        held.append(connection)
    answer = request(
        port,
        "POST /v1/endpoints/check-in HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nSpark-Endpoint: {endpoint}\r\nContent-Length: 2\r\n\r\n{{}}",
    )
    status = answer.split(" ")[1] if answer.startswith("HTTP/1.1") else "0"
    metrics = request(
        port, f"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {operator}\r\n\r\n"
    )
    gauge = next((line.split(" ")[1] for line in metrics.splitlines() if line.startswith("spark_connections ")), "0")
    refused = 0
    more = []
    for _ in range(extra):
        try:
            more.append(socket.create_connection(("127.0.0.1", port), timeout=30))
        except OSError:
            refused += 1
    for connection in more:
        try:
            connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            if not connection.recv(1024):
                refused += 1
        except OSError:
            refused += 1
        connection.close()
    print(f"checkin {status} connections {gauge} refused {refused} of {extra}")
    for connection in held:
        connection.close()


main()
