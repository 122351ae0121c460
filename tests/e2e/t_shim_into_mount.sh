#!/usr/bin/env bash
# t_shim_into_mount.sh - nothing is renamed or linked into a mount (issue 25 item 3): rename, renameat,
# renameat2, link, linkat, symlink and symlinkat whose destination is in a mount fail even when the source is
# outside it, with the kernel's errno for a read-only mount there (EXDEV for a rename across its edge, EROFS for a
# link into it), and so do mv and ln. The mount point here is a real, empty directory the test made:
# under the shim it is the mount, so it must never receive the file (a check of the source alone would let
# the real call put it there). A destination given relative to a descriptor of the mount is refused too, and
# nothing lands in the cache's tree of the mount either. Offline, the fixture's index and blobs (mkindex).
# The kernel's own resolution cannot get around it (the reviewer's holes): a spelling outside the mounts that the
# kernel resolves into the mount's real directory, its skeleton in the cache (/proc/self/fd/N of a descriptor of
# the mount, /proc/self/cwd, a cwd or dirfd there, symlinks to it or above it, a dangling symlink opened O_CREAT)
# or into a synthesized ancestor (CACHE/mounts/ancestors) gives what a read-only bind mount gives; when this
# machine can make one (unshare -m), the answers are compared with it.
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
shim ls "$R" >/dev/null   # the first look (offline, the helper's endpoint check takes mounts/K/lock)
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
# the kernel's answers with a read-only mount there: a rename across its edge is EXDEV, and so is a link out of it;
# a link or symlink into it is EROFS (its destination is created first)
shim_check "every call: EXDEV for a rename or a link out, else EROFS" \
  test "$(grep -c -E '^(rename.*|link out of the mount): EXDEV$|^(link|symlink).*: EROFS$' "$WORK/calls.out")" = 14

# coreutils: mv and ln into the mount fail, the source stays
shim mv "$SRC/x" "$R/new" 2>"$WORK/mv.err"; rc=$?
shim_check "mv FILE M/new: fails, read-only file system" test "$rc" != 0 -a "$(grep -c 'Read-only file system' "$WORK/mv.err")" = 1
shim mv "$SRC/x" "$R/" 2>"$WORK/mv2.err"; rc=$?
shim_check "mv FILE M/: fails, read-only file system" test "$rc" != 0 -a "$(grep -c 'Read-only file system' "$WORK/mv2.err")" = 1
shim ln "$SRC/x" "$R/new" 2>"$WORK/ln.err"; rc=$?
shim_check "ln FILE M/new: fails, read-only file system" test "$rc" != 0 -a "$(grep -c 'Read-only file system' "$WORK/ln.err")" = 1
shim ln -s "$SRC/x" "$R/new" 2>"$WORK/lns.err"; rc=$?
shim_check "ln -s FILE M/new: fails, read-only file system" test "$rc" != 0 -a "$(grep -c 'Read-only file system' "$WORK/lns.err")" = 1

# the kernel's resolution: each call's errno; "(EEXIST)" marks the ones a read-only file system answers so
cat >"$WORK/kern.py" <<'PY'
import ctypes, errno, os, sys
part, R, SRC, W = sys.argv[1:5]
libc = ctypes.CDLL(None, use_errno=True)
b = os.fsencode
def err(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def x():
    p = SRC + "/x"
    if not os.path.exists(p):
        open(p, "w").write("x")
    return p
def c_fopen(p, mode):
    def f():
        fp = libc.fopen(b(p), mode)
        if not fp:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    return f
libc.fopen.restype = ctypes.c_void_p
out = []
def t(name, f):
    out.append("%s: %s" % (name, err(f)))
if part == "mount":                        # R: the mount point, a real directory (or the oracle's read-only one)
    A, base = os.path.dirname(R), os.path.basename(R)
    afd = os.open(A, os.O_RDONLY | os.O_DIRECTORY)
    mfd = os.open(R, os.O_RDONLY | os.O_DIRECTORY)
    m = "/proc/self/fd/%d" % mfd
    for n, target in (("lnk", R), ("lnk2", A), ("dl", R + "/new14")):
        if not os.path.lexists(W + "/" + n):
            os.symlink(target, W + "/" + n)
    t("renameat(parent fd, base/new1)", lambda: os.rename(x(), base + "/new1", dst_dir_fd=afd))
    t("rename via a symlink to the mount", lambda: os.rename(x(), W + "/lnk/new2"))
    t("rename via a symlink to its parent", lambda: os.rename(x(), W + "/lnk2/" + base + "/new3"))
    t("rename to /proc/self/fd/M/new4", lambda: os.rename(x(), m + "/new4"))
    t("open O_CREAT /proc/self/fd/M/new8", lambda: os.close(os.open(m + "/new8", os.O_CREAT | os.O_WRONLY)))
    t("mkdir /proc/self/fd/M/new9", lambda: os.mkdir(m + "/new9"))
    t("open O_CREAT via a dangling symlink", lambda: os.close(os.open(W + "/dl", os.O_CREAT | os.O_WRONLY)))
    t("fopen w /proc/self/fd/M/new15", c_fopen(m + "/new15", b"w"))
    t("symlink /proc/self/fd/M/new16", lambda: os.symlink(x(), m + "/new16"))
    t("mkdir /proc/self/fd/M/dir (EEXIST)", lambda: os.mkdir(m + "/dir"))
    t("rmdir /proc/self/fd/M/empty", lambda: os.rmdir(m + "/empty"))
    t("rename /proc/self/fd/M/empty out", lambda: os.rename(m + "/empty", SRC + "/stolen"))
    t("chmod /proc/self/fd/M", lambda: os.chmod(m, 0o700))
    t("utime /proc/self/fd/M", lambda: os.utime(m))
    t("fchmod of a descriptor from /proc/self/fd/M", lambda: os.fchmod(os.open(m, os.O_RDONLY), 0o700))
    os.chdir(A)
    t("cwd parent: rename base/new11", lambda: os.rename(x(), base + "/new11"))
    os.chdir(R)
    t("cwd mount: rename /proc/self/cwd/new13", lambda: os.rename(x(), "/proc/self/cwd/new13"))
elif part == "anc":                        # R: a mount point not on disk; its parent is a synthesized ancestor
    A, base = os.path.dirname(R), os.path.basename(R)
    afd = os.open(A, os.O_RDONLY | os.O_DIRECTORY)
    t("renameat(ancestor fd, n4)", lambda: os.rename(x(), "n4", dst_dir_fd=afd))
    t("mkdirat(ancestor fd, n5)", lambda: os.mkdir("n5", dir_fd=afd))
    t("openat O_CREAT(ancestor fd, n3)", lambda: os.close(os.open("n3", os.O_CREAT | os.O_WRONLY, dir_fd=afd)))
    t("symlinkat(ancestor fd, n6)", lambda: os.symlink(x(), "n6", dir_fd=afd))
    t("renameat(ancestor fd, base/n1)", lambda: os.rename(x(), base + "/n1", dst_dir_fd=afd))
    os.chdir(A)
    t("cwd ancestor: rename n7", lambda: os.rename(x(), "n7"))
    t("cwd ancestor: mkdir n8", lambda: os.mkdir("n8"))
    t("cwd ancestor: creat n9", lambda: os.close(os.open("n9", os.O_CREAT | os.O_WRONLY)))
    t("cwd ancestor: symlink n10", lambda: os.symlink(x(), "n10"))
    t("cwd ancestor: rename /proc/self/cwd/n11", lambda: os.rename(x(), "/proc/self/cwd/n11"))
    t("cwd ancestor: rmdir base", lambda: os.rmdir(base))
else:                                      # outside the mounts the same spellings still write
    d = os.open(R, os.O_RDONLY | os.O_DIRECTORY)
    p = "/proc/self/fd/%d" % d
    t("mkdir /proc/self/fd/D/m", lambda: os.mkdir(p + "/m"))
    t("open O_CREAT /proc/self/fd/D/f", lambda: os.close(os.open(p + "/f", os.O_CREAT | os.O_WRONLY)))
    t("rename to /proc/self/fd/D/g", lambda: os.rename(x(), p + "/g"))
    t("symlink /proc/self/fd/D/s", lambda: os.symlink("g", p + "/s"))
    t("chmod /proc/self/fd/D/g", lambda: os.chmod(p + "/g", 0o600))
    os.chdir(R)
    t("cwd: mkdir m2", lambda: os.mkdir("m2"))
    t("cwd: rename /proc/self/cwd/g h", lambda: os.rename("/proc/self/cwd/g", "h"))
    t("cwd: unlink h", lambda: os.unlink("h"))
print("\n".join(out))
PY
# expected: EROFS, but EEXIST where marked and EXDEV for a rename across the mount's edge; "ok" for the part
# outside the mounts
kern_expect() { sed -e 's/^\(.*(EEXIST)\): .*/\1: EEXIST/' -e 's/^\([^(]*rename[^(]*\): .*/\1: EXDEV/' \
  -e '/rename/!s/^\([^(]*\): .*/\1: EROFS/' "$1"; }
# the oracle: the same calls on a read-only bind mount with the mount's directories and a.txt (unshare -m): a
# rename across the bind mount's edge is EXDEV there (checked before EROFS), as the shim's
kern_oracle() { # part dir: the output, or nothing when no read-only bind mount can be made here
  local part=$1 src=$2
  unshare -m sh -c "mount --bind '$src' '$src' && mount -o remount,bind,ro '$src' && \
    python3 '$WORK/kern.py' $part '$3' '$WORK/oracle/src' '$WORK/oracle/w'" 2>/dev/null
}
mkdir -p "$WORK/kw" "$WORK/oracle/src" "$WORK/oracle/w" "$WORK/oracle/p/flat/dir" "$WORK/oracle/p/flat/empty"
echo "hello from a" >"$WORK/oracle/p/flat/a.txt"
echo "a file outside" >"$SRC/x"
shim python3 "$WORK/kern.py" mount "$R" "$SRC" "$WORK/kw" >"$WORK/kern.out" 2>&1
cat "$WORK/kern.out"
shim_check "kernel spellings into the mount: every call ran" test "$(grep -c ': ' "$WORK/kern.out")" = 17
shim_check "kernel spellings into the mount: EROFS (EEXIST for an existing name)" \
  test "$(kern_expect "$WORK/kern.out")" = "$(cat "$WORK/kern.out")"
kern_oracle mount "$WORK/oracle/p" "$WORK/oracle/p/flat" >"$WORK/oracle.out"
if [ -s "$WORK/oracle.out" ]; then
  shim_check "the same answers as a read-only bind mount" diff "$WORK/oracle.out" "$WORK/kern.out"
else
  echo "# no read-only bind mount here (unshare -m): not compared with the kernel"
fi
mkdir -p "$WORK/mine"
shim python3 "$WORK/kern.py" outside "$WORK/mine" "$SRC" "$WORK/kw" >"$WORK/kern3.out" 2>&1
cat "$WORK/kern3.out"
shim_check "outside the mounts the same spellings write" test "$(grep -c ': ok$' "$WORK/kern3.out")" = 8
shim_check "  and the files are there" test -d "$WORK/mine/m" -a -f "$WORK/mine/f" -a -d "$WORK/mine/m2" -a ! -e "$WORK/mine/h"
echo "a file outside" >"$SRC/x"

# issue 34 item 4: the source spelled outside every mount's first path component (the shim's fast path takes it as
# outside every mount), on the same file system, so that the real call would succeed: the same answers, and
# nothing lands in the real directory at the mount point. The spelling: a directory of the test's own under
# /var/tmp (or another one no mount's first component shares) on this file system, else /proc/self/cwd with
# the cwd in a directory beside the mount
OB= FARDIR= FAR=
for b in /var/tmp /tmp /root; do
  f=${b#/}; w=${R#/}
  if [ -d "$b" ] && [ "${f:0:1}" != "${w:0:1}" ] && [ "$(stat -c %d "$b")" = "$(stat -c %d "$R")" ]; then
    OB=$(mktemp -d "$b/hfs3-into.XXXXXX") && FARDIR=$OB FAR=$OB && break
  fi
done
if [ -n "$OB" ]; then
  trap 'rm -rf "$OB"' EXIT
elif [ -d /proc/self/cwd ]; then
  mkdir "$WORK/far" && FARDIR=$WORK/far FAR=/proc/self/cwd
fi
if [ -n "$FAR" ]; then
  echo "a file from far" >"$FARDIR/x"
  mkdir "$FARDIR/d"
  (cd "$FARDIR" && shim python3 "$WORK/calls.py" "$R" "$FAR") >"$WORK/calls-far.out" 2>&1
  cat "$WORK/calls-far.out"
  shim_check "from $FAR: every call ran" test "$(grep -c ': ' "$WORK/calls-far.out")" = 14
  shim_check "from $FAR: EXDEV for a rename or a link out, else EROFS" \
    test "$(grep -c -E '^(rename.*|link out of the mount): EXDEV$|^(link|symlink).*: EROFS$' "$WORK/calls-far.out")" = 14
  (cd "$FARDIR" && shim mv "$FAR/x" "$R/new") 2>"$WORK/mvfar.err"; rc=$?
  shim_check "mv $FAR/x M/new: fails, read-only file system" test "$rc" != 0 -a "$(grep -c 'Read-only file system' "$WORK/mvfar.err")" = 1
  shim_check "from $FAR: the source is still there" test "$(cat "$FARDIR/x")" = "a file from far" -a -d "$FARDIR/d" -a ! -e "$FARDIR/stolen"
  # the same spellings outside the mount still work (the fast path itself is not refused)
  mkdir "$WORK/mine2"
  (cd "$FARDIR" && shim python3 -c 'import os, sys; os.rename(sys.argv[1] + "/x", sys.argv[2] + "/x"); os.link(sys.argv[2] + "/x", sys.argv[1] + "/y")' "$FAR" "$WORK/mine2")
  shim_check "from $FAR to a directory of ours: rename and link work" test -f "$WORK/mine2/x" -a -f "$FARDIR/y"
else
  echo "SKIP into-far-side: no spelling on $R's file system outside its first component (no /proc)"
fi

# what is really on disk, seen without the shim
shim_check "the source file is still there, unchanged" test "$(cat "$SRC/x")" = "a file outside" -a -d "$SRC/d"
shim_check "nothing taken out of the mount" test ! -e "$SRC/stolen"
shim_check "the real directory at the mount point received nothing" test -z "$(ls -A "$R")"
shim_check "the cache (the mount's tree included) received nothing" test "$(find "$HFS3_CACHE_DIR" | sort | sha256sum)" = "$tree_before"

# a mount point not on disk: its parent is a synthesized ancestor, CACHE/mounts/ancestors/... in the cache
A=$WORK/mnt/models
export HFS3_MOUNTS="$A/flat=s3test:models/flat"
shim ls "$A" >/dev/null
anc_before=$(find "$HFS3_CACHE_DIR" | sort | sha256sum)
shim python3 "$WORK/kern.py" anc "$A/flat" "$SRC" "$WORK/kw" >"$WORK/kern2.out" 2>&1
cat "$WORK/kern2.out"
shim_check "kernel spellings into an ancestor: every call ran" test "$(grep -c ': ' "$WORK/kern2.out")" = 11
shim_check "kernel spellings into an ancestor: EROFS (EEXIST for an existing name)" \
  test "$(kern_expect "$WORK/kern2.out")" = "$(cat "$WORK/kern2.out")"
kern_oracle anc "$WORK/oracle/p" "$WORK/oracle/p/flat" >"$WORK/oracle2.out"
if [ -s "$WORK/oracle2.out" ]; then
  shim_check "the same answers as a read-only bind mount (ancestor)" diff "$WORK/oracle2.out" "$WORK/kern2.out"
fi
shim_check "the cache's ancestors received nothing" test "$(find "$HFS3_CACHE_DIR" | sort | sha256sum)" = "$anc_before"
shim_check "no mount point was made on disk" test ! -e "$WORK/mnt"
exit $((SHIM_FAILS > 0))
