#!/usr/bin/env bash
# t_shim_trust.sh - the shim's side of the cache trust rules (issue 6, item 10), with two users of a cache shared
# with group 100: user B plants symlinks where user A's shim reads (a blob, a mount's index, a fetch's .err);
# A's `cat` of a mount file fails with EIO and one log line, nothing of the symlinks' targets is read or
# written, and A's own files are unchanged. And the private-cache rule (issue 25 item 6): in A's private (0700)
# cache a blob of B's that carries the cache's group is refused by the shim (EIO, one line). Needs root and setpriv.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then echo "skip: needs root and setpriv"; exit 0; fi
shim_setup || exit 1
chmod 0755 "$WORK"
A=64101 B=64102
C=$HFS3_CACHE_DIR
# a private copy of the cache (0700, A's, group 100) for the private-cache rule below
P=$WORK/pcache
cp -a "$C" "$P" && chown -R $A:100 "$P" && find "$P" -type d -exec chmod 0700 {} +
chgrp -R 100 "$C" && chown -R $A "$C" && find "$C" -type d -exec chmod 03770 {} + && chmod 03770 "$C"
echo "A's secret" >"$WORK/secret" && chown $A "$WORK/secret" && chmod 0600 "$WORK/secret"
as() { local u=$1; shift; setpriv --reuid=$u --regid=100 --clear-groups env HOME="$WORK" "$@"; }
sha=$(sha256sum <"$WORK/fx/src/flat/a.txt" | cut -c1-64)
K=$(basename "$(dirname "$(grep -l . "$C"/mounts/*/manifest.json 2>/dev/null | head -1)")")

shim_check "A reads the mount before anything is planted" test "$(as $A env LD_PRELOAD=$HFS3_SHIM cat "$M/flat/a.txt")" = "hello from a"
# the private-cache rule, applied by the shim itself (offline: no helper runs): in a private cache a file of
# another user is refused even when it carries the cache's group, which only a shared cache trusts
shim_check "private cache: A reads its own blob" test "$(as $A env LD_PRELOAD=$HFS3_SHIM HFS3_CACHE_DIR="$P" cat "$M/flat/a.txt")" = "hello from a"
chown $B:100 "$P/blobs/$sha" && chmod 0440 "$P/blobs/$sha"
out=$(as $A env LD_PRELOAD=$HFS3_SHIM HFS3_CACHE_DIR="$P" cat "$M/flat/a.txt" 2>"$WORK/err"); rc=$?
cat "$WORK/err"
shim_check "private cache, B's blob in the cache's group: EIO" test "$rc" = 1 -a "$(grep -c 'Input/output error' "$WORK/err")" = 1
shim_check "private cache, B's blob: one log line naming it" test "$(grep -c '^hfs3:' "$WORK/err"):$(grep -c "blobs/$sha: owned by another user" "$WORK/err")" = "1:1"
shim_check "private cache, B's blob: nothing read" test -z "$out"
shim_check "private cache: A's other files still read" test "$(as $A env LD_PRELOAD=$HFS3_SHIM HFS3_CACHE_DIR="$P" head -c 3 "$M/flat/dir/b.bin" | wc -c)" = 3
# B replaces nothing of A's (sticky directories), but plants where an entry is missing: a blob A has not got
rm -f "$C/blobs/$sha"
as $B ln -s "$WORK/secret" "$C/blobs/$sha"
out=$(as $A env LD_PRELOAD=$HFS3_SHIM cat "$M/flat/a.txt" 2>"$WORK/err"); rc=$?
cat "$WORK/err"
shim_check "planted blob symlink: EIO" test "$rc" = 1 -a "$(grep -c 'Input/output error' "$WORK/err")" = 1
shim_check "planted blob symlink: one log line" test "$(grep -c '^hfs3:' "$WORK/err")" = 1
shim_check "planted blob symlink: nothing of the target read" test -z "$out"
# the index of a mount A has not loaded yet (removed here as if never fetched): B plants it as a symlink
khf=$(dirname "$(grep -l snapshots "$C"/mounts/*/index)")
rm -f "$khf/index"
as $B ln -s "$WORK/secret" "$khf/index"
out=$(as $A env LD_PRELOAD=$HFS3_SHIM cat "$M/hf/refs/main" 2>"$WORK/err"); rc=$?
cat "$WORK/err"
shim_check "planted index symlink: EIO" test "$rc" = 1 -a "$(grep -c 'Input/output error' "$WORK/err")" = 1
shim_check "planted index symlink: one log line naming it" test "$(grep -c '^hfs3:' "$WORK/err"):$(grep -c "index: a symlink" "$WORK/err")" = "1:1"
shim_check "A's secret unchanged" test "$(cat "$WORK/secret")" = "A's secret" -a "$(stat -c '%u %a' "$WORK/secret")" = "$A 600"
exit $((SHIM_FAILS > 0))
