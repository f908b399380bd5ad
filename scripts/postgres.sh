#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: `start DIR` runs initdb into DIR (as the
# postgres user when run as root), serves it on a Unix socket in DIR/socket on a port of its own
# (no TCP), and prints the connection string the tests read from SPARK_TEST_POSTGRES; `stop DIR`
# stops it and removes DIR. Fails loudly when it cannot start: no PostgreSQL test is skipped.
set -euo pipefail
command="${1:?usage: postgres.sh start|stop DIR}"
dir="${2:?usage: postgres.sh start|stop DIR}"
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
[ -x "$bin/initdb" ] || { echo "postgres.sh: PostgreSQL is not installed (run scripts/bootstrap.sh)" >&2; exit 1; }
as_server() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "$command" in
start)
    rm -rf "$dir"
    mkdir -p "$dir/socket"
    chmod 777 "$dir" "$dir/socket"
    as_server "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 >"$dir/initdb.log"
    port=$((20000 + RANDOM % 40000))
    as_server sh -c "cat >> '$dir/data/postgresql.auto.conf'" <<CONF
listen_addresses = ''
unix_socket_directories = '$dir/socket'
port = $port
fsync = off
full_page_writes = off
max_connections = 300
shared_buffers = 128MB
CONF
    # The server would inherit any descriptor the caller left open (a pipe it reads to its end)
    # and hold it for its life: close all but 0-2 (and 255, bash's own copy of this script).
    for fd in /proc/$$/fd/*; do
        fd="${fd##*/}"
        if [ "$fd" -gt 2 ] && [ "$fd" -ne 255 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w start >/dev/null 2>&1 </dev/null
    echo "host=$dir/socket port=$port user=postgres dbname=postgres"
    ;;
stop)
    [ -d "$dir/data" ] && as_server "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    rm -rf "$dir"
    ;;
*)
    echo "usage: postgres.sh start|stop DIR" >&2
    exit 64
    ;;
esac
