#!/usr/bin/env bash
# t_status_run.sh - `status` shows a fetch in progress (file, bytes so far, which process holds the lock) while
# the fault proxy slows it, then the dead fetch once it is killed, and the last errors; `run` execs real
# programs (cat, python3) with the shim preloaded by its absolute path.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
FETCH=""
cleanup() { [ -z "$FETCH" ] || kill "$FETCH" 2>/dev/null || true; stop_proxies; s3env_stop; }
trap cleanup EXIT
fetch_model "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
export HFS3_CACHE_DIR=$WORK/cache
J() { python3 -c "import json,sys; d=json.load(open('$WORK/out')); print($1)"; }
ST=$(blob_of "$WORK/m/model.safetensors")

# a slow fetch: 100 KB/s per response, 8 ranges of 5 MiB
start_proxy slow 100000
expect_exit 0 "_index" "$HFS3_BIN" _index slow:models/m1
"$HFS3_BIN" fetch slow:models/m1 >"$WORK/fetch.out" 2>&1 & FETCH=$!
for i in $(seq 1 300); do
  "$HFS3_BIN" status --json >"$WORK/out" 2>"$WORK/err" || fail "status --json"
  [ "$(J "len([f for f in d['fetches'] if f['state'] == 'running' and f['path'] == 'model.safetensors'])")" = 1 ] && break
  sleep 0.1
done
[ "$(J "[(f['sha256'], f['remote'], f['size'], f['pid'], f['bytes_done'] is not None) for f in d['fetches']][0]")" = \
  "('$ST', 'slow:models/m1', 41943040, $FETCH, True)" ] || { cat "$WORK/out"; fail "status --json fetch"; }
[ "$(J "d['mounts'][0]['remote'], d['mounts'][0]['files']")" = "slow:models/m1 4" ] || { cat "$WORK/out"; fail "status mounts"; }
expect_exit 0 "status" "$HFS3_BIN" status slow:models/m1
grep -Eq "^  slow:models/m1 model.safetensors: .* of 40.0 MiB \([0-9]+%\).*, last write [0-9]+ s ago, pid $FETCH \(hfs3-manifest\)" "$WORK/out" ||
  { cat "$WORK/out"; fail "status line"; }
ok "status while fetching: $(grep model.safetensors "$WORK/out")"
kill "$FETCH"; wait "$FETCH" 2>/dev/null || true; FETCH=""
expect_exit 0 "status --json after the kill" "$HFS3_BIN" status --json
[ "$(J "[f['state'] for f in d['fetches']]")" = "['dead']" ] || { cat "$WORK/out"; fail "dead fetch"; }
ok "a killed fetch shows as dead"

# the last errors: a failed refresh and a failed fetch
expect_exit 1 "_index of a missing model" "$HFS3_BIN" _index s3test:models/nothing
RCLONE_CONFIG_SLOW_ENDPOINT=http://127.0.0.1:1 expect_exit 1 "_get with S3 down" "$HFS3_BIN" _get slow:models/m1 config.json
expect_exit 0 "status --json" "$HFS3_BIN" status --json
[ "$(J "sorted(e['where'] for e in d['errors'])")" = "['s3test:models/nothing', 'slow:models/m1 config.json']" ] ||
  { cat "$WORK/out"; fail "errors"; }
expect_exit 0 "status" "$HFS3_BIN" status
grep -q "^errors:" "$WORK/out" && grep -q " s3test:models/nothing: " "$WORK/out" || { cat "$WORK/out"; fail "errors text"; }
expect_exit 0 "status REMOTE" "$HFS3_BIN" status --json s3test:models/nothing
[ "$(J "len(d['errors']), len(d['fetches'])")" = "1 0" ] || { cat "$WORK/out"; fail "status REMOTE filter"; }
ok "status: last errors, filtered by REMOTE"

# run: the shim by its absolute path, HFS3_MOUNTS from --mount, appended to an existing LD_PRELOAD
expect_exit 0 "run cat" "$HFS3_BIN" run --mount /models/m1=s3test:models/m1 -- cat /models/m1/config.json
cmp -s "$WORK/out" "$WORK/m/config.json" || { cat "$WORK/out" "$WORK/err"; fail "run cat"; }
expect_exit 0 "run python3" "$HFS3_BIN" run --mount=/models/m1=s3test:models/m1 -- python3 -c \
  'import hashlib,sys; print(hashlib.sha256(open("/models/m1/model.safetensors","rb").read()).hexdigest())'
[ "$(cat "$WORK/out")" = "$ST" ] || { cat "$WORK/out" "$WORK/err"; fail "run python3"; }
# (the plain helper: ASan refuses to start under another LD_PRELOAD)
LD_PRELOAD=libc.so.6 HFS3_MOUNTS=/models/m1=s3test:models/m1 expect_exit 0 "run with the variables set" \
  "$HFS3_ROOT/${BUILD:-build}/bin/hfs3-manifest" run -- sh -c 'echo "$LD_PRELOAD|$HFS3_MOUNTS"'
[ "$(cat "$WORK/out")" = "libc.so.6 $(readlink -f "$HFS3_SHIM")|/models/m1=s3test:models/m1" ] || { cat "$WORK/out"; fail "run env"; }
expect_exit 2 "run without mounts" env -u HFS3_MOUNTS "$HFS3_BIN" run -- true
grep -q "^hfs3-manifest run: no mounts" "$WORK/err" || fail "no mounts line"
expect_exit 2 "run --mount without =" "$HFS3_BIN" run --mount /models/m1 -- true
expect_exit 2 "run --mount of an unknown remote" "$HFS3_BIN" run --mount /m=nosuch:b/p -- true
expect_exit 127 "run of a missing program" "$HFS3_BIN" run --mount /m=s3test:models/m1 -- /nonexistent/prog
grep -q "^hfs3-manifest run: /nonexistent/prog: No such file or directory" "$WORK/err" || fail "missing program line"
ok "run: cat and python3 read through the shim; LD_PRELOAD appended; usage errors exit 2, a missing program 127"

# issue 24 §4: status during a fetch the shim started: the bytes as they land (the first 5 MiB range of the
# shard is not complete for a minute at this pace, so the sidecar alone says 0), the fetcher (the helper), the
# processes waiting in open(), the whole model's total; HFS3_LOG=info says the progress every few seconds
export HFS3_CACHE_DIR=$WORK/cache-shim HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0
M=$WORK/mnt/m1 C1= C2= HP=
trap '[ -z "$C1$C2$HP" ] || kill -9 $C1 $C2 $HP 2>/dev/null || true; cleanup' EXIT
HFS3_MOUNTS="$M=slow:models/m1" HFS3_LOG=info LD_PRELOAD=$HFS3_SHIM cat "$M/model.safetensors" >/dev/null 2>"$WORK/cat1.err" & C1=$!
t0=$(date +%s)
sleep 0.5
HFS3_MOUNTS="$M=slow:models/m1" LD_PRELOAD=$HFS3_SHIM cat "$M/model.safetensors" >/dev/null 2>&1 & C2=$!
good=
for i in $(seq 1 100); do
  "$HFS3_BIN" status --json >"$WORK/out" 2>"$WORK/err" || fail "status --json"
  if J "[f for f in d['fetches'] if f['path'] == 'model.safetensors']" | grep -q .; then
    HP=$(J "[f['pid'] for f in d['fetches'] if f['path'] == 'model.safetensors'][0]")
    if [ "$(J "[(f['process'], (f['bytes_done'] or 0) > 0, $C1 in f['waiting_pids'], $C2 in f['waiting_pids']) for f in d['fetches'] if f['path'] == 'model.safetensors'][0]")" = "('hfs3-manifest', True, True, True)" ] &&
       [ "$(J "[(t['remote'], t['bytes_total'], t['bytes_done'] > 0, t['fetches']) for t in d['totals']]")" = "[('slow:models/m1', $(cat "$WORK"/m/config.json "$WORK"/m/tokenizer.json "$WORK"/m/model.safetensors | wc -c), True, 1)]" ]; then
      good=1; break
    fi
  fi
  sleep 0.2
done
[ -n "$good" ] || { cat "$WORK/out"; fail "status --json during a shim-started fetch"; }
expect_exit 0 "status during a shim-started fetch" "$HFS3_BIN" status
grep -Eq "^  slow:models/m1 model.safetensors: [0-9.]+ [KM]iB of 40.0 MiB \([0-9]+%\).*, pid $HP \(hfs3-manifest\); waiting: pid ($C1 \(cat\), pid $C2|$C2 \(cat\), pid $C1) \(cat\)$" "$WORK/out" &&
  grep -Eq "^  slow:models/m1, the whole model: [0-9.]+ [KM]iB of 40.1 MiB \([0-9]+%\) cached or landed, 1 file in progress$" "$WORK/out" ||
  { cat "$WORK/out"; fail "status text during a shim-started fetch"; }
ok "status during a shim-started fetch: $(grep -E 'model.safetensors:|whole model' "$WORK/out" | tr -s ' ' | paste -sd'|')"
# issue 41 item 3: stderr is a file here, not a terminal: at HFS3_LOG=info the shim logs what it starts, and no
# progress line (those are a terminal's; `run` draws them on one)
while [ $(( $(date +%s) - t0 )) -lt 8 ]; do sleep 0.5; done
kill -9 $C1 $C2 $HP 2>/dev/null || true; C1= C2= HP=
grep -q "^hfs3: $M/model.safetensors: fetching slow:models/m1/model.safetensors" "$WORK/cat1.err" &&
  ! grep -E "of 40.0 MiB|s left" "$WORK/cat1.err" || { cat "$WORK/cat1.err"; fail "HFS3_LOG=info on a file: the fetching line, no progress line"; }
ok "HFS3_LOG=info while cat waits, stderr a file: the fetching line, no progress line in 8 s"

# issue 35: status never contradicts a program blocked on a fetch. From the moment the program has the blob's
# lock open until its open() returns, the file is a fetch in progress (starting: the helper holds the lock, its
# connections wait 2 s at the proxy, nothing in tmp/ yet; then running), or cached; after open() returned it is
# cached although the detached flush has not moved it out of the mount's cblobs/ (HFS3_TEST_NO_FLUSH=1 leaves
# it there, as a slow flush would for seconds at 3 GiB)
export HFS3_CACHE_DIR=$WORK/cache-live
start_proxy late 4000000 "--connect-delay 2"
"$HFS3_BIN" _index late:models/m1 2>/dev/null || fail "_index late:models/m1"
HFS3_TEST_NO_FLUSH=1 HFS3_MOUNTS="$M=late:models/m1" LD_PRELOAD=$HFS3_SHIM HFS3_LOG=error \
  python3 -c 'import sys; open(sys.argv[1], "rb").read(1); print("opened", flush=True)' "$M/model.safetensors" \
  >"$WORK/live.out" 2>"$WORK/live.err" & C1=$!
for i in $(seq 1 300); do
  ls -l /proc/$C1/fd 2>/dev/null | grep -q "locks/$ST.lock" && break
  kill -0 $C1 2>/dev/null || break
  sleep 0.05
done
ls -l /proc/$C1/fd 2>/dev/null | grep -q "locks/$ST.lock" || fail "the program never waited on the lock of model.safetensors"
polls=0 states=""
while [ ! -s "$WORK/live.out" ] && kill -0 $C1 2>/dev/null; do
  "$HFS3_BIN" status --json >"$WORK/out" 2>"$WORK/err" || fail "status --json during the load"
  [ -s "$WORK/live.out" ] && break   # open() returned meanwhile: the checks below apply
  st=$(J "','.join(f['state'] for f in d['fetches'] if f['path'] == 'model.safetensors') or ('cached' if [m for m in d['mounts'] if m['remote'] == 'late:models/m1'][0]['files_cached'] >= 1 else 'NOT CACHED, NO FETCH')")
  [ "$st" != "NOT CACHED, NO FETCH" ] || { cat "$WORK/out"; fail "status: model.safetensors not cached and no fetch while a program waits on it (poll $polls)"; }
  [ "${states##*,}" = "$st" ] || states="$states,$st"
  polls=$((polls + 1))
  "$HFS3_BIN" status >"$WORK/st.txt" 2>&1 || fail "status during the load"
  if [ "$st" = starting ]; then
    grep -Eq "^  late:models/m1 model.safetensors: .*starting \(the lock is held, nothing in tmp/ yet\)" "$WORK/st.txt" ||
      { [ -s "$WORK/live.out" ] || { cat "$WORK/st.txt"; fail "status text: the starting fetch"; }; }
  fi
done
wait $C1 || { cat "$WORK/live.err"; fail "the load failed"; }
C1=
# (the window before the helper's tmp/ file exists is short: a lock held with nothing in tmp/ shows it below)
ls "$HFS3_CACHE_DIR"/mounts/*/cblobs/ 2>/dev/null | grep -q "$ST" || fail "the shard is not in a cblobs/ (the flush was not held back)"
"$HFS3_BIN" status --json >"$WORK/out" 2>"$WORK/err" || fail "status --json after the load"
[ "$(J "[(m['files_cached'], m['bytes_cached']) for m in d['mounts'] if m['remote'] == 'late:models/m1'][0]")" = "(1, 41943040)" ] ||
  { cat "$WORK/out"; fail "status after open() returned: the shard in cblobs/ is not cached"; }
"$HFS3_BIN" cache du >"$WORK/du.txt" 2>&1 || fail "cache du"
grep -q "^late:models/m1: 4 files, 1 cached (40.0 MiB)" "$WORK/du.txt" || { cat "$WORK/du.txt"; fail "cache du: the shard in cblobs/"; }
ok "status while a program waits on a fetch ($polls polls:${states}), then cached in cblobs/: never 'not cached' with no fetch"

# a fetch that holds the lock and has nothing in tmp/ yet (a helper starting: its manifest, its first request;
# here one python process holds it) is a fetch starting, not "fetches: (none)"
TOK=$(blob_of "$WORK/m/tokenizer.json")
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)' "$HFS3_CACHE_DIR/locks/$TOK.lock" >"$WORK/held" & C1=$!
for i in $(seq 1 200); do [ -s "$WORK/held" ] && break; sleep 0.05; done
"$HFS3_BIN" status --json >"$WORK/out" 2>"$WORK/err" || fail "status --json with a lock held"
[ "$(J "[(f['state'], f['path'], f['size'], f['pid']) for f in d['fetches']]")" = "[('starting', 'tokenizer.json', 150000, $C1)]" ] ||
  { cat "$WORK/out"; fail "status --json: a held lock with nothing in tmp/ is not a fetch starting"; }
"$HFS3_BIN" status >"$WORK/st.txt" 2>&1 || fail "status with a lock held"
grep -Eq "^  late:models/m1 tokenizer.json: 146.5 KiB, starting \(the lock is held, nothing in tmp/ yet\), pid $C1 \(python3\)$" "$WORK/st.txt" ||
  { cat "$WORK/st.txt"; fail "status: the starting fetch"; }
kill $C1; wait $C1 2>/dev/null || true; C1=
"$HFS3_BIN" status --json >"$WORK/out" 2>"$WORK/err" || fail "status --json"
[ "$(J "len(d['fetches'])")" = 0 ] || { cat "$WORK/out"; fail "status: a fetch left after the lock went"; }
ok "status: a lock held with nothing in tmp/ is a fetch starting ($(grep tokenizer.json "$WORK/st.txt" | tr -s ' '))"
