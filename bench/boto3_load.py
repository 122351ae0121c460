#!/usr/bin/env python3
"""boto3_load.py BUCKET PREFIX DEST KEY... - boto3's row of the peer table (bench_peers.py), one script the way a
user writes it: S3.Client.download_file for each file of the model (default TransferConfig: HeadObject, then
ranged GETs on 10 threads above 8 MiB), one after the other, into DEST; then the same safetensors load as every
other row (st_loader.load) in the same process. Endpoint and keys from the environment (AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, ...). One JSON line: download_s, load_s, total_s (from the interpreter's start)."""
import json, os, sys, time

T0 = time.perf_counter()
import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_loader  # noqa: E402  (imports torch + safetensors)

bucket, prefix, dest, keys = sys.argv[1], sys.argv[2].strip("/"), sys.argv[3], sys.argv[4:]
s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
t = time.perf_counter()
for k in keys:
    path = os.path.join(dest, k)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    s3.download_file(bucket, f"{prefix}/{k}" if prefix else k, path)
t_dl = time.perf_counter()
n, b, _ = st_loader.load(dest)
end = time.perf_counter()
print(json.dumps({"tensors": n, "bytes": b, "download_s": round(t_dl - t, 3), "load_s": round(end - t_dl, 3),
                  "total_s": round(end - T0, 3)}))
