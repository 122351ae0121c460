"""benchlib.py - what the peer table (bench_peers.py) and the eight-rank table (bench_ranks.py) share: the clients'
clean environment, hfs3's shim environment, the bytes a load must end with, one timed try of a row (a failed
peer run counted and run once more), and the medians and per-round ratios of the tables."""
import json, os, statistics, struct, sys


def client_env(endpoint):
    """one clean environment for every S3 client: the endpoint of this server and nothing of the Node server's;
    the keys (dummies) by environment only, never argv"""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("AWS_", "RUNAI_STREAMER_", "HFS3_MOUNTS", "HFS3_CACHE_DIR", "LD_PRELOAD"))}
    base.update(AWS_ENDPOINT_URL=endpoint, AWS_EC2_METADATA_DISABLED="true", AWS_REGION="us-east-1",
                AWS_DEFAULT_REGION="us-east-1", AWS_ACCESS_KEY_ID=os.environ["AWS_ACCESS_KEY_ID"],
                AWS_SECRET_ACCESS_KEY=os.environ["AWS_SECRET_ACCESS_KEY"])
    return base


def shim_env(base, cache, hfs3, shim, remote):
    """a program under hfs3's shim: the model at /models/peerbench, cache CACHE; hfs3 reads its own remote
    (rclone variables) and nothing of the peers' AWS_* settings"""
    env = dict(base, HFS3_CACHE_DIR=cache, HFS3_HELPER=hfs3, HFS3_MOUNTS=f"/models/peerbench={remote}",
               LD_PRELOAD=shim)
    for k in ("AWS_ENDPOINT_URL", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        env.pop(k, None)
    return env


def tensor_bytes(path):
    """the bytes of a safetensors file's tensors (what a load of it must end with)"""
    with open(path, "rb") as f:
        h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    return sum(t["data_offsets"][1] - t["data_offsets"][0] for k, t in h.items() if k != "__metadata__")


def attempt(fn, retry, failures, who, row, pick=None):
    """fn() once, or (retry) up to twice: a peer's failed run is counted in failures (its last line, or the line
    pick chooses from its message), not timed, and run once more; failed twice, None (no time in that round, and
    no ratio of that round uses it). A row without retry (hfs3's, the floors) fails the table."""
    for _ in range(2 if retry else 1):
        try:
            return fn()
        except SystemExit as e:
            if not retry:
                raise
            lines = str(e).strip().splitlines() or [""]
            failures.append((pick(lines) if pick else lines[-1])[-300:])
            print(f"{who}: {row} failed: {failures[-1]}", file=sys.stderr)
    return None


def med(v):
    v = [x for x in v if x is not None and x == x]
    return statistics.median(v) if v else float("nan")


def ratios(res, k, ref, what="wall"):
    """row k over row ref, round by round, in the rounds where both have a time"""
    if ref not in res:   # a row BENCH_ONLY left out
        return []
    return [a / b for a, b in zip(res[k][what], res[ref][what]) if a is not None and b]
