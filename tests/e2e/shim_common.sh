# shim_common.sh - sourced by the t_shim_*.sh tests: builds the fixture models (shim_fixture.py), installs
# their indexes and blobs into a cache with the mkindex test tool, and points the shim at them.
#   shim_setup          -> REV, MK, M (mount base, not existing on disk), HFS3_CACHE_DIR, HFS3_MOUNTS, HFS3_OFFLINE=1
#   shim_s3             -> the S3 server (scripts/s3env.sh: clean environment, HOME=$WORK/home), stopped on exit
#   shim_start          -> shim_s3, then shim_setup: how a test of the fixture mounts starts
#   shim_check NAME CMD  runs CMD, prints ok/not ok, counts failures in SHIM_FAILS
SHIM_FAILS=0

shim_setup() {
  python3 "$HFS3_ROOT/tests/e2e/shim_fixture.py" "$WORK/fx" >"$WORK/rev" || return 1
  REV=$(cat "$WORK/rev")
  MK="$HFS3_ROOT/$BUILD/tools/mkindex"
  export HFS3_CACHE_DIR="$WORK/cache"
  "$MK" "$WORK/fx/hf.json" "$HFS3_CACHE_DIR" s3test:models/hf "$WORK/fx/src/hf" || return 1
  "$MK" "$WORK/fx/flat.json" "$HFS3_CACHE_DIR" s3test:models/flat "$WORK/fx/src/flat" || return 1
  M="$WORK/mnt/models"
  export HFS3_MOUNTS="$M/hf=s3test:models/hf;$M/flat=s3test:models/flat"
  export HFS3_OFFLINE=1 HFS3_LOG=warn
}

shim_s3() {
  source "$HFS3_ROOT/scripts/s3env.sh"
  s3env_start "$WORK" || exit 1
  trap s3env_stop EXIT
}

shim_start() {
  shim_s3
  shim_setup || exit 1
}

shim_check() {
  local name=$1; shift
  if "$@"; then echo "ok $name"; else echo "not ok $name"; SHIM_FAILS=$((SHIM_FAILS + 1)); fi
}

# runs a command with the shim preloaded
shim() { LD_PRELOAD="$HFS3_SHIM" "$@"; }
