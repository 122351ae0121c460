#!/usr/bin/env bash
# t_cache_stamp.sh - issue 44: with HFS3_VERIFY_FOREIGN=1 a file is served under a name only if it was verified as
# that name (the stamp user.hfs3.verified on the inode: include/hfs3/serve.h). Real uids: A (64101, the victim) and
# B (64102, a member of the shared cache's group G). Two shards s1 and s2 of one model have the same size; B moves
# one of A's verified files under s2's name, where A's serve rule (A's file, A's or root's sticky directory, no
# write bit, one link, the size) would take it. A must read s2's real bytes (or get EIO offline), never s1's.
#   1. Mixed use: B used the model first without the setting (the shared mounts/K/cblobs/ is B's); A read it once
#      without the setting (its verified s1 sits in B's directory). B moves it into root's blobs/ as s2, and (1b)
#      into A's own mounts/KA/cblobs/ as s2. Online and offline.
#   2. B made blobs/: A's flush promotes A's s1 into B's directory; B moves it into A's own cblobs/ as s2.
#   3. B made tmp/: B renames A's .part of s1 (during its download) into A's own cblobs/ as s2.
#   4. B made unflushed/: A's blob installed before its flush, torn by a "crash" (the test rewrites it in place as
#      root), B removes A's record: after the reboot (HFS3_TEST_BOOT_ID) it is verified again, never served torn.
#   5. A cache of an older version (no stamps): A's own blob is hashed again and stamped, offline too; root's is
#      copied into A's own cblobs/ online.
#   6. B (owner of blobs/) puts A's unflushed s1 under A's unflushed s2's name before A's flush: the flush stamps
#      nothing it did not hash itself, so A never reads s1 as s2 after B moves it into A's cblobs/.
#   7. (issue 44 item 7) B made tmp/ first and fetched the model: A, with the setting, reads every file.
#   8. A file system without user extended attributes (a ramfs the test mounts; skipped where it cannot): a
#      private cache serves under the setting, a shared one refuses with one line.
#   9. (issue 44 item 6) B's FIFO, 0600 file, directory or symlink at locks/<sha>.pin.lock: A's gc still evicts it.
# STAMP_ONLY=1,3 runs only those parts. Needs root and setpriv; exits 77 with "SKIP: ..." otherwise.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
skip() { echo "SKIP: $1"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (to act as two users)"
command -v setpriv >/dev/null || skip "needs setpriv"

A=64101 B=64102 G=64100
s3env_start "$WORK"
trap 'stop_proxies; s3env_stop' EXIT
chmod 0755 "$WORK" "$WORK/home"
chmod 0644 "$RCLONE_CONFIG"
mkdir -p "$WORK/m"
printf '{"architectures": ["Test"], "hidden_size": 64}\n' >"$WORK/m/config.json"
head -c $((9 << 20)) /dev/urandom >"$WORK/m/s1.safetensors"
head -c $((9 << 20)) /dev/urandom >"$WORK/m/s2.safetensors"
chmod -R a+rX "$WORK/m"
R=s3test:models/st
fetch_publish "$WORK/m" "$R"
rclone cat "$R/.hfs3/manifest.json" | grep -q '"chunks"' || fail "test setup: no chunk digests in the manifest"
s1=$(blob_of "$WORK/m/s1.safetensors")
s2=$(blob_of "$WORK/m/s2.safetensors")
keyof() {   # the mount key of REMOTE [UID] (with UID: A's own mount directory under HFS3_VERIFY_FOREIGN=1)
  python3 -c '
import sys
h = 1469598103934665603
for b in sys.argv[1].encode() + (b"\0uid=" + sys.argv[2].encode() if len(sys.argv) > 2 else b""):
    h = ((h ^ b) * 1099511628211) % (1 << 64)
print("%016x" % h)' "$@"
}
K=$(keyof "$R")
KA=$(keyof "$R" "$A")
F=$WORK/flags
mkdir -m 1777 "$F"
as() {   # as UID CMD...: CMD as that uid, primary group G, umask 077
  local uid=$1; shift
  setpriv --reuid="$uid" --regid="$G" --clear-groups env HOME="$WORK/home" bash -c 'umask 077; exec "$@"' as "$@"
}
# shim UID REMOTE VAR=VALUE... -- CMD...: CMD as UID through the shim, /models/st mounting REMOTE; $st, shim.out/err
shim() {
  local uid=$1 rem=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  set +e
  setpriv --reuid="$uid" --regid="$G" --clear-groups env HOME="$WORK/home" HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 \
    HFS3_MOUNTS="/models/st=$rem" "${envs[@]}" LD_PRELOAD="$HFS3_SHIM" "$@" >"$WORK/shim.out" 2>"$WORK/shim.err"
  st=$?
  set -e
}
# a shared cache (root's, group G, 3770) whose subdirectories root made, except those named (made by B)
new_cache() {
  S=$WORK/c.$1; shift
  mkdir "$S"; chgrp "$G" "$S"; chmod 03770 "$S"
  local d
  for d in mounts blobs tmp locks fails unflushed; do
    if [[ " $* " == *" $d "* ]]; then as "$B" mkdir -m 03770 "$S/$d"
    else mkdir -m 03770 "$S/$d"; chgrp "$G" "$S/$d"; fi
  done
  export HFS3_CACHE_DIR=$S
}
records_gone() {   # until the detached flush removed every record
  for _ in $(seq 1 300); do [ -z "$(ls -A "$S/unflushed" 2>/dev/null | grep -v '^[0-9a-f]*\.k')" ] && return 0; sleep 0.1; done
  fail "the flush left records: $(ls "$S/unflushed")"
}
# A, with the setting, reads s2 (LABEL ENV...): never s1's bytes; online the real s2; offline the real s2 or EIO
a_reads_s2() {
  local label=$1; shift
  shim "$A" "$R" HFS3_VERIFY_FOREIGN=1 "$@" -- cat /models/st/s2.safetensors
  ! cmp -s "$WORK/shim.out" "$WORK/m/s1.safetensors" || { cat "$WORK/shim.err" >&2; fail "$label: A read s1's bytes as s2"; }
  if [[ " $* " == *HFS3_OFFLINE=1* ]]; then
    [ "$st" != 0 ] || cmp -s "$WORK/shim.out" "$WORK/m/s2.safetensors" || fail "$label: A read other bytes (offline)"
  else
    [ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/s2.safetensors" || {
      cat "$WORK/shim.err" >&2; fail "$label: A did not read s2's real bytes (exit $st)"; }
  fi
  ok "$label: never s1's bytes as s2 (exit $st$([ "$st" = 0 ] || echo ": $(grep -m1 . "$WORK/shim.err" | cut -c1-160)"))"
}
unset HFS3_VERIFY
only() { [ -z "${STAMP_ONLY:-}" ] || [[ ",$STAMP_ONLY," == *",$1,"* ]]; }

# ---- 1. mixed use: A's s1, verified without the setting in B's shared cblobs/, moved under s2's name ----
if only 1; then
for where in blobs own; do
  new_cache "mixed.$where"
  shim "$B" "$R" -- cat /models/st/config.json
  [ "$st" = 0 ] || { cat "$WORK/shim.err" >&2; fail "1: B's first read"; }
  as "$B" mkdir -m 3770 "$S/mounts/$K/cblobs" 2>/dev/null || true
  [ "$(stat -c %u "$S/mounts/$K/cblobs")" = "$B" ] || fail "1: test setup: the shared cblobs/ is not B's"
  # A's notebook, without the setting; no flush yet (the flush would promote it out of B's directory)
  shim "$A" "$R" HFS3_TEST_NO_FLUSH=1 -- cat /models/st/s1.safetensors
  [ "$st" = 0 ] && [ "$(stat -c %u "$S/mounts/$K/cblobs/$s1")" = "$A" ] || { cat "$WORK/shim.err" >&2; fail "1: test setup: A's s1 in B's cblobs/"; }
  as "$A" env HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _index "$R" >/dev/null 2>&1 || fail "1: A's _index"
  if [ "$where" = blobs ]; then dst=$S/blobs/$s2
  else
    as "$A" mkdir -m 3770 "$S/mounts/$KA/cblobs"
    dst=$S/mounts/$KA/cblobs/$s2
  fi
  as "$B" mv "$S/mounts/$K/cblobs/$s1" "$dst"
  [ "$(stat -c %u "$dst")" = "$A" ] || fail "1: test setup: B's move"
  a_reads_s2 "1 ($where, offline)" HFS3_OFFLINE=1
  a_reads_s2 "1 ($where, online)"
  a_reads_s2 "1 ($where, online, again)"
done
fi

# ---- 2. B made blobs/: A's flush promotes A's s1 there, B moves it into A's own cblobs/ as s2 ----
if only 2; then
new_cache bblobs blobs
shim "$A" "$R" -- cat /models/st/s1.safetensors
[ "$st" = 0 ] || { cat "$WORK/shim.err" >&2; fail "2: A's notebook read"; }
records_gone
[ "$(stat -c %u "$S/blobs/$s1")" = "$A" ] || fail "2: test setup: A's s1 was not promoted into B's blobs/"
as "$A" env HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _index "$R" >/dev/null 2>&1 || fail "2: A's _index"
as "$A" mkdir -m 3770 "$S/mounts/$KA/cblobs"
as "$B" mv "$S/blobs/$s1" "$S/mounts/$KA/cblobs/$s2"
a_reads_s2 "2 (offline)" HFS3_OFFLINE=1
a_reads_s2 "2 (online)"
records_gone
[ -f "$S/mounts/$KA/cblobs/$s2" ] && [ ! -e "$S/blobs/$s2" ] || fail "2: A's own s2 was promoted into B's blobs/ under the setting"
a_reads_s2 "2 (after the flush, which keeps A's s2 out of B's blobs/)"
fi

# ---- 3. B made tmp/: B renames A's .part of s1 (downloading) into A's own cblobs/ as s2 ----
if only 3; then
new_cache btmp tmp
as "$A" env HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _index "$R" >/dev/null 2>&1 || fail "3: A's _index"
as "$A" mkdir -m 3770 "$S/mounts/$KA/cblobs"
start_proxy slow 2000000
RS=slow:models/st
KAS=$(keyof "$RS" "$A")
as "$A" env HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _index "$RS" >/dev/null 2>&1 || fail "3: A's _index (slow)"
as "$A" mkdir -m 3770 "$S/mounts/$KAS/cblobs"
as "$B" python3 - "$S" "$s1" "$S/mounts/$KAS/cblobs/$s2" <<'PY' &
import glob, os, sys, time
s, sha, dst = sys.argv[1:]
for _ in range(6000):
    g = glob.glob("%s/tmp/%s.*.part" % (s, sha))
    if g:
        os.rename(g[0], dst)
        sys.exit(0)
    time.sleep(0.005)
sys.exit("no .part appeared")
PY
mover=$!
shim "$A" "$RS" HFS3_VERIFY_FOREIGN=1 -- cat /models/st/s1.safetensors
wait "$mover" || fail "3: B's mover failed"
[ "$(stat -c %u "$S/mounts/$KAS/cblobs/$s2")" = "$A" ] || fail "3: test setup: A's .part is not at s2's name"
R0=$R; R=$RS
a_reads_s2 "3 (offline)" HFS3_OFFLINE=1
a_reads_s2 "3 (online)"
R=$R0
stop_proxies
fi

# ---- 4. B made unflushed/: A's blob torn by a crash before its flush, B removes A's record ----
if only 4; then
new_cache bunfl unflushed
boot1=11111111-1111-4111-8111-111111111111 boot2=22222222-2222-4222-8222-222222222222
shim "$A" "$R" HFS3_VERIFY_FOREIGN=1 HFS3_VERIFY=whole HFS3_TEST_NO_FLUSH=1 HFS3_TEST_BOOT_ID=$boot1 -- cat /models/st/s1.safetensors
[ "$st" = 0 ] || { cat "$WORK/shim.err" >&2; fail "4: A's read"; }
blob=
for b in "$S/blobs/$s1" "$S/mounts/$KA/cblobs/$s1"; do [ -e "$b" ] && blob=$b; done
[ -n "$blob" ] && [ "$(stat -c %u "$blob")" = "$A" ] || fail "4: test setup: A's blob of s1"
[ -n "$(ls "$S/unflushed")" ] || fail "4: test setup: no record"
# the crash tore it: its last MiB never reached the disk (zeroes), same inode, same mode
python3 - "$blob" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
n = os.fstat(fd).st_size
os.pwrite(fd, b"\0" * (1 << 20), n - (1 << 20))
os.close(fd)
PY
as "$B" bash -c "rm -f '$S/unflushed/'*"
[ -z "$(ls "$S/unflushed")" ] || fail "4: test setup: B could not remove A's record"
for mode in offline online; do
  envs=(HFS3_VERIFY_FOREIGN=1 HFS3_TEST_BOOT_ID=$boot2)
  [ $mode = online ] || envs+=(HFS3_OFFLINE=1)
  shim "$A" "$R" "${envs[@]}" -- cat /models/st/s1.safetensors
  cmp -s "$WORK/shim.out" "$WORK/m/s1.safetensors" || [ "$st" != 0 ] || { cat "$WORK/shim.err" >&2; fail "4 ($mode): A read the torn blob"; }
  [ $mode = offline ] || [ "$st" = 0 ] || { cat "$WORK/shim.err" >&2; fail "4: online: exit $st"; }
  ok "4 ($mode): the torn blob whose record B removed is never served (exit $st)"
done
fi
# ---- 5. a cache of an older version: no stamps. A's own blob is hashed again and stamped (offline too); root's is
#      copied (online) ----
if only 5; then
new_cache old
unstamp() { python3 -c 'import os, sys; os.removexattr(sys.argv[1], "user.hfs3.verified")' "$1"; }
stamp_of() { python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.hfs3.verified").decode())' "$1" 2>/dev/null || echo none; }
as "$A" env HFS3_VERIFY=whole "$HFS3_BIN" _get "$R" s1.safetensors >/dev/null 2>&1 || fail "5: A's _get"
HFS3_VERIFY=whole "$HFS3_BIN" _get "$R" s2.safetensors >/dev/null 2>&1 || fail "5: root's _get"
records_gone
[ "$(stat -c %u "$S/blobs/$s1")" = "$A" ] && [ "$(stat -c %u "$S/blobs/$s2")" = 0 ] || fail "5: test setup: owners"
v=$(stamp_of "$S/blobs/$s1")
[ "${v%% *}" = "$s1" ] || fail "5: A's blob is stamped $v"
unstamp "$S/blobs/$s1"; unstamp "$S/blobs/$s2"
as "$A" env HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _index "$R" >/dev/null 2>&1 || fail "5: A's _index"
shim "$A" "$R" HFS3_VERIFY_FOREIGN=1 HFS3_OFFLINE=1 -- cat /models/st/s1.safetensors
[ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/s1.safetensors" || { cat "$WORK/shim.err" >&2; fail "5: A's own unstamped blob offline: exit $st"; }
[ "$(stamp_of "$S/blobs/$s1")" = "$s1" ] && [ "$(stat -c %a "$S/blobs/$s1")" = 440 ] || fail "5: A's blob was not stamped again ($(stamp_of "$S/blobs/$s1"), mode $(stat -c %a "$S/blobs/$s1"))"
ok "5: A's own unstamped blob (an older version's) is hashed again and stamped, offline"
shim "$A" "$R" HFS3_VERIFY_FOREIGN=1 HFS3_OFFLINE=1 -- cat /models/st/s2.safetensors
! cmp -s "$WORK/shim.out" "$WORK/m/s1.safetensors" || fail "5: other bytes"
[ "$st" != 0 ] || cmp -s "$WORK/shim.out" "$WORK/m/s2.safetensors" || fail "5: other bytes (offline)"
shim "$A" "$R" HFS3_VERIFY_FOREIGN=1 -- cat /models/st/s2.safetensors
[ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/s2.safetensors" || { cat "$WORK/shim.err" >&2; fail "5: root's unstamped blob: exit $st"; }
records_gone   # (the flush keeps the copy: root's blob beside it is not stamped)
[ -f "$S/mounts/$KA/cblobs/$s2" ] && [ "$(stat -c %u "$S/mounts/$KA/cblobs/$s2")" = "$A" ] || fail "5: no copy of A's own of root's unstamped blob"
ok "5: root's unstamped blob: A's own copy, hashed and stamped, is served"
fi

# ---- 6. the flush stamps nothing it did not verify: B (owner of blobs/) puts A's s1 under A's unflushed s2 ----
if only 6; then
new_cache bflush blobs
for f in s1 s2; do
  as "$A" env HFS3_VERIFY=whole HFS3_TEST_NO_FLUSH=1 "$HFS3_BIN" _get "$R" $f.safetensors >/dev/null 2>&1 || fail "6: A's _get $f"
done
[ -e "$S/unflushed/$s2" ] && [ "$(stat -c %u "$S/blobs/$s1")" = "$A" ] || fail "6: test setup: A's unflushed blobs in B's blobs/"
as "$B" bash -c "rm -f '$S/blobs/$s2' && mv '$S/blobs/$s1' '$S/blobs/$s2'"
as "$A" "$HFS3_BIN" _get "$R" config.json >/dev/null 2>&1 || fail "6: A's _get config.json"
records_gone
as "$A" env HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _index "$R" >/dev/null 2>&1 || fail "6: A's _index"
as "$A" mkdir -m 3770 "$S/mounts/$KA/cblobs"
as "$B" mv "$S/blobs/$s2" "$S/mounts/$KA/cblobs/$s2"
a_reads_s2 "6 (offline)" HFS3_OFFLINE=1
a_reads_s2 "6 (online)"
fi

# ---- 7. B made tmp/ first and fetched the model: A (with the setting) reads every file ----
if only 7; then
new_cache btmp2 tmp
for f in config.json s1.safetensors; do
  shim "$B" "$R" -- cat /models/st/$f
  [ "$st" = 0 ] || { cat "$WORK/shim.err" >&2; fail "7: B's read of $f"; }
done
for f in config.json s1.safetensors s2.safetensors; do
  shim "$A" "$R" HFS3_VERIFY_FOREIGN=1 -- cat /models/st/$f
  [ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/$f" || { cat "$WORK/shim.err" >&2; fail "7: A's read of $f through B's tmp/ (exit $st)"; }
done
ok "7: B made tmp/ and fetched first: A reads every file (its own copies and downloads, stamped)"
# an O_PATH descriptor of a cached file (the shim's path_of_blob: fgetxattr fails on O_PATH) reads the file
shim "$A" "$R" HFS3_VERIFY_FOREIGN=1 -- python3 -c '
import os, sys
fd = os.open("/models/st/config.json", os.O_PATH)
sys.stdout.buffer.write(open("/proc/self/fd/%d" % fd, "rb").read())'
[ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/config.json" || { cat "$WORK/shim.err" >&2; fail "7: an O_PATH open of a cached file (exit $st)"; }
ok "7: an O_PATH descriptor of a cached file reads its bytes (its stamp read through /proc/self/fd)"
fi

# ---- 8. a file system without user extended attributes (ramfs): no stamp to read. A private cache (0700) still
#      serves; a shared one serves nothing under the setting (one line), never wrong bytes ----
if only 8; then
RF=$WORK/rf
mkdir -p "$RF"
if ! mount -t ramfs none "$RF" 2>/dev/null; then
  echo "SKIP noxattr: cannot mount a ramfs here (no CAP_SYS_ADMIN): the no-xattr fallback is not tested"
else
  trap 'umount "$RF" 2>/dev/null || true; stop_proxies; s3env_stop' EXIT
  chmod 0755 "$RF"
  mkdir -m 0700 "$RF/priv"; chown "$A:$G" "$RF/priv"
  export HFS3_CACHE_DIR=$RF/priv
  for i in 1 2; do
    shim "$A" "$R" HFS3_VERIFY_FOREIGN=1 -- cat /models/st/s1.safetensors
    [ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/s1.safetensors" || { cat "$WORK/shim.err" >&2; fail "8: a private cache on ramfs (run $i): exit $st"; }
  done
  ok "8: a private cache on a file system without user xattrs: served (its directories nobody else can write)"
  S=$RF/shared
  mkdir "$S"; chgrp "$G" "$S"; chmod 03770 "$S"
  export HFS3_CACHE_DIR=$S
  shim "$A" "$R" HFS3_VERIFY_FOREIGN=1 -- cat /models/st/s1.safetensors
  [ "$st" != 0 ] && grep -q "extended attributes" "$WORK/shim.err" || { cat "$WORK/shim.err" >&2; fail "8: a shared cache on ramfs: exit $st, no line naming the missing extended attributes"; }
  ok "8: a shared cache on a file system without user xattrs: nothing served under the setting: $(grep -m1 'extended attributes' "$WORK/shim.err" | cut -c1-220)"
  shim "$A" "$R" -- cat /models/st/s1.safetensors
  [ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/s1.safetensors" || { cat "$WORK/shim.err" >&2; fail "8: without the setting: exit $st"; }
  ok "8: the same cache without the setting: served"
  umount "$RF"
fi
fi

# ---- 9. (issue 44 item 6) B's inode at locks/<sha>.pin.lock: A's blob can still be evicted ----
if only 9; then
new_cache pin
for kind in fifo file dir symlink; do
  as "$A" env HFS3_VERIFY=whole "$HFS3_BIN" _get "$R" s1.safetensors >/dev/null 2>&1 || fail "9: A's _get"
  records_gone
  [ "$(stat -c %u "$S/blobs/$s1")" = "$A" ] || fail "9: test setup: A's blob"
  p=$S/locks/$s1.pin.lock
  rm -rf "$p"
  case $kind in
    fifo) as "$B" mkfifo -m 0600 "$p" ;;
    file) as "$B" bash -c "umask 077; : >'$p'" ;;
    dir) as "$B" mkdir -m 0700 "$p" ;;
    symlink) as "$B" ln -s /nonexistent "$p" ;;
  esac
  set +e; as "$A" "$HFS3_BIN" cache gc --max 0 >"$WORK/out" 2>"$WORK/err"; st=$?; set -e
  [ ! -e "$S/blobs/$s1" ] || { cat "$WORK/err" >&2; fail "9: B's $kind at the pin: A's blob was not evicted (exit $st)"; }
  as "$B" rm -rf "$p"
done
ok "9: B's FIFO, 0600 file, directory or symlink at locks/<sha>.pin.lock: A's gc still evicts A's blob"
fi
echo "all ok"
