#!/usr/bin/env python3
"""shim_python.py M REV SRC - run under the shim: what Python and vLLM-style loaders do with a mount
(listdir, scandir, walk, rglob, glob, realpath through HF-cache symlinks, json, mmap, copytree, subprocess
with cwd=, chdir, fork, threads, write attempts). M holds the mounts hf/ and flat/; SRC the fixture sources."""
import errno, filecmp, glob, hashlib, json, mmap, os, pathlib, shutil, subprocess, sys, threading

M, REV, SRC = sys.argv[1:4]
fails = 0


def check(name, cond):
    global fails
    print(("ok " if cond else "not ok ") + name)
    if not cond:
        fails += 1


def err(fn):
    try:
        fn()
    except OSError as e:
        return e.errno
    return 0


def walk(root):
    out = []
    for dp, dn, fn in os.walk(root):
        out.append((os.path.relpath(dp, root), sorted(dn), sorted(fn)))
    return sorted(out)


HF, FLAT = M + "/hf", M + "/flat"
check("ancestor is a dir", os.path.isdir(M) and os.path.isdir(os.path.dirname(M)))
check("ancestor lists the mounts", sorted(os.listdir(M)) == ["flat", "hf"])
check("isdir(mount)", os.path.isdir(HF) and not os.path.isfile(HF))
for name in ("hf", "flat"):
    check("os.walk %s equals the source" % name, walk(M + "/" + name) == walk(SRC + "/" + name))
    check("os.listdir %s" % name, sorted(os.listdir(M + "/" + name)) == sorted(os.listdir(SRC + "/" + name)))
    mine = sorted((e.name, e.is_dir(), e.is_file(), e.is_symlink()) for e in os.scandir(M + "/" + name))
    theirs = sorted((e.name, e.is_dir(), e.is_file(), e.is_symlink()) for e in os.scandir(SRC + "/" + name))
    check("os.scandir %s types" % name, mine == theirs)
    a = sorted(str(p.relative_to(M + "/" + name)) for p in pathlib.Path(M + "/" + name).rglob("*") if p.is_file())
    b = sorted(str(p.relative_to(SRC + "/" + name)) for p in pathlib.Path(SRC + "/" + name).rglob("*") if p.is_file())
    check("rglob + is_file %s" % name, a == b and len(a) > 3)

snap = HF + "/snapshots/" + open(HF + "/refs/main").read().strip()
check("refs/main names the revision", snap.endswith(REV))
shards = sorted(glob.glob(os.path.join(snap, "*.safetensors")))
check("glob *.safetensors", shards == [snap + "/model-00001-of-00002.safetensors",
                                       snap + "/model-00002-of-00002.safetensors"])
idx = json.load(open(os.path.join(snap, "model.safetensors.index.json")))
check("index json: joined names exist", all(os.path.isfile(os.path.join(snap, f))
                                            for f in set(idx["weight_map"].values())))
cfg = json.load(open(snap + "/config.json"))
check("json.load config", cfg["model_type"] == "tiny")
blob = hashlib.sha256(open(SRC + "/hf/snapshots/%s/config.json" % REV, "rb").read()).hexdigest()
check("realpath through HF symlinks", os.path.realpath(snap + "/config.json") == HF + "/blobs/" + blob)
check("Path.resolve(strict)", str(pathlib.Path(snap + "/config.json").resolve(strict=True)) == HF + "/blobs/" + blob)
check("realpath of the mount", os.path.realpath(HF) == HF)
check("readlink", os.readlink(snap + "/config.json") == "../../blobs/" + blob)
check("lstat shows a symlink", os.path.islink(snap + "/config.json") and os.path.isfile(snap + "/config.json"))
with open(shards[0], "rb") as f:
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    data = bytes(mm)
    mm.close()
check("mmap a shard", data == open(SRC + "/hf/snapshots/%s/model-00001-of-00002.safetensors" % REV, "rb").read())
check("getsize", os.path.getsize(shards[1]) == os.path.getsize(SRC + "/hf/snapshots/%s/model-00002-of-00002.safetensors" % REV))
st1, st2 = os.stat(shards[0]), os.stat(HF + "/blobs/" + os.readlink(shards[0]).split("/")[-1])
check("symlink and blob share identity", (st1.st_dev, st1.st_ino) == (st2.st_dev, st2.st_ino))
with open(shards[0], "rb") as f:
    st3 = os.fstat(f.fileno())
check("fstat agrees with stat", (st1.st_dev, st1.st_ino, st1.st_size) == (st3.st_dev, st3.st_ino, st3.st_size))
check("spellings", os.path.isfile("/" + FLAT.replace("/", "//") + "/./dir/../a.txt") and os.path.isdir(FLAT + "/"))

# copying out
out = os.environ["WORK"] + "/copy"
shutil.copytree(FLAT, out + "/flat", symlinks=True)
cmp = filecmp.dircmp(out + "/flat", SRC + "/flat")
check("copytree(symlinks=True) equals the source", not cmp.left_only and not cmp.right_only and not cmp.diff_files
      and os.readlink(out + "/flat/link-to-a") == "a.txt")
shutil.copytree(HF + "/snapshots", out + "/snaps")
check("copytree following links", open(out + "/snaps/%s/sub/nested.txt" % REV).read() == "nested file\n")
shutil.copy2(FLAT + "/a.txt", out + "/a2.txt")
check("copy2 (xattrs, times)", open(out + "/a2.txt").read() == "hello from a\n")

# cwd
r = subprocess.run(["pwd", "-P"], cwd=snap + "/sub", capture_output=True, text=True)
check("subprocess cwd=mount: pwd -P", r.returncode == 0 and r.stdout.strip() == snap + "/sub")
r = subprocess.run(["cat", "nested.txt"], cwd=snap + "/sub", capture_output=True, text=True)
check("subprocess cwd=mount: relative cat", r.stdout == "nested file\n")
here = os.getcwd()
check("parent cwd unchanged by the vfork child", here == os.getcwd() and not here.startswith(M))
os.chdir(snap)
check("chdir + getcwd", os.getcwd() == snap and sorted(os.listdir(".")) == sorted(os.listdir(snap)))
check("relative open", open("sub/nested.txt").read() == "nested file\n")
os.chdir(here)

# errors
check("write is EROFS", err(lambda: open(FLAT + "/a.txt", "w")) == errno.EROFS)
check("create is EROFS", err(lambda: open(FLAT + "/new", "x")) == errno.EROFS)
check("mkdir is EROFS", err(lambda: os.mkdir(FLAT + "/d")) == errno.EROFS)
check("remove is EROFS", err(lambda: os.remove(FLAT + "/a.txt")) == errno.EROFS)
check("file/x is ENOTDIR", err(lambda: os.stat(FLAT + "/a.txt/x")) == errno.ENOTDIR)
check("missing is ENOENT", err(lambda: os.stat(FLAT + "/nope")) == errno.ENOENT)
check("missing mount under an ancestor", err(lambda: os.stat(M + "/nope")) == errno.ENOENT)

# fork after first use; threads
pid = os.fork()
if pid == 0:
    ok = open(FLAT + "/dir/deeper/c.txt").read() == "c\n" and sorted(os.listdir(FLAT + "/dir")) == ["b.bin", "deeper", "up"]
    os._exit(0 if ok else 1)
check("fork after first use", os.waitpid(pid, 0)[1] == 0)
prog = ("import os, threading, sys\nM=sys.argv[1]\nres=[]\n"
        "def w():\n    res.append(open(M+'/flat/a.txt').read()=='hello from a\\n' and len(os.listdir(M+'/hf/blobs'))==5)\n"
        "ts=[threading.Thread(target=w) for _ in range(16)]\n[t.start() for t in ts]\n[t.join() for t in ts]\n"
        "sys.exit(0 if all(res) and len(res)==16 else 1)\n")
check("16 threads first-touch a mount", subprocess.run([sys.executable, "-c", prog, M]).returncode == 0)

# the rest of the filesystem is unchanged
check("non-mount listing", sorted(os.listdir(SRC + "/flat")) == ["a.txt", "dir", "dirlink", "empty", "link-to-a", "same.txt"])
check("non-mount ENOENT", err(lambda: os.stat(os.environ["WORK"] + "/nope")) == errno.ENOENT)
sys.exit(1 if fails else 0)
