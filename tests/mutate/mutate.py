#!/usr/bin/env python3
"""mutate.py - mutation testing of the suite (`make mutate`; not part of `make test`).

    tests/mutate/mutate.py [--list FILE] [--only ID[,ID...]] [--no-full] [--keep] [--jobs N] [--readme CONTRIBUTING.md]

Each mutation in tests/mutate/mutations.txt is a deliberate bug: a file, the exact text it replaces (which must
occur exactly once in that file), its replacement, and the tests expected to catch it. For each one, in a scratch
copy of the work tree (tracked and untracked-not-ignored files, its own BUILD), the script applies it, builds what
the named tests need, and runs only those tests (unit binaries plain; end-to-end tests with the plain helper).
A mutation that survives its named tests is tried against the whole suite (unit + e2e; --no-full skips that).
Statuses:
  killed            a named test failed (the suite caught the bug)
  killed-by-suite   the named tests passed, another test failed: the list names the wrong tests
  survived          every test passed with the bug in: a hole in the suite
  text-not-found    the file no longer holds the text (or holds it more than once): the entry is stale, fix it
  no-build          the mutated tree does not compile: the entry is wrong, fix it
  not-built         the mutation is not in what the tests ran: the file did not read back as mutated, or a
                    binary the tests run (and the object it comes from) is not newer than the change, or no
                    test named runs anything built from that file (a helper/ mutation named only with unit
                    tests). An error in the entry or the build, never a kill.
The kill rate is (killed + killed-by-suite) / (those + survived); stale, broken and not-built entries are
reported apart, never counted as killed. Prints a Markdown table; --readme FILE replaces the table between the
"<!-- mutate:begin -->" and "<!-- mutate:end -->" lines of FILE (with --only, only the rows of those mutations
are replaced or added, and the summary line is counted again over the whole table). Exit status 0 when every
runnable mutation was killed and no entry is stale, broken or not built, else 1.
"""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_list(path):
    """Blocks: '=== ID' line, 'file:', 'tests:', 'why:' lines, '--- old', text, '--- new', text, '--- end'."""
    muts, cur, section = [], None, None
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        raw = line.rstrip("\n")
        if section in ("old", "new"):
            if raw in ("--- new", "--- end"):
                cur[section] = "\n".join(cur[section + "_lines"])
                section = "new" if raw == "--- new" else None
                if section is None:
                    muts.append(cur)
                    cur = None
            else:
                cur[section + "_lines"].append(raw)
            continue
        if raw.startswith("=== "):
            cur = {"id": raw[4:].strip(), "line": n, "old_lines": [], "new_lines": [], "tests": [], "why": ""}
        elif cur is None or not raw.strip() or raw.startswith("#"):
            continue
        elif raw.startswith("file:"):
            cur["file"] = raw[5:].strip()
        elif raw.startswith("tests:"):
            cur["tests"] = raw[6:].split()
        elif raw.startswith("why:"):
            cur["why"] = raw[4:].strip()
        elif raw == "--- old":
            section = "old"
        else:
            sys.exit(f"{path}:{n}: unexpected line: {raw}")
    if cur is not None or section is not None:
        sys.exit(f"{path}: last entry not closed with '--- end'")
    ids = [m["id"] for m in muts]
    for m in muts:
        if not m.get("file") or not m["tests"] or not m["old"]:
            sys.exit(f"{path}:{m['line']}: entry {m['id']} needs file:, tests: and an old text")
        for t in m["tests"]:
            if not (t.startswith("unit:") or t.startswith("e2e:")):
                sys.exit(f"{path}:{m['line']}: test {t}: write unit:test_x or e2e:t_x")
    if len(set(ids)) != len(ids):
        sys.exit(f"{path}: duplicate ids")
    return muts


def run(cmd, cwd, env=None, log=None, timeout=1800):
    e = dict(os.environ)
    e.update(env or {})
    out = subprocess.run(cmd, cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    if log is not None:
        with open(log, "ab") as f:
            f.write(b"$ " + " ".join(cmd).encode() + b"\n" + out.stdout)
    return out.returncode, out.stdout.decode(errors="replace")


def scratch_copy():
    """A copy of the work tree as it is now (tracked + untracked-not-ignored files), node_modules linked."""
    d = tempfile.mkdtemp(prefix="hfs3-mutate.")
    os.chmod(d, 0o755)  # the two-user tests run the helper from here as another user
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           stdout=subprocess.PIPE).stdout.decode().split("\0")
    for f in files:
        if not f or f == "node_modules" or f.startswith("node_modules/"):
            continue
        src, dst = os.path.join(ROOT, f), os.path.join(d, f)
        if not os.path.lexists(src):
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        elif os.path.isfile(src):
            shutil.copy2(src, dst)
    os.makedirs(os.path.join(d, "tmp"), mode=0o755, exist_ok=True)
    nm = os.path.join(ROOT, "node_modules")
    if os.path.exists(nm):
        os.symlink(os.path.realpath(nm), os.path.join(d, "node_modules"))
    # the project's venv too (ignored, so not copied): without it the tests of the real clients and t_wheel skip,
    # and every mutation they are named for would survive
    venv = os.path.join(ROOT, ".venv")
    if os.path.exists(os.path.join(venv, "bin", "python")) and "HFS3_PY" not in os.environ:
        os.symlink(os.path.realpath(venv), os.path.join(d, ".venv"))
    return d


def targets(tree, tests):
    """Make targets the tests need: unit binaries (plain), or everything the e2e tests run with the plain helper."""
    t = []
    if any(x.startswith("e2e:") for x in tests):
        t.append("all")
        for src in sorted(os.listdir(os.path.join(tree, "tests/tools"))):
            if src.endswith(".c"):
                t.append("build/tools/" + src[:-2])
        for kind in ("plain", "lfs", "fort"):
            for src in sorted(os.listdir(os.path.join(tree, "tests/probes"))):
                if src.endswith(".c"):
                    t.append(f"build/probes/{kind}/" + src[:-2])
    for x in tests:
        if x.startswith("unit:"):
            t.append("build/tests/" + x[5:])
    return t


E2E_ENV = {"BUILD": "build", "E2E_PLAIN_HELPER": "1", "E2E_EXACT": "1"}


class NoBuild(Exception):
    pass


class NotBuilt(Exception):
    """The mutation is not in what the tests run (the message says why)."""


def built_from(tree, src, group):
    """_built_from, plus the unit tests of group that compile src in directly (test_scratch.c has
    #include "../../shim/scratch.c"): they run it too."""
    direct = []
    for x in group:
        if x.startswith("unit:"):
            try:
                with open(os.path.join(tree, "tests/unit", x[5:] + ".c")) as f:
                    if f'#include "../../{src}"' in f.read():
                        direct.append(f"build/tests/{x[5:]}")
            except OSError:
                pass
    arts = _built_from(tree, src, group)
    if not direct:
        return arts
    return direct + [a for a in (arts or []) if a not in direct]


def _built_from(tree, src, group):
    """What the tests of group (all unit: or all e2e:) run that is built from src, plus the objects in
    between: [] when none of them is (the tests cannot see a change there), None when src is not compiled
    (a script the tests run as it is: its text is what counts)."""
    b = "build"
    helper = [f"{b}/bin/hfs3-manifest"]   # e2e under mutate.py: the plain helper (E2E_PLAIN_HELPER=1)
    shim = [f"{b}/lib/libhfs3shim.so"]
    units = [f"{b}/tests/{x[5:]}" for x in group if x.startswith("unit:")]
    e2e = any(x.startswith("e2e:") for x in group)
    name = os.path.basename(src)
    stem = name[:-2] if name.endswith((".c", ".h")) else name
    if src.startswith("lib/") or src.startswith("include/hfs3/"):
        obj = [f"{b}/obj/{src[:-2]}.o", f"{b}/libhfs3.a"] if src.endswith(".c") else []
        out = units + ((helper + sorted(glob.glob(os.path.join(tree, b, "tools", "*")))) if e2e else [])
        if src in ("include/hfs3/index.h", "include/hfs3/serve.h") and e2e:
            out += shim   # the headers the shim shares
        return obj + out if out else []
    if src.startswith("helper/"):
        return ([f"{b}/obj/{src[:-2]}.o"] if src.endswith(".c") else []) + helper if e2e else []
    if src.startswith("shim/"):
        return shim if e2e else []
    if src.startswith("tests/unit/"):
        return [f"{b}/tests/{stem}"] if f"unit:{stem}" in group else ([] if src.endswith(".c") else units)
    if src.startswith("tests/tools/"):
        return [f"{b}/tools/{stem}"] if e2e else []
    if src.startswith("tests/probes/"):
        return [f"{b}/probes/{k}/{stem}" for k in ("plain", "lfs", "fort")] if e2e and src.endswith(".c") else []
    return None


def check_built(tree, src, changed_ns, group):
    """Raises NotBuilt unless everything group runs that is built from src is newer than the change."""
    arts = built_from(tree, src, group)
    if not arts:
        return
    for a in arts:
        p = a if os.path.isabs(a) else os.path.join(tree, a)
        try:
            t = os.stat(p).st_mtime_ns
        except OSError:
            raise NotBuilt(f"{os.path.relpath(p, tree)} was not built")
        if t <= changed_ns:
            raise NotBuilt(f"{os.path.relpath(p, tree)} is older than the change to {src}")


def run_tests(tree, tests, log, mut=None):
    """Builds what each test needs and runs it, unit tests first; returns the first that failed, or None.
    Raises NoBuild when the tree does not compile, NotBuilt when mut = (file, change time in ns) is not in
    what a group of the tests is about to run."""
    units = [x for x in tests if x.startswith("unit:")]
    e2e = [x for x in tests if x.startswith("e2e:")]
    if mut and built_from(tree, mut[0], tests) == []:
        raise NotBuilt(f"none of {' '.join(tests)} runs anything built from {mut[0]}")
    for group in (units, e2e):
        if not group:
            continue
        rc, _ = run(["make", "-s", "BUILD=build"] + targets(tree, group), tree, log=log)
        if rc != 0:
            raise NoBuild()
        if mut:
            check_built(tree, mut[0], mut[1], group)
        for x in group:
            if x.startswith("unit:"):
                rc, _ = run(["build/tests/" + x[5:]], tree, log=log)
            else:
                # work dirs under the scratch tree: a killed mutation's kept work dir goes with it
                rc, _ = run(["bash", "tests/e2e/run.sh"], tree, log=log,
                            env=dict(E2E_ENV, E2E_ONLY=x[4:], TMPDIR=os.path.join(tree, "tmp")))
            if rc != 0:
                return x
    return None


def one(tree, log, m, no_full):
    """Applies mutation m in tree, runs its tests (then the whole suite for a survivor, unless no_full), restores
    the file; returns (status, by)."""
    path = os.path.join(tree, m["file"])
    try:
        orig = open(path, encoding="utf-8").read()
    except OSError:
        orig = None
    if orig is None or orig.count(m["old"]) != 1:
        n = 0 if orig is None else orig.count(m["old"])
        return "text-not-found", "" if n == 0 else f"{n} matches"
    want = orig.replace(m["old"], m["new"])
    with open(path, "w", encoding="utf-8") as f:
        f.write(want)
    try:
        # the change must be in the file the build reads, and in what the tests then run
        if open(path, encoding="utf-8").read() != want:
            raise NotBuilt(f"{m['file']} does not read back as mutated")
        mut = (m["file"], os.stat(path).st_mtime_ns)
        by = run_tests(tree, m["tests"], log, mut)
        status = "killed" if by else "survived"
        if not by and not no_full:
            by = run_tests(tree, [t for t in all_tests(tree) if t not in m["tests"]], log, mut)
            status = "killed-by-suite" if by else "survived"
    except NoBuild:
        status, by = "no-build", ""
    except NotBuilt as e:
        status, by = "not-built", str(e)
    finally:
        with open(path, "w", encoding="utf-8") as f:
            f.write(orig)
    return status, by or ""


def all_tests(tree):
    units = sorted("unit:" + f[:-2] for f in os.listdir(os.path.join(tree, "tests/unit")) if f.startswith("test_") and f.endswith(".c"))
    e2e = sorted("e2e:" + f[:-3] for f in os.listdir(os.path.join(tree, "tests/e2e")) if f.startswith("t_") and f.endswith(".sh"))
    return units + e2e


def table(results, secs):
    rows = ["| mutation | file | bug | tests named | result |", "|---|---|---|---|---|"]
    for m, status, by in results:
        res = f"{status}: {by}" if status == "not-built" else f"{status} by {by}" if by else status
        rows.append(f"| `{m['id']}` | `{m['file']}` | {m['why']} | {' '.join(m['tests'])} | {res} |")
    statuses = [s for _, s, _ in results]
    return "\n".join(rows), summarise(statuses, f"{secs:.0f} s"), all(s.startswith("killed") for s in statuses)


def summarise(statuses, how):
    """The summary line over a list of statuses; how: what the run took ("298 s", or a merged table's note)."""
    killed = sum(1 for s in statuses if s.startswith("killed"))
    survived = sum(1 for s in statuses if s == "survived")
    stale = sum(1 for s in statuses if s.startswith("text-not-found"))
    broken = sum(1 for s in statuses if s == "no-build")
    notbuilt = sum(1 for s in statuses if s == "not-built")
    runnable = killed + survived
    rate = f"{100.0 * killed / runnable:.0f}%" if runnable else "n/a"
    return (f"{len(statuses)} mutations: {killed} killed, {survived} survived, {stale} text not found, "
            f"{broken} not building, {notbuilt} not built into the tests; kill rate {killed}/{runnable} = {rate} "
            f"({how}, {time.strftime('%Y-%m-%d', time.gmtime())})")


ROW_ID = re.compile(r"^\| `([^`]+)` \|")


def merge_rows(old_table, new_rows, order):
    """The README's table with the rows of new_rows (by id) replaced or added, in mutations.txt order (ids not
    there any more are dropped), and its summary line counted again over all rows."""
    rows = {}
    for line in old_table.splitlines():
        mt = ROW_ID.match(line)
        if mt:
            rows[mt.group(1)] = line
    for line in new_rows.splitlines():
        mt = ROW_ID.match(line)
        if mt:
            rows[mt.group(1)] = line
    kept = [rows[i] for i in order if i in rows]
    statuses = [line.rstrip(" |").rsplit("| ", 1)[-1].split(" by ")[0].split(":")[0].strip() for line in kept]
    head = new_rows.splitlines()[:2]
    return "\n".join(head + kept), summarise(statuses, "rows merged from partial runs")


def main():
    # SIGTERM/SIGHUP: the tests running in the workers' trees are stopped too (this process group), then unwind
    # (the scratch trees are removed in the finally below)
    def stop(sig, _frame):
        signal.signal(sig, signal.SIG_IGN)
        os.killpg(0, sig)
        sys.exit(130)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", default=os.path.join(ROOT, "tests/mutate/mutations.txt"))
    ap.add_argument("--only", default="")
    ap.add_argument("--no-full", action="store_true", help="do not run the whole suite for a survivor")
    ap.add_argument("--keep", action="store_true", help="keep the scratch tree")
    ap.add_argument("--readme", default="")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("MUTATE_JOBS", "1")),
                    help="scratch trees run side by side (each takes the next entry; default 1, or $MUTATE_JOBS)")
    a = ap.parse_args()
    muts = parse_list(a.list)
    order = [m["id"] for m in muts]
    if a.only:
        want = set(a.only.split(","))
        muts = [m for m in muts if m["id"] in want]
        if not muts:
            sys.exit("no mutation has those ids")
    t0 = time.time()
    jobs = max(1, min(a.jobs, len(muts)))
    trees = []
    results = [None] * len(muts)
    try:
        for _ in range(jobs):
            tree = scratch_copy()
            trees.append(tree)
            log = os.path.join(tree, "mutate.log")
            print(f"scratch tree {tree} (log {log})", flush=True)
            rc, out = run(["make", "-s", "BUILD=build", "all"], tree, log=log)
            if rc != 0:
                sys.exit("the unmutated tree does not build:\n" + out[-3000:])
        # each worker owns one scratch tree and takes the next mutation in file order; the entries are
        # independent (each restores its file before the next), so their results do not depend on the split
        nxt = iter(range(len(muts)))
        lock = threading.Lock()

        def worker(tree):
            log = os.path.join(tree, "mutate.log")
            while True:
                with lock:
                    i = next(nxt, None)
                if i is None:
                    return
                m = muts[i]
                start = time.time()
                status, by = one(tree, log, m, a.no_full)
                results[i] = (m, status, "" if status == "text-not-found" else by)
                shown = status if status != "text-not-found" or not by else f"{status} ({by})"
                with lock:
                    print(f"{m['id']:28} {shown:16} {'' if status == 'text-not-found' else by} "
                          f"({time.time() - start:.0f} s)", flush=True)

        # daemons: a SIGTERM's exit does not wait for them (their trees are removed below)
        threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in trees]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        if not a.keep:
            for tree in trees:
                shutil.rmtree(tree, ignore_errors=True)
    results = [r for r in results if r is not None]
    rows, summary, all_killed = table(results, time.time() - t0)
    print()
    print(rows)
    print()
    print(summary)
    if a.readme:
        text = open(a.readme, encoding="utf-8").read()
        b, e = "<!-- mutate:begin -->", "<!-- mutate:end -->"
        if b in text and e in text:
            head, rest = text.split(b, 1)
            old_table, tail = rest.split(e, 1)
            if a.only:   # a partial run: its rows replace those of the same ids, the others stay
                rows, summary = merge_rows(old_table, rows, order)
            open(a.readme, "w", encoding="utf-8").write(head + b + "\n" + rows + "\n\n" + summary + "\n" + e + tail)
            print(f"table written into {a.readme}")
    return 0 if all_killed else 1


if __name__ == "__main__":
    sys.exit(main())
