#!/usr/bin/env bash
# t_shim_ancestors.sh - a mount's ancestor that exists on disk lists its own entries and the mounts below it,
# each once (issue 6, item 6): an HF hub directory with real repos beside mounted ones.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
H=$WORK/srv/hub
mkdir -p "$H/models--real--one" && echo x >"$H/real.txt"
export HFS3_MOUNTS="$H/models--a--b=s3test:models/flat;$H/models--c--d=s3test:models/hf;$H/deep/models--e--f=s3test:models/flat"
want=$(printf '%s\n' deep models--a--b models--c--d models--real--one real.txt)
shim_check "ls of a real ancestor: its entries and the mounts, once each" test "$(LD_PRELOAD=$HFS3_SHIM ls "$H")" = "$want"
shim_check "python os.listdir agrees" test "$(LD_PRELOAD=$HFS3_SHIM python3 -c 'import os, sys; print("\n".join(sorted(os.listdir(sys.argv[1]))))' "$H")" = "$want"
shim_check "python os.scandir: mounts are directories" test "$(LD_PRELOAD=$HFS3_SHIM python3 -c 'import os, sys; print(sorted(e.name for e in os.scandir(sys.argv[1]) if e.is_dir()))' "$H")" = "['deep', 'models--a--b', 'models--c--d', 'models--real--one']"
shim_check "find -maxdepth 1 agrees" test "$(LD_PRELOAD=$HFS3_SHIM find "$H" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort)" = "$want"
shim_check "a real ancestor above it lists hub once" test "$(LD_PRELOAD=$HFS3_SHIM ls "$WORK/srv")" = hub
shim_check "a mount below a real ancestor answers" test "$(LD_PRELOAD=$HFS3_SHIM cat "$H/models--a--b/a.txt")" = "hello from a"
shim_check "the real entries are still real" test "$(LD_PRELOAD=$HFS3_SHIM cat "$H/real.txt")" = x

# A synthesized ancestor (not on disk) is a directory of the cache (CACHE/mounts/ancestors/...), which a member of
# a shared cache can write: a relative name from a cwd or a descriptor there is looked up in the logical tree, where
# only the mounts and their ancestors exist (review of issue 22). The test plants as root into the skeleton it made.
V=$WORK/virt
export HFS3_MOUNTS="$V/mdl/m1=s3test:models/flat"
LD_PRELOAD=$HFS3_SHIM python3 -c 'import os, sys; os.chdir(sys.argv[1])' "$V/mdl" || exit 1
skel=$(find "$HFS3_CACHE_DIR/mounts/ancestors" -type d -path "*$V/mdl" | head -1)
shim_check "the synthesized ancestor has a skeleton directory in the cache" test -n "$skel" -a ! -e "$V"
echo planted >"$skel/evil" && mkdir "$skel/evildir" && echo planted >"$skel/evildir/f"
rel=$(LD_PRELOAD=$HFS3_SHIM bash -c 'cd "$1" && cat evil 2>&1; cat evildir/f 2>&1; cat ./evil 2>&1; cat m1/a.txt' _ "$V/mdl")
shim_check "cd into a synthesized ancestor: a name planted in its skeleton is ENOENT, the mount answers" \
  test "$rel" = "cat: evil: No such file or directory
cat: evildir/f: No such file or directory
cat: ./evil: No such file or directory
hello from a"
py=$(LD_PRELOAD=$HFS3_SHIM python3 - "$V/mdl" <<'PY' 2>&1
import errno, os, sys
out = []
def t(name, f):
    try:
        f()
        out.append(name + " ok")
    except OSError as e:
        out.append(name + " " + errno.errorcode[e.errno])
os.chdir(sys.argv[1])
t("open", lambda: os.close(os.open("evil", os.O_RDONLY)))
t("stat", lambda: os.stat("evil"))
t("lstat-dir", lambda: os.lstat("evildir"))
t("access", lambda: os.access("evil", os.R_OK) or (_ for _ in ()).throw(OSError(errno.ENOENT, "")))
t("create", lambda: os.close(os.open("new", os.O_WRONLY | os.O_CREAT, 0o644)))
t("mkdir", lambda: os.mkdir("newdir"))
d = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
t("openat", lambda: os.close(os.open("evil", os.O_RDONLY, dir_fd=d)))
t("statat", lambda: os.stat("evil", dir_fd=d))
t("openat-mount", lambda: os.close(os.open("m1/a.txt", os.O_RDONLY, dir_fd=d)))
t("open-creat-rdonly", lambda: os.close(os.open("evildir/f", os.O_RDONLY | os.O_CREAT, 0o644)))
t("open-rdwr", lambda: os.close(os.open("evil", os.O_RDWR)))
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.fopen.restype = ctypes.c_void_p
libc.freopen.restype = ctypes.c_void_p
def fo(name, mode):
    def f():
        if not libc.fopen(name, mode):
            raise OSError(ctypes.get_errno(), "")
    return f
t("fopen-r", fo(b"evil", b"r"))
t("fopen-a", fo(b"evildir/f", b"a"))
def fre():
    st = libc.fopen(b"/dev/null", b"r")
    if not libc.freopen(b"evil", b"r", ctypes.c_void_p(st)):
        raise OSError(ctypes.get_errno(), "")
t("freopen", fre)
print(" ".join(out))
PY
)
shim_check "open, stat, access, openat of planted names: ENOENT; creates: EROFS (got: $py)" test "$py" = \
  "open ENOENT stat ENOENT lstat-dir ENOENT access ENOENT create EROFS mkdir EROFS openat ENOENT statat ENOENT openat-mount ok open-creat-rdonly ENOENT open-rdwr ENOENT fopen-r ENOENT fopen-a ENOENT freopen ENOENT"
up=$(LD_PRELOAD=$HFS3_SHIM bash -c 'cd "$1" && ls && cd m1 && ls .. && cat ../evil 2>&1; cat ../evildir/f 2>&1' _ "$V/mdl")
shim_check "its listing and '..' from the mount below it: only the mount" test "$up" = "m1
m1
cat: ../evil: No such file or directory
cat: ../evildir/f: No such file or directory"
exit $((SHIM_FAILS > 0))
