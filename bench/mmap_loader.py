#!/usr/bin/env python3
"""mmap_loader.py MODEL_DIR - the smallest loader: each *.safetensors shard in name order, opened, mmapped whole
and every page touched, then closed. One JSON line: first_byte_s (from the first open to the first byte of the
first shard in memory), load_s, bytes. Standard library only."""
import json, mmap, os, sys, time

root = sys.argv[1]
shards = sorted(f for f in os.listdir(root) if f.endswith(".safetensors"))
t0 = time.perf_counter()
first = None
total = 0
acc = 0
for name in shards:
    t_open = time.perf_counter()
    fd = os.open(os.path.join(root, name), os.O_RDONLY)
    size = os.fstat(fd).st_size
    with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as m:
        acc ^= m[0]
        if first is None:
            first = time.perf_counter() - t_open
        acc ^= sum(memoryview(m)[::4096]) & 0xFF
    os.close(fd)
    total += size
print(json.dumps({"shards": len(shards), "bytes": total, "first_byte_s": round(first or 0, 4),
                  "load_s": round(time.perf_counter() - t0, 3), "acc": acc}))
