#!/usr/bin/env bash
# bench_peers.sh - the peer table (issue 20, docs/performance.md "Compared with"): Run:ai Model Streamer, boto3, awscli and
# rclone, and (issue 31) rclone mount, s3fs, Tensorizer and the S3 connector for PyTorch against hfs3, each reading the same shards from the same server in the same interleaved rounds
# (bench_peers.py). Called by bench/run.sh with WORK, HFS3_ROOT, HFS3_BIN, HFS3_SHIM and the Node server of
# s3env.sh running (its listing is what `build` needs for a model only nginx serves).
#   BENCH_PEER_GIB=1        model sizes read from nginx (static files: GET, HEAD, Range; "" skips); "1 4" adds
#                           the 4 GiB table (about 12 more minutes on the 2-core VM)
#   BENCH_PEER_RGW_GIB="1"  model sizes read from Ceph RGW (a real S3 API, for `aws s3 cp --recursive`; "" skips)
#   BENCH_PEER_ROUNDS=3     interleaved rounds per table; BENCH_PEER_RGW_ROUNDS (the same by default) for RGW's
#   BENCH_PEER_ROWS=all     which rows besides hfs3's and the floors: all, or a comma list of base (Run:ai, boto3,
#                           awscli, rclone copy), fuse (rclone mount, s3fs), tensorizer, s3torch (the S3 connector
#                           for PyTorch); "ranks" runs the eight-rank table alone
#   BENCH_RANKS_GIB=1       model sizes of the eight-rank table (bench_ranks.py, from nginx; "" skips it)
#   BENCH_RANKS_ROUNDS=3    its interleaved rounds; BENCH_RANKS_RUNAI_DIST=1 adds Run:ai's distributed mode (gloo)
# Each table goes to $WORK/results/peers-SERVER-GIB.json (+ .txt) for report.py; the eight-rank table
# (bench_ranks.py, nginx) to $WORK/results/ranks-nginx-GIB.json.
set -euo pipefail
: "${WORK:?}" "${HFS3_ROOT:?}" "${HFS3_BIN:?}" "${HFS3_SHIM:?}"
export HFS3_PY=${HFS3_PY:-$HFS3_ROOT/.venv/bin/python}
[ -x "$HFS3_PY" ] || { echo "bench_peers: $HFS3_PY missing (scripts/deps.sh makes the venv)" >&2; exit 1; }
ngx_sizes=${BENCH_PEER_GIB-1} rgw_sizes=${BENCH_PEER_RGW_GIB-1} rounds=${BENCH_PEER_ROUNDS:-3}
rows=${BENCH_PEER_ROWS:-all} ranks_sizes=${BENCH_RANKS_GIB-1}
case ",$rows," in
  *,ranks,*) ngx_sizes= rgw_sizes= ;;                       # the eight-rank table alone
  *,all,*) ;;
  *) ranks_sizes= ;;                                       # some rows of the peer tables alone
esac
export HFS3_PEER_ROWS=$rows HFS3_RANKS_RUNAI_DIST=${BENCH_RANKS_RUNAI_DIST:-0}
P=$WORK/peers
mkdir -p "$P" "$WORK/results"
source bench/nginx.sh
source scripts/rgwenv.sh
rgw_up=
cleanup() { nginx_stop; [ -z "$rgw_up" ] || rgwenv_stop; }
trap cleanup EXIT
nginx_start "$P"
# the clients' keys: the same dummies as the servers', by environment only
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER

in_list() { local x; for x in $2; do [ "$x" = "$1" ] && return 0; done; return 1; }
sizes=$(printf '%s\n' $ngx_sizes $rgw_sizes $ranks_sizes | awk '!seen[$0]++')
max_rgw=$(printf '%s\n' 0 $rgw_sizes | sort -g | tail -1)
for gib in $sizes; do
  model=$P/model-$gib key=models/peer$gib
  mb=$(python3 -c "print(int($gib * 1024 / 4))")
  echo "bench_peers: generating a $gib GiB model (4 shards + small files)..." >&2
  python3 scripts/gen_model.py flat "$model" --shards "$mb,$mb,$mb,$mb" --seed $((20 + ${gib%.*})) >/dev/null
  if in_list "$gib" "$rgw_sizes"; then
    if [ -z "$rgw_up" ]; then
      # memstore keeps every object in memory: room for the largest model twice over
      RGWENV_MEMSTORE_BYTES=$(python3 -c "print(int(($max_rgw * 2 + 1) * 2**30))") RGWENV_KEYS="S3RVER S3RVER" \
        rgwenv_start "$P" models
      rgw_up=1
    fi
    rclone copy "$model" "rgwtest:$key"
    "$HFS3_BIN" build --local "$model" -o "$P/manifest-$gib.json" "rgwtest:$key" >/dev/null
    rclone copyto "$P/manifest-$gib.json" "rgwtest:$key/.hfs3/manifest.json"
  else
    rclone copy "$model" "s3test:$key"   # only for the listing `build` needs
    "$HFS3_BIN" build --local "$model" -o "$P/manifest-$gib.json" "s3test:$key" >/dev/null
    rclone purge "s3test:$key"
  fi
  # Tensorizer's row reads the same tensors serialized once into its format (the conversion's time goes beside
  # the row), uploaded under a prefix of its own (no other row reads it)
  unset HFS3_PEER_TENSORIZER HFS3_PEER_TENSORIZER_CONVERT
  tzkey=peer$gib-tensorizer/model.tensors
  if [ -n "$ngx_sizes$rgw_sizes" ] && case ",$rows," in *,all,*|*,tensorizer,*) true ;; *) false ;; esac; then
    echo "bench_peers: serializing the $gib GiB model with Tensorizer..." >&2
    mkdir -p "$P/tz"
    HFS3_PEER_TENSORIZER_CONVERT=$("$HFS3_PY" bench/tensorizer_convert.py "$model" "$P/tz/model.tensors")
    export HFS3_PEER_TENSORIZER=$tzkey HFS3_PEER_TENSORIZER_CONVERT
    echo "bench_peers: Tensorizer conversion: $HFS3_PEER_TENSORIZER_CONVERT" >&2
  fi
  if in_list "$gib" "$ngx_sizes" || in_list "$gib" "$ranks_sizes"; then
    nginx_publish "$model" "$P/manifest-$gib.json" "$key" "$P"
    if [ -n "${HFS3_PEER_TENSORIZER:-}" ]; then
      mkdir -p "$P/www/models/${tzkey%/*}"; ln -f "$P/tz/model.tensors" "$P/www/models/$tzkey"
    fi
    if in_list "$gib" "$ngx_sizes"; then
      HFS3_PEER_REMOTE="ngx:$key" "$HFS3_PY" bench/bench_peers.py "$model" nginx "$NGINX_ENDPOINT" "$key" "$rounds" \
        "$WORK/results/peers-nginx-$gib.json" | tee "$WORK/results/peers-nginx-$gib.txt"
    fi
    if in_list "$gib" "$ranks_sizes"; then
      HFS3_PEER_REMOTE="ngx:$key" "$HFS3_PY" bench/bench_ranks.py "$model" "$NGINX_ENDPOINT" "$key" \
        "${BENCH_RANKS_ROUNDS:-3}" "$WORK/results/ranks-nginx-$gib.json" | tee "$WORK/results/ranks-nginx-$gib.txt"
    fi
    rm -rf "$P/www/$key" "$P/www/models/${tzkey%/*}"
  fi
  if in_list "$gib" "$rgw_sizes"; then
    [ -z "${HFS3_PEER_TENSORIZER:-}" ] || rclone copyto "$P/tz/model.tensors" "rgwtest:models/$tzkey"
    HFS3_PEER_REMOTE="rgwtest:$key" "$HFS3_PY" bench/bench_peers.py "$model" rgw "$RGW_ENDPOINT" "$key" \
      "${BENCH_PEER_RGW_ROUNDS:-$rounds}" \
      "$WORK/results/peers-rgw-$gib.json" | tee "$WORK/results/peers-rgw-$gib.txt"
    # best effort: RGW is thrown away at the end anyway (a purge of a 1 GiB model once hung there for 10 minutes)
    [ -z "${HFS3_PEER_TENSORIZER:-}" ] || timeout 60 rclone purge "rgwtest:models/${tzkey%/*}" || true
    timeout 60 rclone purge "rgwtest:$key" || echo "bench_peers: rclone purge rgwtest:$key failed; RGW keeps it until it stops" >&2
  fi
  rm -rf "$model" "$P/tz"
done
