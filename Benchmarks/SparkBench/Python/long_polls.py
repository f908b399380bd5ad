"""Holds N mailbox long-polls open against spark-domaind over TLS, for the idle-long-polls rows.

usage: long_polls.py HOST PORT CA_FILE TOKEN ENDPOINT N [--until-entries]

Opens N TLS connections (at most 200 handshakes at a time), sends a 30-second mailbox read on
each, prints "waiting N" once every read is sent, then keeps each connection waiting: a read
that ends empty is sent again. Runs until killed. With --until-entries a read answered with
entries is not sent again (the connection is held), and "answered K" is printed each time the
count K of such connections grows: the row posts once and waits for K to reach N.

One thread on epoll with non-blocking ssl sockets, not asyncio: asyncio's TLS transport keeps a
256 KiB buffer a connection, which for 100,000 long-polls is more memory than the machine has.
"""
import errno
import resource
import selectors
import socket
import ssl
import sys
import time

CONNECTING, HANDSHAKE, READING, HELD = range(4)


class Connection:
    __slots__ = ("sock", "state", "received")

    def __init__(self, sock):
        self.sock, self.state, self.received = sock, CONNECTING, b""


def main():
    host, port, ca, token, endpoint, count = sys.argv[1:7]
    port, count = int(port), int(count)
    until_entries = "--until-entries" in sys.argv[7:]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    context = ssl.create_default_context(cafile=ca)
    request = (
        f"GET /v1/mailbox?after=0&limit=1&wait=30 HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nSpark-Endpoint: {endpoint}\r\n\r\n"
    ).encode()
    selector = selectors.EpollSelector()
    started, opening, waiting, answered, reported = 0, 0, 0, 0, 0
    held = []  # connections answered with entries, kept open and no longer watched

    def fail(text):
        print(f"failed {text}", flush=True)
        sys.exit(1)

    def start():
        nonlocal started, opening
        sock = socket.socket()
        sock.setblocking(False)
        code = sock.connect_ex((host, port))
        if code not in (0, errno.EINPROGRESS):
            fail(f"connect: {errno.errorcode.get(code, code)}")
        selector.register(sock, selectors.EVENT_WRITE, Connection(sock))
        started += 1
        opening += 1

    def handshake(connection):
        nonlocal opening, waiting
        try:
            connection.sock.do_handshake()
        except ssl.SSLWantReadError:
            selector.modify(connection.sock, selectors.EVENT_READ, connection)
            return
        except ssl.SSLWantWriteError:
            selector.modify(connection.sock, selectors.EVENT_WRITE, connection)
            return
        connection.sock.send(request)
        connection.state = READING
        selector.modify(connection.sock, selectors.EVENT_READ, connection)
        opening -= 1
        waiting += 1

    def read(connection):
        nonlocal answered
        while True:
            try:
                chunk = connection.sock.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                break
            if not chunk:
                fail("the server closed a long-poll")
            connection.received += chunk
        while b"\r\n\r\n" in connection.received:
            head, _, rest = connection.received.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if len(rest) < length:
                return
            body, connection.received = rest[:length], rest[length:]
            if not head.startswith(b"HTTP/1.1 200"):
                fail(f"an answer: {head.split(b' ')[1:2]}")
            if until_entries and b'"entries":[]' not in body.replace(b" ", b""):
                answered += 1
                connection.state = HELD
                selector.unregister(connection.sock)
                held.append(connection)
                return
            connection.sock.send(request)

    while started < count and opening < 200:
        start()
    announced = False
    while True:
        for key, _ in selector.select(timeout=0.2):
            connection = key.data
            if connection.state == CONNECTING:
                code = connection.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    fail(f"connect: {errno.errorcode.get(code, code)}")
                connection.sock = context.wrap_socket(
                    connection.sock, server_hostname=host, do_handshake_on_connect=False)
                connection.state = HANDSHAKE
                selector.modify(connection.sock, selectors.EVENT_WRITE, connection)
                handshake(connection)
            elif connection.state == HANDSHAKE:
                handshake(connection)
            elif connection.state == READING:
                read(connection)
        while started < count and opening < 200:
            start()
        if not announced and waiting == count:
            announced = True
            print(f"waiting {count}", flush=True)
        if answered > reported:
            reported = answered
            print(f"answered {reported}", flush=True)


main()
