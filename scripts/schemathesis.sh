#!/usr/bin/env bash
# Fuzzes spark-domaind from its own OpenAPI document with schemathesis (PyPI), bounded: every
# operation gets generated valid and invalid requests, and the run fails on any 5xx or any
# response that does not match the document. The daemon serves plain HTTP on loopback here so
# the fuzzer needs no CA; TLS is covered by the Swift tests.
#
#   scripts/schemathesis.sh [--max-examples N] [--binary PATH]
set -euo pipefail
cd "$(dirname "$0")/.."

examples=25
binary=.build/debug/spark-domaind
while [ $# -gt 0 ]; do
    case "$1" in
        --max-examples) examples="$2"; shift 2 ;;
        --binary) binary="$2"; shift 2 ;;
        *) echo "usage: scripts/schemathesis.sh [--max-examples N] [--binary PATH]" >&2; exit 64 ;;
    esac
done

venv=.build/schemathesis-venv
if [ ! -x "$venv/bin/st" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check schemathesis
fi
[ -x "$binary" ] || swift build --product spark-domaind

work=$(mktemp -d)
trap 'kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; rm -rf "$work"' EXIT
"$binary" init "$work/domain" --domain fuzz --sandbox >/dev/null
"$binary" serve "$work/domain" --plain --listen 127.0.0.1:0 >"$work/out" 2>"$work/log" &
daemon=$!
for _ in $(seq 100); do grep -q "listening on" "$work/out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^listening on //p' "$work/out")
[ -n "$url" ] || { echo "schemathesis: the daemon did not start"; cat "$work/log"; exit 1; }

# A registered user, so the fuzzer gets past authentication to the operations themselves.
token=$(curl -sf "$url/v1/test-tokens" -H 'Content-Type: application/json' -d '{"userID":"fuzzer"}' \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
curl -sf "$url/v1/endpoints/register" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d '{"endpointID":"fuzz-1","description":"schemathesis","nickname":"","takeOver":false}' >/dev/null

status=0
echo "schemathesis: fuzzing $url with $examples examples per operation"
"$venv/bin/st" run "$url/v1/openapi.json" --url "$url" \
    --checks not_a_server_error,response_schema_conformance,content_type_conformance \
    --max-examples "$examples" --workers 2 --seed 1 --no-shrink \
    -H "Authorization: Bearer $token" -H "Spark-Endpoint: fuzz-1" --warnings off || status=$?
if grep -q '"status":5' "$work/log"; then
    echo "schemathesis: the daemon logged a 5xx"; grep '"status":5' "$work/log" | head; exit 1
fi
exit "$status"
