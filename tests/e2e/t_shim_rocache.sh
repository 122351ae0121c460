#!/usr/bin/env bash
# t_shim_rocache.sh - a warm cache on a read-only volume (issue 22 item 15), the Kubernetes shape "prewarm on the
# node, mount the cache read-only into the pods": HFS3_OFFLINE=1 reads every file through the shim (python3 and
# coreutils, the mount's listing), as root and as a member of a shared cache's group (uid 1000 with the fsGroup),
# writes nothing (no lock file, no directory, no last-use stamp) and logs nothing; a file that is not cached is EIO
# with one line saying the cache is read-only; online, the one line says to set HFS3_OFFLINE=1. The read-only
# volume is a read-only bind mount of the cache in a private mount namespace (unshare -m, as root).
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null || ! command -v setpriv >/dev/null || [ ! -x /usr/bin/python3 ]; then echo "SKIP: needs root and unshare -m"; exit 77; fi
s3env_start "$WORK"; trap s3env_stop EXIT
python3 "$HFS3_ROOT/scripts/gen_model.py" flat "$WORK/src" --shards 0.2,0.1 --seed 51
rclone copy "$WORK/src" s3test:models/ro
"$HFS3_BIN" build s3test:models/ro >"$WORK/build.out" 2>&1 || { cat "$WORK/build.out"; fail "build"; }
M=/models/ro C=$WORK/cache
chmod 0755 "$WORK"
mkdir "$C" && chgrp 2000 "$C" && chmod 2770 "$C"   # a shared cache (Kubernetes fsGroup 2000)
export HFS3_MOUNTS="$M=s3test:models/ro" HFS3_CACHE_DIR=$C HFS3_HELPER=$HFS3_BIN
# prewarm as the Kubernetes recipe does (hfs3-manifest fetch on the node), then one blob dropped (the uncached one)
"$HFS3_BIN" fetch s3test:models/ro >"$WORK/fetch.out" 2>&1 || { cat "$WORK/fetch.out"; fail "fetch"; }
wait_flushed "$C"   # the detached flush removes its records later: not a change the read-only run made
first=$(cd "$WORK/src" && ls | grep -v '^config.json$' | head -1)
sha=$(sha256sum "$WORK/src/$first" | cut -d' ' -f1)
[ -f "$C/blobs/$sha" ] && rm "$C/blobs/$sha" || fail "the blob of $first"
chmod -R a+rX "$WORK/src"
find "$C" -printf '%P %y %s %T@\n' | sort >"$WORK/before"
cat >"$WORK/read.py" <<'PY'
import errno, os, sys
m, src, skip = sys.argv[1:]
names = sorted(n for n in os.listdir(src) if not n.startswith("."))
assert sorted(os.listdir(m)) == names, (os.listdir(m), names)
for n in names:
    if n != skip:
        assert open(os.path.join(m, n), "rb").read() == open(os.path.join(src, n), "rb").read(), n
        assert os.stat(os.path.join(m, n)).st_size == os.path.getsize(os.path.join(src, n))
print("read all")
try:
    open(os.path.join(m, skip), "rb").read()
    print("uncached: opened")
except OSError as e:
    print("uncached:", errno.errorcode[e.errno])
PY
cat >"$WORK/ro.sh" <<RO
set -e
mount --bind '$C' '$C' && mount -o remount,bind,ro '$C'
export LD_PRELOAD='$HFS3_SHIM'
HFS3_OFFLINE=1 python3 '$WORK/read.py' $M '$WORK/src' '$first' >'$WORK/ro.out' 2>'$WORK/ro.err'
HFS3_OFFLINE=1 setpriv --reuid 1000 --regid 1000 --groups 2000 /usr/bin/python3 '$WORK/read.py' $M '$WORK/src' '$first' >'$WORK/ro1000.out' 2>'$WORK/ro1000.err'
HFS3_OFFLINE=1 cat $M/config.json >'$WORK/cat.out' 2>'$WORK/cat.err'
cat $M/config.json >'$WORK/online.out' 2>'$WORK/online.err' || true
RO
unshare -m sh "$WORK/ro.sh" || { cat "$WORK/ro.out" "$WORK/ro.err" "$WORK/cat.err" 2>/dev/null; fail "offline on a read-only cache"; }
[ "$(head -1 "$WORK/ro.out")" = "read all" ] || { cat "$WORK/ro.out" "$WORK/ro.err"; fail "every cached file reads offline from a read-only cache"; }
cmp -s "$WORK/cat.out" "$WORK/src/config.json" && [ ! -s "$WORK/cat.err" ] || { cat "$WORK/cat.err"; fail "cat from a read-only cache"; }
[ "$(head -1 "$WORK/ro1000.out")" = "read all" ] && grep -qx "uncached: EIO" "$WORK/ro1000.out" || { cat "$WORK/ro1000.out" "$WORK/ro1000.err"; fail "the same as a member of the cache's group"; }
ok "HFS3_OFFLINE=1 on a read-only cache: python3 and cat read every cached file, the listing is the model's (root, and uid 1000 in the cache's group)"
[ ! -s "$WORK/online.out" ] && [ "$(grep -c . "$WORK/online.err")" = 2 ] && grep -q "Read-only file system (set HFS3_OFFLINE=1" "$WORK/online.err" ||
  { cat "$WORK/online.err"; fail "online on a read-only cache: EIO with a line that says to set HFS3_OFFLINE=1"; }
ok "online on a read-only cache: EIO, and the line says to set HFS3_OFFLINE=1"
grep -qx "uncached: EIO" "$WORK/ro.out" || { cat "$WORK/ro.out"; fail "an uncached file: EIO"; }
[ "$(grep -c . "$WORK/ro.err")" = 1 ] && grep -q "read-only" "$WORK/ro.err" || { cat "$WORK/ro.err"; fail "one line for the uncached file, saying the cache is read-only"; }
ok "an uncached file on a read-only cache: EIO and one line that says why"
find "$C" -printf '%P %y %s %T@\n' | sort >"$WORK/after"
diff "$WORK/before" "$WORK/after" || fail "the read-only cache changed"
ok "nothing in the cache changed"
