#!/usr/bin/env bash
# t_shim_kernel.sh - the shim answers as the kernel answers for a read-only file system (issue 6, item 11): the
# kexact tool runs ~30 operations (opens with O_CREAT/O_EXCL/O_TRUNC/O_APPEND, writes, readlink with a zero
# buffer, a 300-byte name, "file/..", an O_PATH descriptor of a file as a directory, inode identity of equal
# files) over the flat fixture copied into a read-only tmpfs, and over the same tree through the shim. The
# transcripts must differ only by KNOWN, each listed in the README's known limits with its reason.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
T=$HFS3_ROOT/$BUILD/tools
mkdir "$WORK/ro"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=1m tmpfs "$WORK/ro" 2>/dev/null; then
  echo "skip: mounting a tmpfs needs root (or is not allowed here)"; exit 0
fi
trap 'umount "$WORK/ro" 2>/dev/null' EXIT
cp -a "$WORK/fx/src/flat/." "$WORK/ro/" && mount -o remount,ro "$WORK/ro" || { echo "not ok remount ro"; exit 1; }
"$T/kexact" "$WORK/ro" >"$WORK/kernel.out"
LD_PRELOAD=$HFS3_SHIM "$T/kexact" "$M/flat" >"$WORK/shim.out"
umount "$WORK/ro"
# the differences that remain: ".." is taken lexically inside a mount (no lookup of what precedes it)
KNOWN='stat(a.txt/..) ENOTDIR ok
stat(missing/..) ENOENT ok'
got=$(paste -d' ' "$WORK/kernel.out" "$WORK/shim.out" | awk '{ n = NF / 2; a = ""; b = ""; for (i = 1; i < n; i++) a = a $i " "; if ($n != $NF) print a $n " " $NF }' | sed 's/ $//')
diff <(echo "$KNOWN") <(echo "$got") && echo "differences: exactly the known ones"
shim_check "kernel and shim agree but for the known differences" test "$got" = "$KNOWN"
shim_check "operations compared: $(wc -l <"$WORK/kernel.out")" test "$(wc -l <"$WORK/kernel.out")" -ge 30
exit $((SHIM_FAILS > 0))
