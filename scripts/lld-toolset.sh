#!/usr/bin/env bash
# Prints the path of a SwiftPM toolset that links with the toolchain's own lld (about a third of
# the system gold's time for each of the tests' links), written into the folder given (default
# .build), as an absolute path; prints nothing when the toolchain has no ld.lld. Only link commands change, so a build
# that uses it compiles nothing again: `swift build $(bash scripts/lld-toolset.sh | sed 's/^/--toolset /')`.
set -euo pipefail
cd "$(dirname "$0")/.."
folder="${1:-.build}"
[[ "$folder" = /* ]] || folder="$(pwd)/$folder"
lld="$(dirname "$(readlink -f "$(command -v swift)")")/ld.lld"
[ -x "$lld" ] || exit 0
mkdir -p "$folder"
printf '{"schemaVersion": "1.0", "linker": {"path": "%s"}}\n' "$lld" > "$folder/lld-toolset.json"
echo "$folder/lld-toolset.json"
