#!/usr/bin/env bash
# Builds a consumer package outside the repository that depends on SparkSDK by path and uses it
# with `import SparkSDK` alone, in Swift 6 mode with MemberImportVisibility, warnings as errors:
# proof that one product and one import give an app everything the guide uses. A second target
# of the same package names the domain's engine (its rules, SQL, stores, wire coder) through
# `import SparkSDK` and must fail to build, each name unknown: an app gets the contract only.
set -euo pipefail
repository=$(cd "$(dirname "$0")/.." && pwd)
consumer=$(mktemp -d /tmp/sparksdk-consumer.XXXXXX)
trap 'rm -rf "$consumer"' EXIT
mkdir -p "$consumer/Sources/Consumer" "$consumer/Sources/EngineUser"
# A path dependency's identity is its folder's name.
identity=$(basename "$repository" | tr '[:upper:]' '[:lower:]')
cat > "$consumer/Package.swift" <<SWIFT
// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Consumer",
    dependencies: [.package(path: "$repository")],
    targets: [
        .executableTarget(
            name: "Consumer",
            dependencies: [.product(name: "SparkSDK", package: "$identity")],
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility"), .enableUpcomingFeature("ExistentialAny")]
        ),
        .executableTarget(
            name: "EngineUser",
            dependencies: [.product(name: "SparkSDK", package: "$identity")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
SWIFT
# The guide's app, whole: it uses every piece the guide shows.
cp "$repository/Examples/ChatApp/main.swift" "$consumer/Sources/Consumer/main.swift"
swift build --package-path "$consumer" --product Consumer -Xswiftc -warnings-as-errors
"$consumer/.build/debug/Consumer" "$consumer/run" | tail -n 1 | grep -qx done
# The engine's types, each of which an app must not reach: not through import SparkSDK, and not
# with the engine's module imported by name (SwiftPM finds it; its declarations are at package
# access, so nothing in it is visible outside this repository's package).
engine=(DomainEngine DomainStatements DomainStore SQLiteDomainStore EmbeddedDomain MailboxWaiters WireCoder TokenValidator)
{
    echo "import SparkSDK"
    echo "import SparkDomainEngine"
    for name in "${engine[@]}"; do echo "print($name.self)"; done
} > "$consumer/Sources/EngineUser/main.swift"
if swift build --package-path "$consumer" --target EngineUser > "$consumer/engine.log" 2>&1; then
    echo "check-consumer: a consumer named the domain's engine through import SparkSDK and built" >&2
    exit 1
fi
for name in "${engine[@]}"; do
    if ! grep -q "cannot find '$name' in scope" "$consumer/engine.log"; then
        echo "check-consumer: $name did not fail as unknown:" >&2
        cat "$consumer/engine.log" >&2
        exit 1
    fi
done
echo "check-consumer: a package outside the repository builds and runs the guide's app with import SparkSDK alone, and cannot name the engine (${#engine[@]} types refused)"
