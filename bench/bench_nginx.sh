#!/usr/bin/env bash
# The reference-server benchmark (docs/performance.md): nginx serves the model bench/run.sh made as static files;
# bench_ref.py compares hfs3 with curl, aria2c and rclone on it, bench_mem.py measures peak memory for the
# 1 GiB model and a BENCH_MEM_GIB one (4 by default; 0 skips it). Results go to $WORK/results for report.py.
set -euo pipefail
source bench/nginx.sh
nginx_start "$WORK"
trap nginx_stop EXIT
mkdir -p "$WORK/results"
"$HFS3_BIN" build --local "$WORK/model" -o "$WORK/ref-manifest.json" s3test:models/bench >/dev/null
nginx_publish "$WORK/model" "$WORK/ref-manifest.json" models/bench "$WORK"
export HFS3_REF_REMOTE=ngx:models/bench
python3 bench/bench_ref.py "$WORK/model" "$NGINX_ENDPOINT" models/bench "${BENCH_ROUNDS:-5}" \
  "$WORK/results/ref.json" | tee "$WORK/results/ref.txt"
python3 bench/bench_mem.py "$WORK/results/mem.json" "${BENCH_GIB:-1} GiB model" "$WORK/model" ngx:models/bench
mg=${BENCH_MEM_GIB:-4}
if [ "$mg" != 0 ]; then
  mb=$(python3 -c "print(int($mg * 1024 / 4))")
  python3 scripts/gen_model.py flat "$WORK/model-mem" --shards "$mb,$mb,$mb,$mb" --seed 12 >/dev/null
  rclone copy "$WORK/model-mem" s3test:models/mem   # only for the listing `build` needs
  "$HFS3_BIN" build --local "$WORK/model-mem" -o "$WORK/mem-manifest.json" s3test:models/mem >/dev/null
  rclone purge s3test:models/mem
  nginx_publish "$WORK/model-mem" "$WORK/mem-manifest.json" models/mem "$WORK"
  python3 bench/bench_mem.py "$WORK/results/mem.json" "$mg GiB model" "$WORK/model-mem" ngx:models/mem
  rm -rf "$WORK/model-mem" "$WORK/www/models/mem"
fi
