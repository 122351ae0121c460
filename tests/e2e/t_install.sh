#!/usr/bin/env bash
# `make install DESTDIR= PREFIX=` lays out bin/hfs3-manifest and lib/libhfs3shim.so; the installed library
# loads by its bare name (here through LD_LIBRARY_PATH, as ldconfig's cache does after a real install) and
# finds the installed helper next to itself (../bin) when the compiled-in PREFIX is not there.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
# the PREFIX this build was made for, so that installing rebuilds nothing under the other tests' feet
prefix=$(cat "$HFS3_ROOT/$BUILD/prefix.stamp")
make -s --no-print-directory -C "$HFS3_ROOT" install BUILD="$BUILD" DESTDIR="$WORK/root" PREFIX="$prefix" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; fail "make install"; }
R=$WORK/root$prefix
[ -x "$R/bin/hfs3-manifest" ] && [ -f "$R/lib/libhfs3shim.so" ] || fail "installed files missing"
grep -q "$prefix/bin/hfs3-manifest" "$R/lib/libhfs3shim.so" || fail "the shim does not name the installed helper"
ldd "$R/lib/libhfs3shim.so" | grep -v -e 'libc\.so' -e 'ld-linux' -e 'linux-vdso' | grep . && fail "the shim needs more than libc"
s3env_start "$WORK"; trap s3env_stop EXIT
python3 "$HFS3_ROOT/scripts/gen_model.py" flat "$WORK/m" --shards 1 --seed 9
rclone copy "$WORK/m" s3test:models/m
"$R/bin/hfs3-manifest" build s3test:models/m >/dev/null
out=$(env -u HFS3_HELPER LD_LIBRARY_PATH="$R/lib" LD_PRELOAD=libhfs3shim.so HFS3_MOUNTS=/models/m=s3test:models/m \
      HFS3_CACHE_DIR="$WORK/cache" cat /models/m/config.json)
[ "$out" = "$(cat "$WORK/m/config.json")" ] || fail "reading through the installed shim"
ok "make install layout; LD_PRELOAD=libhfs3shim.so by bare name; the helper found beside the library"
