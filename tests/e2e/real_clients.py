#!/usr/bin/env python3
"""real_clients.py - the libraries users load models with, run for real (the project's .venv, requirements.txt):
transformers, tokenizers, safetensors, huggingface_hub, diffusers, sentence-transformers and torch.load. t_real_clients.sh runs each step on a local folder and
again through the shim, and compares.

  gen OUT --seed N            a tiny Qwen2 model made by transformers itself (from_config, fixed seed), saved with
                              save_pretrained in >= 3 safetensors shards + index, a tokenizer.json trained by the
                              tokenizers library, a generation_config.json
  hfcache REPO SRC1 SRC2      an HF cache repo folder (models--org--name) as huggingface_hub writes it: blobs/ (LFS
                              files by sha256, others by git sha1), snapshots/<rev>/ symlinks, refs/main -> rev of
                              SRC2; prints the two revisions
  generate MODEL OUT [REV] [+ MODEL OUT [REV] ...]
                              AutoConfig, AutoTokenizer, AutoModelForCausalLM.from_pretrained, greedy generation of 8
                              tokens; saves the token ids and the logits of every step (torch.save)
  same A B                    the two results of generate are identical (torch.equal)
  safetensors MODEL LOCAL     safe_open(framework="pt") + get_tensor of every tensor of every shard, and load_file,
                              each equal to the LOCAL folder's
  hub CACHE REPO_ID REV1 SRC1 SRC2   huggingface_hub 2.x offline on an HF cache: snapshot_download(local_files_only),
                              scan_cache_dir() with no warnings, try_to_load_from_cache, hf_hub_download offline
  more-gen OUT                diffusers (a DDPMPipeline: unet/, scheduler/), sentence-transformers (BERT + mean
                              pooling) and torch.save (.bin, .pt) models, tiny, made by the libraries themselves
  more MODEL LOCAL            each loaded from MODEL and from LOCAL: equal images (2 denoising steps), embeddings,
                              and torch.load of .bin and .pt with and without mmap=True
  onnx-gen OUT                an ONNX model (MatMul + Add, opset 17) saved by onnx with its weights as external data
                              (model.onnx + model.onnx.data, as every export over 2 GB is)
  onnx MODEL LOCAL            onnx.load (external data read with a raw openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS),
                              onnx.checker.check_model on the path, and an onnxruntime InferenceSession (which checks
                              through /proc/self/fd/N that the data file it opened is in the model's directory): each
                              equal to the LOCAL folder's
  CMD ARGS :: CMD ARGS ...    several commands in one process
"""
import hashlib, json, os, sys, warnings

PROMPT = "The quick brown fox"


def gen(out, seed):
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    text = ("The quick brown fox jumps over the lazy dog. " * 3
            + "hfs3 serves model weights from S3 through a preloaded shim, verified, cached on first open. ") * 30
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
    model = Qwen2ForCausalLM(cfg)
    model.save_pretrained(out, max_shard_size="200KB")
    fast.save_pretrained(out)
    # eos_token_id=[] would stop nothing; an id the model never emits first keeps all 8 tokens comparable
    GenerationConfig(do_sample=False, max_new_tokens=8, bos_token_id=1, eos_token_id=2).save_pretrained(out)
    shards = [n for n in os.listdir(out) if n.endswith(".safetensors")]
    assert len(shards) >= 3 and os.path.exists(os.path.join(out, "model.safetensors.index.json")), shards
    print(f"{out}: {len(shards)} shards")


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def hfcache(repo, src1, src2):
    """Both revisions into one repo folder; a revision's id is a sha1 of its file list (as a commit id is)."""
    revs = []
    for src in (src1, src2):
        files = {}
        for name in sorted(os.listdir(src)):
            data = open(os.path.join(src, name), "rb").read()
            lfs = name.endswith(".safetensors")
            files[name] = hashlib.sha256(data).hexdigest() if lfs else git_sha1(data)
            os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
            blob = os.path.join(repo, "blobs", files[name])
            if not os.path.exists(blob):
                with open(blob, "wb") as f:
                    f.write(data)
        rev = hashlib.sha1(json.dumps(files, sort_keys=True).encode()).hexdigest()
        snap = os.path.join(repo, "snapshots", rev)
        os.makedirs(snap, exist_ok=True)
        for name, blob in files.items():
            os.symlink(os.path.join("..", "..", "blobs", blob), os.path.join(snap, name))
        revs.append(rev)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(revs[1])  # huggingface_hub writes the ref without a newline
    print(*revs)


def generate(model_dir, out, revision=None):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(1)  # one thread: the same sums in the same order, so equal logits mean equal weights
    kw = {"revision": revision} if revision else {}
    cfg = AutoConfig.from_pretrained(model_dir, **kw)
    tok = AutoTokenizer.from_pretrained(model_dir, **kw)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, **kw)
    model.eval()
    ids = tok(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        res = model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False,
                             output_logits=True, return_dict_in_generate=True)
    new = res.sequences[0, ids.shape[1]:]
    assert new.numel() == 8, res.sequences
    torch.save({"model_type": cfg.model_type, "vocab": len(tok), "ids": res.sequences,
                "logits": torch.stack(res.logits)}, out)
    print(f"{model_dir}: {cfg.model_type}, generated {new.tolist()}")


def same(a, b):
    import torch
    x, y = torch.load(a), torch.load(b)
    assert x["model_type"] == y["model_type"] and x["vocab"] == y["vocab"], (x, y)
    assert torch.equal(x["ids"], y["ids"]), (x["ids"], y["ids"])
    assert torch.equal(x["logits"], y["logits"]), "logits differ"
    print("same token ids and logits:", x["ids"][0].tolist())


def check_safetensors(model_dir, local):
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file
    shards = sorted(n for n in os.listdir(model_dir) if n.endswith(".safetensors"))
    assert shards == sorted(n for n in os.listdir(local) if n.endswith(".safetensors")), shards
    tensors = 0
    for name in shards:
        with safe_open(os.path.join(model_dir, name), framework="pt") as f, \
                safe_open(os.path.join(local, name), framework="pt") as g:
            assert sorted(f.keys()) == sorted(g.keys()), name
            assert f.metadata() == g.metadata(), name
            for k in f.keys():
                assert torch.equal(f.get_tensor(k), g.get_tensor(k)), (name, k)
                tensors += 1
        a, b = load_file(os.path.join(model_dir, name)), load_file(os.path.join(local, name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    assert len(shards) >= 3 and tensors > 0, (shards, tensors)
    print(f"safetensors: {len(shards)} shards, {tensors} tensors equal (safe_open + get_tensor, load_file)")


def hub(cache, repo_id, rev1, src1, src2):
    from huggingface_hub import hf_hub_download, scan_cache_dir, snapshot_download, try_to_load_from_cache
    main = snapshot_download(repo_id, local_files_only=True)
    old = snapshot_download(repo_id, revision=rev1, local_files_only=True)
    assert main.startswith(cache) and old.endswith(rev1), (main, old)
    for snap, src in ((main, src2), (old, src1)):
        assert sorted(os.listdir(snap)) == sorted(os.listdir(src)), (snap, os.listdir(snap))
        for name in os.listdir(src):
            assert open(os.path.join(snap, name), "rb").read() == open(os.path.join(src, name), "rb").read(), name
    got = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache)
    assert got == os.path.join(main, "config.json"), got
    missing = try_to_load_from_cache(repo_id, "preprocessor_config.json", cache_dir=cache)
    assert missing is None, missing
    got = hf_hub_download(repo_id, "tokenizer.json", local_files_only=True)
    assert got == os.path.join(main, "tokenizer.json"), got
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        info = scan_cache_dir(cache)
    assert not info.warnings, info.warnings
    assert not caught, [str(w.message) for w in caught]
    repos = {r.repo_id: r for r in info.repos}
    assert repo_id in repos, repos
    r = repos[repo_id]
    assert {x.commit_hash for x in r.revisions} == {os.path.basename(main), rev1}, r.revisions
    assert r.refs.get("main") is not None and r.refs["main"].commit_hash == os.path.basename(main), r.refs
    print(f"huggingface_hub: snapshot_download main + {rev1[:8]}, try_to_load_from_cache, hf_hub_download, "
          f"scan_cache_dir: {len(info.repos)} repos, {r.nb_files} files, {r.size_on_disk} bytes, no warnings")


WORDS = "the quick brown fox jumps over lazy dog hfs3 serves model weights from s3 through a preloaded shim".split()
SENTENCES = ["the quick brown fox", "model weights from s3", "a preloaded shim serves the dog"]


def more_gen(out):
    """Tiny models made by the libraries themselves, no hub download: a diffusers pipeline (model_index.json,
    unet/ and scheduler/ subfolders), a sentence-transformers model (a BERT made by transformers, a WordPiece
    vocabulary written here, mean pooling) and torch.save files, pytorch_model.bin and model.pt."""
    import torch
    torch.manual_seed(7)
    from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel
    unet = UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16),
                       down_block_types=("DownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "UpBlock2D"),
                       norm_num_groups=4)
    DDPMPipeline(unet=unet, scheduler=DDPMScheduler(num_train_timesteps=10)).save_pretrained(os.path.join(out, "diffusers"))
    from transformers import BertConfig, BertModel, BertTokenizerFast
    from sentence_transformers import SentenceTransformer, models
    tmp = os.path.join(out, "bert-src")
    os.makedirs(tmp)
    with open(os.path.join(tmp, "vocab.txt"), "w") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
    BertTokenizerFast(os.path.join(tmp, "vocab.txt")).save_pretrained(tmp)
    BertModel(BertConfig(vocab_size=5 + len(WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(tmp)
    word = models.Transformer(tmp, max_seq_length=32)
    dim = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    SentenceTransformer(modules=[word, models.Pooling(dim(), "mean")]).save(
        os.path.join(out, "sentence"))
    import shutil
    shutil.rmtree(tmp)
    sd = {"w": torch.randn(64, 32), "b": torch.randn(64), "step": torch.tensor(3)}
    os.makedirs(os.path.join(out, "torch"))
    torch.save(sd, os.path.join(out, "torch", "pytorch_model.bin"))
    torch.save({"state_dict": sd, "epoch": 2}, os.path.join(out, "torch", "model.pt"))
    print(f"{out}: diffusers, sentence-transformers, torch.save")


def more_check(mount, local):
    """Each of more_gen's models loaded by its library from mount and from local: equal results."""
    import torch
    torch.set_num_threads(1)
    from diffusers import DDPMPipeline
    out = []
    imgs = []
    for d in (mount, local):
        pipe = DDPMPipeline.from_pretrained(os.path.join(d, "diffusers"))
        imgs.append(pipe(generator=torch.Generator().manual_seed(0), num_inference_steps=2, output_type="np").images)
    assert imgs[0].shape == imgs[1].shape and (imgs[0] == imgs[1]).all(), "diffusers: images differ"
    sub = sorted(os.listdir(os.path.join(mount, "diffusers")))
    assert sub == sorted(os.listdir(os.path.join(local, "diffusers"))) and "unet" in sub and "scheduler" in sub, sub
    out.append(f"diffusers DDPMPipeline.from_pretrained ({', '.join(sub)}): equal {imgs[0].shape} images")
    from sentence_transformers import SentenceTransformer
    emb = [SentenceTransformer(os.path.join(d, "sentence"), device="cpu").encode(SENTENCES, convert_to_tensor=True)
           for d in (mount, local)]
    assert torch.equal(emb[0], emb[1]), "sentence-transformers: embeddings differ"
    out.append(f"sentence-transformers encode: equal {tuple(emb[0].shape)} embeddings")
    n = 0
    for name in ("pytorch_model.bin", "model.pt"):
        for mm in (False, True):
            a = torch.load(os.path.join(mount, "torch", name), mmap=mm, weights_only=True)
            b = torch.load(os.path.join(local, "torch", name), weights_only=True)
            sa, sb = a.get("state_dict", a), b.get("state_dict", b)
            assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa), (name, mm)
            n += 1
    out.append(f"torch.load of .bin and .pt, with and without mmap=True: {n} loads equal")
    print("; ".join(out))


def onnx_gen(out):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "B"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    os.makedirs(out, exist_ok=True)
    onnx.save_model(model, os.path.join(out, "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx.data", size_threshold=0)


def onnx_check(model_dir, local):
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    def load(d):
        m = onnx.load(os.path.join(d, "model.onnx"))
        onnx.checker.check_model(os.path.join(d, "model.onnx"))
        s = ort.InferenceSession(os.path.join(d, "model.onnx"), providers=["CPUExecutionProvider"])
        x = (np.arange(64, dtype=np.float32).reshape(1, 64) - 32) / 16
        return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}, s.run(None, {"x": x})[0]
    mt, my = load(model_dir)
    lt, ly = load(local)
    assert sorted(mt) == sorted(lt) == ["B", "W"], (sorted(mt), sorted(lt))
    assert all(np.array_equal(mt[k], lt[k]) for k in lt), "onnx.load: the external data differ"
    assert np.array_equal(my, ly), "onnxruntime: the outputs differ"
    print(f"onnx {onnx.__version__}: onnx.load + check_model, onnxruntime {ort.__version__} InferenceSession of a model "
          f"with external data: {len(lt)} initializers and the output ({my.size} values) equal the local folder's")


def main():
    # "CMD ARGS :: CMD ARGS ...": several commands in one process (the imports cost more than the tiny models)
    argv = sys.argv[1:]
    while "::" in argv:
        i = argv.index("::")
        run(argv[0], argv[1:i])
        argv = argv[i + 1:]
    run(argv[0], argv[1:])


def run(cmd, args):
    if cmd == "gen":
        gen(args[0], int(args[2]) if len(args) > 2 else 1234)
    elif cmd == "hfcache":
        hfcache(*args)
    elif cmd == "generate":  # several loads in one process: the imports cost more than a tiny model's load
        job = []
        for a in args + ["+"]:
            if a == "+":
                generate(*job)
                job = []
            else:
                job.append(a)
    elif cmd == "same":
        same(*args)
    elif cmd == "safetensors":
        check_safetensors(*args)
    elif cmd == "hub":
        hub(*args)
    elif cmd == "more-gen":
        more_gen(*args)
    elif cmd == "more":
        more_check(*args)
    elif cmd == "onnx-gen":
        onnx_gen(*args)
    elif cmd == "onnx":
        onnx_check(*args)
    else:
        sys.exit(f"real_clients.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
