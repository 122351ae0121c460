#!/usr/bin/env bash
# demo.sh - the main job end to end on loopback: a local S3 server, a model uploaded with rclone, a manifest
# built into the bucket, then the model loaded through the shim by an unmodified Python loader.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD BUILD=${BUILD:-build}
H=$ROOT/$BUILD/bin/hfs3-manifest SHIM=$ROOT/$BUILD/lib/libhfs3shim.so
WORK=${DEMO_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/hfs3-demo.XXXXXX")}
source scripts/s3env.sh
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. start a local S3 server (@20minutes/s3rver) on loopback"
s3env_start "$WORK"
trap 's3env_stop; [ -n "${DEMO_WORK:-}" ] || rm -rf "$WORK"' EXIT
echo "S3 endpoint $S3_ENDPOINT, bucket 'models'; rclone remote 's3test:' set by RCLONE_CONFIG_S3TEST_* variables"

step "2. a model folder like 'hf download --local-dir' makes (2 safetensors shards, 64 MiB)"
python3 scripts/gen_model.py flat "$WORK/qwen-demo" --shards 40,24 --seed 5
(cd "$WORK/qwen-demo" && ls -l)

step "3. upload it with the real rclone"
echo "\$ rclone copy $WORK/qwen-demo s3test:models/qwen-demo"
rclone copy "$WORK/qwen-demo" s3test:models/qwen-demo

step "4. write the manifest into the bucket"
echo "\$ hfs3-manifest build s3test:models/qwen-demo"
"$H" build s3test:models/qwen-demo
echo "\$ hfs3-manifest show s3test:models/qwen-demo"
"$H" show s3test:models/qwen-demo

if [ -f "$SHIM" ]; then
  step "5. load it through the shim: an unmodified Python loader reads /models/qwen-demo"
  export HFS3_MOUNTS=/models/qwen-demo=s3test:models/qwen-demo HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$H
  echo "\$ LD_PRELOAD=$SHIM HFS3_MOUNTS=$HFS3_MOUNTS python3 demo_loader.py /models/qwen-demo"
  echo "cold (empty cache):"
  cold=$(LD_PRELOAD=$SHIM python3 scripts/demo_loader.py /models/qwen-demo)
  echo "  $cold"
  echo "warm (cached):"
  warm=$(LD_PRELOAD=$SHIM python3 scripts/demo_loader.py /models/qwen-demo)
  echo "  $warm"
  python3 - "$cold" "$warm" <<'PY'
import json, sys
c, w = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"  time to first byte {c['ttfb_s']*1000:.0f} ms cold; cold load {c['load_s']:.2f} s at {c['MBps']:.0f} MB/s; "
      f"warm load {w['load_s']:.2f} s at {w['MBps']:.0f} MB/s")
assert c["checksum"] == w["checksum"]
PY
  echo "\$ ls -l /models/qwen-demo   (through the shim)"
  LD_PRELOAD=$SHIM ls -l /models/qwen-demo
fi

step "what you do next"
# the helper that works where the user is: the installed one when it is in PATH, else this clone's build by its
# absolute path. `run` preloads the shim beside it by its absolute path: a bare LD_PRELOAD=libhfs3shim.so is
# ignored by ld.so ("cannot be preloaded") until `make install` has put the library where it looks.
if HX=$(command -v hfs3-manifest 2>/dev/null); then HX=hfs3-manifest; else HX=$H; fi
cat <<EOT
  1. upload your weights:   rclone copy ./my-model remote:bucket/my-model      (HF cache folders: add --links)
  2. write the manifest:    $HX build remote:bucket/my-model
  3. serve, unchanged:      $HX run --mount /models/my-model=remote:bucket/my-model -- \\
                              vllm serve /models/my-model
  (\`run\` preloads the shim by its absolute path; \`make install\` puts hfs3-manifest and libhfs3shim.so under
   /usr/local, see README.md "Install")
EOT
