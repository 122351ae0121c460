#!/usr/bin/env bash
# Failure modes with the real helper against the real S3 server: a mount whose manifest is missing, one whose
# manifest loops (the helper refuses it), a stale cached index when S3 is gone, and HFS3_OFFLINE with a file
# not cached. Each is a directory whose inside fails with EIO (or is served from the cache), with one log line.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_s3
python3 "$HFS3_ROOT/tests/e2e/shim_fixture.py" "$WORK/fx" >/dev/null || exit 1
rclone copy --links "$WORK/fx/src/flat" s3test:models/flat || exit 1
"$HFS3_BIN" build s3test:models/flat >/dev/null || exit 1
rclone copyto "$WORK/fx/loop.json" s3test:models/loop/.hfs3/manifest.json || exit 1
M=$WORK/mnt
export HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0
export HFS3_MOUNTS="$M/flat=s3test:models/flat;$M/none=s3test:models/none;$M/loop=s3test:models/loop"
cd "$WORK"

shim_check "a real read" test "$(shim cat "$M/flat/a.txt")" = "hello from a"
shim_check "missing manifest: still a dir" test "$(shim stat -c %F "$M/none" 2>/dev/null)" = directory
err=$(shim ls "$M/none" 2>&1); echo "$err"
shim_check "missing manifest: EIO" grep -q "Input/output error" <<<"$err"
shim_check "missing manifest: one log line, from the shim" test "$(grep -c "^hfs3" <<<"$err")" = 1 -a "$(grep -c "^hfs3: $M/none: .*no manifest at s3://.*run hfs3-manifest build" <<<"$err")" = 1
err=$(shim cat "$M/loop/a" 2>&1); echo "$err"
shim_check "looping manifest: EIO" grep -q "Input/output error" <<<"$err"
shim_check "looping manifest: one log line naming the loop" test "$(grep -c "^hfs3" <<<"$err")" = 1 -a "$(grep -c "^hfs3: $M/loop: s3test:models/loop: .*loop" <<<"$err")" = 1

# offline: stat from the cached index, EIO for what is not cached
shim_check "offline stat of an uncached file" test "$(HFS3_OFFLINE=1 LD_PRELOAD=$HFS3_SHIM stat -c %s "$M/flat/dir/b.bin")" = 3000
err=$(HFS3_OFFLINE=1 LD_PRELOAD=$HFS3_SHIM cat "$M/flat/dir/b.bin" 2>&1); echo "$err"
shim_check "offline open of an uncached file is EIO" grep -q "Input/output error" <<<"$err"
shim_check "offline open of a cached file" test "$(HFS3_OFFLINE=1 LD_PRELOAD=$HFS3_SHIM cat "$M/flat/a.txt")" = "hello from a"
# booleans as the helper reads them: yes/on/TRUE are 1; anything else warns once and keeps the default
err=$(HFS3_OFFLINE=Yes LD_PRELOAD=$HFS3_SHIM cat "$M/flat/dir/b.bin" 2>&1); echo "$err"
shim_check "HFS3_OFFLINE=Yes is offline" grep -q "not in the cache and HFS3_OFFLINE=1" <<<"$err"
err=$(HFS3_OFFLINE=maybe LD_PRELOAD=$HFS3_SHIM cat "$M/flat/a.txt" 2>&1); echo "$err"
shim_check "HFS3_OFFLINE=maybe: one warning, the default (online), the file read" \
  test "$(grep -c '^hfs3: HFS3_OFFLINE=maybe is not a boolean' <<<"$err"):$(grep -c 'hello from a' <<<"$err")" = 1:1
err=$(HFS3_OFFLINE=1 HFS3_PREFETCH=bogus LD_PRELOAD=$HFS3_SHIM cat "$M/flat/a.txt" 2>&1); echo "$err"
shim_check "HFS3_PREFETCH=bogus: one warning" test "$(grep -c '^hfs3: HFS3_PREFETCH=bogus is not a boolean' <<<"$err")" = 1

# the object changed behind the manifest's back: the helper refuses it, the shim fails the open once
echo "not the bytes the manifest names" | rclone rcat s3test:models/flat/dir/b.bin
err=$(shim cat "$M/flat/dir/b.bin" 2>&1 >/dev/null); echo "$err"
shim_check "changed object: EIO" grep -q "Input/output error" <<<"$err"
shim_check "changed object: one log line from the shim" test "$(grep -c "^hfs3" <<<"$err")" = 1 -a "$(grep -c "^hfs3: $M/flat/dir/b.bin: fetch failed" <<<"$err")" = 1
shim_check "changed object: nothing cached under its sha" bash -c "! ls '$HFS3_CACHE_DIR/blobs' | grep -q \$(sha256sum <'$WORK/fx/src/flat/dir/b.bin' | cut -c1-64)"

# S3 gone, index stale: the cached one is served (the remote's variables stay: only the server went away)
s3env_stop --keep-env
err=$(HFS3_MANIFEST_TTL=0 LD_PRELOAD=$HFS3_SHIM cat "$M/flat/a.txt" 2>&1 >/dev/null); echo "$err"
shim_check "S3 down, stale index: one warning line" test "$(grep -c . <<<"$err")" = 1 -a "$(grep -c "using the cached manifest" <<<"$err")" = 1
shim_check "S3 down, stale index: listing still served" test "$(HFS3_MANIFEST_TTL=0 LD_PRELOAD=$HFS3_SHIM ls "$M/flat" 2>/dev/null | wc -l)" = 6
shim_check "S3 down, cached blob still served" test "$(HFS3_MANIFEST_TTL=0 LD_PRELOAD=$HFS3_SHIM cat "$M/flat/a.txt" 2>/dev/null)" = "hello from a"
exit $((SHIM_FAILS > 0))
