#!/usr/bin/env bash
# t_shim_kanswers.sh - answers that differed from a read-only mount of the same tree (issue 33 item 6), against the
# kernel's own (a read-only bind mount of the source tree, on the same file system as the cache):
# - st_blocks: a cached file has its copy's blocks (here a sparse copy: fewer than the source's), a file not cached
#   what the source written whole takes (4 KiB blocks), a directory its skeleton directory's (size and blocks, as
#   the kernel gives for a real directory on the cache's file system); du -a agrees
# - open(dir, O_TMPFILE|O_RDWR) is EROFS (it was EISDIR), with the kernel's EINVAL/ENOTDIR/ENOENT around it
# - an O_PATH descriptor of a cached file re-opens through /proc/self/fd/N as the file (it was its parent: EISDIR)
# - "." and ".." of a directory descriptor inherited through exec have the mount's modes (they showed 0700)
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
src=$WORK/fx/src/bk
mkdir -p "$src/sub/deeper" && printf 'hello, blocks\n' >"$src/small" && : >"$src/empty" &&
  head -c 5000 /dev/urandom >"$src/sub/x" && head -c 65536 /dev/zero >"$src/zeros" && head -c 9000 /dev/urandom >"$src/sub/deeper/y" || exit 1
shim_tree_mount "$src" bk t_shim_kanswers || exit 1
export HFS3_MOUNTS="$M/bk=s3test:models/bk"
blob() { echo "$HFS3_CACHE_DIR/blobs/$(sha256sum "$src/$1" | cut -d' ' -f1)"; }
# zeros: its cached copy made sparse (the same bytes, no blocks); sub/deeper/y: not in the cache
z=$(blob zeros); cp --sparse=always "$z" "$z.sp" && chmod 0444 "$z.sp" && mv -f "$z.sp" "$z" || exit 1
rm -f "$(blob sub/deeper/y)"
mkdir "$WORK/ro"
if ! shim_ro_bind "$src" "$WORK/ro"; then
  echo "SKIP kernel-oracle: a read-only bind mount needs root"; exit 0
fi
trap 'umount "$WORK/ro" 2>/dev/null' EXIT
python3 "$HFS3_ROOT/tests/e2e/shim_kanswers.py" "$WORK/ro" zeros >"$WORK/kernel.out" || exit 1
shim python3 "$HFS3_ROOT/tests/e2e/shim_kanswers.py" "$M/bk" zeros >"$WORK/shim.out" 2>"$WORK/shim.err" || { cat "$WORK/shim.err"; exit 1; }
umount "$WORK/ro"; trap - EXIT
diff "$WORK/kernel.out" "$WORK/shim.out" | grep '^[<>]' | grep -v -e '^. inherited' -e '^. parent' >"$WORK/diff"
cat "$WORK/diff"
shim_check "st_blocks, O_TMPFILE and O_PATH re-open answers as the read-only bind mount's ($(grep -c . "$WORK/kernel.out") lines)" \
  test ! -s "$WORK/diff"
shim_check "a file not cached: the source's blocks ($(grep '^blocks sub/deeper/y ' "$WORK/shim.out"))" \
  grep -q "^blocks sub/deeper/y $(stat -c %b "$src/sub/deeper/y")$" "$WORK/shim.out"
shim_check "a cached file: its copy's blocks (sparse: $(stat -c %b "$z"); shim: $(shim stat -c %b "$M/bk/zeros"))" \
  test "$(shim stat -c %b "$M/bk/zeros")" = "$(stat -c %b "$z")"
shim_check "fstat of the open file: the same blocks" \
  test "$(shim python3 -c 'import os, sys; print(os.fstat(os.open(sys.argv[1], os.O_RDONLY)).st_blocks)' "$M/bk/zeros")" = "$(stat -c %b "$z")"
shim_check "statx(fd, \"\", AT_EMPTY_PATH) of the open file (Rust's File::metadata): the same blocks" \
  test "$(shim python3 -c 'import ctypes, os, struct, sys
c = ctypes.CDLL(None, use_errno=True)
b = ctypes.create_string_buffer(256)
fd = os.open(sys.argv[1], os.O_RDONLY)
print(struct.unpack_from("Q", b, 48)[0] if c.statx(fd, b"", 0x1000, 0xfff, b) == 0 else "error")' "$M/bk/zeros")" = "$(stat -c %b "$z")"
shim_check "du -ak over the files not sparse: as the source's" \
  test "$(cd "$src" && du -ak --exclude=zeros . | sort -k2)" = "$(cd "$M/bk" 2>/dev/null; shim du -ak --exclude=zeros "$M/bk" | sed "s|$M/bk|.|" | sort -k2)"
for w in . ..; do
  shim_check "inherited directory descriptor: '$w' has the mount's mode ($(grep "inherited $w [0-7]" "$WORK/shim.out"))" \
    test "$(sed -n "s/^inherited $w \([0-7]\)/\1/p" "$WORK/shim.out")" = "$(sed -n "s/^parent $w //p" "$WORK/shim.out")"
done
shim_check "inherited directory descriptor: lstat of '.' too" \
  test "$(sed -n "s/^inherited . lstat //p" "$WORK/shim.out")" = "$(sed -n "s/^parent . //p" "$WORK/shim.out")"
exit $((SHIM_FAILS > 0))
