#!/usr/bin/env bash
# Installs what SparkSDK needs on a Debian machine that already has the Swift toolchain:
# the C libraries it links (OpenSSL 3, SQLite 3, libcurl for
# the domain client, libpq for spark-domaind on PostgreSQL), PostgreSQL itself (the tests start
# throwaway clusters of it), the openssl CLI the benchmark and tests use, curl and python3-venv for
# the schemathesis run, valgrind and gcc for the constant-time check of ML-KEM
# (scripts/check-kem-ct.sh), iproute2 for the two-host test's network namespaces, haproxy for the
# PROXY protocol test, a Secret Service for the tests (GNOME Keyring, D-Bus, libsecret: SparkSDK loads
# libsecret at run time and works without it), and the Python peers the interop tests talk
# to, and a real OpenID provider for the sign-in tests (Glewlwyd, with rnbyc for its keys and
# sqlite3 for its database) with headless Chromium and its driver to play the person at its
# pages. Safe to run again; run as root.
set -euo pipefail

# gnome-keyring, dbus and libsecret: a Secret Service for the test of the store key's keyring.
packages=(libssl-dev libsodium-dev libsqlite3-dev libcurl4-openssl-dev libpq-dev postgresql postgresql-client openssl curl
    pkg-config iproute2 python3-venv haproxy valgrind gcc libc6-dev
    gnome-keyring dbus libsecret-1-0)
python_modules=(cryptography jwcrypto jwt vodozemac voprf pyhpke selenium)
python_packages=("cryptography>=47" jwcrypto pyjwt vodozemac voprf pyhpke selenium)

missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
command -v python3 >/dev/null 2>&1 || missing+=(python3 python3-pip)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "bootstrap: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The OpenID provider: without the debconf answer the package's postinst fails on a config file
# it never wrote; without --no-install-recommends it pulls a MariaDB client and a system database.
provider_packages=(glewlwyd rnbyc dbconfig-no-thanks sqlite3 chromium chromium-driver)
provider_missing=()
for package in "${provider_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || provider_missing+=("$package")
done
if [ "${#provider_missing[@]}" -gt 0 ]; then
    echo "bootstrap: installing ${provider_missing[*]}"
    [ "${#missing[@]}" -gt 0 ] || apt-get update -qq
    echo "glewlwyd glewlwyd/config_type select No configuration" | debconf-set-selections
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${provider_missing[@]}" >/dev/null
fi

need_pip=0
for module in "${python_modules[@]}"; do
    python3 -c "import $module" 2>/dev/null || need_pip=1
done
# ML-KEM and HPKE with X-Wing came in cryptography 47 (its wheel carries OpenSSL with them).
python3 -c "from cryptography.hazmat.primitives import hpke; hpke.KEM.MLKEM768_X25519" 2>/dev/null || need_pip=1
if [ "$need_pip" -eq 1 ]; then
    echo "bootstrap: installing Python packages ${python_packages[*]}"
    python3 -m pip --version >/dev/null 2>&1 || { apt-get update -qq; apt-get install -y -qq python3-pip >/dev/null; }
    # Debian's own python3 refuses pip installs outside a venv (PEP 668) unless told otherwise.
    python3 -m pip install --quiet --disable-pip-version-check "${python_packages[@]}" 2>/dev/null \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "${python_packages[@]}"
fi
echo "bootstrap: ready"
