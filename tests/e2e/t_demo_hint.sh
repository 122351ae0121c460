#!/usr/bin/env bash
# t_demo_hint.sh - `make demo` end to end (scripts/demo.sh, the plain build it runs from a clone), and its last
# screen's advice works where the user is: it names `hfs3-manifest run` by a path that exists (this clone's
# build/bin, or the installed one in PATH), never a bare LD_PRELOAD=libhfs3shim.so (ld.so ignores it without
# `make install`), and that command, with the demo's bucket for remote:bucket and `ls` for `vllm serve`, lists the
# model through the shim from another directory.
# First (issue 46): README's first screen says how long `make demo` takes and what it installs, as scripts/deps.sh
# does it, so that nobody stops it halfway.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
screen=$(head -n 24 "$HFS3_ROOT/README.md")
for want in '`make demo`' '[0-9]+ min [0-9]+ s' 'Debian packages' 'npm ci' 'requirements.txt' '`\.venv`' 'Let it finish'; do
  grep -Eq -- "$want" <<<"$screen" || fail "README's first screen (24 lines) does not say '$want' about make demo"
done
grep -q 'apt-get install' "$HFS3_ROOT/scripts/deps.sh" && grep -q 'npm ci' "$HFS3_ROOT/scripts/deps.sh" &&
  grep -q 'venv=\.venv' "$HFS3_ROOT/scripts/deps.sh" && grep -q 'pip" install .*-r requirements.txt' "$HFS3_ROOT/scripts/deps.sh" ||
  fail "scripts/deps.sh no longer installs what README's first screen says (Debian packages, npm ci, requirements.txt into .venv)"
ok "README's first screen: make demo's time and what it installs (Debian packages, npm ci, requirements.txt into .venv)"
export S3_SERVER=node   # the demo's server: its bucket on disk is served again below (not repeated against RGW)
[ -x "$HFS3_ROOT/${BUILD:-build}/bin/hfs3-manifest" ] || fail "no plain build (make all)"
# as a user runs it: no hfs3 variables of the test run, a PATH without this build
out=$(env -u HFS3_BIN -u HFS3_SHIM DEMO_WORK="$WORK/demo" bash "$HFS3_ROOT/scripts/demo.sh" 2>&1) ||
  { echo "$out"; fail "the demo failed"; }
echo "$out" | tail -8
! grep -q "LD_PRELOAD=libhfs3shim.so" <<<"$out" || fail "the demo shows a bare LD_PRELOAD=libhfs3shim.so"
serve=$(grep -A1 "3. serve, unchanged:" <<<"$out" | sed -e 's/^.*3. serve, unchanged: *//' -e 's/ *\\$//' | tr -s ' \n' ' ')
echo "hint: $serve"
[[ "$serve" == *" run --mount /models/my-model=remote:bucket/my-model -- vllm serve /models/my-model"* ]] ||
  fail "the hint is not \`hfs3-manifest run --mount ... -- vllm serve\`: $serve"
h=${serve%% run --mount*}
[ "$h" = hfs3-manifest ] && h=$(command -v hfs3-manifest) || true
[ -x "$h" ] || fail "the hint's helper $h is not a program here"
# the demo's bucket is still under $WORK/demo/s3: serve it again and run the hint as written
s3env_start "$WORK/demo"
trap s3env_stop EXIT
cmd=${serve//remote:bucket\/my-model/s3test:models/qwen-demo}
cmd=${cmd//vllm serve/ls}
export HFS3_CACHE_DIR=$WORK/cache
listing=$(cd / && env -u LD_PRELOAD bash -c "$cmd" 2>&1) || { echo "$listing"; fail "the hint as written: $cmd"; }
grep -q "model.safetensors.index.json" <<<"$listing" || { echo "$listing"; fail "the hint as written did not list the model"; }
ok "the demo's last screen: $serve; it lists the model from / as written"
