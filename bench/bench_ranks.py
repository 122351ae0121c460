#!/usr/bin/env python3
"""bench_ranks.py MODEL_DIR ENDPOINT BUCKET/PREFIX ROUNDS OUT_JSON - the eight-rank table (issue 31): the
tensor-parallel pattern, 8 processes started together (rank_go.py), each opening every shard with safe_open and
reading its 1/8 slice of every tensor with get_slice, forked together after one import of torch, against nginx (the peer table's server, its
access log counting the bytes it sent in each run). Rows, in the same interleaved rounds:
  - hfs3 through the shim, cold (8 ranks, one empty cache) and warm (everything cached), and one rank cold (whole
    tensors: the load the 8 ranks are held to, 1.2x);
  - rclone mount --vfs-cache-mode full --read-only, one mount shared by the 8, cold (fresh mount, empty VFS cache)
    and warm (the same mount again);
  - Run:ai Model Streamer, 8 processes each streaming every shard (it reads whole tensors) and keeping its slice;
    its distributed mode (gloo, RUNAI_STREAMER_DIST=1) when HFS3_RANKS_RUNAI_DIST=1;
  - rclone copy (8 streams) into a fresh folder, then the 8 ranks on it.
"ranks apart": the most, over the rounds, between the first and the last rank's end in one run (seconds
apart: ranks held up after their shard landed). Time: from the forks to the last rank's slices in memory ("w/o imports"), and the
whole run (wall: one interpreter's imports, then the ranks). Env as bench_peers.py's (HFS3_BIN, HFS3_SHIM, HFS3_PEER_REMOTE, HFS3_PY, AWS_* dummies),
NGINX_ACCESS_LOG."""
import atexit, json, os, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cgrun import run as cgrun, cpu_source  # noqa: E402
from fusemount import Mount, rclone_args, timed, fresh_dir  # noqa: E402
import benchlib  # noqa: E402
from benchlib import tensor_bytes, med  # noqa: E402

model, endpoint, bp, rounds, out_json = sys.argv[1:6]
rounds = int(rounds)
bucket, prefix = bp.split("/", 1)
hfs3, shim, root = os.environ["HFS3_BIN"], os.environ["HFS3_SHIM"], os.environ["HFS3_ROOT"]
remote = os.environ["HFS3_PEER_REMOTE"]
py = os.environ.get("HFS3_PY") or os.path.join(root, ".venv/bin/python")
bench = os.path.join(root, "bench")
log = os.environ["NGINX_ACCESS_LOG"]
WORLD = 8
files = sorted(os.path.relpath(os.path.join(d, f), model) for d, _, fs in os.walk(model) for f in fs)
shards = [f for f in files if f.endswith(".safetensors") and "/" not in f]
model_bytes = sum(os.path.getsize(os.path.join(model, f)) for f in files)
shard_bytes = sum(os.path.getsize(os.path.join(model, f)) for f in shards)
gib = model_bytes / 2**30
work = tempfile.mkdtemp(prefix="hfs3-ranks.")
atexit.register(shutil.rmtree, work, True)
errfile = os.path.join(work, "stderr")
base = benchlib.client_env(endpoint)
go = os.path.join(bench, "rank_go.py")


LOG = open(log)


def sent(fn):
    """fn's run, and the body bytes nginx sent during it (its access log, one number a line; a row that fills a
    cache before its run moves the mark past that)"""
    LOG.seek(0, 2)
    r = fn()
    return r, sum(int(x) for x in LOG.read().split() if x.isdigit())


def run(cmd, env=None):
    return cgrun(cmd, env or base, errfile, "bench_ranks")


def shim_env(cache):
    return benchlib.shim_env(base, cache, hfs3, shim, remote)


def hfs3_cold(world):
    return lambda: run([py, go, str(world), "/models/peerbench"], shim_env(fresh_dir(os.path.join(work, "cache"))))


def hfs3_warm():
    c = fresh_dir(os.path.join(work, "cache"))
    subprocess.run([hfs3, "fetch", remote], env=shim_env(c) | {"LD_PRELOAD": ""}, check=True,
                   stdout=subprocess.DEVNULL)
    LOG.seek(0, 2)   # the fetch that filled the cache is not the run's
    return run([py, go, str(WORLD), "/models/peerbench"], shim_env(c))


mount = {}


def rclone_cold():
    if "m" in mount:
        mount.pop("m").stop()
    mnt, cache = fresh_dir(os.path.join(work, "mnt")), fresh_dir(os.path.join(work, "vfs"))
    m = mount["m"] = Mount(rclone_args("nginx", endpoint, bp, mnt, "full", cache), mnt, base,
                           os.path.join(work, "rclone.log"))
    return timed(m, lambda: run([py, go, str(WORLD), mnt]))


def rclone_warm():
    m = mount.pop("m", None)
    if m is None:
        raise SystemExit("bench_ranks: no rclone mount (its cold run failed)")
    try:
        return timed(m, lambda: run([py, go, str(WORLD), m.mnt]))
    finally:
        m.stop()


atexit.register(lambda: [m.stop() for m in mount.values()])


def runai(dist=False):
    env = dict(base, RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING="0")
    if dist:
        env.update(RUNAI_STREAMER_DIST="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    return run([py, go, str(WORLD), "--runai-dist" if dist else "--runai"] +
               [f"s3://{bucket}/{prefix}/{f}" for f in shards], env)


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def rclone_copy():
    d = fresh_dir(os.path.join(work, "copy"))
    cmd = ["rclone", "copy", "--config", "/dev/null", "--http-url", f"{endpoint}/{bp}/", ":http:", d,
           "--multi-thread-streams", "8", "--multi-thread-cutoff", "16M", "--transfers", "1", "--exclude", ".hfs3/**"]
    env = dict(base, HFS3_PY_=py, HFS3_GO_=go, HFS3_DEST_=d)
    try:
        return run(["bash", "-c", 'set -e; "$@"; exec "$HFS3_PY_" "$HFS3_GO_" 8 "$HFS3_DEST_"', "then_load"] + cmd, env)
    finally:
        shutil.rmtree(d, ignore_errors=True)


ONE, COLD, WARM = "hfs3 through the shim, 1 rank (whole tensors), cold", "hfs3 through the shim, 8 ranks, cold (one cache)", "hfs3 through the shim, 8 ranks, warm"
RCF, RCF_W = "rclone mount --vfs-cache-mode full --read-only, 8 ranks on one mount: cold", "rclone mount --vfs-cache-mode full --read-only, 8 ranks on one mount: warm"
RUNAI8 = "Run:ai Model Streamer, 8 processes each streaming every shard"
cases = {ONE: (hfs3_cold(1), "hfs3"), COLD: (hfs3_cold(WORLD), "hfs3"), WARM: (hfs3_warm, "hfs3"),
         RCF: (rclone_cold, "fuse"), RCF_W: (rclone_warm, "fusewarm"), RUNAI8: (runai, "peer")}
if os.environ.get("HFS3_RANKS_RUNAI_DIST") == "1":
    cases["Run:ai Model Streamer, distributed mode (gloo, RUNAI_STREAMER_DIST=1), 8 processes"] = (lambda: runai(True), "peer")
cases["rclone copy (8 streams), then 8 ranks on the local folder"] = (rclone_copy, "download")


want = sum(tensor_bytes(os.path.join(model, f)) for f in shards)
res = {k: {"wall": [], "cpu": [], "net": [], "sent": [], "spread": [], "failures": []} for k in cases}
for r in range(rounds):
    for k, (fn, kind) in cases.items():
        # the rank's own error line when there is one (rank_go.py says which rank and why), else the last
        got = benchlib.attempt(lambda: sent(fn), kind != "hfs3", res[k]["failures"], "bench_ranks", k,
                             lambda lines: next((x for x in lines if "rank_go: rank " in x), lines[-1]))
        if got is None:
            for x in ("wall", "cpu", "net", "sent", "spread"):
                res[k][x].append(None)
            continue
        (w, c, _, o), nbytes = got
        o = json.loads(o.strip().splitlines()[-1])
        if o["bytes"] != want:
            raise SystemExit(f"bench_ranks: {k}: the ranks read {o['bytes']} bytes, not {want}")
        res[k]["wall"].append(w)
        res[k]["cpu"].append(c)
        # w/o imports: from the forks to the last rank's slices; a download row adds its download (the run less rank_go's)
        res[k]["net"].append(w - o["total_s"] + o["load_s"] if kind == "download" else o["load_s"])
        res[k]["sent"].append(nbytes)
        # how far apart the ranks finished: ranks held up after the shard they wait for landed (a lock held
        # by another process: docs/performance.md "Eight ranks: where the time goes") spread by seconds
        res[k]["spread"].append(max(o["ranks_load_s"]) - min(o["ranks_load_s"]))
    print(f"bench_ranks: {gib:.2f} GiB round {r + 1}/{rounds} done", file=sys.stderr)


def ratios(k, ref, what):
    return benchlib.ratios(res, k, ref, what)


rows = []
for k, (fn, kind) in cases.items():
    x = res[k]
    rows.append({"tool": k, "kind": kind, "wall": med(x["wall"]), "cpu": med(x["cpu"]), "net": med(x["net"]),
                 "net_min": min([v for v in x["net"] if v is not None], default=float("nan")),
                 "net_max": max([v for v in x["net"] if v is not None], default=float("nan")),
                 "sent": med(x["sent"]), "sent_x": med(x["sent"]) / model_bytes if x["sent"] else float("nan"),
                 "x_cold_net": med(ratios(k, COLD, "net")), "x_one_net": med(ratios(k, ONE, "net")),
                 "wall_runs": [v and round(v, 3) for v in x["wall"]], "net_runs": [v and round(v, 3) for v in x["net"]],
                 "sent_runs": x["sent"], "spread": med(x["spread"]),
                 "spread_runs": [v if v is None else round(v, 3) for v in x["spread"]], "failures": x["failures"]})
targets = [{"what": "8 ranks, hfs3 cold <= 1.2x one rank's cold load (w/o imports)", "ratio": med(ratios(COLD, ONE, "net")),
            "limit": 1.2},
           {"what": "8 ranks, hfs3 cold: the server sends each byte once (bytes sent / the files' bytes)",
            "ratio": max([v / model_bytes for v in res[COLD]["sent"] if v is not None], default=float("nan")),
            "limit": 1.0}]
for t in targets:
    t["met"] = t["ratio"] <= t["limit"] + (0.001 if t["limit"] == 1.0 else 0)
    t["by"] = t["ratio"] / t["limit"]
summary = {"server": "nginx", "gib": gib, "files": len(files), "shards": len(shards), "rounds": rounds, "world": WORLD,
           "model_bytes": model_bytes, "shard_bytes": shard_bytes, "cpu_source": cpu_source, "rows": rows,
           "targets": targets}
json.dump(summary, open(out_json, "w"), indent=1)
print(f"\neight-rank table: {gib:.2f} GiB ({len(shards)} shards) from nginx, {WORLD} ranks each reading its 1/{WORLD} "
      f"of every tensor, median of {rounds} interleaved rounds; w/o imports: from the forks to the last rank's slices in memory")
print(f"{'what':92} {'wall s':>7} {'CPU s':>6} {'w/o imports s':>13} {'x 8 cold':>8} {'x 1 cold':>8} {'sent / model':>12} "
      f"{'ranks apart s':>13}")
for x in rows:
    print(f"{x['tool']:92} {x['wall']:7.2f} {x['cpu']:6.2f} {x['net']:13.2f} {x['x_cold_net']:7.2f}x {x['x_one_net']:7.2f}x "
          f"{x['sent'] / model_bytes:11.2f}x {max([v for v in x['spread_runs'] if v is not None], default=float('nan')):13.2f}" + (f"  ({len(x['failures'])} failed runs)" if x["failures"] else ""))
for t in targets:
    print(f"target: {t['what']}: {t['ratio']:.2f} -> " + ("MET" if t["met"] else f"NOT MET ({t['by']:.2f}x the target)"))
