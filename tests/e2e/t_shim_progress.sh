#!/usr/bin/env bash
# t_shim_progress.sh - the shim's stall check follows the helper's temp files (tmp/<sha256>.<rand>.part,
# allocated at full size, and its .done sidecar): a real fetch slowed by the fault proxy that keeps writing is
# never cut by a small HFS3_STALL_TIMEOUT, one whose requests hang is cut after it with EIO and one log line. A
# cold load says what it does where stderr is a terminal (one line updated in place, ended by the file's done
# line), nothing where it is a file (issue 41 item 3; t_shim_quiet has the pipes), nothing at HFS3_LOG=error.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
cleanup() { stop_proxies; s3env_stop; }
trap cleanup EXIT
mkdir -p "$WORK/p"
head -c $((4 << 20)) /dev/urandom >"$WORK/p/big.bin"
head -c $((1536 << 10)) /dev/urandom >"$WORK/p/one.bin"
fetch_publish "$WORK/p" s3test:models/p
# without chunk digests (8 MiB chunks make every range one chunk): big.bin is then fetched as 2 ranges of 2 MiB,
# and only a file of more than one range has the .done sidecar that progress lines read
"$HFS3_BIN" show --json s3test:models/p |
  python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("chunk_size", None); [e.pop("chunks", None) for e in d["entries"]]; json.dump(d, sys.stdout)' \
  >"$WORK/p.json" || fail "manifest without chunk digests"
rclone copyto "$WORK/p.json" s3test:models/p/.hfs3/manifest.json || fail "upload the manifest"
export HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0 HFS3_STALL_TIMEOUT=2
unset HFS3_OFFLINE
M=$WORK/mnt/p

# slow but live: 2 ranges of 2 MiB at 400 KB/s each, and one range of 1.5 MiB at 300 KB/s (no sidecar): ~5 s
start_proxy slow 400000
for f in big.bin one.bin; do
  start=$(date +%s)
  HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM cat "$M/$f" >"$WORK/out" 2>"$WORK/err" ||
    { cat "$WORK/err"; fail "slow fetch of $f cut"; }
  took=$(( $(date +%s) - start ))
  cmp -s "$WORK/out" "$WORK/p/$f" || fail "slow fetch of $f: wrong bytes"
  [ "$took" -ge 3 ] || fail "slow fetch of $f took ${took}s: the proxy did not slow it"
  echo "slow fetch of $f: ${took}s, stall timeout 2 s, not cut"
  # stderr is a file: no progress line at all (issue 41 item 3: only a terminal gets one)
  [ ! -s "$WORK/err" ] || { cat "$WORK/err"; fail "a cold load of $f wrote on a stderr that is a file"; }
done
ok "a cold load of ${took} s writes nothing on a stderr that is a file"

# HFS3_LOG=error: not a byte
HFS3_CACHE_DIR=$WORK/cache-quiet HFS3_LOG=error HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM \
  cat "$M/big.bin" >"$WORK/out" 2>"$WORK/quiet.err" || { cat "$WORK/quiet.err"; fail "HFS3_LOG=error: cat"; }
cmp -s "$WORK/out" "$WORK/p/big.bin" || fail "HFS3_LOG=error: wrong bytes"
[ ! -s "$WORK/quiet.err" ] || { cat "$WORK/quiet.err"; fail "HFS3_LOG=error: the cold load wrote to stderr"; }
ok "HFS3_LOG=error: a cold load writes nothing on stderr"

# on a terminal (script(1) gives the program a pty): one line updated in place with \r, ended by one newline;
# 6 threads on 2 files at once: one line per turn for the whole process, naming how many others wait
if command -v script >/dev/null; then
  cat >"$WORK/threads.py" <<'PY'
import sys, threading
def rd(p):
    with open(p, "rb") as f:
        f.read()
ts = [threading.Thread(target=rd, args=(sys.argv[1 + i % 2],)) for i in range(6)]
[t.start() for t in ts]
[t.join() for t in ts]
PY
  # (what the program writes to the terminal is script's stdout; the terminal turns each \n into \r\n)
  t0=$(date +%s)
  HFS3_CACHE_DIR=$WORK/cache-tty HFS3_MOUNTS="$M=slow:models/p" script -qec \
    "LD_PRELOAD=$HFS3_SHIM python3 $WORK/threads.py $M/big.bin $M/one.bin" /dev/null >"$WORK/tty.err" </dev/null ||
    fail "on a terminal: the load failed"
  took=$(( $(date +%s) - t0 + 1 ))
  python3 - "$WORK/tty.err" "$M" "$took" <<'PY' || fail "on a terminal: the progress line"
import re, sys
t = open(sys.argv[1], "rb").read().decode().replace("\r\n", "\n")
print(repr(t[-400:]))
# every update starts with \r and erases the rest of the line; each line ends with a file's done line (issue 41
# item 3: it stayed at 99%), the last one at the end; rates in decimal units, as status and fetch give them
ups = [u for u in t.split("\r") if u]
assert len(ups) >= 1, "no update"
assert t.endswith("\n"), "not ended"
for u in ups:
    assert re.match(r"hfs3: " + re.escape(sys.argv[2]) + r"/(big|one)\.bin: .*\x1b\[K\n?$", u), u
for line in t.split("\n")[:-1]:
    assert re.search(r"\rhfs3: \S+/(big|one)\.bin: ([0-9.]+ MiB) of \2 \(100%\), done in \d+ s\x1b\[K$", line), line
assert not re.search(r"[KMG]iB/s", t), "a rate in binary units"
# six opens wait at once: the line says so, and one thread's line is the process's
assert any(re.search(r"; [1-5] more opens? waiting", u) for u in ups), "no count of the other waits"
# one printer for the process, at most one update a second (and a done line per file): not one per thread
assert len(ups) <= int(sys.argv[3]) + 3, f"{len(ups)} updates in {sys.argv[3]} s"
PY
  ok "on a terminal: $(tr -d '\n' <"$WORK/tty.err" | tr '\r' '\n' | grep -c .) updates, each line ended by a file's done line; 6 waits print one line between them"
else
  skip_part tty "no script(1) to give the program a terminal"
fi

# last use: an open of a cached blob through the shim moves its lock file's mtime (gc's LRU clock)
bsha=$(blob_of "$WORK/p/big.bin")
touch -d '2 hours ago' "$HFS3_CACHE_DIR/locks/$bsha.lock"
before=$(stat -c %Y "$HFS3_CACHE_DIR/locks/$bsha.lock")
HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM cat "$M/big.bin" >/dev/null || fail "cat of a cached blob"
after=$(stat -c %Y "$HFS3_CACHE_DIR/locks/$bsha.lock")
[ "$after" -gt $((before + 3600)) ] || fail "last use: the lock file's mtime did not move ($before -> $after)"
echo "last use: lock file mtime $before -> $after"

# HFS3_LOG=info: a line per helper start and result; stderr a file: no progress line
HFS3_CACHE_DIR=$WORK/cache-info HFS3_LOG=info HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM \
  cat "$M/big.bin" 2>"$WORK/info.err" >"$WORK/out" || { cat "$WORK/info.err"; fail "info: cat"; }
cat "$WORK/info.err"
cmp -s "$WORK/out" "$WORK/p/big.bin" || fail "info: wrong bytes"
grep -q "^hfs3: $M: refreshing the manifest of slow:models/p" "$WORK/info.err" || fail "info: no manifest line"
grep -q "^hfs3: $M/big.bin: fetching slow:models/p/big.bin (4194304 bytes)" "$WORK/info.err" || fail "info: no fetching line"
! grep -Eq "of 4.0 MiB|s left" "$WORK/info.err" || fail "info: a progress line on a stderr that is a file"
grep -Eq "^hfs3: $M/big.bin: fetched in [0-9.]+ s" "$WORK/info.err" || fail "info: no fetched line"

# stalled: every GET of hang.bin is read and never answered; the shim gives up after ~2 s
head -c $((3 << 20)) /dev/urandom >"$WORK/p/hang.bin"
fetch_publish "$WORK/p" s3test:models/p
# without chunk digests (8 MiB chunks make every range one chunk): big.bin is then fetched as 2 ranges of 2 MiB,
# and only a file of more than one range has the .done sidecar that progress lines read
"$HFS3_BIN" show --json s3test:models/p |
  python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("chunk_size", None); [e.pop("chunks", None) for e in d["entries"]]; json.dump(d, sys.stdout)' \
  >"$WORK/p.json" || fail "manifest without chunk digests"
rclone copyto "$WORK/p.json" s3test:models/p/.hfs3/manifest.json || fail "upload the manifest"
start_proxy stuck 0 "--hang-first 20 --match hang.bin"
start=$(date +%s)
rc=0
HFS3_MOUNTS="$M=stuck:models/p" LD_PRELOAD=$HFS3_SHIM cat "$M/hang.bin" >/dev/null 2>"$WORK/err" || rc=$?
took=$(( $(date +%s) - start ))
cat "$WORK/err"
[ "$rc" = 1 ] || fail "stalled fetch: exit $rc, not 1"
[ "$took" -le 8 ] || fail "stalled fetch: cut after ${took}s, not ~2 s"
[ "$(grep -c '^hfs3:.*no progress.*HFS3_STALL_TIMEOUT' "$WORK/err")" = 1 ] || fail "stalled fetch: no log line"
sha=$(blob_of "$WORK/p/hang.bin")
flock -n "$HFS3_CACHE_DIR/locks/$sha.lock" true || fail "stalled fetch: the lock is still held"
echo "stalled fetch: EIO after ${took}s"
ok "shim stall check: a slow live fetch (2 ranges, and 1) is not cut by HFS3_STALL_TIMEOUT=2, a hung one is; an open of a cached blob records its last use"
