#!/usr/bin/env python3
"""sample.py - a mutation score nobody chose (`make mutate-sample`; not part of `make test`).

    tests/mutate/sample.py [--seed N] [--per-file N] [--since REF] [--files F,F] [--jobs N] [--no-full]
                           [--dry-run] [--out FILE]

mutations.txt measures the suite against the bugs its authors imagined. This script lets a tool imagine them:
universalmutator (pinned in requirements-mutate.txt, in .venv-mutate) writes every one-token mutant of each file (an operator, a
constant, a condition, a call dropped...), and a seeded random sample of them runs against the tests that cover
that file, exactly as a hand-written entry would (mutate.py's machinery: a scratch copy, its own build, the named
tests, then the whole suite for a survivor).

Which files: the guard files always (GUARD_FILES below), plus every C file changed since --since REF.
Which tests cover a file: the union of the tests mutations.txt names for entries of that file (for a header, of
the files that include it); a file no entry names gets the whole suite.

Before a drawn mutant counts, it is compiled alone with the project's own flags (-Werror included):
  invalid     it does not compile (the compiler catches that bug; it is not the suite's to catch)
  equivalent  its object code is byte for byte the original's at -O2 -g0 (trivial compiler equivalence: a
              mutant in a comment, a dead store, `x + 0`...): no test can tell it apart, so it is not counted
Drawing goes on (in the seeded order) until --per-file mutants per file are neither, or the file has no more.
The seed is printed; the same seed, tree and tool version draw the same mutants.

The score per file is killed / (killed + survived). A survivor is either a hole in the suite or an equivalent
mutant the compiler could not prove: CONTRIBUTING.md says, per survivor, which, and why.
Exit status 0 when every sampled mutant was killed, else 1.
"""
import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mutate  # noqa: E402

ROOT = mutate.ROOT
GUARD_FILES = ["shim/open.c", "shim/dl.c", "shim/wrap.c", "shim/cachedir.c", "shim/wguard.c", "shim/hub.c",
               "lib/fetch.c", "lib/durable.c", "lib/gc.c", "include/hfs3/serve.h", "include/hfs3/ownkey.h"]


def tool():
    """The universalmutator command: .venv's, else one on PATH."""
    for c in (os.path.join(ROOT, ".venv-mutate/bin/mutate"), shutil.which("mutate")):
        if c and os.access(c, os.X_OK):
            return c
    sys.exit("sample.py: universalmutator's `mutate` is not installed (.venv-mutate/bin/mutate); "
             "run `make mutate-sample`, which installs requirements-mutate.txt into .venv-mutate")


def make_var(name):
    out = subprocess.run(["make", "-s", "-f", "Makefile", "-f", "-", "pv"], cwd=ROOT, check=True,
                         input=f"pv: ; @echo $({name})\n", stdout=subprocess.PIPE, text=True).stdout
    return out.split()


def flags_for(src):
    """The compiler flags the project builds src with (shim/ or lib/ + helper/), made absolute, -g0."""
    f = make_var("SHIM_CFLAGS") if src.startswith("shim/") else make_var("BASE") + make_var("CFLAGS")
    out = []
    for x in f:
        if x.startswith("-I") and not x.startswith("-I/"):
            x = "-I" + os.path.join(ROOT, x[2:])
        if x.startswith("-g"):
            continue
        out.append(x)
    return out + ["-g0"]


def compiled_units(src):
    """The .c files whose objects a change to src can alter: src itself, or for a header every includer."""
    if src.endswith(".c"):
        return [src]
    base = os.path.basename(src)
    users = []
    for d in ("lib", "shim", "helper"):
        for f in sorted(os.listdir(os.path.join(ROOT, d))):
            if f.endswith(".c") and f'hfs3/{base}"' in open(os.path.join(ROOT, d, f), encoding="utf-8").read():
                users.append(f"{d}/{f}")
    return users


def objects(tree, units):
    """{unit: object bytes} for units compiled in tree (a copy of the sources), None when one does not compile."""
    out = {}
    for u in units:
        obj = os.path.join(tree, "o", u.replace("/", "_") + ".o")
        os.makedirs(os.path.dirname(obj), exist_ok=True)
        fl = [x.replace("-I" + ROOT, "-I" + tree) for x in flags_for(u)]
        # compiled from its own directory under a relative name: __FILE__ is the same in both trees
        r = subprocess.run(["cc"] + fl + ["-iquote", os.path.join(tree, os.path.dirname(u)), "-c",
                                          os.path.basename(u), "-o", obj],
                           cwd=os.path.join(tree, os.path.dirname(u)), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            return None
        out[u] = open(obj, "rb").read()
    return out


def source_tree():
    """A copy of the sources the objects are compiled from (lib, shim, helper, include)."""
    d = tempfile.mkdtemp(prefix="hfs3-sample.")
    for sub in ("lib", "shim", "helper", "include"):
        shutil.copytree(os.path.join(ROOT, sub), os.path.join(d, sub))
    return d


def generate(src, work):
    """Every mutant universalmutator writes for src: a list of (line number, old line, new line)."""
    out = os.path.join(work, "mutants", src.replace("/", "_"))
    os.makedirs(out)
    lang = "c"
    subprocess.run([tool(), os.path.join(ROOT, src), lang, "--noCheck", "--mutantDir", out],
                   cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    orig = open(os.path.join(ROOT, src), encoding="utf-8").read().split("\n")
    muts = []
    for f in sorted(os.listdir(out), key=lambda n: int(re.search(r"\.mutant\.(\d+)\.", n).group(1))):
        new = open(os.path.join(out, f), encoding="utf-8", errors="replace").read().split("\n")
        if len(new) != len(orig):
            continue
        diff = [i for i in range(len(orig)) if orig[i] != new[i]]
        if len(diff) == 1:
            muts.append((diff[0], orig[diff[0]], new[diff[0]]))
    return muts


def unique_old(lines, i):
    """The smallest span of lines around line i that occurs once in the file (mutate.py's entries need that)."""
    text = "\n".join(lines)
    lo, hi = i, i
    while True:
        old = "\n".join(lines[lo:hi + 1])
        if text.count(old) == 1:
            return lo, hi
        if lo == 0 and hi == len(lines) - 1:
            return None
        lo, hi = max(0, lo - 1), min(len(lines) - 1, hi + 1)


def covering_tests(src, listed):
    """The tests mutations.txt names for src; for a header no entry names, those of the files including it."""
    tests = {t for m in listed if m["file"] == src for t in m["tests"]}
    if not tests and src.endswith(".h"):
        users = compiled_units(src)
        tests = {t for m in listed if m["file"] in users for t in m["tests"]}
    return sorted(tests) or mutate.all_tests(ROOT)


def changed_since(ref):
    out = subprocess.run(["git", "diff", "--name-only", ref, "--", "lib", "shim", "helper", "include"], cwd=ROOT,
                         check=True, stdout=subprocess.PIPE, text=True).stdout.split()
    return [f for f in out if f.endswith((".c", ".h")) and os.path.exists(os.path.join(ROOT, f))]


def draw(src, per_file, rng, work, log):
    """Seeded draw of up to per_file counted mutants of src; returns (entries, invalid, equivalent, pool)."""
    pool = generate(src, work)
    order = list(range(len(pool)))
    rng.shuffle(order)
    lines = open(os.path.join(ROOT, src), encoding="utf-8").read().split("\n")
    units = compiled_units(src)
    base_tree = source_tree()
    base = objects(base_tree, units)
    shutil.rmtree(base_tree, ignore_errors=True)
    if base is None:
        sys.exit(f"sample.py: {src} does not compile unmutated")
    picked, invalid, equivalent = [], 0, 0
    tree = source_tree()
    try:
        for k in order:
            if len(picked) >= per_file:
                break
            i, old_line, new_line = pool[k]
            span = unique_old(lines, i)
            if span is None:
                continue
            lo, hi = span
            mutated = lines[:i] + [new_line] + lines[i + 1:]
            path = os.path.join(tree, src)
            open(path, "w", encoding="utf-8").write("\n".join(mutated))
            objs = objects(tree, units)
            open(path, "w", encoding="utf-8").write("\n".join(lines))
            tag = f"{src}:{i + 1}: {old_line.strip()}  ->  {new_line.strip()}"
            if objs is None:
                invalid += 1
                log.write(f"invalid     {tag}\n")
                continue
            if objs == base:
                equivalent += 1
                log.write(f"equivalent  {tag}\n")
                continue
            mid = f"um-{src.replace('/', '-').replace('.', '-')}-{i + 1}-{k}"
            picked.append({"id": mid, "file": src, "line": i + 1, "why": f"universalmutator: line {i + 1}: "
                           f"`{old_line.strip()}` -> `{new_line.strip()}`".replace("|", "\\|"),
                           "old": "\n".join(lines[lo:hi + 1]), "new": "\n".join(mutated[lo:hi + 1])})
            log.write(f"drawn       {tag}\n")
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    return picked, invalid, equivalent, len(pool)


def write_list(path, entries):
    with open(path, "w", encoding="utf-8") as f:
        f.write("# drawn by tests/mutate/sample.py\n\n")
        for m in entries:
            f.write(f"=== {m['id']}\nfile: {m['file']}\ntests: {' '.join(m['tests'])}\nwhy: {m['why']}\n")
            f.write(f"--- old\n{m['old']}\n--- new\n{m['new']}\n--- end\n\n")


def main():
    ap = argparse.ArgumentParser(description="a seeded sample of universalmutator's mutants, run like mutate.py's")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("MUTATE_SEED", "20261204")))
    ap.add_argument("--per-file", type=int, default=int(os.environ.get("MUTATE_PER_FILE", "6")))
    ap.add_argument("--since", default="", help="also sample the C files changed since this git ref")
    ap.add_argument("--files", default="", help="comma-separated files instead of the guard files")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("MUTATE_JOBS", "1")))
    ap.add_argument("--no-full", action="store_true", help="do not run the whole suite for a survivor")
    ap.add_argument("--dry-run", action="store_true", help="draw and print the sample, run nothing")
    ap.add_argument("--out", default="", help="write the drawn entries (mutations.txt format) here")
    a = ap.parse_args()
    files = a.files.split(",") if a.files else list(GUARD_FILES)
    if a.since:
        files += [f for f in changed_since(a.since) if f not in files]
    listed = mutate.parse_list(os.path.join(HERE, "mutations.txt"))
    rng = random.Random(a.seed)
    print(f"sample: seed {a.seed}, {a.per_file} per file, {len(files)} files", flush=True)
    work = tempfile.mkdtemp(prefix="hfs3-sample-work.")
    entries, stats = [], {}
    try:
        with open(os.path.join(work, "draw.log"), "w") as log:
            for src in files:
                picked, invalid, equivalent, pool = draw(src, a.per_file, rng, work, log)
                tests = covering_tests(src, listed)
                for m in picked:
                    m["tests"] = tests
                entries += picked
                stats[src] = {"pool": pool, "invalid": invalid, "equivalent": equivalent, "drawn": len(picked)}
                print(f"  {src}: {pool} mutants; drawn {len(picked)} (passed over {invalid} that do not compile, "
                      f"{equivalent} with the original's object code); tests: {' '.join(tests)}", flush=True)
        lst = a.out or os.path.join(work, "sampled.txt")
        write_list(lst, entries)
        if a.dry_run:
            for m in entries:
                print(f"  {m['id']}: {m['why']}")
            print(f"entries written to {lst}" if a.out else "")
            return 0
        cmd = [sys.executable, os.path.join(HERE, "mutate.py"), "--list", lst, "--jobs", str(a.jobs)]
        if a.no_full:
            cmd.append("--no-full")
        t0 = time.time()
        r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        sys.stdout.write(r.stdout)
        status = {}
        for line in r.stdout.splitlines():
            mt = mutate.ROW_ID.match(line)
            if mt:
                status[mt.group(1)] = line.rstrip(" |").rsplit("| ", 1)[-1].split(" by ")[0].split(":")[0].strip()
        print(f"\nsampled score per file (seed {a.seed}, {time.time() - t0:.0f} s):")
        print("| file | pool | passed over: no compile / same object | drawn | killed | survived | score |")
        print("|---|---|---|---|---|---|---|")
        tk = ts = 0
        for src in files:
            ids = [m["id"] for m in entries if m["file"] == src]
            k = sum(1 for i in ids if status.get(i, "").startswith("killed"))
            s = sum(1 for i in ids if status.get(i) == "survived")
            tk, ts = tk + k, ts + s
            st = stats[src]
            score = f"{100.0 * k / (k + s):.0f}%" if k + s else "n/a"
            print(f"| `{src}` | {st['pool']} | {st['invalid']} / {st['equivalent']} | {st['drawn']} | {k} | {s} | "
                  f"{score} |")
        print(f"\ntotal: {tk} killed, {ts} survived of {tk + ts} run: "
              f"{100.0 * tk / (tk + ts):.0f}%" if tk + ts else "\ntotal: nothing ran")
        for m in entries:
            if status.get(m["id"]) == "survived":
                print(f"survivor {m['id']}: {m['why']}")
        return 0 if ts == 0 and r.returncode == 0 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
