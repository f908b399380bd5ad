#!/usr/bin/env bash
# Runs spark-bench with what its rows compare against installed first: what bootstrap.sh installs
# (the C libraries, PostgreSQL with pgbench, openssl, the Python peers), and wrk and nginx
# (the domaind-request and oprf-evaluate rows; nginx is the HTTP ceiling). Synapse, the peer of
# the synapse-* rows, is set up by the bench itself in .build/synapse-venv on first use. Builds
# spark-bench, spark-domaind and spark-load in release (the remote rows run the daemon, and
# org-load-10k runs spark-load, beside the bench), and installs the release C library into
# .build/sparksdk-install (the c-api-send-receive row builds its C program against it).
# Run as root on Debian; give it a quiet machine. Arguments go to spark-bench.
#
#   bash scripts/bench.sh                      every row
#   bash scripts/bench.sh --filter message     only the rows whose name contains "message"
#   bash scripts/bench.sh --json bench.json    also write the results as JSON
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh
references=(wrk nginx curl)
missing=()
for package in "${references[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "bench: installing ${missing[*]}"
    apt-get update -qq
    # The bench runs nginx itself, in the foreground on a port of its own; the package's service
    # is not needed.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v wrk >/dev/null || { echo "bench: wrk did not install" >&2; exit 1; }

swift build -c release --product spark-domaind >/dev/null
swift build -c release --product spark-load >/dev/null
swift build -c release --product spark-bench >/dev/null
# The release C library as an app gets it, for the c-api-send-receive row.
bash scripts/install.sh .build/sparksdk-install >/dev/null
exec .build/release/spark-bench "$@"
