#!/usr/bin/env python3
"""tensorizer_convert.py MODEL_DIR OUT.tensors - the step a Tensorizer user pays once: the model's safetensors
shards loaded and written into one Tensorizer file with TensorSerializer.write_state_dict (its documented way
for a state dict). Prints one JSON line: convert_s (load + serialize), bytes written."""
import json, os, sys, time

import torch  # noqa: F401
from safetensors.torch import load_file
from tensorizer import TensorSerializer

model, out = sys.argv[1:3]
t = time.perf_counter()
sd = {}
for name in sorted(f for f in os.listdir(model) if f.endswith(".safetensors")):
    sd.update(load_file(os.path.join(model, name)))
s = TensorSerializer(out)
s.write_state_dict(sd)
s.close()
print(json.dumps({"convert_s": round(time.perf_counter() - t, 3), "bytes": os.path.getsize(out)}))
