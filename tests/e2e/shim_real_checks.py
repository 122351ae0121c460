#!/usr/bin/env python3
"""shim_real_checks.py FLAT_MOUNT FLAT_SRC HUB_MOUNT HUB_SRC - run under LD_PRELOAD=libhfs3shim.so: what
Python programs (vLLM, transformers, huggingface_hub) do to a model folder, checked against the source folders
rclone uploaded. Prints one ok line per check; exits 1 on the first failure (explicit checks, not assert)."""
import errno, glob, hashlib, json, mmap, os, shutil, struct, subprocess, sys, tempfile
from pathlib import Path

flat, flat_src, hub, hub_src = sys.argv[1:5]


def ok(msg):
    print("ok:", msg, flush=True)


def check(cond, what):
    """An explicit check (an assert would vanish under python -O / PYTHONOPTIMIZE): exits 1 naming what failed."""
    if not cond:
        print("not ok:", what, flush=True)
        sys.exit(1)


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


visible = sorted(n for n in os.listdir(flat_src) if not n.startswith("."))
check(os.path.isdir(flat) and os.path.isdir(os.path.dirname(flat)), "mount and its ancestor are directories")
check(sorted(os.listdir(flat)) == visible, (os.listdir(flat), visible))
ok("os.listdir, os.path.isdir of the mount and its ancestor")

with os.scandir(flat) as it:
    ents = {e.name: (e.is_file(), e.is_dir(), e.stat().st_size) for e in it}
check(ents == {n: (True, False, os.path.getsize(os.path.join(flat_src, n))) for n in visible}, ents)
ok("os.scandir: names, d_type, sizes")

walked = sorted(os.path.relpath(os.path.join(d, f), hub) for d, _, fs in os.walk(hub) for f in fs)
want = sorted(os.path.relpath(os.path.join(d, f), hub_src) for d, _, fs in os.walk(hub_src) for f in fs)
check(walked == want, set(walked) ^ set(want))
ok(f"os.walk over the hf-cache mount: {len(walked)} files")

files = sorted(str(p) for p in Path(flat).rglob("*") if p.is_file())
check(files == [os.path.join(flat, n) for n in visible], files)
shards = sorted(glob.glob(os.path.join(flat, "*.safetensors")))
check(len(shards) == 2, 'len(shards) == 2')
check(Path(flat, "config.json").exists() and Path(flat, "config.json").is_file(), 'Path(flat, "config.json").exists() and Path(flat, "config.json").is_file()')
check(Path(flat, "config.json").resolve() == Path(flat, "config.json"), 'Path(flat, "config.json").resolve() == Path(flat, "config.json")')
ok("Path.rglob + is_file (vLLM's walk), glob *.safetensors, exists/is_file/resolve")

check(json.load(open(os.path.join(flat, "config.json"))) == json.load(open(os.path.join(flat_src, "config.json"))), 'json.load(open(os.path.join(flat, "config.json"))) == json.load(open(os.path.join(flat_src, "config.json")))')
index = json.load(open(os.path.join(flat, "model.safetensors.index.json")))
check({os.path.join(flat, f) for f in index["weight_map"].values()} == set(shards), '{os.path.join(flat, f) for f in index["weight_map"].values()} == set(shards)')
ok("json.load of config.json and the safetensors index; joined paths compare equal")

for s in shards:
    with open(s, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        st = os.fstat(f.fileno())
        check(st.st_size == os.path.getsize(s) == os.path.getsize(os.path.join(flat_src, os.path.basename(s))), 'st.st_size == os.path.getsize(s) == os.path.getsize(os.path.join(flat_src, os.path.basename(s)))')
        check((st.st_dev, st.st_ino) == (os.stat(s).st_dev, os.stat(s).st_ino), "fstat agrees with stat")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            check(hashlib.sha256(m).hexdigest() == sha(os.path.join(flat_src, os.path.basename(s))), 'hashlib.sha256(m).hexdigest() == sha(os.path.join(flat_src, os.path.basename(s)))')
            for name, t in header.items():
                if name != "__metadata__":
                    a, b = t["data_offsets"]
                    check(len(m[8 + n + a:8 + n + b]) == b - a, 'len(m[8 + n + a:8 + n + b]) == b - a')
ok("safetensors: header parsed, data mmapped, bytes equal the source; fstat identity equals stat")

rev = open(os.path.join(hub, "refs", "main")).read().strip()
cfg = os.path.join(hub, "snapshots", rev, "config.json")
check(json.load(open(cfg)) == json.load(open(os.path.join(hub_src, "snapshots", rev, "config.json"))), 'json.load(open(cfg)) == json.load(open(os.path.join(hub_src, "snapshots", rev, "config.json")))')
target = os.readlink(cfg)
check(target == os.readlink(os.path.join(hub_src, "snapshots", rev, "config.json")), 'target == os.readlink(os.path.join(hub_src, "snapshots", rev, "config.json"))')
check(os.path.islink(cfg) and os.path.realpath(cfg) == os.path.normpath(os.path.join(hub, "snapshots", rev, target)), 'os.path.islink(cfg) and os.path.realpath(cfg) == os.path.normpath(os.path.join(hub, "snapshots", rev, target))')
check(os.path.realpath(cfg).startswith(hub + "/blobs/"), 'os.path.realpath(cfg).startswith(hub + "/blobs/")')
ok("huggingface_hub's way: refs/main, then snapshots/<rev>/config.json; readlink and realpath through the link")

dst = tempfile.mkdtemp()
shutil.copytree(flat, os.path.join(dst, "copy"))
for n in visible:
    check(sha(os.path.join(dst, "copy", n)) == sha(os.path.join(flat_src, n)), n)
shutil.rmtree(dst)
ok("shutil.copytree out of the mount")

out = subprocess.run(["pwd", "-P"], cwd=flat, capture_output=True, text=True, check=True).stdout.strip()
check(out == flat, out)
out = subprocess.run(["ls"], cwd=flat, capture_output=True, text=True, check=True).stdout.split()
check(out == visible, out)
ok("subprocess.run(..., cwd=mount): pwd -P and ls see the mount")

os.chdir(os.path.join(hub, "snapshots", rev))
check(os.getcwd() == os.path.join(hub, "snapshots", rev), 'os.getcwd() == os.path.join(hub, "snapshots", rev)')
check(json.load(open("config.json")) == json.load(open(cfg)), 'json.load(open("config.json")) == json.load(open(cfg))')
os.chdir("/")
ok("chdir into the mount, getcwd, relative open")

pid = os.fork()
if pid == 0:
    try:
        with open(shards[0], "rb") as f:
            f.read(4096)
        os.listdir(flat)
        os._exit(0)
    except BaseException:
        os._exit(1)
_, status = os.waitpid(pid, 0)
check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, 'os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0')
ok("fork after first use: the child lists and reads")

for what, fn in [("open w", lambda: open(os.path.join(flat, "config.json"), "w")),
                 ("create", lambda: open(os.path.join(flat, "new.txt"), "x")),
                 ("mkdir", lambda: os.mkdir(os.path.join(flat, "d"))),
                 ("unlink", lambda: os.unlink(os.path.join(flat, "config.json"))),
                 ("rename", lambda: os.rename(os.path.join(flat, "config.json"), os.path.join(flat, "c2"))),
                 ("chmod", lambda: os.chmod(os.path.join(flat, "config.json"), 0o644))]:
    try:
        fn()
        raise AssertionError(what + " succeeded")
    except OSError as e:
        check(e.errno == errno.EROFS, (what, e))
ok("write attempts get EROFS")

for bad, code in [(os.path.join(flat, "config.json", "x"), errno.ENOTDIR), (os.path.join(flat, "nope"), errno.ENOENT)]:
    try:
        os.stat(bad)
        raise AssertionError(bad)
    except OSError as e:
        check(e.errno == code, (bad, e))
odd = "/" + flat.replace("/", "//") + "/./config.json"
check(os.stat(odd).st_size == os.path.getsize(os.path.join(flat_src, "config.json")), 'os.stat(odd).st_size == os.path.getsize(os.path.join(flat_src, "config.json"))')
ok("ENOTDIR for file/x, ENOENT for a missing name, //a//b/./x spellings")
