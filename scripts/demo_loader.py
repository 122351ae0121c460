#!/usr/bin/env python3
"""demo_loader.py MODEL_DIR - loads a model folder the way vLLM does, standing in for it: isdir, rglob + is_file,
config.json, the safetensors index, then each shard's header and an mmap of its data with every page touched.
Prints time to first byte, load time and throughput as one JSON line. Standard library only."""
import json, mmap, os, struct, sys, time
from pathlib import Path

t0 = time.perf_counter()
root = sys.argv[1]
assert os.path.isdir(root), f"{root} is not a directory"
files = [p for p in Path(root).rglob("*") if p.is_file()]
shards = sorted(str(p) for p in files if p.name.endswith(".safetensors"))
config = json.load(open(os.path.join(root, "config.json")))
index = json.load(open(os.path.join(root, "model.safetensors.index.json")))
assert set(os.path.join(root, f) for f in index["weight_map"].values()) == set(shards), "index/shard mismatch"
ttfb = None
total = tensors = 0
checksum = 0
for path in shards:
    with open(path, "rb") as f:
        (hlen,) = struct.unpack("<Q", f.read(8))
        if ttfb is None:
            ttfb = time.perf_counter() - t0
        header = json.loads(f.read(hlen))
        size = os.path.getsize(path)
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            for name, t in header.items():
                if name == "__metadata__":
                    continue
                a, b = t["data_offsets"]
                start = 8 + hlen + a
                view = memoryview(m)[start:8 + hlen + b]
                # touch every page like a GPU upload would read it
                checksum ^= sum(view[::4096]) & 0xFFFF
                view.release()
                tensors += 1
        total += size
elapsed = time.perf_counter() - t0
print(json.dumps({"model_type": config.get("model_type"), "files": len(files), "shards": len(shards),
                  "tensors": tensors, "bytes": total, "ttfb_s": round(ttfb or 0, 4),
                  "load_s": round(elapsed, 3), "MBps": round(total / elapsed / 1e6, 1), "checksum": checksum}))
