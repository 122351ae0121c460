#!/usr/bin/env bash
# t_shim_prefetch.sh - a cold load through the shim downloads one file at a time, shards in name order (issue 10,
# item 2; docs/performance.md "Prefetch order"), through a counting proxy that paces each response so that two downloads
# would overlap. With one connection a shard's ranged GETs go one after another, so "one at a time" reads
# in the proxy's request numbers: every GET of a shard comes before the first GET of the next.
#  1. The demo loader alone: the first data open starts `_prefetch` before its own `_get` (a wrapper records
#     the helper's runs in order); the shards come one at a time, each byte once (the loader's opens wait for
#     the prefetcher's downloads instead of starting second ones).
#  2. Another process is already fetching the first shard when the loader starts: the prefetcher waits for it
#     instead of starting the second shard alongside.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"; source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"; trap 's3env_stop; for p in $PROXY_PIDS; do kill $p 2>/dev/null; done' EXIT
python3 "$HFS3_ROOT/scripts/gen_model.py" flat "$WORK/m" --shards 24,24,24 --seed 43 >/dev/null
rclone copy "$WORK/m" s3test:models/m
"$HFS3_BIN" build s3test:models/m >/dev/null   # 24 MiB shards: at least 2 ranges each
cat >"$WORK/helper.sh" <<WRAP
#!/bin/sh
printf '%s\n' "\$1" >>"$WORK/runs.log"
exec "$HFS3_BIN" "\$@"
WRAP
chmod +x "$WORK/helper.sh"
export HFS3_HELPER=$WORK/helper.sh HFS3_CONNECTIONS=1
shards="model-00001-of-00003 model-00002-of-00003 model-00003-of-00003"

first() { awk -v k="$2" '$2 == "GET" && index($3, k) { if (!m || $1 < m) m = $1 } END { print m + 0 }' "$1"; }
last() { awk -v k="$2" '$2 == "GET" && index($3, k) { if ($1 > m) m = $1 } END { print m + 0 }' "$1"; }
# one_at_a_time LOG: each shard's bytes sent once, in 2 or more GETs, all before the next shard's first GET
one_at_a_time() {
  local log=$1 prev= s f sent
  for s in $shards; do
    f=$WORK/m/$s.safetensors
    sent=$(got_bytes "$log" "$s.safetensors")
    [ "$sent" = "$(stat -c %s "$f")" ] || { cat "$log"; fail "$s: the server sent $sent bytes of $(stat -c %s "$f")"; }
    [ "$(grep -c "GET /models/m/$s.safetensors " "$log")" -ge 2 ] || { cat "$log"; fail "$s: fewer than 2 ranged GETs"; }
    if [ -n "$prev" ] && [ "$(last "$log" "$prev")" -gt "$(first "$log" "$s")" ]; then
      cat "$log"
      fail "$s requested (GET #$(first "$log" "$s")) before $prev's last range (GET #$(last "$log" "$prev")): two downloads at once"
    fi
    prev=$s
  done
}
# the detached prefetcher may still be on the small files: let it finish before the cache or the server goes
prefetch_done() { for i in $(seq 1 300); do pgrep -f "_prefetch $1:models/m" >/dev/null || break; sleep 0.1; done; }

# 1. the loader alone
start_proxy alone 20000000
HFS3_CACHE_DIR=$WORK/c1 HFS3_MOUNTS=/models/m=alone:models/m LD_PRELOAD=$HFS3_SHIM \
  python3 "$HFS3_ROOT/scripts/demo_loader.py" /models/m >"$WORK/load.json" 2>"$WORK/load.err" ||
  fail "the loader failed: $(cat "$WORK/load.err")"
grep -q '"shards": 3' "$WORK/load.json" || fail "loader: $(cat "$WORK/load.json")"
prefetch_done alone
[ "$(sed -n 2p "$WORK/runs.log")" = _prefetch ] && [ "$(sed -n 1p "$WORK/runs.log")" = _index ] ||
  fail "helper runs: $(tr '\n' ' ' <"$WORK/runs.log"), expected _index, then _prefetch before any _get"
one_at_a_time "$WORK/alone.log"
ok "the loader alone: _index, _prefetch, then _get; 3 shards one after another in name order, each byte once"

# 2. another process (prefetch off) is fetching the first shard when the loader starts
start_proxy busy 10000000
export HFS3_CACHE_DIR=$WORK/c2 HFS3_MOUNTS=/models/m=busy:models/m
HFS3_PREFETCH=0 LD_PRELOAD=$HFS3_SHIM python3 -c 'import sys; open(sys.argv[1], "rb").read()' \
  /models/m/model-00001-of-00003.safetensors 2>"$WORK/a.err" &
apid=$!
for i in $(seq 1 300); do find "$HFS3_CACHE_DIR/tmp" -name '*.part' -size +0c 2>/dev/null | grep -q . && break; sleep 0.05; done
LD_PRELOAD=$HFS3_SHIM python3 "$HFS3_ROOT/scripts/demo_loader.py" /models/m >"$WORK/load2.json" 2>"$WORK/load2.err" ||
  fail "the loader failed: $(cat "$WORK/load2.err")"
wait "$apid" || fail "the first reader failed: $(cat "$WORK/a.err")"
prefetch_done busy
one_at_a_time "$WORK/busy.log"
ok "the first shard already being fetched by another process: the prefetcher waited for it ($(grep -c ' GET ' "$WORK/busy.log") GETs)"
echo "all ok"
