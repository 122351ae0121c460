#!/usr/bin/env bash
# t_real_clients.sh - the libraries users load models with, for real (requirements.txt in .venv): a tiny Qwen2 model
# made by transformers (>= 3 shards + index, a tokenizer trained by tokenizers, a generation config) is uploaded with
# rclone and built; then, through the shim with the real helper:
#   - transformers AutoConfig/AutoTokenizer/AutoModelForCausalLM.from_pretrained(mount) generates the same 8 tokens
#     with the same logits (torch.equal) as from the local folder;
#   - safetensors safe_open(framework="pt") + get_tensor of every tensor, and load_file, equal the local ones;
#   - tiny models made by diffusers (a DDPMPipeline: model_index.json, unet/, scheduler/), sentence-transformers (a
#     BERT + mean pooling) and torch.save (.bin, .pt): the same images, embeddings and tensors as from the local
#     folder, torch.load with and without mmap=True;
#   - an HF cache through a hub mount, as vLLM resolves a repo id offline (HF_HUB_OFFLINE=1, HF_HUB_CACHE=the hub):
#     from_pretrained("org/qwen") at main and at the older revision, snapshot_download(local_files_only=True),
#     try_to_load_from_cache, hf_hub_download, scan_cache_dir() with no warnings, and `hf cache ls`;
#   - what huggingface_hub writes into a cache it only reads offline, asked of the kernel (strace on the same cache
#     on disk): nothing, so a read-only cache breaks no load.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
[ -x "${HFS3_PY:-}" ] || skip_test venv "no ${HFS3_PY:-.venv/bin/python}: scripts/deps.sh installs requirements.txt there"
s3env_start "$WORK"; trap s3env_stop EXIT
# nothing from the host's Hugging Face setup, no telemetry, no progress bars in the log
unset HF_TOKEN HF_ENDPOINT TRANSFORMERS_CACHE HF_HUB_CACHE HF_HUB_OFFLINE
export HF_HOME=$WORK/hf-home HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error \
       TOKENIZERS_PARALLELISM=false PYTHONDONTWRITEBYTECODE=1
RC() { "$HFS3_PY" "$HFS3_ROOT/tests/e2e/real_clients.py" "$@"; }
P() { LD_PRELOAD=$HFS3_SHIM "$@"; }

RC gen "$WORK/v1" --seed 1 :: more-gen "$WORK/more" >/dev/null 2>"$WORK/gen.err" || { cat "$WORK/gen.err"; fail "transformers, diffusers, sentence-transformers, torch.save: make the models"; }
RC gen "$WORK/v2" --seed 2 >/dev/null 2>>"$WORK/gen.err" || { cat "$WORK/gen.err"; fail "transformers: make the model"; }
read -r rev1 rev2 < <(RC hfcache "$WORK/hub/models--org--qwen" "$WORK/v1" "$WORK/v2")
rclone copy "$WORK/v2" s3test:models/qwen
rclone copy --links "$WORK/hub/models--org--qwen" s3test:models/hub/models--org--qwen
"$HFS3_BIN" build s3test:models/qwen >/dev/null
rclone copy "$WORK/more" s3test:models/more
"$HFS3_BIN" build s3test:models/more >/dev/null
"$HFS3_BIN" build --all s3test:models/hub >/dev/null
ok "a transformers model ($(ls "$WORK/v2" | grep -c safetensors$) shards + index, tokenizer.json, generation_config.json) uploaded and built"

# the references: each revision loaded from its local folder, no shim
RC generate "$WORK/v2" "$WORK/local-v2.pt" + "$WORK/v1" "$WORK/local-v1.pt" >"$WORK/local.out" 2>&1 ||
  { cat "$WORK/local.out"; fail "transformers: the local load"; }
# the two revisions differ, or loading the wrong one would pass unseen
if RC same "$WORK/local-v1.pt" "$WORK/local-v2.pt" >/dev/null 2>&1; then fail "the two revisions generate the same"; fi

export HFS3_MOUNTS="/models/qwen=s3test:models/qwen;/models/hub=s3test:models/hub;/models/more=s3test:models/more" HFS3_CACHE_DIR=$WORK/cache \
       HFS3_HELPER=$HFS3_BIN
P "$HFS3_PY" "$HFS3_ROOT/tests/e2e/real_clients.py" generate /models/qwen "$WORK/mount.pt" >"$WORK/mount.out" 2>&1 ||
  { cat "$WORK/mount.out"; fail "transformers: from_pretrained(mount) through the shim"; }
RC same "$WORK/local-v2.pt" "$WORK/mount.pt" >"$WORK/same.out" 2>&1 || { cat "$WORK/same.out"; fail "transformers: mount vs local"; }
ok "transformers: AutoConfig, AutoTokenizer, AutoModelForCausalLM.from_pretrained(mount): 8 tokens, $(cat "$WORK/same.out")"

P "$HFS3_PY" "$HFS3_ROOT/tests/e2e/real_clients.py" safetensors /models/qwen "$WORK/v2" :: more /models/more "$WORK/more" \
  >"$WORK/st.out" 2>"$WORK/st.err" || { cat "$WORK/st.out" "$WORK/st.err"; fail "safetensors, diffusers, sentence-transformers, torch.load through the shim"; }
ok "$(head -1 "$WORK/st.out")"
ok "$(tail -1 "$WORK/st.out")"

# ONNX with external data (every export over 2 GB): onnx.load opens the data with a raw openat2 through syscall(),
# onnxruntime reads /proc/self/fd/N of the data file to check it is in the model's directory
if "$HFS3_PY" -c 'import onnx, onnxruntime' 2>/dev/null; then
  RC onnx-gen "$WORK/onnx" 2>"$WORK/onnx.err" || { cat "$WORK/onnx.err"; fail "onnx: make the model"; }
  rclone copy "$WORK/onnx" s3test:models/onnx
  "$HFS3_BIN" build s3test:models/onnx >/dev/null
  HFS3_MOUNTS="$HFS3_MOUNTS;/models/onnx=s3test:models/onnx" P "$HFS3_PY" "$HFS3_ROOT/tests/e2e/real_clients.py" \
    onnx /models/onnx "$WORK/onnx" >"$WORK/onnx.out" 2>&1 || { cat "$WORK/onnx.out"; fail "onnx, onnxruntime: a model with external data through the shim"; }
  ok "$(tail -1 "$WORK/onnx.out")"
else
  skip_part onnx "onnx and onnxruntime are not in $HFS3_PY (requirements.txt pins them: scripts/deps.sh)"
fi

# a repo id through the hub mount, offline, as vLLM resolves one
export HF_HUB_OFFLINE=1
HF_HUB_CACHE=/models/hub P "$HFS3_PY" "$HFS3_ROOT/tests/e2e/real_clients.py" \
  generate org/qwen "$WORK/hub-main.pt" + org/qwen "$WORK/hub-old.pt" "$rev1" >"$WORK/hub.out" 2>&1 ||
  { cat "$WORK/hub.out"; fail "transformers: from_pretrained(repo id) through a hub mount"; }
RC same "$WORK/local-v2.pt" "$WORK/hub-main.pt" >/dev/null 2>&1 || fail "from_pretrained('org/qwen') at main: not the local model"
RC same "$WORK/local-v1.pt" "$WORK/hub-old.pt" >/dev/null 2>&1 || fail "from_pretrained('org/qwen', revision=old): not the local model"
ok "transformers: from_pretrained('org/qwen') through a hub mount, HF_HUB_OFFLINE=1: main and revision ${rev1:0:8} equal their local loads"

HF_HUB_CACHE=/models/hub P "$HFS3_PY" "$HFS3_ROOT/tests/e2e/real_clients.py" \
  hub /models/hub org/qwen "$rev1" "$WORK/v1" "$WORK/v2" >"$WORK/hubchk.out" 2>&1 ||
  { cat "$WORK/hubchk.out"; fail "huggingface_hub through a hub mount"; }
ok "$(cat "$WORK/hubchk.out")"

# the hf CLI's cache listing: the same as for the same cache on disk, paths aside
HF="$(dirname "$HFS3_PY")/hf"
HF_HUB_CACHE=/models/hub P "$HF" cache ls --revisions --format json >"$WORK/ls.mount" 2>"$WORK/ls.err" ||
  { cat "$WORK/ls.err"; fail "hf cache ls through the shim"; }
HF_HUB_CACHE=$WORK/hub "$HF" cache ls --revisions --format json 2>/dev/null | sed "s|$WORK/hub|/models/hub|g" >"$WORK/ls.local"
strip() { "$HFS3_PY" -c "import json,sys; print(sorted((r['repo_id'], r['revision'], r['snapshot_path'], r['size'], tuple(r['refs'])) for r in json.load(open(sys.argv[1]))))" "$1"; }
[ "$(strip "$WORK/ls.mount")" = "$(strip "$WORK/ls.local")" ] && grep -q "$rev1" "$WORK/ls.mount" ||
  { cat "$WORK/ls.mount" "$WORK/ls.local"; fail "hf cache ls: the mount and the same cache on disk differ"; }
ok "hf cache ls --revisions: both revisions, refs and sizes as for the same cache on disk"

# what huggingface_hub and transformers try to write into a cache they read offline: the kernel's record of the same
# calls on the same cache on disk. Nothing: so a read-only cache (the shim answers EROFS to writes) breaks no load.
if command -v strace >/dev/null; then
  # -y: a descriptor is printed with its path, so a write relative to a directory descriptor names the cache too;
  # the tree's listing before and after catches what a path relative to the working directory would hide
  find "$WORK/hub" -printf '%p %s %m %T@\n' | sort >"$WORK/hub.before"
  HF_HUB_CACHE=$WORK/hub strace -f -qq -y -e trace=%file,%desc -o "$WORK/strace" "$HFS3_PY" "$HFS3_ROOT/tests/e2e/real_clients.py" \
    generate org/qwen "$WORK/s.pt" + org/qwen "$WORK/s1.pt" "$rev1" >/dev/null 2>&1 &&
  HF_HUB_CACHE=$WORK/hub strace -f -qq -y -e trace=%file,%desc -o "$WORK/strace2" "$HFS3_PY" "$HFS3_ROOT/tests/e2e/real_clients.py" \
    hub "$WORK/hub" org/qwen "$rev1" "$WORK/v1" "$WORK/v2" >/dev/null 2>&1 || fail "the strace runs"
  writes=$(cat "$WORK/strace" "$WORK/strace2" | grep -F "$WORK/hub" |
           grep -E '^[0-9]+ +(open|openat|openat2|creat)\(.*(O_WRONLY|O_RDWR|O_CREAT)|^[0-9]+ +(mkdir|mkdirat|rename|renameat2?|unlink|unlinkat|rmdir|symlink|symlinkat|link|linkat|utimes|utimensat|truncate|chmod|fchmodat|chown|lchown|fchownat|setxattr|lsetxattr)\(' || true)
  [ -z "$writes" ] || { echo "$writes" | head; fail "huggingface_hub offline writes into the cache (the shim would refuse it)"; }
  find "$WORK/hub" -printf '%p %s %m %T@\n' | sort | cmp -s - "$WORK/hub.before" ||
    fail "the cache on disk changed while transformers and huggingface_hub read it offline"
  [ "$(grep -cF "$WORK/hub" "$WORK/strace")" -gt 20 ] || fail "the strace saw the cache read"
  ok "offline, transformers + huggingface_hub write nothing into the cache: no .no_exist marker, lock or ref (strace)"
else
  skip_part strace "strace is not installed (scripts/deps.sh installs it)"
fi
