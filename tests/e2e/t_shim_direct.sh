#!/usr/bin/env bash
# t_shim_direct.sh - loads that skip the page cache (issue 33 item 7): GPU-direct loaders (cuFile, KvikIO,
# fastsafetensors) open weights with O_DIRECT and read aligned ranges. open(mount file, O_RDONLY|O_DIRECT) keeps
# O_DIRECT (F_GETFL shows it; it was dropped), aligned preads return the manifest's bytes, an unaligned one is the
# kernel's EINVAL, as for the source file on the same file system; on a cache whose file system cannot do O_DIRECT
# (ramfs) the open fails with the kernel's own error for a file there.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
src=$WORK/fx/src/dio
mkdir -p "$src" && head -c $((3 * 1048576 + 4096)) /dev/urandom >"$src/w.safetensors" || exit 1
python3 - "$src" >"$WORK/fx/dio.json" <<'PY' || exit 1
import hashlib, json, os, sys
b = open(os.path.join(sys.argv[1], "w.safetensors"), "rb").read()
print(json.dumps({"hfs3_manifest": 1, "layout": "flat", "generator": "t_shim_direct", "entries": [
    {"path": "w.safetensors", "type": "file", "size": len(b), "sha256": hashlib.sha256(b).hexdigest(),
     "etag": '"%s"' % hashlib.md5(b).hexdigest(), "mtime": 1764496800}]}))
PY
"$MK" "$WORK/fx/dio.json" "$HFS3_CACHE_DIR" s3test:models/dio "$src" || exit 1
export HFS3_MOUNTS="$M/dio=s3test:models/dio"
probe() {  # FILE [SRC]: O_DIRECT open, F_GETFL, aligned 1 MiB preads (compared with SRC's bytes), an unaligned one
  python3 - "$@" <<'PY'
import errno, fcntl, mmap, os, sys
def name(e): return errno.errorcode[e.errno]
try:
    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
except OSError as e:
    print("open", name(e)); sys.exit(0)
print("open ok", "O_DIRECT" if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT else "no-O_DIRECT")
want = open(sys.argv[2], "rb").read() if len(sys.argv) > 2 else None
buf, got, off = mmap.mmap(-1, 1 << 20), bytearray(), 0
while True:
    n = os.preadv(fd, [buf], off)
    got += buf[:n]; off += n
    if n < len(buf): break
print("aligned", len(got), "bytes", "" if want is None else "same" if got == want else "DIFFERENT")
try:
    os.pread(fd, 100, 1); print("unaligned ok")
except OSError as e:
    print("unaligned", name(e))
PY
}
k=$(probe "$src/w.safetensors" "$src/w.safetensors")
s=$(shim probe "$M/dio/w.safetensors" "$src/w.safetensors")
echo "kernel: $k"; echo "shim: $s"
shim_check "O_DIRECT through the shim: kept, aligned preads give the manifest's bytes, unaligned EINVAL as the kernel's" \
  test "$s" = "$k"
shim_check "(the kernel's own answer on this file system: O_DIRECT, the bytes)" grep -q "^open ok O_DIRECT" <<<"$k"
# a cache on ramfs, which has no O_DIRECT: the kernel's error for a file there, through the shim
mkdir "$WORK/ram"
if [ "$(id -u)" = 0 ] && mount -t ramfs ramfs "$WORK/ram" 2>/dev/null; then
  trap 'umount "$WORK/ram" 2>/dev/null' EXIT
  chmod 0700 "$WORK/ram" && "$MK" "$WORK/fx/dio.json" "$WORK/ram/cache" s3test:models/dio "$src" || exit 1
  k=$(probe "$WORK/ram/cache/blobs/$(sha256sum "$src/w.safetensors" | cut -d' ' -f1)")
  s=$(HFS3_CACHE_DIR=$WORK/ram/cache shim probe "$M/dio/w.safetensors")
  echo "ramfs kernel: $k"; echo "ramfs shim: $s"
  shim_check "a cache on ramfs: the kernel's answer ($k)" test "$s" = "$k"
  umount "$WORK/ram"; trap - EXIT
else
  echo "SKIP ramfs: mounting a ramfs needs root"
fi
exit $((SHIM_FAILS > 0))
