#!/usr/bin/env bash
# t_shim_shared.sh - the shim in a cache shared with a group (setgid + g+w, made by an "init container" as
# root): what the shim creates itself (mounts/K/, its lock, locks/<sha>.lock, skeleton directories) keeps
# the group's access under umask 077, so a second user of the group, whose shim comes later, opens files
# through the first user's lock files and directories. Needs root (to act as two users); skipped otherwise.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
  echo "SKIP not-root: needs root and setpriv"; exit 77
fi
if [ ! -c /dev/null ] && [ -z "${T_SHIM_SHARED_NS:-}" ]; then
  # Some sandboxes have a root-owned regular file for /dev/null: another user cannot open it, and the shim
  # gives the helper /dev/null. Run in a private mount namespace with a file anyone can write bound over it.
  unshare -m true 2>/dev/null || { echo "SKIP no-devnull: /dev/null is not a device and unshare -m fails"; exit 77; }
  : >"$WORK/devnull"
  chmod 0666 "$WORK/devnull"
  T_SHIM_SHARED_NS=1 exec unshare -m --propagation private \
    bash -c 'mount --bind "$1" /dev/null && exec bash "$2"' sh "$WORK/devnull" "$0"
fi
shared_setup

export HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0
MNT=/models/org/m1
export HFS3_MOUNTS="$MNT=s3test:models/m1"

# USER CMD...: CMD as uid USER of group 100 only, umask 077, with the shim preloaded
as_user() {
  local uid=$1; shift
  setpriv --reuid="$uid" --regid=100 --clear-groups env HOME="$WORK/home" HFS3_SHIM="$HFS3_SHIM" \
    bash -c 'umask 077; export LD_PRELOAD=$HFS3_SHIM; exec "$@"' as_user "$@"
}
mode() { stat -c '%u %a' "$HFS3_CACHE_DIR/$1"; }
cfg=$(blob_of "$WORK/m/config.json")
tok=$(blob_of "$WORK/m/tokenizer.json")
K=$(ls "$HFS3_CACHE_DIR/mounts" 2>/dev/null || true)
[ -z "$K" ] || fail "the cache is not empty before the first shim"

# user A (65533) touches the cache first: its shim creates mounts/K/, mounts/K/lock, locks/<cfg>.lock and a
# skeleton directory for /models
as_user 65533 cat "$MNT/config.json" >"$WORK/a.cfg" 2>"$WORK/a.err" || { cat "$WORK/a.err"; fail "user A: cat"; }
cmp -s "$WORK/a.cfg" "$WORK/m/config.json" || fail "user A: content of config.json"
as_user 65533 ls /models >"$WORK/a.ls" 2>>"$WORK/a.err" || { cat "$WORK/a.err"; fail "user A: ls /models"; }
grep -qx org "$WORK/a.ls" || fail "user A: ls /models shows $(cat "$WORK/a.ls")"
[ ! -s "$WORK/a.err" ] || { cat "$WORK/a.err"; fail "user A: the shim logged"; }
K=$(ls "$HFS3_CACHE_DIR/mounts" | grep -v '^ancestors$')
[ "$(mode "mounts/$K")" = "65533 2770" ] || fail "mounts/K (made by A's shim): $(mode "mounts/$K")"
[ "$(mode "mounts/$K/lock")" = "65533 660" ] || fail "mounts/K/lock (made by A's shim): $(mode "mounts/$K/lock")"
wait_flushed "$HFS3_CACHE_DIR"   # the chunk-checked file enters blobs/ through the detached flush
[ "$(mode "locks/$cfg.lock")" = "65533 660" ] || fail "lock of config.json (made by A's shim): $(mode "locks/$cfg.lock")"
[ "$(mode "blobs/$cfg")" = "65533 440" ] || fail "blob of config.json: $(mode "blobs/$cfg")"
[ "$(mode mounts/ancestors)" = "65533 3770" ] || fail "mounts/ancestors: $(mode mounts/ancestors)"
[ "$(mode mounts/ancestors/models)" = "65533 3770" ] || fail "mounts/ancestors/models: $(mode mounts/ancestors/models)"
ok "user A's shim under umask 077: its directories 3770 (mounts/K 2770), its lock files 660, blob 440"

# user B (65534): another uncached file, then A's file again through A's lock file (the blob is gone), with
# its mount refreshed under A's mount lock (TTL 0) and a missing skeleton directory made inside A's
rm "$HFS3_CACHE_DIR/blobs/$cfg"
rmdir "$HFS3_CACHE_DIR/mounts/ancestors/models/org"
export HFS3_MANIFEST_TTL=0
as_user 65534 cat "$MNT/tokenizer.json" >"$WORK/b.tok" 2>"$WORK/b.err" || { cat "$WORK/b.err"; fail "user B: cat another file"; }
cmp -s "$WORK/b.tok" "$WORK/m/tokenizer.json" || fail "user B: content of tokenizer.json"
as_user 65534 cat "$MNT/config.json" >"$WORK/b.cfg" 2>>"$WORK/b.err" || { cat "$WORK/b.err"; fail "user B: cat the same file"; }
cmp -s "$WORK/b.cfg" "$WORK/m/config.json" || fail "user B: content of config.json"
as_user 65534 ls /models/org >"$WORK/b.ls" 2>>"$WORK/b.err" || { cat "$WORK/b.err"; fail "user B: ls /models/org"; }
grep -qx m1 "$WORK/b.ls" || fail "user B: ls /models/org shows $(cat "$WORK/b.ls")"
[ ! -s "$WORK/b.err" ] || { cat "$WORK/b.err"; fail "user B: the shim logged"; }
wait_flushed "$HFS3_CACHE_DIR"
[ "$(mode "blobs/$tok")" = "65534 440" ] || fail "blob of tokenizer.json: $(mode "blobs/$tok")"
[ "$(mode "blobs/$cfg")" = "65534 440" ] || fail "blob of config.json, fetched again by B: $(mode "blobs/$cfg")"
[ "$(mode "locks/$tok.lock")" = "65534 660" ] || fail "lock of tokenizer.json (made by B's shim): $(mode "locks/$tok.lock")"
[ "$(mode "locks/$cfg.lock")" = "65533 660" ] || fail "lock of config.json: $(mode "locks/$cfg.lock")"
[ "$(mode mounts/ancestors/models/org)" = "65534 3770" ] || fail "mounts/ancestors/models/org: $(mode mounts/ancestors/models/org)"
for b in "$HFS3_CACHE_DIR"/blobs/*; do
  [ "$(stat -c %a "$b")" = 440 ] || fail "blob $b: mode $(stat -c %a "$b")"
done
for l in "$HFS3_CACHE_DIR"/locks/*; do
  [ "$(stat -c %a "$l")" = 660 ] || fail "lock file $l: mode $(stat -c %a "$l")"
done
ok "user B of the group, umask 077: another file, then A's file through A's lock file; blobs 440, locks 660"
echo "all ok"
