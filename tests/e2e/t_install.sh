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

# README's container image recipe, as written: its make commands lay out the tree its COPY takes, and its runtime
# packages are exactly those that hold the libraries the helper links (beside libc6)
dock=$(awk '/^<!-- dockerfile:/ {f=1; next} f && /^```/ {if (n++) exit; next} f' "$HFS3_ROOT/README.md")
[ -n "$dock" ] || fail "README: no Dockerfile after the '<!-- dockerfile:' marker"
mk=$(grep -o 'make -C /src install DESTDIR=[^ ]* PREFIX=[^ ]*' <<<"$dock") || fail "README Dockerfile: no make install line"
d=${mk#*DESTDIR=}; d=${d%% *}; p=${mk##*PREFIX=}
grep -q "^RUN make -C /src all && make -C /src install DESTDIR=$d PREFIX=$p\$" <<<"$dock" || fail "README Dockerfile: the build line"
grep -q "^COPY --from=hfs3 $d$p/ $p/\$" <<<"$dock" || fail "README Dockerfile: COPY does not take $d$p/"
[ "$p" = /usr/local ] || fail "README Dockerfile: PREFIX $p"
if command -v dpkg >/dev/null && command -v readelf >/dev/null; then
  want=$(sed -n '/^FROM \$BASE$/,$p' <<<"$dock" | tr -d '\\\n' | grep -o 'no-install-recommends [a-z0-9 .+-]*' |
         sed 's/no-install-recommends //' | tr ' ' '\n' | grep . | sort -u)
  have=$(for so in $(readelf -d "$R/bin/hfs3-manifest" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
           path=$(ldd "$R/bin/hfs3-manifest" | awk -v s="$so" '$1 == s {print $3}')
           [ -n "$path" ] || continue
           # by file name: with a merged /usr, dpkg knows one of /lib and /usr/lib only
           base=/$(basename "$(readlink -f "$path")")
           dpkg -S "${base#/}" 2>/dev/null | awk -F': ' -v b="$base" \
             'substr($2, length($2) - length(b) + 1) == b {sub(/:.*/, "", $1); print $1; exit}'
         done | grep -vx libc6 | sort -u)
  [ -n "$have" ] && [ "$want" = "$have" ] || fail "README Dockerfile runtime packages '$(echo $want)', the helper needs '$(echo $have)'"
  ok "README's Dockerfile: make install DESTDIR=$d PREFIX=$p, COPY $d$p/, runtime packages $(echo $have)"
else
  skip_part dockerfile-packages "no dpkg or readelf to map the helper's libraries to packages"
fi

# make uninstall removes every file make install put there
make -s --no-print-directory -C "$HFS3_ROOT" uninstall BUILD="$BUILD" DESTDIR="$WORK/root" PREFIX="$prefix" >"$WORK/uninstall.log" 2>&1 || { cat "$WORK/uninstall.log"; fail "make uninstall"; }
left=$(find "$WORK/root" -type f)
[ -z "$left" ] || fail "make uninstall left: $left"
ok "make uninstall removes what make install installed"
