#!/usr/bin/env bash
# Builds a consumer package outside the repository that depends on SparkSDK by path and uses it
# with `import SparkSDK` alone, in Swift 6 mode with MemberImportVisibility, warnings as errors:
# proof that one product and one import give an app everything the guide uses.
set -euo pipefail
repository=$(cd "$(dirname "$0")/.." && pwd)
consumer=$(mktemp -d /tmp/sparksdk-consumer.XXXXXX)
trap 'rm -rf "$consumer"' EXIT
mkdir -p "$consumer/Sources/Consumer"
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
        )
    ],
    swiftLanguageModes: [.v6]
)
SWIFT
# The guide's app, whole: it uses every piece the guide shows.
cp "$repository/Examples/ChatApp/main.swift" "$consumer/Sources/Consumer/main.swift"
swift build --package-path "$consumer" -Xswiftc -warnings-as-errors
"$consumer/.build/debug/Consumer" "$consumer/run" | tail -n 1 | grep -qx done
echo "check-consumer: a package outside the repository builds and runs the guide's app with import SparkSDK alone"
