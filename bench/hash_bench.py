#!/usr/bin/env python3
"""hash_bench.py MODEL_DIR REMOTE ROUNDS - hashing throughput of `hfs3-manifest build --local` against
`openssl dgst -sha256` and `sha256sum` run one file after another over the same files, in the same run,
interleaved rounds, median. Also the helper's peak memory (ru_maxrss of the child)."""
import json, os, resource, statistics, subprocess, sys, time

model, remote, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
hfs3 = os.environ["HFS3_BIN"]
files = sorted(os.path.join(model, f) for f in os.listdir(model) if os.path.isfile(os.path.join(model, f)))
total = sum(os.path.getsize(f) for f in files)


def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def seq(tool):
    t = 0.0
    for f in files:
        t += run(tool + [f])
    return t


def peak_rss_kib(cmd):
    # a fresh python child per measurement so ru_maxrss is this command's alone
    code = ("import resource,subprocess,sys;subprocess.run(sys.argv[1:],check=True,stdout=subprocess.DEVNULL,"
            "stderr=subprocess.DEVNULL);print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    return int(subprocess.check_output([sys.executable, "-c", code] + cmd).decode())


for f in files:  # warm the page cache so every tool reads from memory
    with open(f, "rb") as fh:
        while fh.read(1 << 24):
            pass
build = [hfs3, "build", "--local", model, "-o", "/dev/null", remote]
times = {"hfs3-manifest build --local": [], "openssl dgst -sha256 (one file after another)": [],
         "sha256sum (one file after another)": []}
for r in range(rounds):
    times["hfs3-manifest build --local"].append(run(build))
    times["openssl dgst -sha256 (one file after another)"].append(seq(["openssl", "dgst", "-sha256"]))
    times["sha256sum (one file after another)"].append(seq(["sha256sum"]))
med = {k: statistics.median(v) for k, v in times.items()}
ref = med["hfs3-manifest build --local"]
print(f"\nhashing {total / 2**30:.2f} GiB in {len(files)} files, {os.cpu_count()} cores, median of {rounds} rounds")
print(f"{'tool':48} {'seconds':>8} {'GB/s':>7} {'hfs3 speedup':>13}")
for k, v in med.items():
    print(f"{k:48} {v:8.2f} {total / v / 1e9:7.2f} {v / ref:12.2f}x")
rss = peak_rss_kib(build)
print(f"hfs3-manifest build --local peak memory: {rss / 1024:.1f} MiB (target < 64 MiB)")
ratio = med["openssl dgst -sha256 (one file after another)"] / ref
# build also writes chunk digests (a second sha256 stream over the same bytes) for the files that get them, so it
# computes more digests per byte than the tools it is compared with: say how many, and the rate per digest
out = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"hfs3-hash-bench.{os.getpid()}.json")
subprocess.run(build[:-3] + ["-o", out, remote], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
entries = json.load(open(out)).get("entries", [])
os.unlink(out)
twice = sum(e.get("size", 0) for e in entries if e.get("chunks"))
per_byte = (total + twice) / total
print(f"target: >= 1.8x openssl dgst -> {ratio:.2f}x {'MET' if ratio >= 1.8 else 'NOT MET'}; "
      f"memory {'MET' if rss < 64 * 1024 else 'NOT MET'}")
print(f"build computes {per_byte:.2f} sha256 digests per byte (the file's and, for {twice / total:.0%} of the bytes, "
      f"its chunk digests), openssl and sha256sum one: per digest, build is {ratio * per_byte:.2f}x openssl dgst")
