#!/usr/bin/env bash
# shim_fake_helper.sh - a stand-in for hfs3-manifest's shim commands, for t_shim_robust.sh: it checks what
# the shim hands it (descriptors, environment, the lock on fd 3) and serves the fixture from $FAKE_FX with
# mkindex, logging each call to $FAKE_LOG. Not the real helper: t_shim_real.sh covers that.
fds=
for n in $(seq 0 64); do [ -e /proc/$$/fd/$n ] && fds+=$n,; done
cmd=$1; shift
lockfd=
if [ "${1:-}" = --lock-fd ]; then lockfd=$2; shift 2; fi
remote=$1 name=${1##*/}
echo "$cmd $* lockfd=$lockfd fds=$fds preload=${LD_PRELOAD:-none} cache=$HFS3_CACHE_DIR" >>"$FAKE_LOG"
case $cmd in
  _index)
    sleep "${FAKE_INDEX_SLEEP:-0}"
    if [ -f "$FAKE_FX/$name.json" ]; then exec "$FAKE_MK" "$FAKE_FX/$name.json" "$HFS3_CACHE_DIR" "$remote"; fi
    d=$(dirname "$(readlink /proc/$$/fd/3)")
    echo "fake: no such model $remote" >"$d/error"
    exit 1 ;;
  _get)
    path=$2 src="$FAKE_FX/src/$name/$2"
    sha=$(sha256sum "$src" | cut -d' ' -f1)
    # the lock must be held (through fd 3) while we fetch
    if flock -n "$HFS3_CACHE_DIR/locks/$sha.lock" true; then echo "get-unlocked $path" >>"$FAKE_LOG"; fi
    case ${FAKE_GET_MODE:-} in
      hang) exec sleep 1000 ;;
      slow) # progress every 0.5 s for FAKE_SLOW_S seconds, as a slow but live download
        mkdir -p "$HFS3_CACHE_DIR/tmp"
        for i in $(seq 1 $((${FAKE_SLOW_S:-4} * 2))); do echo "$i" >>"$HFS3_CACHE_DIR/tmp/$sha.0123456789abcdef.part"; sleep 0.5; done
        rm -f "$HFS3_CACHE_DIR/tmp/$sha.0123456789abcdef.part" ;;
      gate) # until the file $FAKE_GATE exists (t_shim_cancel.sh: opens cancelled while this runs)
        until [ -e "$FAKE_GATE" ]; do sleep 0.05; done ;;
      *) sleep "${FAKE_GET_SLEEP:-0.3}" ;;
    esac
    if [ "$path" = dir/b.bin ]; then
      mkdir -p "$HFS3_CACHE_DIR/fails"; echo "fake: refusing $path" >"$HFS3_CACHE_DIR/fails/$sha.err"; exit 1
    fi
    cp "$src" "$HFS3_CACHE_DIR/blobs/.tmp.$sha" && chmod 0444 "$HFS3_CACHE_DIR/blobs/.tmp.$sha" &&
      mv "$HFS3_CACHE_DIR/blobs/.tmp.$sha" "$HFS3_CACHE_DIR/blobs/$sha" ;;
  _prefetch) exit 0 ;;
esac
