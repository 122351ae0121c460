#!/usr/bin/env python3
"""stack_budget.py CC CFLAGS... -- SHIM.so SOURCES...: the shim's stack budget, checked from the compiler's own
numbers (docs/internals.md, "Rules for code that runs in the host").

Compiles SOURCES with -fcallgraph-info=su (one .ci file each: every function's frame size and its calls), joins
the graphs, and for every symbol SHIM.so exports sums the frames along each call chain down to the calls that
leave the shim (libc). A chain's worst sum must stay within
  OUTSIDE (2 KiB) for what a path outside the mounts can reach: chains that do not enter MOUNT_SIDE, and
  INSIDE  (8 KiB) for everything, mount paths included.
MOUNT_SIDE lists the functions only a path inside a mount (or an ancestor, or a descriptor the shim returned)
reaches; RECURSIVE_OK the one function allowed to call itself (the nftw walk, one frame per directory level). A frame of dynamic size (alloca, a variable-length array) fails the check, and so does recursion.
Indirect calls go to libc (sh_r.*, REAL()) except the callbacks named in CALLBACKS. Prints the worst chain of
each kind; exit 1 over budget."""
import glob, os, re, subprocess, sys, tempfile

OUTSIDE, INSIDE = 2048, 8192
MOUNT_SIDE = {
    "sh_stat", "sh_open", "sh_readlink", "sh_realpath", "sh_access", "sh_chdir", "sh_statfs", "sh_list",
    "sh_open_stream", "sh_fd_stat", "sh_fd_dirloc", "sh_resolve", "sh_mount_get", "fopen_ours", "realpath_ours",
    "statvfs_ours", "opendir_ours", "scan_ours", "dir_new", "fstat_ours", "walk_ours",
    # hub.c: a path inside a hub mount, or a real path inside the cache's skeleton of one of its repositories
    "sh_hub_classify", "sh_hub_map",
    "o_open", "o_read", "o_children",
    # wrap.c: rmdir/unlink of a spelling ending in ".", ".." or "/", only once sh_outside said it may be a mount's
    "ro_dots",
}
# recursion allowed, one frame counted: nftw's walk of a mount enters one frame per directory level, as glibc's
# own nftw does (the budget is per level; docs/internals.md)
RECURSIVE_OK = {"visit"}
# an indirect call in the first function may reach these (function pointers the shim passes to itself)
CALLBACKS = {"sh_list": ["add"], "sh_open_stream": ["wrap_fdopen", "wrap_dir"], "scan_ours": []}


def main():
    argv = sys.argv[1:]
    sep = argv.index("--")
    cc, cflags, so, sources = argv[0], argv[1:sep], argv[sep + 1], argv[sep + 2:]
    frames, edges, dynamic = {}, {}, set()
    with tempfile.TemporaryDirectory() as tmp:
        for src in sources:
            obj = os.path.join(tmp, os.path.basename(src)[:-2] + ".o")
            subprocess.run([cc, *cflags, "-fcallgraph-info=su", "-c", src, "-o", obj], check=True)
        for ci in glob.glob(os.path.join(tmp, "*.ci")):
            text = open(ci).read()
            for m in re.finditer(r'node: \{ title: "([^"]+)" label: "([^"]*)"', text):
                title, label = m.group(1), m.group(2)
                name = title.split(":")[-1]
                fm = re.search(r"\\n(\d+) bytes \(([a-z,]+)\)", label)
                if fm:
                    frames[name] = int(fm.group(1))
                    if "dynamic" in fm.group(2) and "bounded" not in fm.group(2):
                        dynamic.add(name)
            for m in re.finditer(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"', text):
                a, b = m.group(1).split(":")[-1], m.group(2).split(":")[-1]
                edges.setdefault(a, set()).add(b)
    for f, cbs in CALLBACKS.items():
        edges.setdefault(f, set()).update(cbs)
    nm = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True, check=True).stdout
    exports = sorted({line.split()[-1] for line in nm.splitlines() if " T " in line or " W " in line})

    memo = {}

    def worst(f, outside, stack):
        """(bytes, chain) of the deepest chain from f; outside: do not enter MOUNT_SIDE."""
        key = (f, outside)
        if key in memo:
            return memo[key]
        if f in stack:
            sys.exit("stack_budget: recursion through " + " -> ".join(stack + [f]))
        own = frames.get(f)
        if own is None:   # leaves the shim: libc (its own use is the guard-page test's business)
            return (0, [])
        best = (0, [])
        for g in sorted(edges.get(f, ())):
            if outside and g in MOUNT_SIDE:
                continue
            if g == f and f in RECURSIVE_OK:
                continue
            r = worst(g, outside, stack + [f])
            if r[0] > best[0]:
                best = r
        res = (own + best[0], [f"{f}({own})"] + best[1])
        memo[key] = res
        return res

    bad = 0
    if dynamic:
        print("stack_budget: frames of dynamic size:", ", ".join(sorted(dynamic)))
        bad = 1
    missing = [e for e in exports if e not in frames]
    if missing:
        print("stack_budget: exported but not found in the call graph:", ", ".join(missing))
        bad = 1
    for outside, limit, what in ((True, OUTSIDE, "outside the mounts"), (False, INSIDE, "inside the mounts")):
        top = max((worst(e, outside, []) for e in exports if e in frames), key=lambda r: r[0])
        over = [(e, worst(e, outside, [])) for e in exports if e in frames and worst(e, outside, [])[0] > limit]
        print(f"stack_budget: {what}: worst chain {top[0]} bytes (budget {limit}): {' -> '.join(top[1])}")
        for e, (n, chain) in over:
            print(f"  OVER: {e}: {n} bytes: {' -> '.join(chain)}")
            bad = 1
    print("stack_budget: %d exported symbols checked" % len(exports))
    sys.exit(bad)


if __name__ == "__main__":
    main()
