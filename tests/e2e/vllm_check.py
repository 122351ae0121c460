#!/usr/bin/env python3
"""vllm_check.py - vLLM's own model-resolution and weight-loading code, run through the shim (`make vllm-check`,
scripts/vllm-check.sh; the Python of requirements-vllm.txt). Not part of `make test`: vLLM costs ~10 GB.

Follows vLLM 0.33.0 (the pin in requirements-vllm.txt; this script refuses another version), on CPU, no GPU:
  vllm.transformers_utils.config:      get_config, get_safetensors_params_metadata, checkpoint_has_lm_head
  vllm.transformers_utils.repo_utils:  list_repo_files (local: Path.rglob + is_file), is_mistral_model_repo,
                                       file_or_path_exists, try_get_local_file
  vllm.config.ModelConfig(model=...):  the whole config resolution of `vllm serve MODEL` (config.json, generation,
                                       tokenizer and image-processor configs, architecture, max_model_len)
  vllm.tokenizers.get_tokenizer:       resolve_tokenizer_args, get_non_weight_snapshot_path (repo id: get_lock +
                                       snapshot_download(local_files_only)), AutoTokenizer.from_pretrained
  vllm.model_executor.model_loader.default_loader.DefaultModelLoader:
                                       _prepare_weights (isdir, list_filtered_repo_files, repo id:
                                       download_weights_from_hf + download_safetensors_index_file_from_hf under
                                       weight_utils.get_lock, glob.glob, filter_duplicate_safetensors_files), and
                                       get_all_weights -> _get_weights_iterator -> weight_utils.
                                       safetensors_weights_iterator (safe_open + get_tensor: mmap) with each
                                       safetensors_load_strategy: lazy (default), eager (read()), prefetch (threads
                                       that read() every shard while safe_open maps it), and
                                       multi_thread_safetensors_weights_iterator (enable_multithread_load)

  local MOUNT LOCAL                    the model at the mount path; every result equals the one for LOCAL (the same
                                       files on disk, read in this process without the shim: the shim serves only
                                       its mounts)
  hub REPO_ID REV1 LOCAL_V1 LOCAL_V2   the repo id with HF_HUB_OFFLINE=1 and HF_HUB_CACHE=the hub mount: main equals
                                       LOCAL_V2, revision REV1 equals LOCAL_V1
Prints one "ok" line per check; any failure raises (exit status 1).
"""
import os, sys, time

VLLM_VERSION = "0.33.0"
PROMPT = "The quick brown fox jumps over the lazy dog."
STRATEGIES = (None, "eager", "prefetch", "multithread")


def ok(msg):
    print(f"ok: {msg}", flush=True)


def imports():
    import vllm
    assert vllm.__version__ == VLLM_VERSION, f"vllm {vllm.__version__}: this check follows {VLLM_VERSION}"
    import torch
    torch.set_num_threads(2)


def config_dict(cfg):
    d = cfg.to_dict()
    d.pop("_name_or_path", None)
    d.pop("transformers_version", None)
    return d


def local_tensors(local):
    """Every tensor of LOCAL's shards, read with safetensors without the shim: name -> (shard, tensor)."""
    from safetensors import safe_open
    out = {}
    for name in sorted(os.listdir(local)):
        if name.endswith(".safetensors"):
            with safe_open(os.path.join(local, name), framework="pt") as f:
                for k in f.keys():
                    out[k] = (name, f.get_tensor(k))
    return out


def weights(strategy, ref, model_config):
    """vLLM's DefaultModelLoader.get_all_weights (what load_weights iterates) for one load strategy; every tensor
    must equal the local one, and every local tensor must come."""
    import torch
    from vllm.config.load import LoadConfig
    from vllm.model_executor.model_loader.default_loader import DefaultModelLoader
    if strategy == "multithread":
        lc = LoadConfig(load_format="auto", model_loader_extra_config={"enable_multithread_load": True,
                                                                       "num_threads": 4})
    else:
        lc = LoadConfig(load_format="auto", safetensors_load_strategy=strategy)
    loader = DefaultModelLoader(lc)
    seen, nbytes = set(), 0
    for name, t in loader.get_all_weights(model_config, torch.nn.Module()):
        assert name in ref, (strategy, name)
        assert name not in seen, (strategy, "twice", name)
        assert torch.equal(t, ref[name][1]) and t.dtype == ref[name][1].dtype, (strategy, name)
        seen.add(name)
        nbytes += t.numel() * t.element_size()
    assert seen == set(ref), (strategy, set(ref) - seen)
    return len(seen), nbytes


def prepare(model, revision, local):
    """_prepare_weights as DefaultModelLoader.download_model calls it: the folder, and exactly the index's shards."""
    import json
    from vllm.config.load import LoadConfig
    from vllm.model_executor.model_loader.default_loader import DefaultModelLoader
    folder, files, use_st, index = DefaultModelLoader(LoadConfig(load_format="auto"))._prepare_weights(
        model, None, revision, True, None)
    want = sorted(set(json.load(open(os.path.join(local, "model.safetensors.index.json")))["weight_map"].values()))
    assert use_st and index == "model.safetensors.index.json", (use_st, index)
    assert sorted(os.path.relpath(f, folder) for f in files) == want, (folder, files, want)
    assert all(f.startswith(folder + "/") for f in files), (folder, files)
    return folder, files


def model_config(model, revision, local, resolved=None):
    """vllm.config.ModelConfig: the config resolution `vllm serve` runs; the same as for the local folder. For a repo
    id it resolves the revision to a commit first (repo_utils.resolve_revision: offline, the cache's refs/<rev>)."""
    from vllm.config import ModelConfig
    t = time.monotonic()
    mc = ModelConfig(model=model, tokenizer=model, revision=revision, dtype="float32")
    secs = time.monotonic() - t
    lc = ModelConfig(model=local, tokenizer=local, dtype="float32")
    # get_all_weights reads these
    assert mc.model == model, mc.model
    if resolved is None:
        assert mc.revision == revision, mc.revision
    else:  # a huggingface_hub ResolvedRevision: the requested name as a str, .resolved the commit
        assert mc.revision == (revision or "main") and mc.revision.resolved == resolved, mc.revision
    assert mc.architectures == lc.architectures == ["Qwen2ForCausalLM"], (mc.architectures, lc.architectures)
    assert mc.max_model_len == lc.max_model_len, (mc.max_model_len, lc.max_model_len)
    assert config_dict(mc.hf_config) == config_dict(lc.hf_config)
    assert mc.get_diff_sampling_param() == lc.get_diff_sampling_param(), "generation_config.json differs"
    gen = mc.try_get_generation_config()
    assert gen == lc.try_get_generation_config() and gen, gen
    return mc, secs


def tokenizer(model, revision, local):
    from vllm.tokenizers import get_tokenizer
    tok = get_tokenizer(model, revision=revision)
    ref = get_tokenizer(local)
    ids = tok.encode(PROMPT)
    assert ids == ref.encode(PROMPT) and len(tok) == len(ref), (ids, ref.encode(PROMPT))
    assert tok.decode(ids) == ref.decode(ids)
    return type(tok).__name__, len(ids)


def check_local(mount, local):
    from vllm.transformers_utils import repo_utils
    from vllm.transformers_utils.config import checkpoint_has_lm_head, get_config, get_safetensors_params_metadata
    imports()

    files = repo_utils.list_repo_files(mount)
    assert sorted(files) == sorted(repo_utils.list_repo_files(local)), files
    assert repo_utils.file_or_path_exists(mount, "config.json", None)
    assert not repo_utils.file_or_path_exists(mount, "params.json", None)
    assert not repo_utils.file_or_path_exists(mount, "hf_quant_config.json", None)
    assert not repo_utils.is_mistral_model_repo(mount)
    assert repo_utils.try_get_local_file(mount, "tokenizer.json") is not None
    ok(f"vllm list_repo_files({mount}) (rglob + is_file): {len(files)} files, as the local folder; "
       "file_or_path_exists config.json yes, params.json / hf_quant_config.json no; not a Mistral repo")

    cfg = get_config(mount, trust_remote_code=False)
    assert config_dict(cfg) == config_dict(get_config(local, trust_remote_code=False))
    meta = get_safetensors_params_metadata(mount)
    assert meta == get_safetensors_params_metadata(local) and meta, "safetensors headers differ"
    meta = [k for k in meta if k != "__metadata__"]
    assert checkpoint_has_lm_head(mount) is True
    ok(f"vllm get_config({mount}): {cfg.model_type} {cfg.architectures[0]}, equal to the local folder's; "
       f"get_safetensors_params_metadata: {len(meta)} tensors' headers equal; checkpoint_has_lm_head")

    mc, secs = model_config(mount, None, local)
    ok(f"vllm ModelConfig(model={mount}) in {secs:.2f}s: {mc.architectures[0]}, max_model_len {mc.max_model_len}, "
       "hf_config, generation config and sampling defaults equal to the local folder's")

    name, n = tokenizer(mount, None, local)
    ok(f"vllm get_tokenizer({mount}): {name}, {n} token ids for the prompt, equal to the local folder's")

    folder, shards = prepare(mount, None, local)
    assert folder == mount, folder
    ok(f"vllm DefaultModelLoader._prepare_weights({mount}): glob + filter_duplicate_safetensors_files: "
       f"{len(shards)} shards, exactly the index's")

    ref = local_tensors(local)
    for s in STRATEGIES:
        n, nbytes = weights(s, ref, mc)
        ok(f"vllm get_all_weights -> safetensors weights iterator ({s or 'lazy (default)'}) over {len(shards)} "
           f"shards of {mount}: {n} tensors, {nbytes} bytes, all equal to the local folder's")


def check_hub(repo_id, rev1, local_v1, local_v2):
    import glob
    import huggingface_hub
    from vllm.model_executor.model_loader.weight_utils import download_weights_from_hf, get_lock
    from vllm.transformers_utils import repo_utils
    from vllm.transformers_utils.config import checkpoint_has_lm_head, get_config, get_safetensors_params_metadata
    imports()
    cache = os.environ["HF_HUB_CACHE"]
    assert huggingface_hub.constants.HF_HUB_OFFLINE and huggingface_hub.constants.HF_HUB_CACHE == cache
    tmp = os.environ["TMPDIR"]
    lock = get_lock(repo_id, None).lock_file
    assert lock.startswith(tmp + "/"), lock  # vLLM's lock goes to tempfile.gettempdir(), never the cache

    for rev, local in ((None, local_v2), (rev1, local_v1)):
        at = f"{repo_id}@{rev[:8] if rev else 'main'}"
        assert repo_utils.list_repo_files(repo_id, revision=rev) == []  # offline: OfflineModeIsEnabled -> []
        assert repo_utils.file_or_path_exists(repo_id, "config.json", rev)
        assert repo_utils.try_get_local_file(repo_id, "tokenizer.json", rev or "main") is not None
        cfg = get_config(repo_id, trust_remote_code=False, revision=rev)
        assert config_dict(cfg) == config_dict(get_config(local, trust_remote_code=False))
        meta = get_safetensors_params_metadata(repo_id, revision=rev)
        assert meta and meta == get_safetensors_params_metadata(local), "safetensors headers differ"
        meta = [k for k in meta if k != "__metadata__"]
        assert checkpoint_has_lm_head(repo_id, revision=rev) is True
        ok(f"vllm get_config({at}), HF_HUB_OFFLINE=1, HF_HUB_CACHE={cache}: {cfg.architectures[0]}, equal to the "
           f"local folder's; file_or_path_exists / try_get_local_file (try_to_load_from_cache); "
           f"get_safetensors_params_metadata (snapshot_download fallback): {len(meta)} tensors' headers equal")

        sha = rev or open(os.path.join(cache, "models--" + repo_id.replace("/", "--"), "refs", "main")).read()
        mc, secs = model_config(repo_id, rev, local, sha)
        ok(f"vllm ModelConfig(model={repo_id}, revision={rev[:8] if rev else None}) in {secs:.2f}s: revision resolved "
           f"to {sha[:8]}{'' if rev else ' (refs/main)'}, {mc.architectures[0]}, max_model_len {mc.max_model_len}, "
           "configs equal to the local folder's")

        name, n = tokenizer(repo_id, rev, local)
        ok(f"vllm get_tokenizer({at}): get_non_weight_snapshot_path (get_lock + snapshot_download offline), {name}, "
           f"{n} token ids, equal to the local folder's")

        folder = download_weights_from_hf(repo_id, None, ["*.safetensors", "*.bin"], rev)
        snap = os.path.join(cache, "models--" + repo_id.replace("/", "--"), "snapshots")
        assert os.path.dirname(folder) == snap and (rev is None or os.path.basename(folder) == rev), folder
        got, shards = prepare(repo_id, rev, local)
        assert got == folder, (got, folder)
        assert len(glob.glob(os.path.join(folder, "*.safetensors"))) == len(shards)
        ok(f"vllm download_weights_from_hf + DefaultModelLoader._prepare_weights({at}): "
           f"snapshots/{os.path.basename(folder)[:8]}, {len(shards)} shards, exactly the index's")

        ref = local_tensors(local)
        for s in STRATEGIES:
            n, nbytes = weights(s, ref, mc)
            ok(f"vllm get_all_weights -> safetensors weights iterator ({s or 'lazy (default)'}) over {len(shards)} "
               f"shards of {at}: {n} tensors, {nbytes} bytes, all equal to the local folder's")
    assert os.path.exists(lock), lock
    ok(f"vllm's weight_utils.get_lock file is in TMPDIR ({os.path.basename(lock)[:16]}...), not in the read-only hub")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "local":
        check_local(*args)
    elif cmd == "hub":
        check_hub(*args)
    else:
        sys.exit(f"vllm_check.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
