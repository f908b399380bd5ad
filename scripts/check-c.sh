#!/usr/bin/env bash
# The C and Python APIs as an app uses them: installs the C library into a scratch prefix
# (scripts/install.sh), builds Examples/c-chat and Examples/c-echo-bot with cc and pkg-config,
# runs c-chat (alice and bob in C, rich messaging included) and c-chat under valgrind (no invalid access, no leak of what
# the API hands out), runs the echo bot against a Swift quick start on the same domain, and runs
# the Python package's tests (pip install ./python in a venv, pytest).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind gcc libc6-dev >/dev/null
fi

work="$(mktemp -d /tmp/spark-c.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# The release build, as users install it (a release build keeps only public `@_cdecl`
# functions: checking the debug library once hid a library that exported none of them).
bash scripts/install.sh "$work/prefix" >/dev/null
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"

# Every function the header declares is in the library.
declared="$(grep -oE '\bspark_[a-z_]+\(' "$work/prefix/include/spark/spark.h" | tr -d '(' | sort -u)"
exported="$(nm -D --defined-only "$work/prefix/lib/libsparksdk.so" | awk '{ print $3 }' | sort -u)"
missing="$(comm -23 <(echo "$declared") <(echo "$exported"))"
[ -z "$missing" ] || { echo "check-c: spark.h declares what libsparksdk.so lacks: $missing" >&2; exit 1; }

echo "check-c: building the examples with cc $(pkg-config --cflags --libs sparksdk)"
cc -std=c11 -Wall -Wextra -Werror Examples/c-chat/chat.c $(pkg-config --cflags --libs sparksdk) -o "$work/c-chat"
cc -std=c11 -Wall -Wextra -Werror Examples/c-echo-bot/echo_bot.c $(pkg-config --cflags --libs sparksdk) -o "$work/echo-bot"

plist() {
    cat > "$1/ConfigSettings.plist" <<PLIST
<?xml version="1.0" encoding="UTF-8"?>
<plist version="1.0"><dict>
  <key>authProvider</key><string>testAuth</string>
  <key>testAuth</key><dict><key>domain</key><string>c-check</string><key>environment</key><string>sandbox</string></dict>
  <key>embeddedDomainPath</key><string>domain.sqlite</string>
</dict></plist>
PLIST
}

echo "check-c: c-chat"
mkdir -p "$work/chat" && plist "$work/chat"
"$work/c-chat" "$work/chat/ConfigSettings.plist" "$work/chat" | tee "$work/chat.out"
grep -q "^bob got: 12:30 at the usual place? from alice$" "$work/chat.out"
grep -q "^alice's message is read$" "$work/chat.out"
grep -q "^bob has 1 chat(s): .*, post-quantum$" "$work/chat.out"
grep -q "^alice's message has 👍 from bob$" "$work/chat.out"
grep -q "^bob found: 12:30 at the \[usual\] \[place\]?$" "$work/chat.out"
grep -q "^bob's short prefix: .*a prefix search needs at least 3 letters" "$work/chat.out"
grep -q "^bob's copy is the same file$" "$work/chat.out"
grep -q "^bob sees the file recalled$" "$work/chat.out"
grep -q "^alice sees bob typing$" "$work/chat.out"
grep -q '^bob got the live event cursor {"x": 3} from alice$' "$work/chat.out"
grep -q "^bob got the queued messages in order: yes$" "$work/chat.out"
grep -q "^bob got the batch in order: yes$" "$work/chat.out"
grep -q "^bob blocked 1 user(s): alice$" "$work/chat.out"
grep -q "^done$" "$work/chat.out"

echo "check-c: c-chat under valgrind (run again on its devices: signed in, set up)"
valgrind --quiet --error-exitcode=3 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite \
    --suppressions=scripts/valgrind-swift.supp "$work/c-chat" "$work/chat/ConfigSettings.plist" "$work/chat" >/dev/null

echo "check-c: the echo bot answers a Swift quick start"
mkdir -p "$work/echo" && plist "$work/echo"
swift build --product quickstart >/dev/null
quickstart=".build/debug/quickstart"
printf 'bob\nbob-passcode-1\nbob-passcode-1\nquit\n' |
    "$quickstart" --config "$work/echo/ConfigSettings.plist" --data-dir "$work/echo/bob" >/dev/null
# A bot (the command after the first two arguments) answers bob's message, sent from his quick
# start to a new chat with it; bob's shell then shows the answer.
answers() {
    local user="$1" text="$2"
    shift 2
    "$@" > "$work/$user.out" &
    local pid=$!
    for _ in $(seq 1 300); do grep -q "is listening" "$work/$user.out" 2>/dev/null && break; sleep 0.1; done
    printf 'start %s\nsend %s\nquit\n' "$user" "$text" |
        "$quickstart" --config "$work/echo/ConfigSettings.plist" --data-dir "$work/echo/bob" >/dev/null
    wait "$pid"
    grep -q "answered bob" "$work/$user.out"
    printf 'chats\nopen 1\nmessages\nquit\n' |
        "$quickstart" --config "$work/echo/ConfigSettings.plist" --data-dir "$work/echo/bob" > "$work/bob-$user.out"
    grep -q "$user: echo: $text" "$work/bob-$user.out" || { cat "$work/bob-$user.out"; exit 1; }
}
answers echo-bot "hello bot" "$work/echo-bot" "$work/echo/ConfigSettings.plist" "$work/echo/bot" echo-bot 1

echo "check-c: the Python package"
# The OpenID test drives the provider and Chromium with the system's Python (bootstrap.sh
# installed selenium there) and trusts the provider through spark-admin.
swift build --product spark-admin >/dev/null
export SPARK_ADMIN="$PWD/.build/debug/spark-admin" SPARK_SYSTEM_PYTHON="$(command -v python3)"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check ./python pytest
export SPARKSDK_LIBRARY="$work/prefix/lib/libsparksdk.so"
"$work/venv/bin/python" -m pytest -q python/tests

echo "check-c: the Python echo bot answers the Swift quick start"
answers py-bot "hello python" \
    "$work/venv/bin/python" python/examples/echo_bot.py "$work/echo/ConfigSettings.plist" "$work/echo/pybot" py-bot 1
echo "check-c: C and Python work"
