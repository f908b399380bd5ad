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
    python3 scripts/mutants/run.py --lanes 2    two mutants at a time, each lane in a checkout of
                                                its own (the first is this one with --here; the
                                                others are copies, built once): a mutant's time
                                                is mostly its build and link, one core's work
                                                for much of it, so two lanes keep both busy.
                                                With --here, as root, a copy starts on a copy of
                                                the checkout's build, run at the checkout's path
                                                in a mount namespace of its own
"""
import os, queue, re, shutil, signal, subprocess, sys, tempfile, threading, time

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


def linker_toolset(scratch):
    """A SwiftPM toolset that links with the toolchain's lld instead of the system's gold
    (scripts/lld-toolset.sh), or None if the toolchain has none. Only the link commands change
    (SwiftPM passes it as `-ld-path`), so the tests' build is not compiled again; a mutant's build
    links nine products and lld takes about a third of gold's time for each."""
    made = subprocess.run(["bash", os.path.join(root, "scripts", "lld-toolset.sh"), scratch],
                          capture_output=True, text=True)
    return made.stdout.strip() or None


def can_bind_mount():
    """Whether this process may bind a folder over the checkout in a mount namespace of its own
    (as root): tried once, the checkout over itself, so a copy's lane never fails on it."""
    try:
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                               'mount --bind "$0" "$0"', root],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        return False


def at_root(command, copy):
    """`command` run in `copy` seen at the path of the checkout it was copied from, in a mount
    namespace of its own: SwiftPM's build directory names its files by absolute path, so a copy
    of the checkout's build is up to date only at the checkout's path. The copy's lane then starts
    on the tests' build instead of compiling everything again (about four minutes here)."""
    if copy == root or not lanes_share_the_build:
        return command
    # SwiftPM locks a build directory with a file in the temporary directory named after its path
    # (/tmp/_work_main_.build.lock for /work/main/.build), so every lane seen at the checkout's path
    # would wait for the others' builds and tests; each copy gets a lock file of its own there.
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" "$1" && touch "$2" "$3" && mount --bind "$3" "$2" && cd "$1" && shift 3 && exec "$@"',
            copy, root, swiftpm_lock, os.path.join(copy, ".build", "lane.lock")] + command


# The file SwiftPM locks the checkout's build directory with.
swiftpm_lock = os.path.join(tempfile.gettempdir(), os.path.join(root, ".build").replace("/", "_") + ".lock")


# Set in main(): whether the copies run at the checkout's path on a copy of its build.
lanes_share_the_build = False


def run(command, cwd, log, env=None):
    with open(log, "a") as out:
        return subprocess.run(at_root(command, cwd), cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                              env=env or environment).returncode


# Set in main(): every test's identifier (`Module.Suite/test()`), as `swift test list` names them.
test_identifiers = []


def test_modules(mutant):
    """The test modules that hold the tests `mutant` names (its filter matched as `swift test
    --filter` matches it), comma-separated and sorted; "" when none is found (then every module
    is built). A mutant is built with only these (Package.swift reads SPARK_MUTANT_TEST_MODULES):
    every other test module below the mutated one would be type-checked again for nothing each
    time the mutation changes an interface it imports, and then that is most of the build
    (Swift Testing's macros: about 6 s for SparkSDKTests' 288 tests)."""
    try:
        pattern = re.compile(mutant["tests"])
    except re.error:
        return ""
    modules = {identifier.split(".", 1)[0] for identifier in test_identifiers if pattern.search(identifier)}
    # Swift Testing matches a filter against each test's source location too (`Module/File.swift`),
    # which `swift test list` does not print: a filter that names a file needs its module.
    for module, files in test_files.items():
        if any(pattern.search(f"{module}/{file}") for file in files):
            modules.add(module)
    return ",".join(sorted(modules))


# Set in main(): the Swift files of each test module (`Tests/<module>`), by module.
test_files = {}


def mutant_environment(mutant):
    modules = test_modules(mutant)
    return dict(environment, SPARK_MUTANT_TEST_MODULES=modules) if modules else environment


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


def killed_by_tests(command, cwd, log, env):
    """Runs the tests and answers whether they failed. A mutant is killed by its first failure:
    the run stops there (the tests and every process they started are in a session of their
    own) instead of waiting out every other test, some of which wait a minute for what the
    mutant stopped from happening."""
    with open(log, "a") as out:
        tests = subprocess.Popen(at_root(command, cwd), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
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


# Each mutant's build and test times, in seconds (for the line that gives its verdict).
timings = {}

# Set in main(): what every build of a mutant adds to `swift build` (the linker's toolset).
build_options = []


def apply_mutant(copy, log, mutant, active, lane):
    """Builds and tests one mutant in `copy`; its verdict. The mutated file is restored before
    this returns (and by the signal handler, through `active`, if the run is stopped)."""
    path = os.path.join(copy, mutant["file"])
    original = open(path, encoding="utf-8").read()
    if original.count(mutant["pattern"]) < mutant["occurrence"]:
        return f"BROKEN (the pattern is not in {mutant['file']}: the code moved, update mutants.tsv)"
    parts = original.split(mutant["pattern"])
    index = mutant["occurrence"]
    mutated = mutant["pattern"].join(parts[:index]) + mutant["replacement"] + mutant["pattern"].join(parts[index:])
    active[lane] = (path, original)
    open(path, "w", encoding="utf-8").write(mutated)
    try:
        with open(log, "a") as out:
            out.write(f"\n===== {mutant['id']}\n")
        env = mutant_environment(mutant)
        started = time.time()
        if run(["swift", "build", "--build-tests"] + build_options, copy, log, env) != 0:
            # A mutant must compile: one that does not proves nothing about the tests.
            return "BROKEN (does not compile: fix its replacement in mutants.tsv)"
        built = time.time()
        killed = killed_by_tests(["swift", "test", "--skip-build", "--filter", mutant["tests"]], copy, log, env)
        timings[mutant["id"]] = (built - started, time.time() - built)
        return "killed" if killed else "SURVIVED"
    finally:
        open(path, "w", encoding="utf-8").write(original)
        active.pop(lane, None)


def main():
    arguments = sys.argv[1:]
    here = "--here" in arguments
    lanes = 1
    if "--lanes" in arguments:
        at = arguments.index("--lanes")
        lanes = max(1, int(arguments[at + 1]))
        del arguments[at:at + 2]
    wanted = set(argument for argument in arguments if argument != "--here")
    selected = [m for m in mutants() if not wanted or m["id"] in wanted]
    if wanted - {m["id"] for m in selected}:
        sys.exit(f"no such mutant: {sorted(wanted - {m['id'] for m in selected})}")
    lanes = min(lanes, len(selected)) or 1
    scratch = os.environ.get("SPARK_MUTANTS_DIR") or tempfile.mkdtemp(prefix="spark-mutants-")
    if here:
        # Mutating a file with uncommitted changes could lose them: only committed ones. (Other
        # files may have changed: CI's schemathesis run rewrites its cache.)
        files = sorted({m["file"] for m in selected})
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--"] + files, cwd=root,
                                 capture_output=True, text=True).stdout
        if changed.strip():
            sys.exit(f"mutants: --here needs the files it mutates without uncommitted changes:\n{changed}")
    global lanes_share_the_build
    toolset = linker_toolset(scratch)
    if toolset:
        build_options.extend(["--toolset", toolset])
    # With --here the checkout has built the tests: the other lanes copy that build (its debug
    # folder, a few seconds) and run at the checkout's path, where it is up to date.
    triple_debug = os.path.realpath(os.path.join(root, ".build", "debug"))
    lanes_share_the_build = here and lanes > 1 and os.path.isdir(triple_debug) and can_bind_mount()
    copies = []
    for lane in range(lanes):
        if here and lane == 0:
            copies.append(root)
            continue
        copy = os.path.join(scratch, "repo" if lane == 0 else f"repo-{lane}")
        if os.path.exists(copy):
            shutil.rmtree(copy)
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".build", ".git"), symlinks=True)
        if lanes_share_the_build:
            build = os.path.join(root, ".build")
            os.makedirs(os.path.join(copy, ".build"))
            names = [os.path.relpath(triple_debug, build), "debug", "build.db", "debug.yaml",
                     "workspace-state.json", "plugin-tools.yaml"]
            present = [name for name in names if os.path.lexists(os.path.join(build, name))]
            # cp -a keeps the times the build's records compare against (copytree would too,
            # but not as fast for 600 MB).
            subprocess.run(["cp", "-a", "--parents"] + present + [os.path.join(copy, ".build")],
                           cwd=build, check=True)
        copies.append(copy)
    logs = [os.path.join(scratch, "mutants.log" if lane == 0 else f"mutants-{lane}.log") for lane in range(lanes)]
    print(f"mutants: {len(selected)} in {lanes} lane(s): {', '.join(copies)}; logs in {scratch}"
          + ("; the copies run on a copy of the checkout's build" if lanes_share_the_build else "")
          + (f"; linked by {toolset}" if toolset else ""), flush=True)

    # Every test's identifier, from lane 0's build of the unmutated checkout, to find the test
    # modules each mutant needs; the mutants are taken in groups that need the same ones, so a
    # lane builds the test modules it left out again only when the group changes.
    global test_identifiers
    if run(["swift", "build", "--build-tests"] + build_options, copies[0], logs[0]) == 0:
        listing = subprocess.run(at_root(["swift", "test", "--skip-build", "list"], copies[0]), cwd=copies[0],
                                 capture_output=True, text=True, env=environment)
        if listing.returncode == 0:
            test_identifiers = [line.strip() for line in listing.stdout.splitlines() if "." in line.strip()]
    if lanes_share_the_build and not os.path.exists(swiftpm_lock):
        print(f"mutants: SwiftPM's lock is not {swiftpm_lock} (a SwiftPM that names it otherwise?): the lanes may"
              " wait for each other's builds and tests", flush=True)
    for module in {identifier.split(".", 1)[0] for identifier in test_identifiers}:
        folder = os.path.join(root, "Tests", module)
        test_files[module] = [name for _, _, names in os.walk(folder) for name in names if name.endswith(".swift")]
    work = queue.Queue()
    for mutant in sorted(selected, key=test_modules):
        work.put(mutant)
    verdicts = {}
    active = {}
    printing = threading.Lock()
    failures = []

    def lane_loop(lane):
        # Each lane builds its checkout unmutated first (nothing to do on CI's own checkout and
        # on a copy of its build; everything in a copy from nothing), then takes mutants until
        # none is left.
        if run(["swift", "build", "--build-tests"] + build_options, copies[lane], logs[lane]) != 0:
            if lane == 0:
                failures.append(f"the unmutated checkout does not build; see {logs[lane]}")
            else:
                # A copy that cannot build (a full disk, say) leaves its mutants to the others.
                with printing:
                    print(f"mutants: lane {lane} could not build its copy (see {logs[lane]}); the others go on", flush=True)
            return
        while not failures:
            try:
                mutant = work.get_nowait()
            except queue.Empty:
                return
            start = time.time()
            verdict = apply_mutant(copies[lane], logs[lane], mutant, active, lane)
            verdicts[mutant["id"]] = verdict
            with printing:
                build, tests = timings.get(mutant["id"], (0, 0))
                print(f"mutants: {mutant['id']}: {verdict} by {mutant['tests']} in {test_modules(mutant) or 'every test module'}"
                      f" ({time.time() - start:.0f} s: build {build:.0f}, tests {tests:.0f})", flush=True)

    def stop(number, frame):
        # A stop (SIGTERM, as CI's timeout sends) restores every mutated file first.
        for path, original in list(active.values()):
            open(path, "w", encoding="utf-8").write(original)
        print(f"mutants: stopped by signal {number}", flush=True)
        os._exit(1)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threads = [threading.Thread(target=lane_loop, args=(lane,), daemon=True) for lane in range(lanes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(timeout=1)
    if failures:
        sys.exit("mutants: " + "; ".join(failures))
    missing = [m["id"] for m in selected if m["id"] not in verdicts]
    if missing:
        sys.exit(f"mutants: {len(missing)} never ran: {', '.join(missing)}")
    survivors = [m["id"] for m in selected if verdicts[m["id"]] != "killed"]
    if survivors:
        print(f"mutants: {len(survivors)} of {len(selected)} survived: {', '.join(survivors)}")
        sys.exit(1)
    print(f"mutants: all {len(selected)} killed")


if __name__ == "__main__":
    main()
