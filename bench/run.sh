#!/usr/bin/env bash
# bench/run.sh - benchmarks, each a ratio against a reference measured in the same run (never a timed test).
#   BENCH_GIB=1 (model size), BENCH_ROUNDS=5 (reference-server rounds), BENCH_NODE_ROUNDS=2 (Node server and
#   hashing rounds), BENCH_MEM_GIB=4 (the second model of the memory check; 0 skips it).
#   The peer table (bench_peers.sh): BENCH_PEER_GIB=1 (sizes from nginx; "1 4" adds the 4 GiB table),
#   BENCH_PEER_RGW_GIB=1 (sizes from Ceph RGW, where awscli's listing runs), BENCH_PEER_ROUNDS=3;
#   BENCH_ONLY=peers runs the peer table alone and keeps the other tables of the last full run; BENCH_ONLY=nopeers
#   runs all but the peer table (about half the time) and keeps the peer tables of the last run that had them.
#   Writes bench/results/latest.md and bench/results/latest.png (bench/report.py), and keeps what they were made
#   from in bench/results/raw/ (`python3 bench/report.py bench/results/raw OUT.md OUT.png` makes them again).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD BUILD=${BUILD:-build}
export BUILD HFS3_BIN=$ROOT/$BUILD/bin/hfs3-manifest HFS3_SHIM=$ROOT/$BUILD/lib/libhfs3shim.so
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hfs3-bench.XXXXXX")
source scripts/s3env.sh
s3env_start "$WORK"
trap 's3env_stop; mkdir -p bench/results/raw; ! ls "$WORK"/results/peers-*.json >/dev/null 2>&1 || rm -f bench/results/raw/peers-*
  cp "$WORK"/results/*.json "$WORK"/results/*.txt bench/results/raw/ 2>/dev/null; rm -rf "$WORK"' EXIT
gib=${BENCH_GIB:-1}
mb=$(python3 -c "print(int($gib * 1024 / 4))")
mkdir -p "$WORK/results"
if [ "${BENCH_ONLY:-}" = peers ]; then
  # the other tables stay as the last full run left them in bench/results/raw/
  cp bench/results/raw/*.json bench/results/raw/*.txt "$WORK/results/" 2>/dev/null || true
  rm -f "$WORK"/results/peers-*
else
  echo "bench: generating a ${gib} GiB model in 4 shards + small files, uploading with rclone..."
  python3 scripts/gen_model.py flat "$WORK/model" --shards "$mb,$mb,$mb,$mb" --seed 11
  rclone copy "$WORK/model" s3test:models/bench
  python3 bench/hash_bench.py "$WORK/model" s3test:models/bench "${BENCH_NODE_ROUNDS:-2}" | tee "$WORK/results/hash.txt"
  python3 bench/verify_scale.py 1024 "${BENCH_NODE_ROUNDS:-2}" "$WORK/results/verify.json" | tee "$WORK/results/verify.txt"
  WORK=$WORK HFS3_ROOT=$ROOT bash bench/bench_nginx.sh
  # bench_fetch.sh builds the manifest in the Node server that bench_shim_overhead.sh's mount reads
  WORK=$WORK HFS3_ROOT=$ROOT BENCH_ROUNDS=${BENCH_NODE_ROUNDS:-2} bash bench/bench_fetch.sh | tee "$WORK/results/node.txt"
  WORK=$WORK HFS3_ROOT=$ROOT bash bench/bench_shim_overhead.sh | tee "$WORK/results/shim.txt"
fi
if [ "${BENCH_ONLY:-}" = nopeers ]; then
  cp bench/results/raw/peers-* "$WORK/results/" 2>/dev/null || true
else
  WORK=$WORK HFS3_ROOT=$ROOT bash bench/bench_peers.sh
fi
python3 bench/report.py "$WORK/results" bench/results/latest.md bench/results/latest.png
exit 0
