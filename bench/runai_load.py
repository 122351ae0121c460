#!/usr/bin/env python3
"""runai_load.py S3_URL... - Run:ai Model Streamer's row of the peer table (bench_peers.py): the shards, given as
explicit s3://bucket/key URLs (vLLM lists the prefix first; a static server cannot list), streamed into CPU
tensors with SafetensorsStreamer.stream_files, every tensor taken from get_tensors (owned: each is the caller's,
in anonymous memory, nothing left to read). Configured from the environment only, as vLLM's docs describe for
an S3-compatible endpoint: AWS_ENDPOINT_URL, RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING=0,
AWS_EC2_METADATA_DISABLED=true, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, and RUNAI_STREAMER_CONCURRENCY when set
(what vLLM's --model-loader-extra-config '{"concurrency": N}' sets). One JSON line like st_loader.py's."""
import json, sys, time

T0 = time.perf_counter()
import torch  # noqa: E402,F401
from runai_model_streamer import SafetensorsStreamer  # noqa: E402

T_IMPORT = time.perf_counter()
urls = sys.argv[1:]
n = nbytes = 0
t = time.perf_counter()
with SafetensorsStreamer() as s:
    s.stream_files(urls, device="cpu")
    for name, tensor in s.get_tensors():
        n += 1
        nbytes += tensor.numel() * tensor.element_size()
end = time.perf_counter()
print(json.dumps({"tensors": n, "bytes": nbytes, "import_s": round(T_IMPORT - T0, 3),
                  "load_s": round(end - t, 3), "total_s": round(end - T0, 3)}))
