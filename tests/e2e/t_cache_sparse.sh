#!/usr/bin/env bash
# t_cache_sparse.sh - a page that cannot be read under a hash is an error or zeros, never SIGBUS. On a full tmpfs
# a read fault on a hole of a mapped file raises SIGBUS (the page cannot be allocated) where pread reads zeros:
# user A's cache on a tmpfs holds a blob and a dead fetch's .part with holes (a cache copied with
# cp --sparse=always, rsync -S), member B fills the tmpfs, then A's `cache verify` and A's fetch (which resumes the
# .part) hash them. Only the .part a fetch has just written itself is hashed through a mapping (lib/util.c,
# hfs3_sha256_update_fd_fresh): an I/O error, a hole, or a file shortened under a mapping kills the helper.
# Needs root (tmpfs mount, distinct uids) and setpriv; exits 77 with "SKIP: ..." otherwise.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
source "$HFS3_ROOT/tests/e2e/cache_users.sh"
[ "$(id -u)" = 0 ] || skip_test root "needs root (a tmpfs mount, two users)"
small=$WORK/small
CLEANUP='umount "$small" 2>/dev/null'
cache_users_start
mkdir -p "$small"
mount -t tmpfs -o size=32m tmpfs "$small" 2>"$WORK/mount.err" ||
  skip_test tmpfs "cannot mount a tmpfs here: $(cat "$WORK/mount.err")"

# 20 MiB, three 8 MiB chunks, mostly zeros: 1 MiB of random bytes at each end
mkdir -p "$WORK/m"
python3 - "$WORK/m/sparse.bin" <<'PY'
import os, sys
with open(sys.argv[1], "wb") as f:
    f.write(os.urandom(1 << 20) + bytes(18 << 20) + os.urandom(1 << 20))
PY
chmod -R a+rX "$WORK/m"
fetch_publish "$WORK/m" s3test:models/sp
R=s3test:models/sp
sha=$(blob_of "$WORK/m/sparse.bin")
S=$small/cache
mkdir "$S"; chgrp "$G" "$S"; chmod 03770 "$S"
export HFS3_CACHE_DIR=$S HFS3_VERIFY=whole

# no_crash WHAT: A's last command was not killed by a signal (SIGBUS: 135) nor stopped by a sanitizer
no_crash() {
  if [ "$st" -ge 128 ] || [ "$st" = 99 ] || grep -q "AddressSanitizer\|Bus error\|SIGBUS" "$WORK/err"; then
    cat "$WORK/out" "$WORK/err" >&2; fail "$1: the helper crashed (exit $st)"
  fi
}
# fill: B fills the tmpfs but for 256 KiB (room for A's small writes; a mapping's faults on 20 MiB of holes
# need far more)
fill() {
  as "$B" rm -f "$S/tmp/fill.B"
  as "$B" dd if=/dev/zero of="$S/tmp/reserve.B" bs=64k count=4 status=none
  as "$B" dd if=/dev/zero of="$S/tmp/fill.B" bs=64k status=none 2>/dev/null || true
  as "$B" rm -f "$S/tmp/reserve.B"
  [ "$(df -k --output=avail "$small" | tail -1)" -le 512 ] || fail "the tmpfs is not full: $(df -k "$small")"
}
holes() { [ "$(du -k "$1" | cut -f1)" -le 4096 ] || fail "$1 has no holes: $(du -k "$1")"; }

runA fetch "$R"
[ "$st" = 0 ] || { cat "$WORK/err" >&2; fail "A's fetch (exit $st)"; }
[ "$(stat -c %u "$S/blobs/$sha")" = "$A" ] || fail "the blob is not A's"

# ---- a blob with holes: cache verify reads it with pread ----
as "$A" cp --sparse=always "$S/blobs/$sha" "$S/blobs/$sha.sparse"
as "$A" chmod 0440 "$S/blobs/$sha.sparse"
as "$A" mv -f "$S/blobs/$sha.sparse" "$S/blobs/$sha"
holes "$S/blobs/$sha"
fill
runA cache verify
no_crash "cache verify of a blob with holes on a full tmpfs"
[ "$st" = 0 ] && grep -q "1 good, 0 bad" "$WORK/out" || { cat "$WORK/out" "$WORK/err" >&2; fail "cache verify (exit $st)"; }
holes "$S/blobs/$sha"
ok "cache verify of A's blob with holes while B filled the tmpfs: $(grep -o '[0-9]* good, [0-9]* bad' "$WORK/out")"

# ---- a dead fetch's .part with holes: the resume checks its chunks and hashes it with pread ----
as "$B" rm -f "$S/tmp/fill.B"
as "$A" rm -f "$S/blobs/$sha"
part=$S/tmp/$sha.0123456789abcdef
as "$A" cp --sparse=always "$WORK/m/sparse.bin" "$part.part"
printf 'hfs3-done 1 %s %s\n0\n1\n2\n' "$((20 << 20))" "$((8 << 20))" | as "$A" tee "$part.done" >/dev/null
holes "$part.part"
fill
runA fetch "$R"
no_crash "a resume of a .part with holes on a full tmpfs"
[ "$st" = 0 ] || { cat "$WORK/out" "$WORK/err" >&2; fail "A's resumed fetch (exit $st)"; }
[ "$(blob_of "$S/blobs/$sha")" = "$sha" ] || fail "the resumed blob does not hash to its name"
[ ! -e "$part.part" ] || fail "the .part was not the one resumed"
ok "A's fetch resumes a .part with holes while B filled the tmpfs: no crash, the blob installed"

# ---- a chunk-checked file with holes in A's cblobs/: the detached flush hashes it for its promotion through
# a mapping (lib/durable.c); SIGBUS there ends the mapped pass and pread hashes it again, so it is promoted ----
as "$B" rm -f "$S/tmp/fill.B"
as "$A" rm -f "$S/blobs/$sha"
set +e
as "$A" env HFS3_VERIFY=chunks HFS3_TEST_NO_FLUSH=1 "$HFS3_BIN" _get "$R" sparse.bin >"$WORK/out" 2>"$WORK/err"; st=$?
set -e
[ "$st" = 0 ] || { cat "$WORK/err" >&2; fail "A's chunk-checked _get (exit $st)"; }
cb=$(ls "$S"/mounts/*/cblobs/"$sha")
rec=$(ls "$S/unflushed/")
as "$A" cp --sparse=always "$cb" "$cb.sparse"
as "$A" chmod 0440 "$cb.sparse"
as "$A" mv -f "$cb.sparse" "$cb"
holes "$cb"
fill
set +e
as "$A" env HFS3_VERIFY=chunks "$HFS3_BIN" _get "$R" sparse.bin >"$WORK/out" 2>"$WORK/err"; st=$?
set -e
no_crash "a _get of a chunk-checked file with holes on a full tmpfs"
for _ in $(seq 1 300); do [ ! -e "$S/unflushed/$rec" ] && [ -e "$S/blobs/$sha" ] && break; sleep 0.1; done
[ ! -e "$S/unflushed/$rec" ] && [ -e "$S/blobs/$sha" ] ||
  fail "the flush did not promote the file with holes (SIGBUS in its mapped hash?): $(ls "$S/unflushed" "$S"/mounts/*/cblobs)"
[ "$(blob_of "$S/blobs/$sha")" = "$sha" ] || fail "the promoted blob does not hash to its name"
ok "the flush promotes A's chunk-checked file with holes while B filled the tmpfs: the mapped hash's SIGBUS is caught, pread hashes it"
echo "all ok"
