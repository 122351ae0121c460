#!/usr/bin/env bash
# t_cache_gc_shared.sh - gc in a cache shared with a group: a member removes its own blobs, never tries another
# user's (sticky blobs/) and counts them; a member's use of root's blob is recorded on root's lock file (0660);
# a budget that only other users' blobs could meet fails before a byte, saying so; root cleans everything.
# Needs root (to act as the second user); skipped otherwise.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
  echo "skip: needs root and setpriv"; exit 0
fi
shared_setup
as_user() { setpriv --reuid=65534 --regid=100 --clear-groups env HOME="$WORK/home" "$@"; }
cfg=$(blob_of "$WORK/m/config.json"); tok=$(blob_of "$WORK/m/tokenizer.json")
"$HFS3_BIN" _get s3test:models/m1 config.json || fail "root _get"
as_user "$HFS3_BIN" _get s3test:models/m1 tokenizer.json || fail "member _get"
touch -d 2001-01-01 "$HFS3_CACHE_DIR/locks/$cfg.lock"
as_user "$HFS3_BIN" _get s3test:models/m1 config.json || fail "member _get of root's blob"
[ "$(stat -c %Y "$HFS3_CACHE_DIR/locks/$cfg.lock")" -gt 978307200 ] || fail "member's use of root's blob not recorded"
# a chunk-checked _get answers from the mount's cblobs/; the detached flush moves the file into blobs/ later (and
# holds the blob's lock meanwhile, which a gc counts as busy)
wait_flushed "$HFS3_CACHE_DIR"
ok "a member's use of root's blob is recorded on root's lock file"

HFS3_CACHE_MAX=100K expect_exit 1 "member fetch that only root's blob could make room for" \
  as_user "$HFS3_BIN" _get s3test:models/m1 model.safetensors
grep -q "model.safetensors: the file is 40.0 MiB, more than the whole cache budget" "$WORK/err" || { cat "$WORK/err"; fail "too large"; }
HFS3_CACHE_MAX=40M expect_exit 1 "member fetch blocked by root's blob" as_user "$HFS3_BIN" _get s3test:models/m1 model.safetensors
grep -q "cannot make room: .* are other users' files (only their owners may remove them); nothing was removed or downloaded" "$WORK/err" ||
  { cat "$WORK/err"; fail "other users' message"; }
[ -e "$HFS3_CACHE_DIR/blobs/$tok" ] && [ -e "$HFS3_CACHE_DIR/blobs/$cfg" ] || fail "removed for nothing"
ok "budget: $(grep -o 'cannot make room.*' "$WORK/err" | head -c 120)"

expect_exit 1 "member gc --max 0" as_user "$HFS3_BIN" cache gc --max 0
grep -q "^removed $tok " "$WORK/out" && grep -q "kept 0 busy, 1 of other users" "$WORK/out" || { cat "$WORK/out" "$WORK/err"; fail "member gc"; }
[ ! -e "$HFS3_CACHE_DIR/blobs/$tok" ] && [ -e "$HFS3_CACHE_DIR/blobs/$cfg" ] || fail "member gc removed the wrong blobs"
expect_exit 0 "root gc --max 0" "$HFS3_BIN" cache gc --max 0
[ -z "$(ls -A "$HFS3_CACHE_DIR/blobs")" ] || fail "root gc left blobs"
ok "gc: a member removes its own and counts root's; root removes everything"
