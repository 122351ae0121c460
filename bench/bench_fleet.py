#!/usr/bin/env python3
"""bench_fleet.py - a fleet at once (issue 45 item 1): N simulated nodes (separate processes, each with its own
cache, HOME and rclone remote: its own credentials file) start together at a barrier and cold-load one model
through the shim (a Python reader under LD_PRELOAD hashing every file of the mount) against one origin, the local
S3 server behind tests/e2e/s3proxy.py acting as S3 under load: a request-rate limit per prefix answered with
503 SlowDown beyond it, and a bandwidth cap per connection and in total.

    bench_fleet.py OUT.json   (environment: S3_ENDPOINT of scripts/s3env.sh, HFS3_BIN, HFS3_SHIM, HFS3_ROOT;
                               BENCH_FLEET_NODES=16, BENCH_FLEET_MIB=48 (the model: two shards of half that,
                               plus config and tokenizer), BENCH_FLEET_RATE=10 (requests/s per prefix),
                               BENCH_FLEET_BW_MIB=64 (MiB/s in total), BENCH_FLEET_CONN_MIB=16 (MiB/s a connection))

Reported: the time until the last node has the model (barrier to last exit), the origin's requests and bytes
(what the proxy forwarded), the 503s, the failed nodes (a node fails when its reader exits non-zero or any file's
sha256 differs), and the floor max(bytes / bandwidth, requests / rate) over the requests the origin served."""
import hashlib, json, os, shutil, subprocess, sys, tempfile, time

out = sys.argv[1]
root, hfs3, shim = os.environ["HFS3_ROOT"], os.environ["HFS3_BIN"], os.environ["HFS3_SHIM"]
endpoint = os.environ["S3_ENDPOINT"]
N = int(os.environ.get("BENCH_FLEET_NODES", "16"))
MIB = int(os.environ.get("BENCH_FLEET_MIB", "48"))
RATE = float(os.environ.get("BENCH_FLEET_RATE", "10"))
BW = int(os.environ.get("BENCH_FLEET_BW_MIB", "64")) << 20
CONN = int(os.environ.get("BENCH_FLEET_CONN_MIB", "16")) << 20
work = tempfile.mkdtemp(prefix="hfs3-fleet.")
model = os.path.join(work, "model")
key = "models/fleet"


def sh(*a, **kw):
    return subprocess.run(a, check=True, **kw)


try:
    os.makedirs(model)
    half = MIB // 2
    sh(sys.executable, os.path.join(root, "scripts/gen_model.py"), "flat", model, "--shards", f"{half},{half}",
       "--seed", "45", stdout=subprocess.DEVNULL)
    files = sorted(os.path.relpath(os.path.join(d, f), model) for d, _, fs in os.walk(model) for f in fs)
    files = [f for f in files if not any(c.startswith(".") for c in f.split("/"))]
    want = {f: hashlib.sha256(open(os.path.join(model, f), "rb").read()).hexdigest() for f in files}
    size = sum(os.path.getsize(os.path.join(model, f)) for f in files)
    sh("rclone", "copy", model, f"s3test:{key}")
    sh(hfs3, "build", f"s3test:{key}", stdout=subprocess.DEVNULL)
    plog = os.path.join(work, "proxy.log")
    proxy = subprocess.Popen([sys.executable, os.path.join(root, "tests/e2e/s3proxy.py"), "--target",
                              endpoint.replace("http://", ""), "--log", plog, "--rate", str(CONN),
                              "--total-rate", str(BW), "--slowdown-rate", str(RATE)],
                             stdout=subprocess.PIPE, text=True)
    port = int(proxy.stdout.readline().split()[1])
    go = os.path.join(work, "go")
    reader = ("import hashlib, json, os, sys, time\n"
              "while not os.path.exists(sys.argv[1]): time.sleep(0.005)\n"
              "print(json.dumps({f: hashlib.sha256(open('/fleet/m/' + f, 'rb').read()).hexdigest() "
              "for f in sys.argv[2:]}))\n")
    procs = []
    for i in range(N):
        home = os.path.join(work, f"node{i}")
        os.makedirs(os.path.join(home, "cache"))
        conf = os.path.join(home, "rclone.conf")   # each node its own credentials file
        with open(conf, "w") as f:
            f.write(f"[origin]\ntype = s3\nprovider = Other\naccess_key_id = S3RVER\nsecret_access_key = S3RVER\n"
                    f"endpoint = http://127.0.0.1:{port}\nregion = us-east-1\nforce_path_style = true\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RCLONE_CONFIG", "HFS3_", "LD_PRELOAD"))}
        env.update(HOME=home, RCLONE_CONFIG=conf, HFS3_CACHE_DIR=os.path.join(home, "cache"), HFS3_HELPER=hfs3,
                   HFS3_MOUNTS=f"/fleet/m=origin:{key}", LD_PRELOAD=shim)
        procs.append(subprocess.Popen([sys.executable, "-c", reader, go] + files, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    time.sleep(1.0)   # every node waits at the barrier
    t0 = time.monotonic()
    open(go, "w").close()
    failed, errors, last = 0, [], 0.0
    pending = list(range(N))
    results = [None] * N
    while pending:
        for i in list(pending):
            if procs[i].poll() is not None:
                results[i] = (procs[i].returncode, procs[i].stdout.read(), procs[i].stderr.read(),
                              time.monotonic() - t0)
                pending.remove(i)
        time.sleep(0.02)
    for rc, so, se, t in results:
        last = max(last, t)
        ok = rc == 0
        if ok:
            try:
                ok = json.loads(so) == want
            except ValueError:
                ok = False
        if not ok:
            failed += 1
            errors.append((se.strip().splitlines() or ["exit %d" % rc])[-1][-300:])
    proxy.terminate()
    proxy.wait()
    reqs = served = refused = nbytes = 0
    for line in open(plog):
        w = line.split()
        reqs += 1
        if w[4] == "slowdown-503":
            refused += 1
            continue
        served += 1
        nbytes += int(next(x for x in w if x.startswith("bytes="))[6:])
    floor = max(nbytes / BW, served / RATE)
    r = dict(nodes=N, model_bytes=size, files=len(files), rate=RATE, bw=BW, conn_bw=CONN, wall=last,
             requests=reqs, served=served, refused=refused, origin_bytes=nbytes, failed=failed, errors=errors[:5],
             floor=floor, floor_bytes=nbytes / BW, floor_requests=served / RATE)
    json.dump(r, open(out, "w"), indent=1)
    print(f"fleet: {N} nodes, {size / 2**20:.1f} MiB model: last node after {last:.1f} s; origin: {served} requests "
          f"served, {nbytes / 2**20:.0f} MiB ({nbytes / size / N:.2f}x the model per node); "
          f"{refused} answered 503 SlowDown; {failed} nodes failed; floor {floor:.1f} s "
          f"(bytes {nbytes / BW:.1f} s, requests {served / RATE:.1f} s): {last / floor:.2f}x the floor")
    for e in errors[:5]:
        print("  failed:", e)
finally:
    shutil.rmtree(work, ignore_errors=True)
