"""The Matrix Synapse reference of spark-bench's synapse-* rows.

Usage: synapse_messages.py WORKDIR PGHOST PGPORT DATABASE

Runs Synapse (from the virtual environment running this script) on the given PostgreSQL
database, registers two users, puts them in one room, and measures what spark-bench measures
for its own two processes: alice sends 300 messages one after another (each send waits for
its answer, as the SDK's does), then 100 paced 20 ms apart; bob receives through /sync
long-polls on a thread of his own. Throughput is the burst's count over first send to last
receipt; latency is receipt minus the send time carried in each message. Prints
`throughput=… p50=… p99=…` (ms) like spark-bench's child.
"""

import hashlib
import hmac
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse

import yaml

BURST = 300
PACED = 100


def main():
    workdir, pghost, pgport, database = sys.argv[1:5]
    os.makedirs(workdir, exist_ok=True)
    config_path = os.path.join(workdir, "homeserver.yaml")
    port = free_port()
    subprocess.run(
        [sys.executable, "-m", "synapse.app.homeserver", "--server-name", "bench.local", "--config-path", config_path,
         "--data-directory", workdir, "--generate-config", "--report-stats=no"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=workdir)
    with open(config_path) as handle:
        config = yaml.safe_load(handle)
    unlimited = {"per_second": 100000, "burst_count": 100000}
    config.update({
        "listeners": [{"port": port, "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False,
                       "x_forwarded": False, "resources": [{"names": ["client"], "compress": False}]}],
        "database": {"name": "psycopg2", "args": {"host": pghost, "port": int(pgport), "user": "postgres",
                                                   "database": database, "cp_min": 2, "cp_max": 10}},
        "registration_shared_secret": "bench-secret",
        "enable_registration": False,
        "rc_message": unlimited, "rc_registration": unlimited, "rc_joins": {"local": unlimited, "remote": unlimited},
        "rc_login": {"address": unlimited, "account": unlimited, "failed_attempts": unlimited},
        "rc_admin_redaction": unlimited,
        "presence": {"enabled": False},
        "suppress_key_server_warning": True,
        "trusted_key_servers": [],
    })
    with open(config_path, "w") as handle:
        yaml.safe_dump(config, handle)

    server = subprocess.Popen(
        [sys.executable, "-m", "synapse.app.homeserver", "--config-path", config_path],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "synapse.log"), "w"), cwd=workdir)
    try:
        wait_until_up(port, server)
        alice = register(port, "alice")
        bob = register(port, "bob")
        room = call(port, "POST", "/_matrix/client/v3/createRoom", alice, {"preset": "private_chat"})["room_id"]
        quoted = urllib.parse.quote(room)
        call(port, "POST", f"/_matrix/client/v3/rooms/{quoted}/invite", alice, {"user_id": "@bob:bench.local"})
        call(port, "POST", f"/_matrix/client/v3/rooms/{quoted}/join", bob, {})
        measure(port, alice, bob, quoted)
    finally:
        server.terminate()
        server.wait(timeout=30)


def measure(port, alice, bob, room):
    since = call(port, "GET", "/_matrix/client/v3/sync?timeout=0", bob, None)["next_batch"]
    arrivals = {}
    done = threading.Event()

    def receive():
        nonlocal since
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while len(arrivals) < BURST + PACED:
            answer = call(port, "GET", f"/_matrix/client/v3/sync?timeout=30000&since={since}", bob, None, connection)
            now = time.time_ns()
            since = answer["next_batch"]
            joined = answer.get("rooms", {}).get("join", {})
            for data in joined.values():
                for event in data.get("timeline", {}).get("events", []):
                    if event.get("type") == "m.room.message" and event["sender"] == "@alice:bench.local":
                        body = event["content"]["body"]
                        arrivals.setdefault(body, now)
        done.set()

    receiver = threading.Thread(target=receive, daemon=True)
    receiver.start()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for index in range(BURST + PACED):
        tag = "burst" if index < BURST else "paced"
        body = f"{tag} {index} {time.time_ns()}"
        call(port, "PUT", f"/_matrix/client/v3/rooms/{room}/send/m.room.message/t{index}", alice,
             {"msgtype": "m.text", "body": body}, connection)
        if tag == "paced":
            time.sleep(0.02)
    if not done.wait(120):
        raise SystemExit(f"received {len(arrivals)} of {BURST + PACED}")
    burst = [(int(body.split()[2]), received) for body, received in arrivals.items() if body.startswith("burst")]
    paced = sorted((received - int(body.split()[2])) / 1e6 for body, received in arrivals.items()
                   if body.startswith("paced"))
    throughput = len(burst) / ((max(r for _, r in burst) - min(s for s, _ in burst)) / 1e9)
    p50 = paced[len(paced) // 2]
    p99 = paced[min(len(paced) - 1, int(len(paced) * 0.99))]
    print(f"throughput={throughput} p50={p50} p99={p99}")


def call(port, method, path, token, body, connection=None):
    connection = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    connection.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    response = connection.getresponse()
    data = response.read()
    if response.status != 200:
        raise SystemExit(f"{method} {path}: {response.status} {data[:300]!r}")
    return json.loads(data)


def register(port, user):
    """The shared-secret registration of Synapse's admin API; the user's access token."""
    nonce = call(port, "GET", "/_synapse/admin/v1/register", None, None)["nonce"]
    password = f"{user}-password"
    mac = hmac.new(b"bench-secret", digestmod=hashlib.sha1)
    mac.update(b"\x00".join([nonce.encode(), user.encode(), password.encode(), b"notadmin"]))
    answer = call(port, "POST", "/_synapse/admin/v1/register", None,
                  {"nonce": nonce, "username": user, "password": password, "admin": False, "mac": mac.hexdigest()})
    return answer["access_token"]


def wait_until_up(port, server):
    deadline = time.time() + 120
    while time.time() < deadline:
        if server.poll() is not None:
            raise SystemExit("synapse exited; see synapse.log")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/_matrix/client/versions")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("synapse did not start in 120 s")


def free_port():
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


if __name__ == "__main__":
    main()
