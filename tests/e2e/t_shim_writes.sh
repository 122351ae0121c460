#!/usr/bin/env bash
# t_shim_writes.sh - every write call the shim wraps answers what the kernel answers with a read-only mount of the
# same tree there, call by call (tests/e2e/shim_writes.py; the oracle is a read-only bind mount made with
# unshare -m), and nothing is written into the cache:
#   1. a file opened in a mount is the cached blob every process shares: reopened for writing through
#      /proc/self/fd/N, truncated, chmod-ed, hard-linked out (linkat AT_EMPTY_PATH, or AT_SYMLINK_FOLLOW of
#      /proc/self/fd/N) or freopen(NULL, "r+")-ed, it gives EROFS (EXDEV for the links), and every blob keeps its
#      bytes and its one link;
#   2. mkfifo, mknod, mkstemp & co, mkdtemp and bind() of a unix socket cannot create in a mount;
#   4. relative creates from a cwd in a synthesized ancestor (or `..` from a cwd in a mount) give EROFS;
#   5. O_CREAT on a directory: EISDIR; O_CREAT|O_DIRECTORY: EINVAL (the kernel's, Linux 6.4 on);
#   6. EEXIST, EISDIR, ENOENT, ENOTDIR, EXDEV, EROFS, ENAMETOOLONG where the kernel gives them, in a mount and in
#      an ancestor; fopen("w") of a directory: EISDIR.
# Then without /proc (a mount namespace without it) the guard still refuses what reaches the cache, and the helper,
# run under the shim as a global LD_PRELOAD would run it, still fills a cache.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_start
cd "$WORK"
PY=$HFS3_ROOT/tests/e2e/shim_writes.py
shim ls "$M/flat" "$M/hf" >/dev/null
shim sh -c "cd '$M'" # the shim's own skeleton of the ancestors, made by a chdir there
# what the cache holds, with modes and link counts: nothing may change it
cache_state() { (cd "$HFS3_CACHE_DIR" && find . -printf '%p %m %n %s\n' | sort && find . -type f -exec sha256sum {} + | sort); }
cache_state >state.before
before=$(sha256sum <state.before)

mkdir -p w1 w2 o/models
cp -a "$WORK/fx/src/flat" "$WORK/fx/src/hf" o/models/
shim python3 "$PY" all "$M" "$WORK/w1" >shim.out 2>&1
shim_check "every call ran under the shim ($(grep -c ': ' shim.out) lines)" test "$(grep -c ': ' shim.out)" -ge 250
unshare -m sh -c "mount --bind '$WORK/o' '$WORK/o' && mount -o remount,bind,ro '$WORK/o' && \
  python3 '$PY' all '$WORK/o/models' '$WORK/w2'" >kernel.out 2>/dev/null
if [ -s kernel.out ]; then
  diff kernel.out shim.out >diff.out
  cat diff.out
  shim_check "every call: the kernel's answer on a read-only bind mount ($(grep -c '^>' diff.out) differ)" test ! -s diff.out
else
  echo "# no read-only bind mount here (unshare -m): not compared with the kernel"
  cat shim.out
fi
for c in "1 open /proc/self/fd/N O_RDWR: EROFS" "1 linkat N AT_EMPTY_PATH: EXDEV" "1 freopen NULL r+: EROFS" \
    "2 mkstemp M/tXXXXXX: EROFS" "2 bind M/sock: EROFS" "4 cwd R: mkdir n: EROFS" "5 open M/dir O_RDONLY|O_CREAT: EISDIR" \
    "6 fopen w M/dir: EISDIR" "6 mkdir R/long: ENAMETOOLONG"; do
  shim_check "$c" grep -qxF "$c" shim.out
done
# rename between two mounts: EXDEV, as between two read-only bind mounts (each mount is its own file system)
ren='import errno, os, sys
try:
    os.rename(sys.argv[1] + "/flat/a.txt", sys.argv[1] + "/hf/x")
    print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])'
mkdir -p o2/flat o2/hf
k=$(unshare -m sh -c "mount --bind '$WORK/o/models/flat' '$WORK/o2/flat' && mount -o remount,bind,ro '$WORK/o2/flat' &&
  mount --bind '$WORK/o/models/hf' '$WORK/o2/hf' && mount -o remount,bind,ro '$WORK/o2/hf' &&
  python3 -c '$ren' '$WORK/o2'" 2>/dev/null)
s=$(shim python3 -c "$ren" "$M")
echo "# rename between two mounts: kernel ${k:-(no bind mounts here)}, shim $s"
shim_check "rename between two mounts: EXDEV (the kernel's: ${k:-EXDEV})" test "$s" = "${k:-EXDEV}" -a "$s" = EXDEV
# a ".." out of a synthesized ancestor into a writable directory: "missing/." is the kernel's ENOENT, nothing made
# (the real call goes where the kernel goes, its last "." kept: "missing/" would be made)
s=$(shim python3 -c 'import errno, os, sys
for p in sys.argv[1:]:
    try:
        os.mkdir(p)
        print("ok", end=" ")
    except OSError as e:
        print(errno.errorcode[e.errno], end=" ")' "$M/../../w1/missing/." "$M/../../w1/missing/..")
shim_check "mkdir M/../../w1/missing/. and /..: ENOENT, nothing made ($s)" \
  test "$s" = "ENOENT ENOENT " -a ! -e w1/missing
# a directory of the test's own whose first path component starts with another byte than every mount's (they are
# under $WORK): a spelling there is "outside every mount" by the shim's fast path (sh_outside)
OB=
for b in /var/tmp /tmp /dev/shm /root; do
  f=${b#/}; w=${WORK#/}
  if [ -d "$b" ] && [ -w "$b" ] && [ "${f:0:1}" != "${w:0:1}" ]; then
    OB=$(mktemp -d "$b/hfs3-writes.XXXXXX") && break
  fi
done
[ -n "$OB" ] && trap 'rm -rf "$OB"; s3env_stop' EXIT
# issue 34 item 1: a blob reached by its cache path cannot be truncated or written: open O_RDONLY|O_TRUNC (as root
# the kernel would truncate a 0444 file), O_WRONLY, truncate(), and the same through openat on a descriptor of
# blobs/, from both sides of the fast path (the cache's own spelling, under $WORK's first component, and a
# symlink to the cache from a directory no mount's first component shares): EROFS, and the blob keeps its size
big=$(find "$HFS3_CACHE_DIR/blobs" -type f -size +0 | head -1)
bsize=$(stat -c %s "$big")
blobcalls='import errno, os, sys
def err(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
for c in sys.argv[2:]:
    p = c + "/blobs/" + sys.argv[1]
    bfd = os.open(c + "/blobs", os.O_RDONLY | os.O_DIRECTORY)
    for name, f in (("open O_RDONLY|O_TRUNC", lambda: os.close(os.open(p, os.O_RDONLY | os.O_TRUNC))),
                    ("open O_WRONLY", lambda: os.close(os.open(p, os.O_WRONLY))),
                    ("open O_RDWR|O_TRUNC", lambda: os.close(os.open(p, os.O_RDWR | os.O_TRUNC))),
                    ("truncate", lambda: os.truncate(p, 0)),
                    ("openat(blobs fd) O_RDONLY|O_TRUNC", lambda: os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_TRUNC, dir_fd=bfd))),
                    ("openat(blobs fd) O_WRONLY|O_APPEND", lambda: os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND, dir_fd=bfd))),
                    ("open O_RDONLY", lambda: os.close(os.open(p, os.O_RDONLY)))):
        print("%s %s: %s" % ("far" if c != sys.argv[2] else "cache", name, err(f)))'
spellings=("$HFS3_CACHE_DIR")
if [ -n "$OB" ]; then ln -s "$HFS3_CACHE_DIR" "$OB/c" && spellings+=("$OB/c"); else echo "SKIP writes-far-side: no writable directory outside $WORK's first path component"; fi
shim python3 -c "$blobcalls" "$(basename "$big")" "${spellings[@]}" >blobcalls.out 2>&1
cat blobcalls.out
shim_check "a blob by its cache path and by openat on blobs/: EROFS (a read-only open works)" \
  test "$(grep -c ': EROFS$' blobcalls.out):$(grep -c 'O_RDONLY: ok$' blobcalls.out)" = "$((6 * ${#spellings[@]})):${#spellings[@]}"
shim_check "  and the blob keeps its size ($bsize)" test "$(stat -c %s "$big")" = "$bsize"
# issue 34 item 5: a directory beside the cache whose name begins with the cache's ($HFS3_CACHE_DIR-old) is the
# user's own: creating, writing, renaming and linking in it work through the shim, by both spellings
mkdir "$HFS3_CACHE_DIR-old"
besides='import os, sys
for i, d in enumerate(sys.argv[1:]):
    s = "%s/sub%d" % (d, i)
    os.mkdir(s)
    with open(s + "/f", "w") as f:
        f.write("mine")
    os.rename(s + "/f", s + "/g")
    os.link(s + "/g", s + "/h")
    fd = os.open(s + "/g", os.O_RDWR | os.O_TRUNC)
    os.write(fd, b"again")
    os.close(fd)
    os.rename(s, s + "b")
    print(d, open(s + "b/h").read())'
bs=("$HFS3_CACHE_DIR-old")
if [ -n "$OB" ]; then mkdir "$OB/old" && ln -s "$HFS3_CACHE_DIR-old" "$OB/old/c" && bs+=("$OB/old/c"); fi
shim python3 -c "$besides" "${bs[@]}" >besides.out 2>&1
cat besides.out
shim_check "$(basename "$HFS3_CACHE_DIR")-old/, beside the cache: mkdir, write, rename, link, truncate work" \
  test "$(grep -c ' again$' besides.out)" = "${#bs[@]}" -a "$(cat "$HFS3_CACHE_DIR-old/sub0b/h")" = again
# open_by_handle_at (issue 33 round 4; root, CAP_DAC_READ_SEARCH): a handle names an inode, no path: a handle of a
# blob (name_to_handle_at of its cache path) opened for writing is refused, as a handle of a file outside is not;
# a skeleton directory's handle opens, and a create through it is refused
BLOB=$(ls "$HFS3_CACHE_DIR"/blobs | head -1)
echo handle >hw.txt
SKEL=$(find "$HFS3_CACHE_DIR/mounts" -mindepth 2 -type d -name dir | head -1)
h=$(shim python3 - "$HFS3_CACHE_DIR/blobs/$BLOB" "$WORK/hw.txt" "$SKEL" <<'PY' 2>&1
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class FH(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("f", ctypes.c_ubyte * 128)]
def handle(p):
    h, mid = FH(), ctypes.c_int()
    h.bytes = 128
    if libc.name_to_handle_at(-100, os.fsencode(p), ctypes.byref(h), ctypes.byref(mid), 0) < 0:
        raise OSError(ctypes.get_errno(), "name_to_handle_at")
    return h
def name(e):
    return errno.errorcode.get(e, str(e))
out = []
try:
    hs = [handle(p) for p in sys.argv[1:4]]
except OSError as e:
    print("SKIP name_to_handle_at:", name(e.errno)); sys.exit(0)
mfd = os.open(sys.argv[1], os.O_RDONLY)
for what, h, fl in (("blob O_WRONLY", hs[0], os.O_WRONLY), ("blob O_RDWR|O_TRUNC", hs[0], os.O_RDWR | os.O_TRUNC),
                    ("blob O_RDONLY", hs[0], os.O_RDONLY), ("W file O_WRONLY", hs[1], os.O_WRONLY),
                    ("skeleton dir O_RDONLY|O_DIRECTORY", hs[2], os.O_RDONLY | os.O_DIRECTORY)):
    fd = libc.open_by_handle_at(mfd, ctypes.byref(h), fl)
    if fd < 0 and ctypes.get_errno() == errno.EPERM:
        print("SKIP open_by_handle_at: EPERM"); sys.exit(0)
    out.append("%s: %s" % (what, "ok" if fd >= 0 else name(ctypes.get_errno())))
    if fd >= 0 and "dir" in what:
        try:
            os.mkdir("n", dir_fd=fd)
            out.append("  mkdirat n: ok")
        except OSError as e:
            out.append("  mkdirat n: " + name(e.errno))
    if fd >= 0:
        os.close(fd)
print(" / ".join(out))
PY
)
echo "open_by_handle_at: $h"
case $h in
SKIP*) ;;
*) shim_check "open_by_handle_at: a blob's handle for writing refused, the others open" test "$h" = \
     "blob O_WRONLY: EROFS / blob O_RDWR|O_TRUNC: EROFS / blob O_RDONLY: ok / W file O_WRONLY: ok / skeleton dir O_RDONLY|O_DIRECTORY: ok /   mkdirat n: EROFS" ;;
esac

# the utmp/wtmp writers by the system's names (/run and /var/log fresh tmpfs in a mount namespace), and a name that
# reaches a blob only through a symlink on disk at a mount's path (the shim's logical path would not)
blob=$(find "$HFS3_CACHE_DIR/blobs" -type f -size +0 | head -1)
if shim_oracle_ok; then
  mkdir -p "$WORK/wu"
  u=$(unshare -m --propagation private sh -c "mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /var/log &&
    LD_PRELOAD='$HFS3_SHIM' python3 '$HFS3_ROOT/tests/e2e/shim_utmp.py' '$blob' '$WORK/wu'" 2>&1)
  echo "$u"
  want="pututxline, utmpxname /var/run/utmpx (not there: /var/run/utmp, the blob's): EROFS
updwtmpx /var/log/wtmpx (not there: /var/log/wtmp, the blob's): EROFS
login (utmp and wtmp the blob's): EROFS
logout (utmp the blob's): EROFS
logwtmp (wtmp the blob's): EROFS
descriptors 0-19 still open, each the same: ok
pututline after logout, utmp made the blob's: EROFS
pututxline, utmpxname /var/run/utmpx (a file): ok
updwtmpx /var/log/wtmpx (a file): ok
logwtmp (a file): ok
utmp holds 1 record, wtmp 2: ok"
  shim_check "utmp and wtmp by the system's names: the blob is never written, plain files are" test "$u" = "$want"
else
  echo "# no mount namespace here: the utmp/wtmp writers by the system's names are not tried"
fi
mkdir -p "$WORK/mp2"
ln -s "$HFS3_CACHE_DIR/blobs" "$WORK/mp2/flat"
u=$(HFS3_MOUNTS="$WORK/mp2/flat=s3test:models/flat" shim python3 -c 'import ctypes, errno, sys
c = ctypes.CDLL(None, use_errno=True)
c.pututline.restype = ctypes.c_void_p
p = sys.argv[1].encode()
c.utmpname(p)
r = c.pututline(ctypes.create_string_buffer(384))
a = "ok" if r else errno.errorcode[ctypes.get_errno()]
ctypes.set_errno(0)
c.updwtmp(p, ctypes.create_string_buffer(384))
print(a, errno.errorcode.get(ctypes.get_errno(), "ok"))' "$WORK/mp2/flat/../blobs/$(basename "$blob")" 2>&1)
shim_check "a name through a symlink on disk at a mount's path into blobs/: pututline and updwtmp EROFS ($u)" test "$u" = "EROFS EROFS"
rm "$WORK/mp2/flat"
cache_state | diff state.before -
shim_check "the cache did not change (blobs, modes, links, skeletons)" test "$(cache_state | sha256sum)" = "$before"
shim_check "nothing was linked or made outside but the calls' own files" test "$(ls -A w1 | tr '\n' ' ')" = "o7 s x "
for b in "$HFS3_CACHE_DIR"/blobs/*; do
  [ "$(sha256sum <"$b" | cut -c1-64)" = "$(basename "$b")" ] || { echo "changed: $b"; bad=1; }
done
shim_check "every blob still holds its bytes" test -z "${bad:-}"

# the cost outside the mounts: a write-open's directory, once found unguarded, is remembered by identity (one
# fstatat), and its last component is left to the real call's O_NOFOLLOW; no readlink per open (the guard's check
# costs an open, a readlink and a close of the directory, and an fstatat of the entry, without that)
if command -v strace >/dev/null; then
  shim strace -f -c -e trace=readlink -o strace.out python3 -c '
import os, sys
for i in range(1000):
    os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))' "$WORK/w1/loop"
  n=$(awk '$NF == "readlink" {print $4}' strace.out)
  cat strace.out
  shim_check "1000 write-opens outside the mounts: not one readlink each ($n in all)" test "${n:-0}" -lt 300
else
  echo "# no strace here: the system calls are not counted"
fi

# without /proc: no descriptor has a path, the guard decides by identity (the cache's, the blobs' mode and device)
BLOB=$(ls "$HFS3_CACHE_DIR"/blobs | head -1)
mkdir -p w3
unshare -m sh -c "umount -l /proc && LD_PRELOAD='$HFS3_SHIM' python3 '$PY' noproc '$M' '$WORK/w3' \
  '$HFS3_CACHE_DIR/blobs/$BLOB'" >noproc.out 2>&1
cat noproc.out
cat >noproc.want <<'EOF'
open a symlink to a blob O_WRONLY: EROFS
open a symlink to a blob O_RDONLY: ok
truncate a symlink to a blob: EROFS
chmod a symlink to a blob: EROFS
linkat a symlink to a blob AT_SYMLINK_FOLLOW: EXDEV
linkat N AT_EMPTY_PATH: EXDEV
fchmod N: EROFS
mkdirat(fd of M/dir, n): EROFS
openat O_CREAT(fd of M/dir, n): EROFS
mkfifoat(fd of M/dir, n): EROFS
mkdir W/ok: ok
open O_CREAT W/ok2: ok
cwd R: mkdir n: EROFS
cwd R: creat n2: EROFS
cwd R: symlink n3: EROFS
cwd M/dir: mkdir ../../n4: EROFS
cwd M/dir: creat ../../../n5: EROFS
EOF
if grep -q ': ' noproc.out; then
  shim_check "without /proc: the same refusals, writes outside still work" diff noproc.want noproc.out
else
  echo "# no mount namespace without /proc here: not checked"
fi
shim_check "the cache did not change without /proc either" test "$(cache_state | sha256sum)" = "$before"

# the helper under the shim (a global LD_PRELOAD; or a program under `hfs3-manifest run` that starts it): it writes
# the cache, which the write guard lets it do, and only it
mkdir src && echo "one" >src/one.txt && rclone copy src s3test:models/w || exit 1
"$HFS3_BIN" build s3test:models/w >build.out 2>&1 || { cat build.out; exit 1; }
# (the plain build: an ASan one refuses to start with a library preloaded before its runtime)
HFS3_CACHE_DIR=$WORK/gcache HFS3_OFFLINE=0 LD_PRELOAD=$HFS3_SHIM HFS3_MOUNTS="$WORK/mnt/w=s3test:models/w" \
  "$HFS3_ROOT/$BUILD/bin/hfs3-manifest" fetch s3test:models/w >fetch.out 2>&1
rc=$?
cat fetch.out
shim_check "the helper under the shim fetches into a new cache" test "$rc" = 0 -a -n "$(ls "$WORK/gcache/blobs")"
out=$(HFS3_CACHE_DIR=$WORK/gcache HFS3_OFFLINE=1 HFS3_MOUNTS="$WORK/mnt/w=s3test:models/w" shim cat "$WORK/mnt/w/one.txt")
shim_check "  and a program reads it from there" test "$out" = "one"
out=$(HFS3_CACHE_DIR=$WORK/gcache HFS3_MOUNTS="$WORK/mnt/w=s3test:models/w" shim sh -c \
  "cat '$WORK/mnt/w/one.txt' >/dev/null; for f in '$WORK'/gcache/blobs/*; do echo x >>\"\$f\" && echo wrote; done" 2>&1)
shim_check "  but cannot write the cache itself: $out" test "$(grep -c 'Read-only file system' <<<"$out")" -ge 1 -a \
  "$(grep -c wrote <<<"$out")" = 0
exit $((SHIM_FAILS > 0))
