"""Two users chat through the Python package: setup, a chat, a message, events, a read receipt."""

import asyncio
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
        assert [m.content for m in bob.messages(chat_id)] == ["12:30?"]
        assert alice.safety_number("bob") == bob.safety_number("alice")


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


def test_errors_carry_the_status(directory):
    with device(directory, "alice") as alice:
        with pytest.raises(sparksdk.SparkError) as refused:
            alice.send("no-such-chat", "hello")
        assert refused.value.status == sparksdk.Status.NOT_FOUND
        with pytest.raises(sparksdk.SparkError) as missing:
            sparksdk.Client(os.path.join(directory, "missing.plist"))
        assert missing.value.status == sparksdk.Status.CONFIG
