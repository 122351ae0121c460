#!/usr/bin/env python3
"""gen_model.py - generate model folders shaped like Hugging Face downloads, for tests, the demo and benches.

  gen_model.py flat DIR [--shards MB,MB,...] [--seed N]
      a `hf download --local-dir` folder: config.json, tokenizer.json, generation_config.json,
      model-0000i-of-0000n.safetensors shards (valid safetensors files), model.safetensors.index.json, and the
      .cache/huggingface/download/*.metadata bookkeeping huggingface_hub writes.
  gen_model.py hf-cache DIR [--shards MB,...] [--seed N]
      an HF cache repo folder models--org--name: blobs/ (LFS files named by sha256, small files by git sha1),
      snapshots/<rev1>/ and snapshots/<rev2>/ (symlinks ../../blobs/x; the revisions share the shards and differ
      in config.json), refs/main -> rev2.
Only the standard library; deterministic for a seed.
"""
import argparse, hashlib, json, os, random, struct, sys, time


def tensor_bytes(rng, nbytes):
    # random bytes, fast: repeat a random 1 MiB block with a varying counter so shards still hash uniquely
    block = rng.randbytes(1 << 20)
    out = bytearray()
    i = 0
    while len(out) < nbytes:
        out += struct.pack("<Q", i) + block[8:]
        i += 1
    return bytes(out[:nbytes])


def safetensors(rng, name_prefix, mb):
    """A valid safetensors file of about mb MiB: one F32 tensor per 16 MiB chunk."""
    total = max(1, int(mb * (1 << 20)))
    chunk = 16 << 20
    header, offset, names = {}, 0, []
    i = 0
    while offset < total:
        n = min(chunk, total - offset)
        n -= n % 4
        if n == 0:
            break
        name = f"{name_prefix}.layers.{i}.weight"
        header[name] = {"dtype": "F32", "shape": [n // 4], "data_offsets": [offset, offset + n]}
        names.append(name)
        offset += n
        i += 1
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + tensor_bytes(rng, offset), names


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def model_files(rng, shards):
    files = {}
    files["config.json"] = json.dumps({"architectures": ["HfsTestForCausalLM"], "model_type": "hfs3test",
                                       "hidden_size": 64, "num_hidden_layers": len(shards),
                                       "torch_dtype": "float32"}, indent=2).encode() + b"\n"
    files["generation_config.json"] = b'{\n  "do_sample": false\n}\n'
    files["tokenizer.json"] = json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {
        f"tok{i}": i for i in range(2000)}}}).encode()
    weight_map = {}
    n = len(shards)
    for i, mb in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        data, names = safetensors(rng, f"model.{i}", mb)
        files[fname] = data
        for t in names:
            weight_map[t] = fname
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": sum(len(files[f]) for f in files if f.endswith(".safetensors"))},
         "weight_map": weight_map}, indent=2, sort_keys=True).encode() + b"\n"
    return files


def is_lfs(name):
    return name.endswith(".safetensors") or name == "tokenizer.json"


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def gen_flat(d, shards, seed):
    rng = random.Random(seed)
    commit = hashlib.sha1(b"commit%d" % seed).hexdigest()
    files = model_files(rng, shards)
    for name, data in files.items():
        write(os.path.join(d, name), data)
        etag = hashlib.sha256(data).hexdigest() if is_lfs(name) else git_sha1(data)
        write(os.path.join(d, ".cache/huggingface/download", name + ".metadata"),
              f"{commit}\n{etag}\n{time.time()}\n".encode())  # written after the file, as huggingface_hub does
    write(os.path.join(d, ".cache/huggingface/.gitignore"), b"*\n")


def gen_cache(d, shards, seed):
    rng = random.Random(seed)
    files = model_files(rng, shards)
    revs = [hashlib.sha1(b"rev1-%d" % seed).hexdigest(), hashlib.sha1(b"rev2-%d" % seed).hexdigest()]
    for r, rev in enumerate(revs):
        snap = dict(files)
        if r == 1:  # the second revision changes config.json, shares everything else
            cfg = json.loads(files["config.json"])
            cfg["revision_note"] = "second"
            snap["config.json"] = json.dumps(cfg, indent=2).encode() + b"\n"
        for name, data in snap.items():
            blob = hashlib.sha256(data).hexdigest() if is_lfs(name) else git_sha1(data)
            bp = os.path.join(d, "blobs", blob)
            if not os.path.exists(bp):
                write(bp, data)
            link = os.path.join(d, "snapshots", rev, name)
            os.makedirs(os.path.dirname(link), exist_ok=True)
            if os.path.lexists(link):
                os.unlink(link)
            os.symlink("../../blobs/" + blob, link)
    write(os.path.join(d, "refs", "main"), revs[1].encode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layout", choices=["flat", "hf-cache"])
    ap.add_argument("dir")
    ap.add_argument("--shards", default="1,1", help="shard sizes in MiB, comma-separated")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    shards = [float(x) for x in a.shards.split(",")]
    (gen_flat if a.layout == "flat" else gen_cache)(a.dir, shards, a.seed)


if __name__ == "__main__":
    sys.exit(main())
