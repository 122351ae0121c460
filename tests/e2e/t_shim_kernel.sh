#!/usr/bin/env bash
# t_shim_kernel.sh - the shim answers as the kernel answers for a read-only file system (issue 6, items 11 and
# 12, 13): the kexact tool runs ~150 operations (opens with O_CREAT/O_EXCL/O_TRUNC/O_APPEND, writes, readlink
# with a zero buffer, a 300-byte name, ".." after a file, a missing name and a symlink to a directory through
# stat, lstat, open, opendir, chdir, access, readlink and realpath, an O_PATH descriptor of a file as a
# directory, inode identity of equal files, glibc's fts with FTS_PHYSICAL and FTS_LOGICAL: one line per entry) over the flat fixture and a links tree copied into a read-only tmpfs, and over
# the same trees through the shim. The transcripts must be equal.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
T=$HFS3_ROOT/$BUILD/tools
# the links tree: a link whose parent is not its target's parent (lnk -> a/b), a target with ".." in it
lt=$WORK/fx/src/lt
shim_links_tree "$lt" && shim_tree_mount "$lt" lt t_shim_kernel || exit 1
export HFS3_MOUNTS="$HFS3_MOUNTS;$M/lt=s3test:models/lt"
mkdir "$WORK/ro"
if ! shim_oracle_ok || ! mount -t tmpfs -o size=1m tmpfs "$WORK/ro" 2>/dev/null; then
  echo "skip: mounting a tmpfs needs root (or is not allowed here)"; exit 0
fi
trap 'umount "$WORK/ro" 2>/dev/null' EXIT
mkdir "$WORK/ro/flat" "$WORK/ro/lt" && cp -a "$WORK/fx/src/flat/." "$WORK/ro/flat/" && cp -a "$lt/." "$WORK/ro/lt/" &&
  mount -o remount,ro "$WORK/ro" || { echo "not ok remount ro"; exit 1; }
"$T/kexact" "$WORK/ro/flat" "$WORK/ro/lt" >"$WORK/kernel.out"
LD_PRELOAD=$HFS3_SHIM "$T/kexact" "$M/flat" "$M/lt" >"$WORK/shim.out"
umount "$WORK/ro"
# no difference remains: a ".." that climbs out of a mount's root is looked up as the kernel does (issue 22 item 3:
# "a.txt/../../ROOT" is ENOTDIR, "lnk/../../a" with lnk -> a/b stays inside)
KNOWN=''
got=$(paste -d' ' "$WORK/kernel.out" "$WORK/shim.out" | awk '{ n = NF / 2; a = ""; b = ""; for (i = 1; i < n; i++) a = a $i " "; if ($n != $NF) print a $n " " $NF }' | sed 's/ $//')
diff <(echo "$KNOWN") <(echo "$got") && echo "differences: none"
shim_check "kernel and shim agree" test "$got" = "$KNOWN"
shim_check "operations compared: $(wc -l <"$WORK/kernel.out")" test "$(wc -l <"$WORK/kernel.out")" -ge 140
# from the real parent of a synthesized ancestor ($WORK/mnt is not on disk): "mnt/../<256-byte name>" is the
# kernel's ENAMETOOLONG (the walk comes back out of the ancestor to a real directory), for chdir, stat, fopen, open,
# opendir, scandir and scandirat; "mnt/models/", an entry of the ancestor, opens (fopen "r", issue 22: seed 644)
N=$(printf 'n%.0s' $(seq 256))
# (leaks: Python's own, under t_shim_san's ASan runtime, are not the shim's)
got=$(cd "$WORK" && ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 shim python3 -c 'import ctypes, errno, os, sys
for f in (os.chdir, os.stat, lambda p: os.close(os.open(p, os.O_RDONLY))):
    try:
        f(sys.argv[1])
        print("ok", end=" ")
    except OSError as e:
        print(errno.errorcode[e.errno], end=" ")
c = ctypes.CDLL(None, use_errno=True)
c.fopen.restype = c.opendir.restype = ctypes.c_void_p
c.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
def say(ok): print("ok" if ok else errno.errorcode[ctypes.get_errno()], end=" ")
p = (sys.argv[1] + "/x").encode()
say(c.fopen(sys.argv[1].encode(), b"r"))
say(c.opendir(ctypes.c_char_p(p)))
v = ctypes.c_void_p()
say(c.scandir(ctypes.c_char_p(p), ctypes.byref(v), None, None) >= 0)
say(c.scandirat(-100, ctypes.c_char_p(p), ctypes.byref(v), None, None) >= 0)
print("ok" if c.fopen(b"mnt/models/", b"r") else errno.errorcode[ctypes.get_errno()])' "mnt/../$N")
shim_check "cwd the ancestor's parent: chdir, stat, open, fopen, opendir, scandir, scandirat mnt/../<256-byte name>: ENAMETOOLONG; fopen mnt/models/: ok ($got)" \
  test "$got" = "ENAMETOOLONG ENAMETOOLONG ENAMETOOLONG ENAMETOOLONG ENAMETOOLONG ENAMETOOLONG ENAMETOOLONG ok"
# realpath of a spelling of PATH_MAX bytes or more (glibc walks it component by component) that reaches a mount's
# file through a "..": a trailing slash is the kernel's ENOTDIR (issue 22: seed 669), without one the file
got=$(ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 shim python3 -c 'import ctypes, errno, sys
c = ctypes.CDLL(None, use_errno=True)
c.realpath.restype = ctypes.c_void_p
for p in sys.argv[1:]:
    r = c.realpath(("/" * 4100 + p).encode(), None)
    print(ctypes.string_at(r).decode() if r else errno.errorcode[ctypes.get_errno()], end=" ")' "$M/lt/../flat/./empty/" "$M/lt/../flat/empty")
shim_check "realpath of a 4,100-slash spelling of lt/../flat/empty/: ENOTDIR; without the last slash the file ($got)" \
  test "$got" = "ENOTDIR $M/flat/empty "
exit $((SHIM_FAILS > 0))
