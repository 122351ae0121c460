#!/usr/bin/env python3
"""st_loader.py MODEL_DIR - the load every row of the peer table ends with (bench_peers.py): the real safetensors
library, safe_open(framework="pt") and get_tensor for every tensor of every *.safetensors shard in name order,
each tensor then read into memory (one byte of every 4 KiB page: safetensors' pt tensors are lazy views of an
mmap of the file, and a tensor that was never read is not loaded). One JSON line: tensors, bytes, import_s
(interpreter start to torch + safetensors imported), load_s (the shards), total_s (from the interpreter's start).
Also importable: load(dir) -> (tensors, bytes), used by bench_peers' boto3 row in the same process."""
import json, os, sys, time

T0 = time.perf_counter()
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402

T_IMPORT = time.perf_counter()


def load(root):
    tensors = nbytes = 0
    acc = 0
    for name in sorted(f for f in os.listdir(root) if f.endswith(".safetensors")):
        with safe_open(os.path.join(root, name), framework="pt") as fh:
            for k in fh.keys():
                t = fh.get_tensor(k)
                u = t.reshape(-1).view(torch.uint8)
                if u.numel():
                    acc ^= int(u[::4096].sum())   # every page read (a minor fault from the page cache)
                tensors += 1
                nbytes += u.numel()
    return tensors, nbytes, acc


if __name__ == "__main__":
    t = time.perf_counter()
    n, b, acc = load(sys.argv[1])
    end = time.perf_counter()
    print(json.dumps({"tensors": n, "bytes": b, "acc": acc, "import_s": round(T_IMPORT - T0, 3),
                      "load_s": round(end - t, 3), "total_s": round(end - T0, 3)}))
