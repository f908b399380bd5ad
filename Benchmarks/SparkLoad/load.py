"""spark-load's wire clients: every user's device holding its mailbox long-poll, and the senders.

usage: load.py PLAN_FILE

spark-load writes the plan (JSON): the proxy's address and CA, each user's token and endpoint,
the chats (members and class), each class's share of the messages and its pre-sealed MLS
messages (base64), the steps (messages a second, seconds each), how long to let the domain
settle once every device is connected, and the processes to watch.

Each user is one TLS connection through the proxy with a mailbox read waiting on it (`wait=30`),
sent again as soon as one is answered, exactly as a device's long-poll. Senders are a pool of
keep-alive connections posting on behalf of the chats' members (each request with that member's
token and endpoint). A pacer offers messages at the step's rate on a fixed schedule (an open
loop: a slow domain does not slow the offer), and a message's delivery latency to each member is
from the moment it was offered to the moment that member's long-poll answer was read.

Prints one JSON line per step: the rate offered and achieved, errors, deliveries expected, lost
and doubled, latency p50 and p99 in milliseconds, and each watched process's CPU (percent of one
core) and resident memory (MB). Then "done".
"""
import asyncio
import json
import os
import resource
import ssl
import sys
import time
import random

TICK = os.sysconf("SC_CLK_TCK")


def process_times(pid):
    """CPU seconds and proportional memory of the process and of its children that are still
    running (PostgreSQL's backends are its postmaster's children)."""
    total = 0.0
    pids = [pid]
    try:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    if int(fields[1]) == pid:
                        pids.append(int(entry))
                except OSError:
                    pass
    except OSError:
        pass
    resident = 0
    for one in pids:
        try:
            with open(f"/proc/{one}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICK
            # The proportional set size: memory shared between processes (PostgreSQL's buffers)
            # counted once over them, not once in each.
            with open(f"/proc/{one}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        resident += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total, resident


class Connection:
    """One keep-alive HTTP/1.1 connection over TLS."""

    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, host, port, context):
        reader, writer = await asyncio.open_connection(host, port, ssl=context, limit=1 << 22)
        return cls(reader, writer)

    async def request(self, head, body=b""):
        self.writer.write(head + body)
        await self.writer.drain()
        answer = await self.reader.readuntil(b"\r\n\r\n")
        status = int(answer[9:12])
        length = 0
        for line in answer.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return status, await self.reader.readexactly(length)


class Load:
    def __init__(self, plan):
        self.plan = plan
        self.host = plan["host"]
        self.port = plan["port"]
        self.context = ssl.create_default_context(cafile=plan["ca"])
        self.users = plan["users"]
        self.chats = plan["chats"]
        self.payloads = plan["messages"]
        self.shares = plan["shares"]
        self.by_class = [[index for index, chat in enumerate(self.chats) if chat["class"] == c] for c in range(len(self.shares))]
        # (chat index, message number) → [(user index, arrival time)]
        self.arrivals = {}
        self.chat_index = {chat["id"]: index for index, chat in enumerate(self.chats)}
        self.polling = 0
        self.poll_errors = 0
        self.stopping = False

    def head(self, method, path, user, length=None):
        token, endpoint = self.users[user]
        lines = [
            f"{method} {path} HTTP/1.1",
            f"Host: {self.host}",
            f"Authorization: Bearer {token}",
            f"Spark-Endpoint: {endpoint}",
        ]
        if length is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {length}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def device(self, user, gate):
        """A user's device: its long-poll, read again as soon as it is answered."""
        async with gate:
            connection = await Connection.open(self.host, self.port, self.context)
        cursor = 0
        first = True
        while not self.stopping:
            head = self.head("GET", f"/v1/mailbox?after={cursor}&limit=500&wait=30", user)
            try:
                status, body = await connection.request(head)
            except (OSError, asyncio.IncompleteReadError) as error:
                self.poll_errors += 1
                print(json.dumps({"warning": f"user {user}'s long-poll failed: {error!r}"}), file=sys.stderr, flush=True)
                async with gate:
                    connection = await Connection.open(self.host, self.port, self.context)
                continue
            now = time.monotonic()
            if status != 200:
                self.poll_errors += 1
                await asyncio.sleep(1)
                continue
            for entry in json.loads(body)["entries"]:
                cursor = max(cursor, entry["sequence"])
                if entry["kind"] == "message":
                    key = (self.chat_index.get(entry["chatID"], -1), entry.get("messageNumber"))
                    self.arrivals.setdefault(key, []).append((user, now))
            if first:
                first = False
                self.polling += 1

    async def sender(self, queue, sent, errors):
        connection = await Connection.open(self.host, self.port, self.context)
        while True:
            job = await queue.get()
            if job is None:
                return
            chat, member, payload, offered, client_id = job
            body = json.dumps(
                {"chatID": self.chats[chat]["id"], "kind": "message", "payload": payload, "clientID": client_id}
            ).encode()
            try:
                status, answer = await connection.request(self.head("POST", "/v1/chats/post", member, len(body)), body)
            except (OSError, asyncio.IncompleteReadError) as error:
                errors.append(f"connection: {error!r}")
                connection = await Connection.open(self.host, self.port, self.context)
                continue
            if status != 200:
                errors.append(f"{status} {answer[:200]!r}")
                continue
            sent[(chat, json.loads(answer)["messageNumber"])] = offered

    async def step(self, rate, seconds, step_index):
        watched = {name: process_times(pid) for name, pid in self.plan["watch"].items()}
        watched["spark-load (this client)"] = process_times(os.getpid())
        started_wall = time.monotonic()
        queue = asyncio.Queue()
        sent = {}
        errors = []
        senders = [asyncio.create_task(self.sender(queue, sent, errors)) for _ in range(self.plan["senders"])]
        chooser = random.Random(step_index)
        cumulative = []
        total = 0.0
        for share in self.shares:
            total += share
            cumulative.append(total)
        offered = 0
        start = time.monotonic()
        count = int(rate * seconds)
        while offered < count:
            now = time.monotonic()
            due = min(count, int((now - start) * rate) + 1)
            while offered < due:
                pick = chooser.random() * total
                chat_class = next(index for index, bound in enumerate(cumulative) if pick < bound)
                chat = chooser.choice(self.by_class[chat_class])
                member = chooser.choice(self.chats[chat]["members"])
                payloads = self.payloads[chat_class]
                payload = payloads[offered % len(payloads)]
                # When the schedule meant it to go, not when the pacer got to it.
                at = start + offered / rate
                queue.put_nowait((chat, member, payload, at, f"s{step_index}-{offered}"))
                offered += 1
            await asyncio.sleep(max(0.0, start + offered / rate - time.monotonic()))
        for _ in senders:
            queue.put_nowait(None)
        await asyncio.gather(*senders)
        sending = time.monotonic() - start
        # Every member's long-poll gets its copy, or the drain time passes.
        deadline = time.monotonic() + self.plan["drain"]
        while time.monotonic() < deadline:
            if all(len(self.arrivals.get(key, ())) >= len(self.chats[key[0]]["members"]) for key in sent):
                break
            await asyncio.sleep(0.05)
        elapsed = time.monotonic() - started_wall
        latencies = []
        by_class = [[] for _ in self.shares]
        lost = doubled = expected = 0
        for key, offered_at in sent.items():
            members = self.chats[key[0]]["members"]
            expected += len(members)
            seen = self.arrivals.pop(key, [])
            users = [user for user, _ in seen]
            doubled += len(users) - len(set(users))
            lost += len(set(members) - set(users))
            delays = [arrived - offered_at for user, arrived in seen]
            latencies += delays
            by_class[self.chats[key[0]]["class"]] += delays
        # Deliveries of messages this client never heard were accepted (none should be).
        unexpected = sum(len(v) for k, v in self.arrivals.items() if k[1] is not None)
        self.arrivals.clear()
        latencies.sort()
        for delays in by_class:
            delays.sort()

        def percentile(p, values=latencies):
            return round(1000 * values[min(len(values) - 1, int(p * len(values)))], 1) if values else None

        cpu = {}
        memory = {}
        for name, (before, _) in watched.items():
            pid = os.getpid() if name.startswith("spark-load") else self.plan["watch"][name]
            after, resident = process_times(pid)
            cpu[name] = round(100 * (after - before) / elapsed, 1)
            memory[name] = round(resident / 1e6, 1)
        return {
            "rate": rate,
            "seconds": seconds,
            "offered": count,
            "accepted": len(sent),
            "achieved": round(len(sent) / sending, 1),
            "errors": len(errors),
            "firstError": errors[0] if errors else None,
            "deliveries": expected,
            "lost": lost,
            "doubled": doubled,
            "unexpected": unexpected,
            "p50": percentile(0.50),
            "p99": percentile(0.99),
            "max": round(1000 * latencies[-1], 1) if latencies else None,
            "byChatSize": [
                {"size": size, "deliveries": len(delays), "p50": percentile(0.5, delays), "p99": percentile(0.99, delays)}
                for size, delays in zip(self.plan["sizes"], by_class)
            ],
            "cpu": cpu,
            "rssMB": memory,
            "pollErrors": self.poll_errors,
        }

    async def run(self):
        gate = asyncio.Semaphore(100)
        devices = [asyncio.create_task(self.device(user, gate)) for user in range(len(self.users))]
        opening = time.monotonic()
        while self.polling < len(self.users):
            failed = [task for task in devices if task.done()]
            if failed:
                raise RuntimeError(f"a device stopped while connecting: {failed[0].exception()!r}")
            await asyncio.sleep(0.1)
        print(json.dumps({"connected": len(self.users), "seconds": round(time.monotonic() - opening, 1)}), flush=True)
        # An organisation at work, not one whose every device just connected: the domain's work
        # for the new connections (each device's first reads and its cursor's first record)
        # ends before the first step.
        await asyncio.sleep(self.plan["settle"])
        # Setup's entries are read; what arrives from here is the load's.
        self.arrivals.clear()
        for index, (rate, seconds) in enumerate(self.plan["steps"]):
            print(json.dumps(await self.step(rate, seconds, index)), flush=True)
        self.stopping = True
        print("done", flush=True)
        os._exit(0)


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    if hard < len(plan["users"]) + plan["senders"] + 64:
        sys.exit(f"{len(plan['users'])} users need more descriptors than this machine allows ({hard})")
    asyncio.run(Load(plan).run())


main()
