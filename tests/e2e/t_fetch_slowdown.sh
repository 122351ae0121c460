#!/usr/bin/env bash
# t_fetch_slowdown.sh - a fleet that starts together against an origin answering 503 SlowDown (issue 45 item 2):
# several `hfs3-manifest fetch` processes and shim loads at once, each with its own cache, through a proxy in front
# of the real server that answers 503 SlowDown (S3's XML body) to a fraction of the requests and beyond a request
# rate per prefix. Every file ends right and nothing fails (s3.c retries a throttle past HFS3_RETRIES, with
# full-jitter backoff, for up to HFS3_THROTTLE_BUDGET), and the retries back off: the proxy counts the requests,
# and the refused ones stay a small multiple of the ones served (no storm). Before, a range refused 6 times in a row
# failed its file ("503 SlowDown ... (after 6 attempts)"). Also: the tuner halves the connections at a SlowDown
# (AIMD), and a Retry-After is waited for.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; stop_proxies; s3env_stop; }
s3env_start "$WORK"; trap cleanup EXIT
fetch_model "$WORK/m"
head -c $((24 << 20)) /dev/urandom >"$WORK/m/model-2.safetensors"
fetch_publish "$WORK/m" s3test:models/slow
# 40% of the requests refused at random, and past 8 a second on a prefix (a burst of 8)
start_proxy slow 0 "--slowdown-fraction 0.4 --slowdown-rate 8 --seed 45"
unset HFS3_CONNECTIONS

# 5 fetch processes and 3 shim loads, started together at a barrier
N_FETCH=5 N_SHIM=3
for i in $(seq 1 $N_FETCH); do
  ( while [ ! -e "$WORK/go" ]; do sleep 0.01; done
    HFS3_LOG=debug HFS3_CACHE_DIR=$WORK/f$i exec "$HFS3_BIN" fetch slow:models/slow ) >"$WORK/fout$i" 2>"$WORK/ferr$i" &
  pids="$pids $!"
done
for i in $(seq 1 $N_SHIM); do
  HFS3_MOUNTS=/models/slow=slow:models/slow HFS3_CACHE_DIR=$WORK/s$i HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0 \
    LD_PRELOAD=$HFS3_SHIM python3 -c '
import hashlib, os, sys, time
while not os.path.exists(sys.argv[1]): time.sleep(0.01)
for f in ("config.json", "tokenizer.json", "model.safetensors", "model-2.safetensors"):
    print(f, hashlib.sha256(open("/models/slow/" + f, "rb").read()).hexdigest())' "$WORK/go" >"$WORK/sout$i" 2>"$WORK/serr$i" &
  pids="$pids $!"
done
touch "$WORK/go"
bad=0
for p in $pids; do wait "$p" || bad=$((bad + 1)); done
pids=""
if [ "$bad" != 0 ]; then
  for f in "$WORK"/ferr* "$WORK"/serr*; do grep -v 'debug:' "$f" | tail -5; done
  fail "$bad of $((N_FETCH + N_SHIM)) loads failed under SlowDown"
fi
for i in $(seq 1 $N_FETCH); do
  for f in config.json tokenizer.json model.safetensors model-2.safetensors; do
    b=$(blob_of "$WORK/m/$f"); [ "$(blob_of "$WORK/f$i/blobs/$b")" = "$b" ] || fail "fetch $i: $f differs"
  done
done
for i in $(seq 1 $N_SHIM); do
  for f in config.json tokenizer.json model.safetensors model-2.safetensors; do
    grep -qx "$f $(blob_of "$WORK/m/$f")" "$WORK/sout$i" || fail "shim load $i: $f differs ($(cat "$WORK/serr$i" | tail -3))"
  done
done
refused=$(grep -c ' slowdown-503 ' "$WORK/slow.log" || true)
served=$(grep -vc ' slowdown-503 ' "$WORK/slow.log" || true)
[ "$refused" -ge 10 ] || fail "the proxy refused only $refused requests: SlowDown was not tested"
# no storm: with backoff a refused request is tried again a few times; without, hundreds of times
[ "$refused" -le $((8 * served)) ] || fail "a retry storm: $refused requests refused for $served served"
halved=$(cat "$WORK"/ferr* | grep -c 'throttled: the server asked to slow down' || true)
[ "$halved" -ge 1 ] || fail "no fetch halved its connections at a SlowDown"
# ranges grow when requests are the limit: after a halving, a GET asks for more than one 8 MiB chunk
big=$(awk '$2 == "GET" && $5 == "forwarded" && match($4, /bytes=[0-9]+-[0-9]+/) {
  split(substr($4, RSTART + 6, RLENGTH - 6), r, "-"); if (r[2] - r[1] + 1 > 8 * 1048576) n++ } END { print n + 0 }' "$WORK/slow.log")
[ "$big" -ge 1 ] || fail "no GET asked for more than 8 MiB after the throttling"
ok "$N_FETCH fetches and $N_SHIM shim loads at once under SlowDown: every file right; $refused refused, $served served; $halved halvings, $big GETs of more than 8 MiB"

# Retry-After: the first GET of model-2 is refused with Retry-After: 2; its retry comes no sooner (backoff alone
# would be at most 100 ms here)
stop_proxies
start_proxy after 0 "--fail-first 1 --match model-2.safetensors --retry-after 2"
HFS3_CONNECTIONS=1 HFS3_CACHE_DIR=$WORK/ra "$HFS3_BIN" fetch after:models/slow >"$WORK/raout" 2>"$WORK/raerr" ||
  { cat "$WORK/raerr"; fail "fetch with a Retry-After"; }
b=$(blob_of "$WORK/m/model-2.safetensors"); [ "$(blob_of "$WORK/ra/blobs/$b")" = "$b" ] || fail "model-2 differs (Retry-After)"
gap=$(python3 - "$WORK/after.log" <<'PY'
import sys
r = [l.split() for l in open(sys.argv[1]) if "model-2.safetensors" in l and l.split()[1] == "GET"]
t = lambda w: [float(x) for x in next(x for x in w if x.startswith("t="))[2:].split("-")]
assert r[0][4] == "503-injected", r[0]
print("%.3f" % (t(r[1])[0] - t(r[0])[1]))
PY
) || fail "after.log: $(cat "$WORK/after.log")"
python3 -c "import sys; sys.exit(not $gap >= 1.9)" || fail "the retry came ${gap} s after a Retry-After: 2"
ok "Retry-After: 2 honoured (the retry came ${gap} s later)"
