#!/usr/bin/env bash
# Installs the C library: libsparksdk.so, its header spark/spark.h, a sparksdk.pc for
# pkg-config, and the Swift runtime libraries the library links (in PREFIX/lib/sparksdk, found
# through the library's rpath, so an app needs no Swift toolchain at run time). Then
#
#   cc app.c $(pkg-config --cflags --libs sparksdk)
#
# builds an app (with PKG_CONFIG_PATH=PREFIX/lib/pkgconfig unless PREFIX is /usr or /usr/local).
#
#   bash scripts/install.sh [PREFIX]      (default /usr/local; run as root for a system prefix)
#
# SPARKSDK_CONFIGURATION=debug installs the debug build instead of the release one (CI's check
# of the C API does, to reuse the build its tests made).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${1:-/usr/local}"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"

bash scripts/bootstrap.sh
if ! command -v patchelf >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq patchelf >/dev/null
fi

configuration="${SPARKSDK_CONFIGURATION:-release}"
swift build -c "$configuration" --product sparksdk
library=".build/$configuration/libsparksdk.so"
toolchain="$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")"

install -d "$prefix/lib/sparksdk" "$prefix/include/spark" "$prefix/lib/pkgconfig"
install -m 0644 Sources/CSparkAPI/include/spark/spark.h "$prefix/include/spark/spark.h"
install -m 0755 "$library" "$prefix/lib/libsparksdk.so"
# No debug sections (half the size; and valgrind 3.19 cannot read the toolchain's DWARF 5).
strip --strip-debug "$prefix/lib/libsparksdk.so"
# The toolchain's libraries the library loads (the Swift runtime, Foundation, Dispatch, ICU):
# copied beside it, each finding the others in its own directory.
ldd "$library" | awk '/=> \// { print $3 }' | while read -r dependency; do
    case "$dependency" in
    "$toolchain"/*)
        install -m 0755 "$dependency" "$prefix/lib/sparksdk/"
        patchelf --set-rpath '$ORIGIN' "$prefix/lib/sparksdk/$(basename "$dependency")"
        ;;
    esac
done
patchelf --set-rpath '$ORIGIN/sparksdk' "$prefix/lib/libsparksdk.so"

cat > "$prefix/lib/pkgconfig/sparksdk.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: sparksdk
Description: Spark SDK: end-to-end encrypted chat for Linux apps (C API)
Version: 1.0.0
Libs: -L\${libdir} -lsparksdk -Wl,-rpath,\${libdir}
Cflags: -I\${includedir}
PC

echo "install: libsparksdk.so, spark/spark.h and sparksdk.pc in $prefix"
