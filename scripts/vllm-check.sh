#!/usr/bin/env bash
# vllm-check.sh - `make vllm-check`: vLLM's own model and config resolution, tokenizer and safetensors weights
# iterators, run through the shim on this CPU-only machine (tests/e2e/vllm_check.py names the vLLM version and the
# functions it follows). Not part of `make test`: vLLM and the CUDA torch it pins take ~10 GB and ~10 minutes to
# install.
#   1. the virtual environment .venv-vllm (VLLM_VENV=dir: another one) with requirements-vllm.txt, pinned whole
#      (vllm==0.33.0 and what it pulls); reinstalled only when that file changed (a stamp, as scripts/deps.sh does)
#   2. a local S3 server (scripts/s3env.sh); the tiny Qwen2 model of t_real_clients (tests/e2e/real_clients.py gen:
#      made by transformers, 4 shards + index, a trained tokenizer, a generation config) in two revisions, and an HF
#      cache holding both (real_clients.py hfcache); uploaded with rclone, manifests built
#   3. through the shim (the helper under test: HFS3_BIN, else the sanitized build), with the real helper:
#      vllm_check.py local /models/qwen, then vllm_check.py hub org/qwen with HF_HUB_OFFLINE=1 and
#      HF_HUB_CACHE=/models/hub, at main and at the older revision
# The work dir is removed after a pass and kept after a failure (VLLM_WORK=dir: use and keep that one).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD BUILD=${BUILD:-build}
HFS3_BIN=${HFS3_BIN:-$ROOT/$BUILD/bin-san/hfs3-manifest}
SHIM=$ROOT/$BUILD/lib/libhfs3shim.so
for f in "$HFS3_BIN" "$SHIM"; do [ -x "$f" ] || [ -f "$f" ] || { echo "vllm-check: no $f (make all e2e-build)" >&2; exit 1; }; done

# 1. the virtual environment
venv=${VLLM_VENV:-.venv-vllm}
if [ ! -x "$venv/bin/python" ]; then
  echo "vllm-check: creating the virtual environment $venv"
  python3 -m venv "$venv"
fi
if ! cmp -s requirements-vllm.txt "$venv/.requirements-vllm-stamp" 2>/dev/null; then
  echo "vllm-check: pip install -r requirements-vllm.txt into $venv (vllm 0.33.0, CUDA torch: ~10 GB, minutes)"
  "$venv/bin/pip" install -q --disable-pip-version-check -r requirements-vllm.txt 2>&1 | grep -v '^WARNING: Location' || true
  "$venv/bin/python" -c "import vllm, torch, transformers, safetensors, huggingface_hub, tokenizers" 2>/dev/null ||
    { echo "vllm-check: the packages of requirements-vllm.txt did not install into $venv" >&2; exit 1; }
  cp requirements-vllm.txt "$venv/.requirements-vllm-stamp"
else
  echo "vllm-check: vLLM present ($venv)"
fi
PY=$(cd "$venv" && pwd)/bin/python

# 2. the server, the models, the upload
WORK=${VLLM_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/hfs3-vllm-check.XXXXXX")}
mkdir -p "$WORK"
source scripts/s3env.sh
done_ok=0
cleanup() { s3env_stop; if [ $done_ok = 1 ] && [ -z "${VLLM_WORK:-}" ]; then rm -rf "$WORK"; else echo "vllm-check: work dir $WORK"; fi; }
trap cleanup EXIT
s3env_start "$WORK"
# nothing from the host's Hugging Face setup; vLLM's lock files (weight_utils.get_lock: tempfile.gettempdir()) in
# the work dir; no usage reports; vLLM's CPU platform without a GPU
unset HF_TOKEN HF_ENDPOINT TRANSFORMERS_CACHE HF_HUB_CACHE HF_HUB_OFFLINE VLLM_USE_MODELSCOPE PYTHONOPTIMIZE
mkdir -p "$WORK/tmp"
export TMPDIR=$WORK/tmp HF_HOME=$WORK/hf-home HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_PROGRESS_BARS=1 \
       TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false PYTHONDONTWRITEBYTECODE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 VLLM_CONFIGURE_LOGGING=0
# the sanitized helper as the e2e tests run it: a leak or UB fails the fetch
export ASAN_OPTIONS=detect_leaks=1:exitcode=99 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
RC() { "$PY" tests/e2e/real_clients.py "$@"; }
RC gen "$WORK/v1" --seed 1 >/dev/null 2>"$WORK/gen.err" || { cat "$WORK/gen.err" >&2; echo "vllm-check: make the model" >&2; exit 1; }
RC gen "$WORK/v2" --seed 2 >/dev/null 2>>"$WORK/gen.err" || { cat "$WORK/gen.err" >&2; echo "vllm-check: make the model" >&2; exit 1; }
read -r rev1 _ < <(RC hfcache "$WORK/hub/models--org--qwen" "$WORK/v1" "$WORK/v2")
rclone copy "$WORK/v2" s3test:models/qwen
rclone copy --links "$WORK/hub/models--org--qwen" s3test:models/hub/models--org--qwen
"$HFS3_BIN" build s3test:models/qwen >/dev/null
"$HFS3_BIN" build --all s3test:models/hub >/dev/null
echo "ok: a tiny Qwen2 model from transformers ($(ls "$WORK/v2" | grep -c 'safetensors$') shards + index), two revisions in an HF cache, uploaded with rclone and built"

# 3. vLLM through the shim
export HFS3_MOUNTS="/models/qwen=s3test:models/qwen;/models/hub=s3test:models/hub" HFS3_CACHE_DIR=$WORK/cache \
       HFS3_HELPER=$HFS3_BIN
echo "vllm-check: $("$PY" -c 'import importlib.metadata as m; print("vllm", m.version("vllm"), "torch", m.version("torch"), "transformers", m.version("transformers"), "huggingface_hub", m.version("huggingface_hub"), "safetensors", m.version("safetensors"))')"
fails=0
LD_PRELOAD=$SHIM "$PY" tests/e2e/vllm_check.py local /models/qwen "$WORK/v2" 2>"$WORK/local.err" ||
  { tail -40 "$WORK/local.err" >&2; echo "not ok: vLLM on the local path /models/qwen through the shim" >&2; fails=1; }
HF_HUB_OFFLINE=1 HF_HUB_CACHE=/models/hub LD_PRELOAD=$SHIM "$PY" tests/e2e/vllm_check.py hub org/qwen "$rev1" "$WORK/v1" "$WORK/v2" \
  2>"$WORK/hub.err" ||
  { tail -40 "$WORK/hub.err" >&2; echo "not ok: vLLM on the repo id org/qwen through the hub mount" >&2; fails=1; }
[ $fails = 0 ] || exit 1
# the bytes vLLM read came through hfs3: every shard of both revisions is in the shim's cache, by its sha256
n=0
for f in "$WORK"/v1/*.safetensors "$WORK"/v2/*.safetensors; do
  sum=$(sha256sum "$f" | cut -d' ' -f1)
  [ -f "$WORK/cache/blobs/$sum" ] || { echo "not ok: $f is not in the shim's cache (blobs/$sum)" >&2; exit 1; }
  n=$((n + 1))
done
echo "ok: the shim's cache holds the $n shards vLLM read (both revisions), fetched from S3 and verified by sha256"
done_ok=1
echo "vllm-check: passed"
