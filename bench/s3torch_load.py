#!/usr/bin/env python3
"""s3torch_load.py S3_URL... - the S3 connector for PyTorch's row of the peer table (bench_peers.py): each shard
read with S3Checkpoint's reader (its checkpoint API: an S3Reader, a file-like object over the mountpoint-s3
CRT client), then safetensors.torch.load on its bytes (tensors in anonymous memory, nothing lazy). Path-style
requests (force_path_style), endpoint and keys from the environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY; never argv). One JSON line like st_loader.py's."""
import json, os, sys, time

T0 = time.perf_counter()
import torch  # noqa: E402,F401
from safetensors.torch import load  # noqa: E402
from s3torchconnector import S3Checkpoint, S3ClientConfig  # noqa: E402

T_IMPORT = time.perf_counter()
t = time.perf_counter()
ckpt = S3Checkpoint(region="us-east-1", endpoint=os.environ["AWS_ENDPOINT_URL"],
                    s3client_config=S3ClientConfig(force_path_style=True))
n = nbytes = 0
for url in sys.argv[1:]:
    with ckpt.reader(url) as r:
        sd = load(r.read())
    for tensor in sd.values():
        n += 1
        nbytes += tensor.numel() * tensor.element_size()
    del sd
end = time.perf_counter()
print(json.dumps({"tensors": n, "bytes": nbytes, "import_s": round(T_IMPORT - T0, 3),
                  "load_s": round(end - t, 3), "total_s": round(end - T0, 3)}))
