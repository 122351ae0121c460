#!/usr/bin/env python3
"""tensorizer_load.py s3://BUCKET/KEY - Tensorizer's row of the peer table (bench_peers.py): the model serialized
once into Tensorizer's format (tensorizer_convert.py), streamed from the server with open_stream (Tensorizer's own
S3 reader: a presigned GET through libcurl) into TensorDeserializer, device "cpu", every tensor loaded (lazy_load
off: the default), its reader count left to Tensorizer (num_readers=None: its own choice). Endpoint and keys from
the environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; never argv). One JSON line like
st_loader.py's."""
import json, os, sys, time

T0 = time.perf_counter()
import torch  # noqa: E402,F401
from tensorizer import TensorDeserializer, stream_io  # noqa: E402

T_IMPORT = time.perf_counter()
t = time.perf_counter()
stream = stream_io.open_stream(sys.argv[1], "rb", s3_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                               s3_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                               s3_endpoint=os.environ["AWS_ENDPOINT_URL"], force_http=True)   # plain http: a loopback server
n = nbytes = 0
with TensorDeserializer(stream, device="cpu") as d:
    for name, tensor in d.items():
        n += 1
        nbytes += tensor.numel() * tensor.element_size()
end = time.perf_counter()
print(json.dumps({"tensors": n, "bytes": nbytes, "import_s": round(T_IMPORT - T0, 3),
                  "load_s": round(end - t, 3), "total_s": round(end - T0, 3)}))
