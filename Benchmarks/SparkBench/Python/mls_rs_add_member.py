"""mls-rs (PyPI agentvault-mls-rs-uniffi, RFC 9420 in Rust): one member added to a 1,000-member
group, and the commit applied by another member. The group is made as spark-bench makes ours: its
creator adds 999 members in one commit, and the newest joins from the Welcome. Prints the best of
five, in milliseconds: `add=… apply=… total=…`."""
import time

import mls_rs_uniffi as mls

SUITE = mls.CipherSuite.CURVE25519_AES128
CONFIG = mls.client_config_default()


def client(name):
    return mls.Client(name.encode(), mls.generate_signature_keypair(SUITE), CONFIG)


creator = client("creator")
group = creator.create_group(None)
members = [client(f"member {i}") for i in range(1, 1000)]
added = group.add_members([member.generate_key_package_message() for member in members])
# mls-rs keeps its own commit pending until it processes it.
group.process_incoming_message(added.commit_message)
receiver = members[-1].join_group(group.export_tree(), added.welcome_message).group
best = None
for round in range(5):
    package = client(f"new {round}").generate_key_package_message()
    started = time.perf_counter()
    commit = group.add_members([package]).commit_message
    group.process_incoming_message(commit)
    committed = time.perf_counter()
    receiver.process_incoming_message(commit)
    applied = time.perf_counter()
    times = (committed - started, applied - committed)
    if best is None or sum(times) < sum(best):
        best = times
print(f"add={best[0] * 1000:.3f} apply={best[1] * 1000:.3f} total={sum(best) * 1000:.3f}")
