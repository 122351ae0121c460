#!/usr/bin/env bash
# The shim's side of the helper protocol and its failure modes, with a stand-in helper
# (shim_fake_helper.sh): _index under the mount lock as fd 3, _get under the blob lock, a clean descriptor
# table and no LD_PRELOAD for the helper, one fetch for two concurrent readers, TTL, prefetch, a host that
# ignores SIGCHLD; a mount without a manifest or with a refused (looping) one is a dir whose inside fails
# with EIO and one log line; HFS3_OFFLINE; a real symlink into a mount; root-level ancestors.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_start
cd "$WORK"
F=$M/flat
export HFS3_CACHE_DIR=$WORK/cache2 FAKE_LOG=$WORK/fake.log FAKE_FX=$WORK/fx FAKE_MK=$MK
export HFS3_HELPER=$HFS3_ROOT/tests/e2e/shim_fake_helper.sh
export HFS3_MOUNTS="$F=s3test:models/flat;$M/none=s3test:models/none;$M/loop=s3test:models/loop"
unset HFS3_OFFLINE
: >"$FAKE_LOG"

shim_check "stat answers from the index" test "$(shim stat -c %s "$F/dir/b.bin")" = 3000
shim_check "_index ran under the lock, fds 0-3, no LD_PRELOAD" grep -q "^_index s3test:models/flat lockfd=3 fds=0,1,2,3, preload=none cache=$HFS3_CACHE_DIR" "$FAKE_LOG"
shim_check "stat never fetches" bash -c "! grep -q ^_get '$FAKE_LOG'"
shim_check "ls -l never fetches" bash -c "LD_PRELOAD='$HFS3_SHIM' ls -lR '$F' >/dev/null && ! grep -q ^_get '$FAKE_LOG'"
shim_check "O_PATH and O_DIRECTORY opens never fetch" bash -c "LD_PRELOAD='$HFS3_SHIM' python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_PATH); size = os.fstat(fd).st_size; os.close(os.open(sys.argv[2], os.O_RDONLY | os.O_DIRECTORY)); sys.exit(size != 3000)' '$F/dir/b.bin' '$F/dir' && ! grep -q ^_get '$FAKE_LOG'"
shim_check "cat fetches" test "$(shim cat "$F/a.txt")" = "hello from a"
shim_check "_get ran with the lock as fd 3" grep -q "^_get s3test:models/flat a.txt lockfd=3 fds=0,1,2,3, preload=none" "$FAKE_LOG"
shim_check "the lock was held during _get" bash -c "! grep -q get-unlocked '$FAKE_LOG'"
shim_check "prefetch started once, detached, fds 0-2" test "$(grep -c "^_prefetch s3test:models/flat a.txt lockfd= fds=0,1,2, preload=none" "$FAKE_LOG")" = 1
shim_check "the blob is in the cache" test -f "$HFS3_CACHE_DIR/blobs/$(sha256sum "$WORK/fx/src/flat/a.txt" | cut -d' ' -f1)"
n_index=$(grep -c ^_index "$FAKE_LOG"); n_get=$(grep -c ^_get "$FAKE_LOG")
shim_check "cached: no new _get, fresh index: no new _index" bash -c "LD_PRELOAD='$HFS3_SHIM' cat '$F/same.txt' >/dev/null && [ \$(grep -c ^_get '$FAKE_LOG') = $n_get ] && [ \$(grep -c ^_index '$FAKE_LOG') = $n_index ]"
shim_check "HFS3_MANIFEST_TTL=0 revalidates" bash -c "HFS3_MANIFEST_TTL=0 LD_PRELOAD='$HFS3_SHIM' stat '$F' >/dev/null && [ \$(grep -c ^_index '$FAKE_LOG') = $((n_index + 1)) ]"
# two readers at once: one fetch
(shim cat "$F/dir/deeper/c.txt" >"$WORK/c1") & p1=$!
(shim cat "$F/dir/deeper/c.txt" >"$WORK/c2") & p2=$!
wait $p1 $p2
shim_check "two concurrent readers get the bytes" bash -c "[ \"\$(cat '$WORK/c1')\" = c ] && [ \"\$(cat '$WORK/c2')\" = c ]"
shim_check "two concurrent readers: one _get" test "$(grep -c "^_get s3test:models/flat dir/deeper/c.txt" "$FAKE_LOG")" = 1
# a failed fetch: EIO and the helper's reason, once
err=$(shim cat "$F/dir/b.bin" 2>&1 >/dev/null)
echo "$err"
shim_check "failed fetch is EIO" grep -q "Input/output error" <<<"$err"
shim_check "failed fetch logs the reason once" test "$(grep -c '^hfs3: .*fake: refusing dir/b.bin' <<<"$err")" = 1
shim_check "a host ignoring SIGCHLD still gets its files" bash -c "LD_PRELOAD='$HFS3_SHIM' python3 -c \"
import signal, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
sys.exit(0 if open('$F/empty','rb').read() == b'' and open('$F/link-to-a').read() == 'hello from a\\\\n' else 1)\""

# no manifest: a dir, EIO inside, one log line
shim_check "mount without a manifest is a dir" test "$(shim stat -c %F "$M/none" 2>/dev/null)" = directory
err=$(shim ls "$M/none" 2>&1); echo "$err"
shim_check "listing it is EIO" grep -q "Input/output error" <<<"$err"
shim_check "one log line with the helper's reason" test "$(grep -c '^hfs3: .*fake: no such model s3test:models/none' <<<"$err")" = 1
shim_check "lookups inside are EIO" bash -c "LD_PRELOAD='$HFS3_SHIM' stat '$M/none/x' 2>&1 | grep -q 'Input/output error'"
shim_check "python: isdir true, listdir EIO" bash -c "LD_PRELOAD='$HFS3_SHIM' python3 -c \"
import os, errno, sys
try: os.listdir('$M/none'); sys.exit(1)
except OSError as e: sys.exit(0 if e.errno == errno.EIO and os.path.isdir('$M/none') else 1)\" 2>/dev/null"
# a looping manifest: refused by the validating parser, so no index can be made
err=$(shim ls "$M/loop" 2>&1); echo "$err"
shim_check "looping manifest: EIO" grep -q "Input/output error" <<<"$err"
shim_check "looping manifest: one log line naming the loop" test "$(grep -c '^hfs3: .*loop' <<<"$err")" = 1

# offline: stat answers, open of an uncached file is EIO
shim_check "offline stat of an uncached file" test "$(HFS3_OFFLINE=1 LD_PRELOAD=$HFS3_SHIM stat -c %s "$F/dir/b.bin")" = 3000
shim_check "offline open of an uncached file is EIO" bash -c "HFS3_OFFLINE=1 LD_PRELOAD='$HFS3_SHIM' cat '$F/dir/b.bin' 2>&1 | grep -q 'Input/output error'"
shim_check "offline open of a cached file" test "$(HFS3_OFFLINE=1 LD_PRELOAD=$HFS3_SHIM cat "$F/a.txt")" = "hello from a"

# a real symlink into a mount
ln -s "$F" "$WORK/hublink"
shim_check "cat through a real symlink into a mount" test "$(shim cat "$WORK/hublink/a.txt")" = "hello from a"
shim_check "realpath through a real symlink" test "$(shim realpath "$WORK/hublink/link-to-a")" = "$F/a.txt"
shim_check "listdir through a real symlink" test "$(shim python3 -c "import os; print(sorted(os.listdir('$WORK/hublink/dir')))")" = "['b.bin', 'deeper', 'up']"

# root-level ancestors that do not exist
R=/hfs3e2e-$$-$RANDOM
shim_check "root-level ancestor lists its mount" test "$(HFS3_MOUNTS="$R/deep/flat=s3test:models/flat" LD_PRELOAD=$HFS3_SHIM ls "$R")" = deep
shim_check "cd into an ancestor" test "$(HFS3_MOUNTS="$R/deep/flat=s3test:models/flat" LD_PRELOAD=$HFS3_SHIM bash -c "cd $R/deep && /bin/pwd && ls")" = "$R/deep
flat"
shim_check "Path.resolve(strict) through ancestors" test "$(HFS3_MOUNTS="$R/deep/flat=s3test:models/flat" LD_PRELOAD=$HFS3_SHIM python3 -c "import pathlib; print(pathlib.Path('$R/deep/flat/a.txt').resolve(strict=True))")" = "$R/deep/flat/a.txt"
# ancestors that exist on disk are the host's: writes there are real; a synthetic one is read-only
shim_check "touch a real ancestor" shim touch "$WORK"
shim_check "mkdir beside a mount in a real ancestor" shim mkdir "$WORK/mnt-sibling"
# (it is there: EEXIST, as a read-only mount answers; a new name in it is EROFS)
shim_check "mkdir of a synthetic ancestor is EEXIST" bash -c "LD_PRELOAD='$HFS3_SHIM' mkdir '$WORK/mnt' 2>&1 | grep -q 'File exists'"
shim_check "mkdir in a synthetic ancestor is EROFS" bash -c "LD_PRELOAD='$HFS3_SHIM' mkdir '$WORK/mnt/new' 2>&1 | grep -q 'Read-only'"
# a thread cancelled (pthread_cancel) while it loads a mount's index: the mount is not left "loading", later
# calls on it return (they waited forever)
out=$(HFS3_CACHE_DIR=$WORK/cache-cancel FAKE_INDEX_SLEEP=2 LD_PRELOAD=$HFS3_SHIM timeout -k 5 20 \
  "$HFS3_ROOT/$BUILD/tools/cancelload" "$F/a.txt" 2>&1); rc=$?
shim_check "a thread cancelled during the index load: the next stat returns ($rc: $out)" test "$rc:$out" = "0:stat ok"
exit $((SHIM_FAILS > 0))
