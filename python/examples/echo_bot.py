"""The echo bot in Python: answers every message with "echo: " and its text.

    python3 echo_bot.py ConfigSettings.plist DATA_DIRECTORY USER_ID MAX     (MAX 0: forever)
"""

import sys

import sparksdk


def main(config: str, directory: str, user: str, maximum: int) -> int:
    with sparksdk.Client(config, directory) as client:
        if not client.is_set_up:
            client.sign_in_test(user)
            client.complete_setup(passcode=f"{user}-passcode-2026")
        print(f"py-echo-bot: {user} is listening", flush=True)
        answered = 0
        for event in client.events():
            if event.kind != sparksdk.EventKind.MESSAGE:
                continue
            client.send(event.chat_id, "echo: " + event.message.content)
            client.mark_read(event.chat_id)
            answered += 1
            print(f"py-echo-bot: answered {event.message.sender}", flush=True)
            if maximum and answered >= maximum:
                break
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        sys.exit(64)
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
