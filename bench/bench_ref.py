#!/usr/bin/env python3
"""bench_ref.py MODEL_DIR NGINX_ENDPOINT BUCKET/PREFIX ROUNDS OUT_JSON - cold download of a whole model from the
reference server (nginx serving the same objects as static files), side by side, interleaved rounds: wall time
and CPU seconds (user + system of the client's whole process tree, detached helpers included: each run is put in
its own cpuacct cgroup when the machine allows it, else getrusage of the waited-for tree) per GiB, for
`hfs3-manifest fetch`, cold loads through the shim (the demo's Python loader and an mmap loader), parallel curl
ranged GETs to /dev/null, aria2c -x8 -s8 and rclone's http backend; and the two loaders again with everything
cached (warm), the loader's own work, which a cold load overlaps with the download but cannot skip. Median and
spread (min-max)."""
import atexit
import json, os, shutil, statistics, subprocess, sys, tempfile

model, endpoint, bp, rounds, out_json = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
hfs3, shim, root = os.environ["HFS3_BIN"], os.environ["HFS3_SHIM"], os.environ["HFS3_ROOT"]
remote = os.environ["HFS3_REF_REMOTE"]          # an rclone-style remote pointing at nginx, e.g. ngx:models/bench
files = sorted(f for f in os.listdir(model) if os.path.isfile(os.path.join(model, f)))
sizes = {f: os.path.getsize(os.path.join(model, f)) for f in files}
total = sum(sizes.values())
gib = total / 2**30
work = tempfile.mkdtemp(prefix="hfs3-ref.")
atexit.register(shutil.rmtree, work, True)   # a failed run leaves nothing behind either
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cgrun import run as cgrun, cpu_source  # noqa: E402  (one measured run, shared with bench_peers.py)


def run(cmd, env=None):
    """wall seconds, cpu seconds (user+sys), peak RSS KiB of the top process, stdout (bench/cgrun.py)"""
    return cgrun(cmd, env, os.path.join(work, "stderr"), "bench_ref")


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def env_hfs3(cache):
    return dict(os.environ, HFS3_CACHE_DIR=cache)


def curl8():
    lines = []
    for f in files:
        n = 8 if sizes[f] >= 8 << 20 else 1
        step = -(-sizes[f] // n)
        for a in range(0, sizes[f], step):
            lines.append(f"curl -sf -o /dev/null -r {a}-{min(a + step, sizes[f]) - 1} {endpoint}/{bp}/{f} & p+=($!)")
        lines.append('for x in "${p[@]}"; do wait "$x"; done; p=()')
    return run(["bash", "-c", "\n".join(["set -e; p=()"] + lines)])


def aria():
    d = fresh(os.path.join(work, "aria"))
    lst = os.path.join(work, "aria.txt")
    open(lst, "w").write("".join(f"{endpoint}/{bp}/{f}\n" for f in files))
    return run(["aria2c", "--console-log-level=error", "--summary-interval=0", "--download-result=hide", "--log=" + os.path.join(work, "stderr"), "--log-level=warn", "-x8", "-s8", "-k1M", "-j1", "--file-allocation=none", "--allow-overwrite=true",
                "--auto-file-renaming=false", "-d", d, "-i", lst])


def rclone():
    d = fresh(os.path.join(work, "rclone"))
    return run(["rclone", "copy", "--config", "/dev/null", "--http-url", f"{endpoint}/{bp}/", "--exclude", ".hfs3/**",
                "--multi-thread-streams", "8", "--multi-thread-cutoff", "16M", "--transfers", "1", ":http:", d])


def curl_write():
    """a plain writer: one GET per file, one after the other, written as it arrives, nothing hashed or synced"""
    d = fresh(os.path.join(work, "curl1"))
    return run(["curl", "-sf"] + [a for f in files for a in ("-o", os.path.join(d, f), f"{endpoint}/{bp}/{f}")])


def write_alone():
    """writing the same bytes into new files and flushing each (dd from /dev/zero, 1 MiB blocks, fdatasync, as
    `fetch` flushes each file before it installs it): the disk's part of a download's wall time. Its CPU is
    no floor: what the page cache costs a writer depends on how full memory is (reclaim runs on its clock)"""
    d = fresh(os.path.join(work, "dd"))
    return run(["bash", "-c", "set -e\n" + "\n".join(
        f"dd if=/dev/zero of='{os.path.join(d, f)}' bs=1M count={sizes[f]} iflag=count_bytes conv=fdatasync status=none"
        for f in files)])


def sha_alone():
    """the hashing floor: the same bytes, already in the page cache, through sha256 in one process"""
    return run(["openssl", "dgst", "-sha256"] + [os.path.join(model, f) for f in files])


def fetch():
    c = fresh(os.path.join(work, "cache"))
    return run([hfs3, "fetch", remote], env_hfs3(c))


def fetch_chunks():
    """issue 21: chunk digests checked as each range arrives (no read-back); the flush and the whole-file hash that
    moves each file into blobs/ run after the answer, in a detached process (its CPU is counted: cgroup)"""
    c = fresh(os.path.join(work, "cache"))
    return run([hfs3, "fetch", remote], dict(env_hfs3(c), HFS3_VERIFY="chunks"))


def fetch_sync():
    """the path before issue 21: every file flushed before its install (kept for comparison)"""
    c = fresh(os.path.join(work, "cache"))
    return run([hfs3, "fetch", remote], dict(env_hfs3(c), HFS3_DURABLE="sync"))


def shim_env(c):
    return dict(env_hfs3(c), HFS3_HELPER=hfs3, HFS3_MOUNTS=f"/models/refbench={remote}", LD_PRELOAD=shim)


def shim_py():
    c = fresh(os.path.join(work, "cache"))
    return run([sys.executable, os.path.join(root, "scripts/demo_loader.py"), "/models/refbench"], shim_env(c))


def shim_mmap():
    c = fresh(os.path.join(work, "cache"))
    return run([sys.executable, os.path.join(root, "bench/mmap_loader.py"), "/models/refbench"], shim_env(c))


def shim_mmap_sync():
    """the cold load before issue 21: each file verified whole and flushed before its open returns"""
    c = fresh(os.path.join(work, "cache"))
    return run([sys.executable, os.path.join(root, "bench/mmap_loader.py"), "/models/refbench"],
               dict(shim_env(c), HFS3_DURABLE="sync", HFS3_VERIFY="whole"))


def warmed():
    """a cache that `fetch` filled (not measured): the files are in blobs/ and in the page cache"""
    c = fresh(os.path.join(work, "cache"))
    subprocess.run([hfs3, "fetch", remote], env=env_hfs3(c), check=True, stdout=subprocess.DEVNULL)
    return c


def warm_py():
    c = warmed()
    return run([sys.executable, os.path.join(root, "scripts/demo_loader.py"), "/models/refbench"], shim_env(c))


def warm_mmap():
    c = warmed()
    return run([sys.executable, os.path.join(root, "bench/mmap_loader.py"), "/models/refbench"], shim_env(c))


cases = {
    "curl, 8 ranged GETs per file, to /dev/null": (curl8, False),
    "aria2c -x8 -s8": (aria, True),
    "rclone copy (http backend, 8 streams)": (rclone, True),
    "curl, 1 GET per file, writing the files": (curl_write, True),
    "write alone (dd from /dev/zero, 1 MiB blocks, fdatasync each file)": (write_alone, "yes (zeros, nothing received)"),
    "sha256 alone (openssl dgst, the same bytes from the page cache)": (sha_alone, "no (hashes only)"),
    "hfs3-manifest fetch (sha256 verified)": (fetch, True),
    "hfs3-manifest fetch, HFS3_VERIFY=chunks (chunk digests as ranges arrive)": (fetch_chunks, True),
    "hfs3-manifest fetch, HFS3_DURABLE=sync (flushed before install: the old path)": (fetch_sync, True),
    "cold load through the shim: Python loader": (shim_py, True),
    "cold load through the shim: mmap loader": (shim_mmap, True),
    "cold load through the shim, HFS3_DURABLE=sync HFS3_VERIFY=whole (the old path): mmap loader": (shim_mmap_sync, True),
    # the loaders' own work, everything cached: a cold load can overlap it with the download but not skip it
    "warm load through the shim (all cached): Python loader": (warm_py, "no (all cached)"),
    "warm load through the shim (all cached): mmap loader": (warm_mmap, "no (all cached)"),
}
res = {k: {"wall": [], "cpu": [], "rss": [], "out": []} for k in cases}
for r in range(rounds):
    for k, (fn, _) in cases.items():
        w, c, m, o = fn()
        res[k]["wall"].append(w)
        res[k]["cpu"].append(c)
        res[k]["rss"].append(m)
        res[k]["out"].append(o)
    print(f"bench_ref: round {r + 1}/{rounds} done", file=sys.stderr)

med = lambda v: statistics.median(v)
curl_w = med(res["curl, 8 ranged GETs per file, to /dev/null"]["wall"])
fetch_k = "hfs3-manifest fetch (sha256 verified)"
rows = []
for k, (fn, writes) in cases.items():
    w, c = res[k]["wall"], res[k]["cpu"]
    # per-round ratios against curl and fetch of the same round (interleaved pairs)
    rc = [a / b for a, b in zip(w, res["curl, 8 ranged GETs per file, to /dev/null"]["wall"])]
    rf = [a / b for a, b in zip(w, res[fetch_k]["wall"])]
    rows.append({"tool": k, "writes": writes, "wall_per_gib": med(w) / gib, "wall_min": min(w) / gib,
                 "wall_max": max(w) / gib, "cpu_per_gib": med(c) / gib, "cpu_min": min(c) / gib,
                 "cpu_max": max(c) / gib, "x_curl": med(rc), "x_fetch": med(rf),
                 "wall_runs": [round(x, 3) for x in w], "cpu_runs": [round(x, 3) for x in c]})
fb = [json.loads(o)["first_byte_s"] for o in res["cold load through the shim: mmap loader"]["out"]]
ttfb = [json.loads(o)["ttfb_s"] for o in res["cold load through the shim: Python loader"]["out"]]
# a cold load against the same loader run after the download, one after the other (per round): below 1 is
# the part of the loader's work that overlapped the download
overlap = {}
for kind in ("Python loader", "mmap loader"):
    cold, warm = res["cold load through the shim: " + kind]["wall"], res["warm load through the shim (all cached): " + kind]["wall"]
    overlap[kind] = med([c / (f + w) for c, f, w in zip(cold, res[fetch_k]["wall"], warm)])
# the floor of a cold load when every file is verified whole before it opens: the download, then the loader's
# work on the last file it reads, which nothing can overlap (its share of the warm load, by size)
last = max((f for f in files if f.endswith((".safetensors", ".bin"))), default=max(files, key=lambda f: sizes[f]))
floor = {}
for kind in ("Python loader", "mmap loader"):
    cold, warm = res["cold load through the shim: " + kind]["wall"], res["warm load through the shim (all cached): " + kind]["wall"]
    fl = [f + w * sizes[last] / total for f, w in zip(res[fetch_k]["wall"], warm)]
    floor[kind] = {"floor_x_fetch": med([a / f for a, f in zip(fl, res[fetch_k]["wall"])]),
                   "cold_x_floor": med([c / a for c, a in zip(cold, fl)])}
# the CPU a verified download cannot go below before it writes a byte, per round: the bytes received the same
# way (curl8, to /dev/null) and hashed once (sha_alone)
cpu_floor = med([a + b for a, b in zip(res["curl, 8 ranged GETs per file, to /dev/null"]["cpu"],
                                       res["sha256 alone (openssl dgst, the same bytes from the page cache)"]["cpu"])]) / gib
# issue 21's targets, per round against tools of the same round: fetch wall / rclone copy; cold load / (rclone copy +
# warm load), the "download everything first" path; fetch CPU / the floor above
rcl = res["rclone copy (http backend, 8 streams)"]["wall"]
floor_r = [a + b for a, b in zip(res["curl, 8 ranged GETs per file, to /dev/null"]["cpu"],
                                 res["sha256 alone (openssl dgst, the same bytes from the page cache)"]["cpu"])]
fetch_rows = [fetch_k, "hfs3-manifest fetch, HFS3_VERIFY=chunks (chunk digests as ranges arrive)",
              "hfs3-manifest fetch, HFS3_DURABLE=sync (flushed before install: the old path)"]
targets = {"fetch_x_rclone": {k: med([a / b for a, b in zip(res[k]["wall"], rcl)]) for k in fetch_rows},
           "fetch_cpu_x_floor": {k: med([a / b for a, b in zip(res[k]["cpu"], floor_r)]) for k in fetch_rows},
           "cold_x_rclone_warm": {name: med([c / (r + w) for c, r, w in zip(res[cold]["wall"], rcl, res[warm]["wall"])])
                                  for name, cold, warm in (
               ("Python loader", "cold load through the shim: Python loader",
                "warm load through the shim (all cached): Python loader"),
               ("mmap loader", "cold load through the shim: mmap loader",
                "warm load through the shim (all cached): mmap loader"),
               ("mmap loader, old path (HFS3_DURABLE=sync HFS3_VERIFY=whole)",
                "cold load through the shim, HFS3_DURABLE=sync HFS3_VERIFY=whole (the old path): mmap loader",
                "warm load through the shim (all cached): mmap loader"))}}
summary = {"targets": targets, "cpu_floor": cpu_floor, "overlap": overlap, "floor": floor, "last_file": last, "gib": gib, "files": len(files), "rounds": rounds, "cpu_source": cpu_source,
           "rows": rows, "mmap_first_byte_s": med(fb), "py_ttfb_s": med(ttfb), "shard_bytes": max(sizes.values())}
json.dump(summary, open(out_json, "w"), indent=1)
shutil.rmtree(work, ignore_errors=True)
print(f"\ncold download of {gib:.2f} GiB in {len(files)} files from nginx (reference server), median of {rounds} "
      f"interleaved rounds, CPU from {summary['cpu_source']}")
print(f"{'tool':46} {'wall s/GiB':>10} {'(min-max)':>13} {'CPU s/GiB':>9} {'(min-max)':>13} {'x curl':>7} {'x fetch':>8}")
for x in rows:
    print(f"{x['tool']:46} {x['wall_per_gib']:10.2f} {x['wall_min']:6.2f}-{x['wall_max']:<6.2f} {x['cpu_per_gib']:9.2f} "
          f"{x['cpu_min']:6.2f}-{x['cpu_max']:<6.2f} {x['x_curl']:6.2f}x {x['x_fetch']:7.2f}x")
print("cold load / (fetch + warm load of the same loader, one after the other): " +
      ", ".join(f"{k} {v:.2f}x" for k, v in overlap.items()))
print(f"CPU floor of a verified download before it writes a byte (curl to /dev/null + sha256 alone, per round): {cpu_floor:.2f} s/GiB; "
      f"fetch {med(res[fetch_k]['cpu']) / gib:.2f}")
print(f"floor of a cold load (fetch + the loader's work on the last file, {last}): " +
      ", ".join(f"{k} {v['floor_x_fetch']:.2f}x fetch, cold load {v['cold_x_floor']:.2f}x the floor" for k, v in floor.items()))
print("issue 21 (per-round medians): fetch wall / rclone copy: " +
      ", ".join(f"{k.split(',')[1].strip() if ',' in k else 'default'} {v:.2f}x" for k, v in targets["fetch_x_rclone"].items()) +
      "; fetch CPU / floor: " +
      ", ".join(f"{k.split(',')[1].strip() if ',' in k else 'default'} {v:.2f}x" for k, v in targets["fetch_cpu_x_floor"].items()) +
      "; cold load / (rclone copy + warm load): " + ", ".join(f"{k} {v:.2f}x" for k, v in targets["cold_x_rclone_warm"].items()))
print(f"first open -> first byte of the first shard (mmap loader): {med(fb):.3f} s (the shard is "
      f"{max(sizes.values()) / 2**20:.0f} MiB); Python loader's time to first byte from its start: {med(ttfb):.3f} s")
