#!/usr/bin/env bash
# t_shim_into_mount.sh - nothing is renamed or linked into a mount (issue 25 item 3): rename, renameat,
# renameat2, link, linkat, symlink and symlinkat whose destination is in a mount give EROFS even when the
# source is outside it, and so do mv and ln. The mount point here is a real, empty directory the test made:
# under the shim it is the mount, so it must never receive the file (a check of the source alone would let
# the real call put it there). A destination given relative to a descriptor of the mount is refused too, and
# nothing lands in the cache's tree of the mount either. Offline, the fixture's index and blobs (mkindex).
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
export HOME=$WORK/home
mkdir -p "$HOME"
R=$WORK/real/flat            # a real directory at the mount point, made here and empty
mkdir -p "$R"
export HFS3_MOUNTS="$R=s3test:models/flat"
SRC=$WORK/outside
mkdir -p "$SRC"
echo "a file outside" >"$SRC/x"
mkdir "$SRC/d"
tree_before=$(find "$HFS3_CACHE_DIR" | sort | sha256sum)

shim_check "the mount answers at the real directory's path" test "$(shim cat "$R/a.txt")" = "hello from a"

# each call from Python (libc's own symbols, so the shim's), the errno printed; renameat2 through ctypes
cat >"$WORK/calls.py" <<'PY'
import ctypes, errno, os, sys
m, src = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
def err(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def c_call(fn, *a):
    def f():
        if fn(*a) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    return f
mfd = os.open(m, os.O_RDONLY | os.O_DIRECTORY)
b = os.fsencode
checks = {
    "rename": err(lambda: os.rename(src + "/x", m + "/new")),
    "rename dir": err(lambda: os.rename(src + "/d", m + "/newdir")),
    "rename over a file": err(lambda: os.rename(src + "/x", m + "/a.txt")),
    "renameat (dir fd of the mount)": err(lambda: os.rename(src + "/x", "new", dst_dir_fd=mfd)),
    "renameat2": err(c_call(libc.renameat2, AT_FDCWD, b(src + "/x"), AT_FDCWD, b(m + "/new"), 0)),
    "renameat2 NOREPLACE": err(c_call(libc.renameat2, AT_FDCWD, b(src + "/x"), AT_FDCWD, b(m + "/new"), 1)),
    "renameat2 (dir fd)": err(c_call(libc.renameat2, AT_FDCWD, b(src + "/x"), mfd, b"new", 0)),
    "link": err(lambda: os.link(src + "/x", m + "/new")),
    "linkat (dir fd of the mount)": err(lambda: os.link(src + "/x", "new", dst_dir_fd=mfd)),
    "linkat AT_SYMLINK_FOLLOW": err(c_call(libc.linkat, AT_FDCWD, b(src + "/x"), AT_FDCWD, b(m + "/new"), 0x400)),
    "symlink": err(lambda: os.symlink(src + "/x", m + "/new")),
    "symlinkat (dir fd of the mount)": err(lambda: os.symlink(src + "/x", "new", dir_fd=mfd)),
    "rename out of the mount": err(lambda: os.rename(m + "/a.txt", src + "/stolen")),
    "link out of the mount": err(lambda: os.link(m + "/a.txt", src + "/stolen")),
}
for k, v in checks.items():
    print("%s: %s" % (k, v))
PY
shim python3 "$WORK/calls.py" "$R" "$SRC" >"$WORK/calls.out" 2>&1
cat "$WORK/calls.out"
shim_check "every call ran" test "$(grep -c ': ' "$WORK/calls.out")" = 14
shim_check "every call: EROFS" test "$(grep -c ': EROFS$' "$WORK/calls.out")" = 14

# coreutils: mv and ln into the mount fail, the source stays
shim mv "$SRC/x" "$R/new" 2>"$WORK/mv.err"; rc=$?
shim_check "mv FILE M/new: fails, read-only file system" test "$rc" != 0 -a "$(grep -c 'Read-only file system' "$WORK/mv.err")" = 1
shim mv "$SRC/x" "$R/" 2>"$WORK/mv2.err"; rc=$?
shim_check "mv FILE M/: fails, read-only file system" test "$rc" != 0 -a "$(grep -c 'Read-only file system' "$WORK/mv2.err")" = 1
shim ln "$SRC/x" "$R/new" 2>"$WORK/ln.err"; rc=$?
shim_check "ln FILE M/new: fails, read-only file system" test "$rc" != 0 -a "$(grep -c 'Read-only file system' "$WORK/ln.err")" = 1
shim ln -s "$SRC/x" "$R/new" 2>"$WORK/lns.err"; rc=$?
shim_check "ln -s FILE M/new: fails, read-only file system" test "$rc" != 0 -a "$(grep -c 'Read-only file system' "$WORK/lns.err")" = 1

# what is really on disk, seen without the shim
shim_check "the source file is still there, unchanged" test "$(cat "$SRC/x")" = "a file outside" -a -d "$SRC/d"
shim_check "nothing taken out of the mount" test ! -e "$SRC/stolen"
shim_check "the real directory at the mount point received nothing" test -z "$(ls -A "$R")"
shim_check "the cache (the mount's tree included) received nothing" test "$(find "$HFS3_CACHE_DIR" | sort | sha256sum)" = "$tree_before"
exit $((SHIM_FAILS > 0))
