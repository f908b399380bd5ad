#!/usr/bin/env bash
# The constant-time check of ML-KEM-768 and X-Wing (CSparkKEM): builds the library with its
# declassification points (SPARK_KEM_CTGRIND) at -O1, -O2 and -O3, and runs scripts/kem-ct/ctgrind.c
# under valgrind with every secret undefined; any branch or address that depends on one fails.
# Needs gcc, valgrind and the OpenSSL and libsodium headers (scripts/bootstrap.sh installs them,
# .ci/run installs valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "check-kem-ct: valgrind is not installed" >&2; exit 1; }
[ -f /usr/include/valgrind/memcheck.h ] || { echo "check-kem-ct: valgrind's headers are missing" >&2; exit 1; }
compiler="${CC:-$(command -v gcc || command -v clang || command -v cc)}"
# Valgrind sees branches and addresses, not the time an instruction takes: a division's time
# depends on its operands (KyberSlash), so none may be by q, whatever it divides.
if grep -nE '[/%][[:space:]]*(Q|3329)\b' Sources/CSparkKEM/*.c; then
    echo "check-kem-ct: a division or remainder by q (above): multiply by ceil(2^s/q) and shift instead" >&2
    exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for level in 1 2 3; do
    "$compiler" -O"$level" -g -std=c11 -Wall -Wextra -Werror -DSPARK_KEM_CTGRIND \
        -ISources/CSparkKEM/include -ISources/CSparkKEM \
        scripts/kem-ct/ctgrind.c Sources/CSparkKEM/*.c -lcrypto -lsodium -o "$work/ctgrind-O$level"
    echo "check-kem-ct: -O$level"
    valgrind --quiet --error-exitcode=1 --track-origins=yes \
        --suppressions=scripts/kem-ct/libsodium.supp "$work/ctgrind-O$level" 3
done
