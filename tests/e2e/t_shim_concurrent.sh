#!/usr/bin/env bash
# 8 processes open the same shard through the shim at the same moment, prefetch off: the server sends the
# shard's bytes once (counted by a proxy in front of the real server), and all 8 read the right content.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"; source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"; trap 's3env_stop; for p in $PROXY_PIDS; do kill $p 2>/dev/null; done' EXIT
python3 "$HFS3_ROOT/scripts/gen_model.py" flat "$WORK/m" --shards 24,2 --seed 31
rclone copy "$WORK/m" s3test:models/m
"$HFS3_BIN" build s3test:models/m >/dev/null
start_proxy counted
export HFS3_MOUNTS=/models/m=counted:models/m HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0
shard=model-00001-of-00002.safetensors
want=$(sha256sum <"$WORK/m/$shard" | cut -d' ' -f1)
# every process waits at a barrier file, then opens the shard at once
pids=""
for i in 1 2 3 4 5 6 7 8; do
  LD_PRELOAD=$HFS3_SHIM python3 -c '
import hashlib, os, sys, time
while not os.path.exists(sys.argv[2]): time.sleep(0.001)
print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' /models/m/$shard "$WORK/go" >"$WORK/r$i" 2>"$WORK/e$i" &
  pids="$pids $!"
done
sleep 1; touch "$WORK/go"
for p in $pids; do wait $p || fail "a reader failed: $(cat "$WORK"/e*)"; done
for i in 1 2 3 4 5 6 7 8; do [ "$(cat "$WORK/r$i")" = "$want" ] || fail "reader $i got other bytes"; done
size=$(stat -c %s "$WORK/m/$shard")
sent=$(got_bytes "$WORK/counted.log" "$shard")
[ "$sent" = "$size" ] || { cat "$WORK/counted.log"; fail "server sent $sent bytes of the $size-byte shard"; }
ok "8 processes opened the shard at once; the server sent its $size bytes once ($(grep -c "$shard" "$WORK/counted.log") ranged GETs)"
