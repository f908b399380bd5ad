#!/usr/bin/env bash
# Builds SparkSDK's DocC documentation from the package's symbol graphs (the DocC plugin is an
# outside package, so the toolchain's `docc` is run directly), with warnings as errors: a broken
# link to a renamed symbol fails the build. The result is a static site in .build/docs/site.
#   bash scripts/build-docs.sh && python3 -m http.server -d .build/docs/site 8000
#   then open http://localhost:8000/documentation/sparksdk/
set -euo pipefail
cd "$(dirname "$0")/.."

swift package dump-symbol-graph --minimum-access-level public >/dev/null
graphs=$(swift build --show-bin-path)/../symbolgraph
[ -f "$graphs/SparkSDK.symbols.json" ] || graphs=.build/$(uname -m)-unknown-linux-gnu/symbolgraph
mkdir -p .build/docs
rm -rf .build/docs/graphs .build/docs/site
mkdir .build/docs/graphs
# Only SparkSDK's own graphs: the catalog documents that module.
cp "$graphs"/SparkSDK.symbols.json "$graphs"/SparkSDK@*.symbols.json .build/docs/graphs/ 2>/dev/null || true
[ -f .build/docs/graphs/SparkSDK.symbols.json ] || { echo "build-docs: no symbol graph for SparkSDK in $graphs" >&2; exit 1; }
docc convert Sources/SparkSDK/SparkSDK.docc \
    --additional-symbol-graph-dir .build/docs/graphs \
    --fallback-display-name SparkSDK --fallback-bundle-identifier org.sparksdk.SparkSDK \
    --transform-for-static-hosting --output-path .build/docs/site \
    --warnings-as-errors
echo "build-docs: .build/docs/site (serve it: python3 -m http.server -d .build/docs/site 8000)"
