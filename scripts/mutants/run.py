#!/usr/bin/env python3
"""Mutation testing of the security checks: applies each mutation of mutants.tsv, one at a time,
in a scratch copy of the repository, builds it, and runs the tests named for it. A mutant the
tests do not notice (they still pass) "survives": the script prints it and exits 1.

    python3 scripts/mutants/run.py              every mutant
    python3 scripts/mutants/run.py token-typ    only these
    python3 scripts/mutants/run.py --here       in this checkout, not a copy (what CI does: its
                                                clean clone has built and tested already, so only
                                                what each mutant changes is built again; the
                                                files it mutates must have no uncommitted
                                                changes, and each is restored after its mutant)
"""
import os, re, shutil, signal, subprocess, sys, tempfile, time

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
table = os.path.join(root, "scripts", "mutants", "mutants.tsv")


def mutants():
    for line in open(table, encoding="utf-8"):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.rstrip("\n").split("\t")
        if len(fields) != 6:
            sys.exit(f"mutants.tsv: a line needs 6 tab-separated fields: {line!r}")
        yield dict(id=fields[0], file=fields[1], pattern=fields[2], replacement=fields[3],
                   occurrence=int(fields[4]), tests=fields[5])


# The vectors are in the repository (Tests/Vectors), so the scratch copy has them too. A test waits
# at most 10 s for what should come at once (SparkTestSupport's patience(_:)): a mutant that stops
# it is killed in seconds, not a minute.
environment = dict(os.environ, SPARK_TEST_PATIENCE="10")


def run(command, cwd, log):
    with open(log, "a") as out:
        return subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=environment).returncode


# The first failure a test reports, as Swift Testing and XCTest print it the moment it happens.
first_failure = re.compile(r"^✘ Test .* recorded an issue|^\S+:\d+: error: -\[")


def kill_session(session):
    """Kills every process of `session`. `swift test` runs the test binary in a process group of
    its own, and the daemons and peers the tests spawn join that group, so killing the group of
    `swift test` alone would leave them running; the session holds them all."""
    for _ in range(5):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == session:
                found = True
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass
        if not found:
            return
        time.sleep(0.1)


def killed_by_tests(command, cwd, log):
    """Runs the tests and answers whether they failed. A mutant is killed by its first failure:
    the run stops there (the tests and every process they started are in a session of their
    own) instead of waiting out every other test, some of which wait a minute for what the
    mutant stopped from happening."""
    with open(log, "a") as out:
        tests = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environment,
                                 start_new_session=True, text=True, errors="replace")
        try:
            for line in tests.stdout:
                out.write(line)
                if first_failure.search(line):
                    out.write("mutants: the first failure kills the mutant; the run is stopped here\n")
                    return True
            return tests.wait() != 0
        finally:
            kill_session(tests.pid)
            tests.wait()


def main():
    arguments = sys.argv[1:]
    here = "--here" in arguments
    wanted = set(argument for argument in arguments if argument != "--here")
    selected = [m for m in mutants() if not wanted or m["id"] in wanted]
    if wanted - {m["id"] for m in selected}:
        sys.exit(f"no such mutant: {sorted(wanted - {m['id'] for m in selected})}")
    scratch = os.environ.get("SPARK_MUTANTS_DIR") or tempfile.mkdtemp(prefix="spark-mutants-")
    log = os.path.join(scratch, "mutants.log")
    if here:
        # Mutating a file with uncommitted changes could lose them: only committed ones. (Other
        # files may have changed: CI's schemathesis run rewrites its cache.)
        files = sorted({m["file"] for m in selected})
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--"] + files, cwd=root,
                                 capture_output=True, text=True).stdout
        if changed.strip():
            sys.exit(f"mutants: --here needs the files it mutates without uncommitted changes:\n{changed}")
        copy = root
        print(f"mutants: in this checkout, log in {log}")
    else:
        copy = os.path.join(scratch, "repo")
        if os.path.exists(copy):
            shutil.rmtree(copy)
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".build", ".git"), symlinks=True)
        print(f"mutants: scratch copy in {copy}, log in {log}")
    if run(["swift", "build", "--build-tests"], copy, log) != 0:
        sys.exit("mutants: the unmutated copy does not build; see the log")
    # A stop (SIGTERM, as CI's timeout sends) still restores the mutated file (the finally below).
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(f"mutants: stopped by signal {number}"))
    survivors = []
    for mutant in selected:
        path = os.path.join(copy, mutant["file"])
        original = open(path, encoding="utf-8").read()
        if original.count(mutant["pattern"]) < mutant["occurrence"]:
            sys.exit(f"mutants: {mutant['id']}: the pattern is not in {mutant['file']} (the code moved: update mutants.tsv)")
        parts = original.split(mutant["pattern"])
        index = mutant["occurrence"]
        mutated = mutant["pattern"].join(parts[:index]) + mutant["replacement"] + mutant["pattern"].join(parts[index:])
        open(path, "w", encoding="utf-8").write(mutated)
        start = time.time()
        try:
            with open(log, "a") as out:
                out.write(f"\n===== {mutant['id']}\n")
            if run(["swift", "build", "--build-tests"], copy, log) != 0:
                # A mutant must compile: one that does not proves nothing about the tests.
                verdict = "BROKEN (does not compile: fix its replacement in mutants.tsv)"
                survivors.append(mutant["id"])
            elif killed_by_tests(["swift", "test", "--skip-build", "--filter", mutant["tests"]], copy, log):
                verdict = "killed"
            else:
                verdict = "SURVIVED"
                survivors.append(mutant["id"])
        finally:
            open(path, "w", encoding="utf-8").write(original)
        print(f"mutants: {mutant['id']}: {verdict} by {mutant['tests']} ({time.time() - start:.0f} s)", flush=True)
    if survivors:
        print(f"mutants: {len(survivors)} of {len(selected)} survived: {', '.join(survivors)}")
        sys.exit(1)
    print(f"mutants: all {len(selected)} killed")


if __name__ == "__main__":
    main()
