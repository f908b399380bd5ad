"""Two users chat through the Python package: setup, a chat, a message, events, a read receipt."""

import asyncio
import itertools
import os
import tempfile

import pytest

import sparksdk

PLIST = """<?xml version="1.0" encoding="UTF-8"?>
<plist version="1.0"><dict>
  <key>authProvider</key><string>testAuth</string>
  <key>testAuth</key><dict><key>domain</key><string>pytest</string><key>environment</key><string>sandbox</string></dict>
  <key>embeddedDomainPath</key><string>domain.sqlite</string>
</dict></plist>
"""


@pytest.fixture()
def directory():
    with tempfile.TemporaryDirectory() as path:
        with open(os.path.join(path, "ConfigSettings.plist"), "w") as plist:
            plist.write(PLIST)
        yield path


def device(directory, user):
    client = sparksdk.Client(os.path.join(directory, "ConfigSettings.plist"), os.path.join(directory, user))
    client.sign_in_test(user)
    client.complete_setup(passcode=f"{user}-passcode-2026")
    assert client.is_set_up
    return client


def test_two_users_chat_and_see_the_receipt(directory):
    with device(directory, "alice") as alice, device(directory, "bob") as bob:
        chat_id = alice.start_chat(["bob"], "Lunch")
        sent = alice.send(chat_id, "12:30?")
        assert sent.number == 1 and sent.content == "12:30?"
        arrived = next(e for e in bob.events(timeout=30) if e.kind == sparksdk.EventKind.MESSAGE)
        assert arrived.message.content == "12:30?" and arrived.message.sender == "alice"
        bob.mark_read(chat_id)
        read = next(e for e in alice.events(timeout=30)
                    if e.kind == sparksdk.EventKind.MESSAGE_STATE and e.state == sparksdk.MessageState.READ)
        assert read.message_id == sent.message_id
        assert [c.subject for c in bob.chats()] == ["Lunch"]
        assert [c.post_quantum for c in bob.chats()] == [True]
        assert [m.content for m in bob.messages(chat_id)] == ["12:30?"]
        assert alice.safety_number("bob") == bob.safety_number("alice")


def test_a_device_without_post_quantum_chats_keeps_its_chats_classic(directory):
    with open(os.path.join(directory, "Classic.plist"), "w") as plist:
        plist.write(PLIST.replace("</dict></plist>", "  <key>postQuantumChats</key><false/>\n</dict></plist>"))
    old = sparksdk.Client(os.path.join(directory, "Classic.plist"), os.path.join(directory, "carol"))
    old.sign_in_test("carol")
    old.complete_setup(passcode="carol-passcode-2026")
    with device(directory, "alice") as alice, device(directory, "bob") as bob, old:
        modern = alice.start_chat(["bob"], "Modern")
        mixed = alice.start_chat(["bob", "carol"], "Mixed")
        assert {c.chat_id: c.post_quantum for c in alice.chats()} == {modern: True, mixed: False}
        alice.send(mixed, "classic for now")
        arrived = next(e for e in old.events(timeout=30) if e.kind == sparksdk.EventKind.MESSAGE)
        assert arrived.message.content == "classic for now"


def test_events_as_an_asyncio_iterator(directory):
    with device(directory, "alice") as alice, device(directory, "bob") as bob:
        chat_id = alice.start_chat(["bob"])

        async def first_message():
            async for event in bob.async_events():
                if event.kind == sparksdk.EventKind.MESSAGE:
                    return event

        alice.send(chat_id, "over asyncio")
        event = asyncio.run(asyncio.wait_for(first_message(), 30))
        assert event.message.content == "over asyncio"


def test_queued_messages_arrive_in_order(directory):
    with device(directory, "alice") as alice, device(directory, "bob") as bob:
        chat_id = alice.start_chat(["bob"])
        queued = [alice.queue(chat_id, f"queued {index}") for index in range(20)]
        assert all(message.content == f"queued {index}" for index, message in enumerate(queued))
        assert queued[-1].state in (sparksdk.MessageState.SENDING, sparksdk.MessageState.SENT)
        incoming = (e.message for e in bob.events(timeout=30) if e.kind == sparksdk.EventKind.MESSAGE)
        arrived = list(itertools.islice(incoming, 20))
        assert [m.content for m in arrived] == [f"queued {index}" for index in range(20)]
        assert [m.number for m in arrived] == list(range(1, 21))
        sent = wait_for(alice, sparksdk.EventKind.MESSAGE_STATE,
                        lambda e: e.message_id == queued[-1].message_id and e.state == sparksdk.MessageState.SENT)
        assert sent.message_id == queued[-1].message_id
        with pytest.raises(sparksdk.SparkError) as refused:
            alice.queue("no-such-chat", "hello")
        assert refused.value.status == sparksdk.Status.NOT_FOUND


def test_messages_queued_at_once_arrive_in_order(directory):
    with device(directory, "alice") as alice, device(directory, "bob") as bob:
        chat_id = alice.start_chat(["bob"])
        texts = [f"batched {index}" for index in range(30)]
        queued = alice.queue_many(chat_id, texts)
        assert [message.content for message in queued] == texts
        assert len({message.message_id for message in queued}) == 30
        incoming = (e.message for e in bob.events(timeout=30) if e.kind == sparksdk.EventKind.MESSAGE)
        arrived = list(itertools.islice(incoming, 30))
        assert [m.content for m in arrived] == texts
        assert [m.message_id for m in arrived] == [m.message_id for m in queued]
        with pytest.raises(sparksdk.SparkError) as too_many:
            alice.queue_many(chat_id, ["x"] * 257)
        assert too_many.value.status == sparksdk.Status.INVALID_ARGUMENT
        # One refused (too large) refuses the call: nothing of it is stored.
        with pytest.raises(sparksdk.SparkError):
            alice.queue_many(chat_id, ["stored?", "x" * 80_000])
        assert "stored?" not in [m.content for m in alice.messages(chat_id)]


def test_errors_carry_the_status(directory):
    with device(directory, "alice") as alice:
        with pytest.raises(sparksdk.SparkError) as refused:
            alice.send("no-such-chat", "hello")
        assert refused.value.status == sparksdk.Status.NOT_FOUND
        with pytest.raises(sparksdk.SparkError) as missing:
            sparksdk.Client(os.path.join(directory, "missing.plist"))
        assert missing.value.status == sparksdk.Status.CONFIG


def wait_for(client, kind, predicate=lambda event: True):
    return next(e for e in client.events(timeout=30) if e.kind == kind and predicate(e))


def test_rich_messaging(directory):
    with device(directory, "alice") as alice, device(directory, "bob") as bob:
        chat_id = alice.start_chat(["bob"], "Files")
        sent = alice.send(chat_id, "react to this")
        wait_for(bob, sparksdk.EventKind.MESSAGE)

        # A reaction, seen by the sender as a changed message.
        bob.react(sent.message_id, "🎉")
        wait_for(alice, sparksdk.EventKind.MESSAGES_CHANGED,
                 lambda e: e.message_id == sent.message_id and alice.message(e.message_id).reactions)
        assert alice.message(sent.message_id).reactions == [sparksdk.Reaction("🎉", ["bob"])]

        # A file, with its progress, saved byte for byte.
        original = os.path.join(directory, "photo.bin")
        with open(original, "wb") as file:
            file.write(os.urandom(300_000))
        steps = []
        with_file = alice.send_file(chat_id, original, "a photo", progress=lambda done, total: steps.append((done, total)))
        assert with_file.attachment == sparksdk.Attachment("photo.bin", "application/octet-stream", 300_000, False)
        assert steps and steps[-1][0] == steps[-1][1]
        wait_for(bob, sparksdk.EventKind.MESSAGE, lambda e: e.message_id == with_file.message_id)
        copy = os.path.join(directory, "copy.bin")
        bob.save_attachment(with_file.message_id, copy)
        with open(original, "rb") as a, open(copy, "rb") as b:
            assert a.read() == b.read()
        assert bob.thumbnail(with_file.message_id) is None

        # A recall takes the content and the file from bob's device.
        alice.recall(with_file.message_id)
        wait_for(bob, sparksdk.EventKind.MESSAGES_CHANGED,
                 lambda e: e.message_id == with_file.message_id and bob.message(e.message_id).is_recalled)
        recalled = bob.message(with_file.message_id)
        assert recalled.is_recalled and recalled.attachment is None and recalled.content == ""

        # Typing and a live event.
        bob.send_typing(chat_id)
        typing = wait_for(alice, sparksdk.EventKind.TYPING)
        assert (typing.user_id, typing.state) == ("bob", 1)
        alice.send_chat_event(chat_id, "cursor", '{"x": 3}')
        live = wait_for(bob, sparksdk.EventKind.CHAT_EVENT)
        assert (live.user_id, live.text, live.data) == ("alice", "cursor", '{"x": 3}')

        # A timer, a report and a block.
        alice.set_disappearing_timer(chat_id, 3600)
        timed = alice.send(chat_id, "gone in an hour")
        assert timed.expires_at_ms > timed.timestamp_ms
        rude = bob.send(chat_id, "something rude")
        wait_for(alice, sparksdk.EventKind.MESSAGE, lambda e: e.message_id == rude.message_id)
        assert alice.report(chat_id, "bob", [rude.message_id], "rude") > 0
        alice.block("bob")
        assert alice.blocked_users() == ["bob"]
        alice.unblock("bob")
        assert alice.blocked_users() == []


def test_rich_messaging_refuses_bad_input(directory):
    with device(directory, "alice") as alice, device(directory, "bob") as bob:
        chat_id = alice.start_chat(["bob"])
        sent = alice.send(chat_id, "mine")
        wait_for(bob, sparksdk.EventKind.MESSAGE)
        with pytest.raises(sparksdk.SparkError):
            bob.recall(sent.message_id)  # only the sender recalls
        with pytest.raises(sparksdk.SparkError) as missing:
            alice.message("no-such-message")
        assert missing.value.status == sparksdk.Status.NOT_FOUND
        with pytest.raises(sparksdk.SparkError):
            alice.send_file(chat_id, os.path.join(directory, "no-such-file"))
        with pytest.raises(sparksdk.SparkError):
            alice.report(chat_id, "bob", [sent.message_id], "not theirs")  # alice's own message
        assert [m.content for m in bob.messages(chat_id)] == ["mine"]


def test_a_client_signed_out_and_in_again_messages_again(directory):
    with device(directory, "alice") as alice, device(directory, "bob") as bob:
        chat_id = alice.start_chat(["bob"])
        alice.send(chat_id, "before")
        alice.sign_out()
        with pytest.raises(sparksdk.SparkError) as stopped:
            alice.send(chat_id, "while signed out")
        assert stopped.value.status == sparksdk.Status.NOT_READY
        alice.sign_in_test("alice")
        alice.complete_setup(passcode="alice-passcode-2026")
        alice.send(chat_id, "after")
        wait_for(bob, sparksdk.EventKind.MESSAGE, lambda e: e.message.content == "after")


def test_search_finds_words_prefixes_and_pages(directory):
    with device(directory, "alice") as alice, device(directory, "bob") as bob:
        chat_id = alice.start_chat(["bob"], "Plans")
        ids = [alice.send(chat_id, text).message_id
               for text in ["Lunch tomorrow?", "lunchtime at the Crème café", "dinner instead", "東京都に行きます"]]
        page = alice.search("lunch")
        assert [r.message_id for r in page.results] == [ids[0]] and page.next is None
        assert page.results[0].snippet == "[Lunch] tomorrow?"
        assert {r.message_id for r in alice.search("lunch*").results} == {ids[0], ids[1]}
        assert [r.message_id for r in alice.search("creme CAFE").results] == [ids[1]]
        assert [r.message_id for r in alice.search("京都").results] == [ids[3]]
        assert alice.search("dinner", sender="bob").results == []
        first = alice.search("lunch*", limit=1)
        second = alice.search("lunch*", limit=1, cursor=first.next)
        assert len(first.results) == 1 and len(second.results) == 1
        assert first.results[0].message_id != second.results[0].message_id
        with pytest.raises(sparksdk.SparkError) as refused:
            alice.search("lu*")
        assert refused.value.status == sparksdk.Status.INVALID_ARGUMENT


def test_transparency_checks_pass_on_an_honest_domain(directory):
    with device(directory, "alice") as alice, device(directory, "bob") as bob:
        alice.start_chat(["bob"], "Keys")
        assert alice.check_transparency() is None
        assert bob.check_transparency() is None
        assert sparksdk.EventKind.TRANSPARENCY == 7


def test_sign_in_through_an_openid_provider(tmp_path):
    """A real OpenID provider (Glewlwyd, started by scripts/openid-provider.py), a device code
    approved on its pages by headless Chromium, then setup: the oidc provider through Python."""
    import json
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = os.path.join(root, "scripts", "openid-provider.py")
    # The provider's script and Chromium's driver run on the system's Python (bootstrap.sh).
    system_python = os.environ.get("SPARK_SYSTEM_PYTHON", "python3")
    state = json.loads(subprocess.run([system_python, script, "start", str(tmp_path / "provider")],
                                      check=True, capture_output=True, text=True).stdout)
    try:
        subprocess.run([system_python, script, "client", str(tmp_path / "provider"), "spark-test"], check=True)
        with open(tmp_path / "ConfigSettings.plist", "w") as plist:
            plist.write(f"""<?xml version="1.0" encoding="UTF-8"?>
<plist version="1.0"><dict>
  <key>authProvider</key><string>oidc</string>
  <key>oidc</key><dict><key>domain</key><string>pyoidc</string><key>environment</key><string>production</string>
    <key>issuer</key><string>{state["issuer"]}</string><key>clientId</key><string>spark-test</string>
    <key>userClaim</key><string>email</string><key>caFile</key><string>{state["ca"]}</string>
    <key>flow</key><string>device</string><key>scopes</key><array><string>openid</string></array></dict>
  <key>embeddedDomainPath</key><string>domain.sqlite</string>
</dict></plist>
""")
        shown = []

        def prompt(url, user_code):
            shown.append((url, user_code))
            subprocess.Popen([system_python, script, "browser-device", url, state["user"], state["password"]],
                             stdout=subprocess.DEVNULL)

        with sparksdk.Client(str(tmp_path / "ConfigSettings.plist"), str(tmp_path / "device")) as client:
            admin = os.environ.get("SPARK_ADMIN", os.path.join(root, ".build", "debug", "spark-admin"))
            subprocess.run([admin, "--domain", str(tmp_path / "domain.sqlite"), "issuer", "add", "--discover",
                            state["issuer"], "--audience", "spark-test", "--user-claim", "email", "--ca", state["ca"]],
                           check=True, capture_output=True)
            client.sign_in_oidc(prompt)
            assert len(shown) == 1 and shown[0][0].startswith(state["issuer"]) and shown[0][1]
            client.complete_setup(passcode="alice-passcode-2026")
            assert client.is_set_up
    finally:
        subprocess.run([system_python, script, "stop", str(tmp_path / "provider")])
