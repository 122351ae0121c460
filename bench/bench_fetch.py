#!/usr/bin/env python3
"""bench_fetch.py MODEL_DIR REMOTE BUCKET/PREFIX ROUNDS - cold fetch of a whole model, side by side in one run:
`hfs3-manifest fetch` (ranged GETs verified as they arrive, installed atomically) at several connection counts,
and a cold load through the shim (the demo's Python loader), against the reference: 8 parallel `curl` ranged
GETs per file to /dev/null (what the server can send, no disk, no hashing). Median of interleaved rounds."""
import os, shutil, statistics, subprocess, sys, tempfile, time

model, remote, bp, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
hfs3, shim, root = os.environ["HFS3_BIN"], os.environ["HFS3_SHIM"], os.environ["HFS3_ROOT"]
endpoint = os.environ["S3_ENDPOINT"]
files = sorted(f for f in os.listdir(model) if os.path.isfile(os.path.join(model, f)))
total = sum(os.path.getsize(os.path.join(model, f)) for f in files)
work = tempfile.mkdtemp()


def timed(cmd, env=None):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t


def curl8():
    t = time.perf_counter()
    for f in files:
        size = os.path.getsize(os.path.join(model, f))
        n = 8 if size >= 8 << 20 else 1
        step = -(-size // n)
        procs = [subprocess.Popen(["curl", "-sf", "-o", "/dev/null", "-r", f"{a}-{min(a + step, size) - 1}",
                                   f"{endpoint}/{bp}/{f}"]) for a in range(0, size, step)] if size else []
        for p in procs:
            if p.wait() != 0:
                raise SystemExit("curl failed")
    return time.perf_counter() - t


def fetch(conns):
    cache = os.path.join(work, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, HFS3_CACHE_DIR=cache, HFS3_CONNECTIONS=str(conns))
    return timed([hfs3, "fetch", remote], env)


def shim_load():
    cache = os.path.join(work, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, HFS3_CACHE_DIR=cache, HFS3_HELPER=hfs3, HFS3_MOUNTS=f"/models/bench={remote}",
               LD_PRELOAD=shim)
    return timed([sys.executable, os.path.join(root, "scripts/demo_loader.py"), "/models/bench"], env)


def warm_load():
    env = dict(os.environ, HFS3_CACHE_DIR=os.path.join(work, "cache"), HFS3_HELPER=hfs3,
               HFS3_MOUNTS=f"/models/bench={remote}", LD_PRELOAD=shim)
    return timed([sys.executable, os.path.join(root, "scripts/demo_loader.py"), "/models/bench"], env)


cases = {"8 x curl ranged GETs to /dev/null (reference)": curl8}
for c in (1, 8):
    cases[f"hfs3-manifest fetch, HFS3_CONNECTIONS={c}"] = (lambda c=c: fetch(c))
cases["cold load through the shim (python loader)"] = shim_load
cases["warm load through the shim (cached)"] = warm_load
times = {k: [] for k in cases}
for r in range(rounds):
    for k, fn in cases.items():
        times[k].append(fn())
med = {k: statistics.median(v) for k, v in times.items()}
ref = med["8 x curl ranged GETs to /dev/null (reference)"]
print(f"\ncold fetch of {total / 2**30:.2f} GiB in {len(files)} files from the local S3 server, "
      f"median of {rounds} rounds")
print(f"{'what':52} {'seconds':>8} {'MB/s':>7} {'x reference':>12}")
for k, v in med.items():
    print(f"{k:52} {v:8.2f} {total / v / 1e6:7.0f} {v / ref:11.2f}x")
shutil.rmtree(work, ignore_errors=True)
