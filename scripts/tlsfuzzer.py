#!/usr/bin/env python3
"""tlsfuzzer's TLS 1.3 scripts against spark-domaind and against `openssl s_server` with the same
OpenSSL and one RSA certificate, every probe of each (`-n 0`): a probe that fails on the daemon
and passes on the reference fails this check. Probes that fail on both are listed (they are the
suite's or OpenSSL's, not the daemon's). The reference offers the daemon's TLS 1.2 suites
(`-cipher`, read from CSparkHTTPTransport.c's TLS12_CIPHERS): a probe that falls back to TLS 1.2 with a
CBC suite fails on both, by the policy both then have, and what is compared is how each
behaves, not which suites each allows.

usage: python3 scripts/tlsfuzzer.py DAEMON [SCRIPT...]

DAEMON is a built spark-domaind. tlsfuzzer is found at $TLSFUZZER_DIR, or ../shared/tools/tlsfuzzer
beside the checkout, or /work/shared/tools/tlsfuzzer (the workplace's copy: it is not part of the
project); it needs tlslite-ng 0.9.0b2 and ecdsa, installed into a venv of its own here. Missing, the
check fails: it never passes without running.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

SCRIPTS = [
    "record-layer-limits", "keyupdate", "zero-length-data", "record-padding", "zero-content-type",
    "empty-alert", "ccs", "symetric-ciphers", "finished", "conversation", "invalid-ciphers",
    "unencrypted-alert", "multiple-ccs-messages", "connection-abort", "legacy-version",
    "version-negotiation", "hrr", "nociphers", "finished-plaintext",
]

repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_tlsfuzzer():
    for candidate in [os.environ.get("TLSFUZZER_DIR"), os.path.join(repository, "..", "shared", "tools", "tlsfuzzer"),
                      "/work/shared/tools/tlsfuzzer"]:
        if candidate and os.path.isdir(os.path.join(candidate, "tlsfuzzer", "_apps")):
            return os.path.abspath(candidate)
    sys.exit("tlsfuzzer: no copy of tlsfuzzer found (set TLSFUZZER_DIR)")


def venv_python():
    """A venv with tlslite-ng and ecdsa (kept between runs in /tmp, made once)."""
    venv = os.path.join(tempfile.gettempdir(), "spark-tlsfuzzer-venv")
    python = os.path.join(venv, "bin", "python")
    probe = [python, "-c", "import tlslite, ecdsa; assert tlslite.__version__ == '0.9.0b2'"]
    if not os.path.exists(python) or subprocess.run(probe, capture_output=True).returncode != 0:
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "tlslite-ng==0.9.0b2", "ecdsa"], check=True)
    return python


def daemon_tls12_ciphers():
    """The TLS 1.2 suites the daemon sets (CSparkHTTPTransport.c's TLS12_CIPHERS), as OpenSSL's list."""
    source = open(os.path.join(repository, "Sources", "CSparkHTTP", "CSparkHTTPTransport.c")).read()
    match = re.search(r"#define TLS12_CIPHERS((?:[^\n]*\\\n)*[^\n]*)", source)
    if not match:
        sys.exit("tlsfuzzer: TLS12_CIPHERS not found in CSparkHTTPTransport.c")
    ciphers = "".join(re.findall(r'"([^"]*)"', match.group(1)))
    if not ciphers:
        sys.exit("tlsfuzzer: TLS12_CIPHERS is empty")
    return ciphers


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, process, name):
    for _ in range(200):
        if process.poll() is not None:
            sys.exit(f"tlsfuzzer: {name} exited before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"tlsfuzzer: {name} did not listen on {port}")


def run_script(python, tlsfuzzer, script, port):
    """The names of the probes that failed, and the summary line, of one script at one port."""
    module = "tlsfuzzer._apps.test_tls13_" + script.replace("-", "_")
    code = f"import sys; import {module} as m; m.main()"
    done = subprocess.run([python, "-c", code, "-h", "127.0.0.1", "-p", str(port), "-n", "0"],
                          cwd=tlsfuzzer, env=dict(os.environ, PYTHONPATH=tlsfuzzer), capture_output=True, text=True,
                          timeout=900)
    output = done.stdout
    if "Test end" not in output:
        sys.exit(f"tlsfuzzer: {script} did not run to its end on port {port}:\n{output[-3000:]}\n{done.stderr[-3000:]}")
    failed, listing = set(), False
    for line in output.splitlines():
        if line.startswith("FAILED:"):
            listing = True
        elif listing and line.startswith("\t"):
            failed.add(line.strip().strip("'\""))
        elif listing:
            listing = False
    summary = " ".join(m.group(0) for m in re.finditer(r"\b(PASS|FAIL|TOTAL): \d+", output))
    return failed, summary


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    daemon = os.path.abspath(sys.argv[1])
    scripts = sys.argv[2:] or SCRIPTS
    tlsfuzzer = find_tlsfuzzer()
    work = tempfile.mkdtemp(prefix="spark-tlsfuzzer.")
    processes = []
    try:
        python = venv_python()
        key, certificate = os.path.join(work, "key.pem"), os.path.join(work, "cert.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out",
                        certificate, "-days", "2", "-subj", "/CN=localhost"], check=True, capture_output=True)
        reference_port, daemon_port = free_port(), free_port()
        reference = subprocess.Popen(
            ["openssl", "s_server", "-www", "-num_tickets", "0", "-cipher", daemon_tls12_ciphers(), "-key", key,
             "-cert", certificate, "-accept", str(reference_port)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(reference)
        home = os.path.join(work, "domain")
        subprocess.run([daemon, "init", home, "--sandbox"], check=True, capture_output=True)
        served = subprocess.Popen(
            [daemon, "serve", home, "--listen", f"127.0.0.1:{daemon_port}", "--certificate", certificate, "--key", key,
             "--quiet"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(served)
        wait_for(reference_port, reference, "openssl s_server")
        wait_for(daemon_port, served, "spark-domaind")
        daemon_only = []
        # The two servers at once, one script at a time.
        with ThreadPoolExecutor(max_workers=2) as pool:
            for script in scripts:
                ours = pool.submit(run_script, python, tlsfuzzer, script, daemon_port)
                theirs = pool.submit(run_script, python, tlsfuzzer, script, reference_port)
                (ours_failed, ours_summary), (theirs_failed, theirs_summary) = ours.result(), theirs.result()
                only = sorted(ours_failed - theirs_failed)
                print(f"{script}: spark-domaind {ours_summary}; openssl s_server {theirs_summary}"
                      + (f"; failing on both: {len(ours_failed & theirs_failed)}" if ours_failed & theirs_failed else ""))
                for name in only:
                    print(f"  FAILS ON THE DAEMON ONLY: {name}")
                daemon_only += [f"{script}: {name}" for name in only]
        if served.poll() is not None:
            sys.exit("tlsfuzzer: spark-domaind exited during the run")
        if daemon_only:
            sys.exit(f"tlsfuzzer: {len(daemon_only)} probes fail on spark-domaind and pass on openssl s_server")
        print(f"tlsfuzzer: {len(scripts)} scripts, no probe fails on spark-domaind that passes on openssl s_server")
    finally:
        for process in processes:
            process.terminate()
            process.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
