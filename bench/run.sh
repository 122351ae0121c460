#!/usr/bin/env bash
# bench/run.sh - benchmarks, each a ratio against a reference measured in the same run (never a timed test).
#   BENCH_GIB=1 (model size), BENCH_ROUNDS=5 (reference-server rounds), BENCH_NODE_ROUNDS=2 (Node server and
#   hashing rounds), BENCH_MEM_GIB=4 (the second model of the memory check; 0 skips it).
#   The peer table (bench_peers.sh): BENCH_PEER_GIB=1 (sizes from nginx; "1 4" adds the 4 GiB table),
#   BENCH_PEER_RGW_GIB=1 (sizes from Ceph RGW, where awscli's listing runs), BENCH_PEER_ROUNDS=3;
#   BENCH_ONLY=peers runs the peer tables and the eight-rank table alone and keeps the other tables of the last full
#   run; BENCH_ONLY=nopeers runs all but those (about half the time) and keeps the peer and eight-rank tables of the
#   last run that had them. One group of rows alone (the peer tables then hold those rows, hfs3's and the floors;
#   the other tables are kept):
#     BENCH_ONLY=fuse        rclone mount (--vfs-cache-mode full / off, --read-only) cold and warm from nginx and
#                            RGW; s3fs with and without -o use_cache (RGW)
#     BENCH_ONLY=tensorizer  Tensorizer's TensorDeserializer on the model serialized once (nginx, RGW)
#     BENCH_ONLY=s3torch     the S3 connector for PyTorch, then safetensors.torch.load (RGW)
#     BENCH_ONLY=base        the rows of issue 20: Run:ai Model Streamer, boto3, awscli, rclone copy
#     BENCH_ONLY=ranks       the eight-rank table alone (bench_ranks.py: 8 processes, safe_open + get_slice)
#     BENCH_ONLY=fleet       the fleet table alone (bench_fleet.py, issue 45: BENCH_FLEET_NODES=16 nodes cold-load
#                            one small model at once through a proxy acting as S3 under load: a request rate per
#                            prefix with 503 SlowDown beyond it, a bandwidth cap per connection and in total); only
#                            with BENCH_ONLY=fleet (the other runs keep the last fleet table)
#   (BENCH_PEER_ROWS takes the same names, comma-separated, for bench_peers.sh.)
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
  ! ls "$WORK"/results/ranks-*.json >/dev/null 2>&1 || rm -f bench/results/raw/ranks-*
  ! ls "$WORK"/results/fleet-*.json >/dev/null 2>&1 || rm -f bench/results/raw/fleet-*
  cp "$WORK"/results/*.json "$WORK"/results/*.txt bench/results/raw/ 2>/dev/null; rm -rf "$WORK"' EXIT
gib=${BENCH_GIB:-1}
mb=$(python3 -c "print(int($gib * 1024 / 4))")
mkdir -p "$WORK/results"
only=${BENCH_ONLY:-}
case "$only" in
  ""|nopeers) ;;
  peers) export BENCH_PEER_ROWS=all ;;
  fuse|tensorizer|s3torch|base|ranks) export BENCH_PEER_ROWS=$only ;;
  fleet) ;;
  *) echo "bench: BENCH_ONLY=$only is none of peers, nopeers, fuse, tensorizer, s3torch, base, ranks, fleet: see bench/run.sh" >&2
     exit 2 ;;
esac
if [ -n "$only" ] && [ "$only" != nopeers ]; then
  # the other tables stay as the last full run left them in bench/results/raw/
  cp bench/results/raw/*.json bench/results/raw/*.txt "$WORK/results/" 2>/dev/null || true
  case "$only" in
    ranks) rm -f "$WORK"/results/ranks-* ;;
    fleet) rm -f "$WORK"/results/fleet-* ;;
    peers) rm -f "$WORK"/results/peers-* "$WORK"/results/ranks-* ;;
    *) rm -f "$WORK"/results/peers-* ;;
  esac
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
if [ "$only" = fleet ]; then
  WORK=$WORK HFS3_ROOT=$ROOT python3 bench/bench_fleet.py "$WORK/results/fleet-${BENCH_FLEET_NODES:-16}.json" |
    tee "$WORK/results/fleet-${BENCH_FLEET_NODES:-16}.txt"
elif [ "$only" = nopeers ]; then
  cp bench/results/raw/peers-* bench/results/raw/ranks-* "$WORK/results/" 2>/dev/null || true
else
  WORK=$WORK HFS3_ROOT=$ROOT bash bench/bench_peers.sh
fi
python3 bench/report.py "$WORK/results" bench/results/latest.md bench/results/latest.png
exit 0
