#!/usr/bin/env bash
# t_fetch_shared.sh - a cache shared with a group (setgid + g+w, made by an "init container" as root) is used
# by another user of that group: directories 03770, blobs 0440, lock and other files group-writable, whatever
# the umask; the cache's own directories also carry the sticky bit (3770), a mount's directory is 2770 (every
# member's refresh replaces its files). Needs root (to act as the second user); skipped otherwise.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
  echo "SKIP not-root: needs root and setpriv"; exit 77
fi
shared_setup

(umask 077; "$HFS3_BIN" _get s3test:models/m1 config.json) || fail "root _get"
cfg=$(blob_of "$WORK/m/config.json")
# a chunk-checked _get answers from the mount's cblobs/; the detached flush moves the file into blobs/ later
wait_flushed "$HFS3_CACHE_DIR"
[ "$(stat -c %a "$HFS3_CACHE_DIR/blobs/$cfg")" = 440 ] || fail "shared blob mode $(stat -c %a "$HFS3_CACHE_DIR/blobs/$cfg")"
for d in . blobs tmp locks fails mounts unflushed "mounts/$(ls "$HFS3_CACHE_DIR/mounts")/tree"; do
  [ "$(stat -c %a "$HFS3_CACHE_DIR/$d")" = 3770 ] || fail "mode of $d: $(stat -c %a "$HFS3_CACHE_DIR/$d")"
done
d="mounts/$(ls "$HFS3_CACHE_DIR/mounts")"
[ "$(stat -c %a "$HFS3_CACHE_DIR/$d")" = 2770 ] || fail "mode of $d: $(stat -c %a "$HFS3_CACHE_DIR/$d")"
[ "$(stat -c %a "$HFS3_CACHE_DIR/locks/$cfg.lock")" = 660 ] || fail "lock mode"
ok "root in a shared cache: dirs 3770 (a mount's 2770), blob 440, lock 660 under umask 077"

# another user of the group: reads root's blob, fetches another file, takes root's lock file
as_user() { setpriv --reuid=65534 --regid=100 --clear-groups env HOME="$WORK/home" "$@"; }
as_user cat "$HFS3_CACHE_DIR/blobs/$cfg" >/dev/null || fail "the group cannot read root's blob"
as_user "$HFS3_BIN" _get s3test:models/m1 tokenizer.json || fail "uid 65534 _get"
tok=$(blob_of "$WORK/m/tokenizer.json")
wait_flushed "$HFS3_CACHE_DIR"
cmp -s "$HFS3_CACHE_DIR/blobs/$tok" "$WORK/m/tokenizer.json" || fail "blob of uid 65534"
[ "$(stat -c '%u %g %a' "$HFS3_CACHE_DIR/blobs/$tok")" = "65534 100 440" ] || fail "owner/mode $(stat -c '%u %g %a' "$HFS3_CACHE_DIR/blobs/$tok")"
idx=$HFS3_CACHE_DIR/mounts/$(ls "$HFS3_CACHE_DIR/mounts")/index
as_user cat "$idx" >/dev/null || fail "the group cannot read root's index"
touch -d 2001-01-01 "$idx"
as_user "$HFS3_BIN" _index s3test:models/m1 2>"$WORK/idx.err" || fail "uid 65534 _index (root's mount lock and files)"
[ ! -s "$WORK/idx.err" ] || { cat "$WORK/idx.err"; fail "uid 65534 _index warned"; }
[ "$(stat -c %Y "$idx")" -gt 978307200 ] || fail "uid 65534 _index did not renew the index"
ok "uid 65534 of the group: reads, fetches, refreshes"
echo "all ok"
