"""Holds N mailbox long-polls open against spark-domaind over TLS, for the idle-long-polls row.

usage: long_polls.py HOST PORT CA_FILE TOKEN ENDPOINT N [--until-entries]

Opens N TLS connections (at most 200 handshakes at a time), sends a 30-second mailbox read on
each, prints "waiting N" once every read is sent, then keeps each connection waiting: a read
that ends empty is sent again. Runs until killed. With --until-entries a read answered with
entries is not sent again (the connection is held), and "answered K" is printed each time the
count K of such connections grows: the row posts once and waits for K to reach N.
"""
import asyncio
import resource
import ssl
import sys


async def hold(host, port, context, request, gate, opened, answered, until_entries):
    async with gate:
        reader, writer = await asyncio.open_connection(host, port, ssl=context)
    writer.write(request)
    await writer.drain()
    opened.append(1)
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        body = await reader.readexactly(length)
        if until_entries and head.startswith(b"HTTP/1.1 200") and b'"entries":[]' not in body.replace(b" ", b""):
            answered.append(1)
            await asyncio.Event().wait()  # held, not asked again
        writer.write(request)
        await writer.drain()


async def main():
    host, port, ca, token, endpoint, count = sys.argv[1:7]
    until_entries = "--until-entries" in sys.argv[7:]
    count = int(count)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    context = ssl.create_default_context(cafile=ca)
    request = (
        f"GET /v1/mailbox?after=0&limit=1&wait=30 HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nSpark-Endpoint: {endpoint}\r\n\r\n"
    ).encode()
    gate = asyncio.Semaphore(200)
    opened, answered = [], []
    tasks = [asyncio.create_task(hold(host, int(port), context, request, gate, opened, answered, until_entries))
             for _ in range(count)]
    while len(opened) < count:
        failed = [task for task in tasks if task.done() and task.exception()]
        if failed:
            print(f"failed {failed[0].exception()!r}", flush=True)
            return
        await asyncio.sleep(0.05)
    print(f"waiting {count}", flush=True)
    reported = 0
    while True:
        failed = [task for task in tasks if task.done() and task.exception()]
        if failed:
            print(f"failed {failed[0].exception()!r}", flush=True)
            return
        if len(answered) > reported:
            reported = len(answered)
            print(f"answered {reported}", flush=True)
        await asyncio.sleep(0.2)


asyncio.run(main())
