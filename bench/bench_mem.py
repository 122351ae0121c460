#!/usr/bin/env python3
"""bench_mem.py OUT_JSON LABEL MODEL_DIR REMOTE - peak RSS (getrusage ru_maxrss of the process itself) of
`hfs3-manifest fetch` and of a cold load through the shim (the mmap loader) minus the same loader reading the
local copy without the shim, for one model. Appends one record to OUT_JSON (a JSON list)."""
import json, os, resource, shutil, subprocess, sys, tempfile

out, label, model, remote = sys.argv[1:5]
hfs3, shim, root = os.environ["HFS3_BIN"], os.environ["HFS3_SHIM"], os.environ["HFS3_ROOT"]
work = tempfile.mkdtemp(prefix="hfs3-mem.")
loader = [sys.executable, os.path.join(root, "bench/mmap_loader.py")]


def peak(cmd, env=None):
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if p.returncode:
        raise SystemExit(f"bench_mem: {cmd} failed")
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: measure each in its own short-lived python
    return None


def maxrss(cmd, env=None):
    code = ("import os, resource, subprocess, sys; p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
            "stderr=subprocess.DEVNULL); sys.exit(p.returncode) if p.returncode else "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", code] + cmd, env=env, stdout=subprocess.PIPE, check=True)
    return int(r.stdout) / 1024   # MiB


def cache():
    c = os.path.join(work, "cache")
    shutil.rmtree(c, ignore_errors=True)
    return c


size = sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model)
           if os.path.isfile(os.path.join(model, f)))
fetch = maxrss([hfs3, "fetch", remote], dict(os.environ, HFS3_CACHE_DIR=cache()))
plain = maxrss(loader + [model])
shimmed = maxrss(loader + ["/models/membench"], dict(os.environ, HFS3_CACHE_DIR=cache(), HFS3_HELPER=hfs3,
                                                    HFS3_MOUNTS=f"/models/membench={remote}", LD_PRELOAD=shim))
shutil.rmtree(work, ignore_errors=True)
recs = json.load(open(out)) if os.path.exists(out) else []
recs.append({"model": label, "gib": size / 2**30, "fetch_mib": fetch, "load_plain_mib": plain,
             "load_shim_mib": shimmed, "shim_minus_plain_mib": shimmed - plain})
json.dump(recs, open(out, "w"), indent=1)
r = recs[-1]
print(f"peak RSS, {label} ({r['gib']:.2f} GiB): fetch {fetch:.1f} MiB; mmap loader cold through the shim "
      f"{shimmed:.1f} MiB, from the local copy {plain:.1f} MiB: shim adds {shimmed - plain:.1f} MiB")
