#!/usr/bin/env bash
# t_readme_recipes.sh - the README's shell recipes, run as written against the local Node server that its "Try it"
# tells users to start (scripts/s3env.sh, default settings: no S3ENV_MAX_KEYS), with `s3test:` for `minio:` as the
# README says: "Try it" (its s3env_start directory moved under $WORK), "An HF cache" (a hub of two repositories
# with huggingface_hub's .locks/ and version.txt, then the one-repository variant the text describes), and "Update
# a model" (unchanged, then a changed file served after the rebuild). vllm is swapped for a loader that resolves
# the repository the huggingface_hub offline way (HF_HUB_CACHE, refs/main, snapshots/<rev>/) and compares bytes.
set -euo pipefail
source "$HFS3_ROOT/tests/e2e/lib.sh"
export S3_SERVER=node   # the server the README names; not repeated against RGW
R=$HFS3_ROOT/README.md
# block HEADING_REGEX N: the Nth ```sh block after the line matching HEADING_REGEX
block() { H=$1 awk -v want="${2:-1}" '$0 ~ ENVIRON["H"] {f=1} f && /^```sh/ {n++; if (n == want) {g=1; next}} g && /^```/ {exit} g' "$R"; }
as_test() { sed -e 's/minio:/s3test:/g'; }
# every helper call of a recipe runs the binary under test; `vllm serve REPO` becomes the loader
bin=$(dirname "$HFS3_BIN")
cat >"$WORK/load.py" <<'PY'
import os, sys
hub, repo_id, src = os.environ["HF_HUB_CACHE"], sys.argv[1], sys.argv[2]
d = os.path.join(hub, "models--" + repo_id.replace("/", "--"))
rev = open(os.path.join(d, "refs", "main")).read().strip()
snap, ref = os.path.join(d, "snapshots", rev), os.path.join(src, "snapshots", rev)
n = 0
for f in sorted(os.listdir(ref)):
    with open(os.path.join(snap, f), "rb") as a, open(os.path.join(ref, f), "rb") as b:
        if a.read() != b.read():
            sys.exit("differs: " + f)
    n += 1
print("hub", " ".join(sorted(os.listdir(hub))), "loaded", n, "files of", repo_id)
PY
mkdir -p "$WORK/pathbin"
ln -s "$HFS3_BIN" "$WORK/pathbin/hfs3-manifest"
cat >"$WORK/pathbin/vllm" <<EOF
#!/bin/bash
[ "\$1" = serve ] || { echo "vllm \$*" >&2; exit 2; }
exec /usr/bin/python3 "$WORK/load.py" "\$2" "$WORK/src/models--\${2//\//--}"
EOF
chmod +x "$WORK/pathbin/vllm"
export PATH=$WORK/pathbin:$PATH

# 1. "Try it", as written from the repository's root, but for its paths: its directory and ./my-model under $WORK
# (this test writes only there), build/bin the build under test
try=$(block '^## Try it' 2)
grep -q '^source scripts/s3env.sh && s3env_start /tmp/hfs3-try' <<<"$try" || fail "Try it: $try"
try=${try//\/tmp\/hfs3-try/$WORK/try}; try=${try//.\/my-model/$WORK/my-model}; try=${try//build\/bin\//$bin/}
python3 "$HFS3_ROOT/scripts/gen_model.py" flat "$WORK/my-model" --shards 0.2 --seed 51 >/dev/null
# (a trap first, so that a failing step does not leave the block's server running)
out=$(cd "$HFS3_ROOT" && bash -euo pipefail -c "trap 's3env_stop 2>/dev/null || true' EXIT; $try" 2>&1) || { echo "$out"; fail "Try it"; }
grep -q " config.json$" <<<"$out" && grep -q " model-00001-of-00001.safetensors$" <<<"$out" || { echo "$out"; fail "Try it: ls -l /models/m"; }
ok "Try it: s3env_start, rclone copy, build, run ... ls -l /models/m, s3env_stop, as written"

# ... and the user's shell is as it was after s3env_stop: HOME, AWS_PROFILE, the proxies, their own rclone
# remotes and RCLONE_CONFIG back (set, unset, exported or not), a variable the user set meanwhile kept
mkdir -p "$WORK/userhome"
out=$(cd "$HFS3_ROOT" && env -u AWS_REGION HOME="$WORK/userhome" AWS_PROFILE=mine http_proxy=http://proxy.invalid:3128 \
  HTTPS_PROXY=http://proxy.invalid:3129 RCLONE_CONFIG="$WORK/userhome/rclone.conf" RCLONE_CONFIG_MINE_TYPE=local \
  AWS_ENDPOINT_URL="http://aws.invalid" bash -euo pipefail -c '
  no_proxy=localhost   # a shell variable, not exported
  export -p >"$0/env.before"; declare -p no_proxy >>"$0/env.before"
  source scripts/s3env.sh && s3env_start "$0/try-env"
  [ "$HOME" = "$0/try-env/home" ] && [ -z "${AWS_PROFILE:-}" ] && [ -z "${RCLONE_CONFIG_MINE_TYPE:-}" ] || exit 3
  export HFS3_CACHE_DIR=$0/my-cache   # the user'"'"'s own, set while the server runs: kept
  s3env_stop
  [ "$HFS3_CACHE_DIR" = "$0/my-cache" ] || exit 4
  unset HFS3_CACHE_DIR
  export -p >"$0/env.after"; declare -p no_proxy >>"$0/env.after"' "$WORK" 2>&1) || { echo "$out"; fail "s3env_start/stop in a user's shell"; }
diff "$WORK/env.before" "$WORK/env.after" || fail "s3env_stop left the shell changed (diff above: < before, > after)"
ok "s3env_stop puts the shell back: HOME, AWS_PROFILE, AWS_ENDPOINT_URL, proxies (exported or not), RCLONE_CONFIG and RCLONE_CONFIG_*, AWS_REGION unset; a variable set meanwhile kept"

# the server the other recipes run against, started as "Try it" says (HOME moves under it: the HF cache goes there)
source "$HFS3_ROOT/scripts/s3env.sh"
s3env_start "$WORK/try2"; trap s3env_stop EXIT
export HFS3_CACHE_DIR=$WORK/cache
H=$HOME/.cache/huggingface/hub
gen() { python3 "$HFS3_ROOT/scripts/gen_model.py" "$@" >/dev/null; }
gen hf-cache "$WORK/src/models--Qwen--Qwen3-1.7B" --shards 0.2,0.1 --seed 52
gen hf-cache "$WORK/src/models--org--other" --shards 0.1 --seed 53
mkdir -p "$H/.locks/models--Qwen--Qwen3-1.7B"; cp -a "$WORK/src/." "$H/"
: >"$H/.locks/models--Qwen--Qwen3-1.7B/x.lock"; echo 1 >"$H/version.txt"

# 2. "An HF cache": the whole hub
hub=$(block '^\*\*An HF cache\*\*' 1 | as_test)
grep -q -- '--mount /models/hub=s3test:models/hub -- vllm serve Qwen/Qwen3-1.7B$' <<<"$hub" || fail "HF cache recipe: $hub"
out=$(bash -euo pipefail -c "$hub" 2>&1) || { echo "$out"; fail "the README's HF cache recipe"; }
grep -q "^s3test:models/hub: 2 repositories: 2 built, 0 unchanged, 0 failed$" <<<"$out" || { echo "$out"; fail "build --all"; }
grep -qx "hub models--Qwen--Qwen3-1.7B models--org--other loaded 6 files of Qwen/Qwen3-1.7B" <<<"$out" || { echo "$out"; fail "the hub recipe's load"; }
[ -z "$(rclone lsf s3test:models/hub/.locks)" ] && ! rclone lsf s3test:models/hub | grep -qx version.txt || fail "the recipe uploaded .locks or version.txt"
ok "HF cache recipe as written (Node server, default listing): build --all, one mount for the hub, the repository loaded by name"

# 3. the one-repository variant: "/models--Qwen--Qwen3-1.7B" added to every path and REMOTE except HF_HUB_CACHE, no --all
grep -q 'add `/models--Qwen--Qwen3-1.7B` to every path and REMOTE except `HF_HUB_CACHE`; drop `--all`' "$R" || fail "README: the one-repository sentence changed; update this test"
r=/models--Qwen--Qwen3-1.7B
one=$(sed -e "s#huggingface/hub #huggingface/hub$r #; s#s3test:models/hub \\\\#s3test:models/hub$r \\\\#" \
          -e "s#build --all s3test:models/hub\$#build s3test:models/hub$r#" \
          -e "s#--mount /models/hub=s3test:models/hub #--mount /models/hub$r=s3test:models/hub$r #" <<<"$hub")
[ "$(grep -c "$r" <<<"$one")" = 3 ] && ! grep -q -- --all <<<"$one" || fail "one-repository variant: $one"
rclone purge s3test:models/hub
out=$(bash -euo pipefail -c "$one" 2>&1) || { echo "$out"; fail "the one-repository variant"; }
grep -qx "hub models--Qwen--Qwen3-1.7B loaded 6 files of Qwen/Qwen3-1.7B" <<<"$out" || { echo "$out"; fail "the one-repository load"; }
ok "the one-repository variant of the HF cache recipe"

# 4. "Update a model": publish with the three steps' upload and build, then the update recipe as written
upd=$(block '^\*\*Update a model\.\*\*' 1 | as_test)
grep -q "^rclone sync ./Qwen3-1.7B s3test:models/qwen --exclude '/.hfs3/\*\*'$" <<<"$upd" || fail "update recipe: $upd"
mkdir -p "$WORK/pub"; cp -a "$WORK/my-model" "$WORK/pub/Qwen3-1.7B"
(cd "$WORK/pub" && rclone copy ./Qwen3-1.7B s3test:models/qwen && hfs3-manifest build s3test:models/qwen) >/dev/null 2>&1 || fail "publish"
cat_config() { HFS3_MANIFEST_TTL=0 hfs3-manifest run --mount /models/qwen=s3test:models/qwen -- cat /models/qwen/config.json; }
[ "$(cat_config)" = "$(cat "$WORK/pub/Qwen3-1.7B/config.json")" ] || fail "the published model's config.json"
out=$(cd "$WORK/pub" && bash -euo pipefail -c "$upd" 2>&1) || { echo "$out"; fail "update recipe, nothing changed"; }
grep -q "unchanged" <<<"$out" || { echo "$out"; fail "update recipe: no 'unchanged' when nothing changed"; }
[ -n "$(rclone lsf s3test:models/qwen/.hfs3)" ] || fail "rclone sync removed the manifest"
printf '{"architectures": ["Test"], "hidden_size": 128}\n' >"$WORK/pub/Qwen3-1.7B/config.json"
out=$(cd "$WORK/pub" && bash -euo pipefail -c "$upd" 2>&1) || { echo "$out"; fail "update recipe, a file changed"; }
grep -q "unchanged" <<<"$out" && { echo "$out"; fail "update recipe: 'unchanged' after a change"; }
got=$(cat_config)
[ "$got" = "$(cat "$WORK/pub/Qwen3-1.7B/config.json")" ] || fail "the rebuilt model serves the old config.json: $got"
ok "Update a model as written: 'unchanged' when nothing changed; after a change the rebuild serves the new file"
echo "all ok"
