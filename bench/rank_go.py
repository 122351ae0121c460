#!/usr/bin/env python3
"""rank_go.py WORLD SRC [S3_URL...] - WORLD ranks started together, the tensor-parallel pattern of the eight-rank
table (bench_ranks.py): vLLM's loader in each rank opens every shard with safe_open (an mmap of the file) and
takes its own slice of every tensor with get_slice. Rank r takes rows [r*n/WORLD, (r+1)*n/WORLD) of the first
dimension of every tensor (a scalar whole), each slice's pages read.
SRC is a model folder, or --runai: each rank streams every shard whole with Run:ai Model Streamer (it cannot read
part of a tensor) and keeps its slice of each; or --runai-dist: the ranks first join one torch.distributed group
(gloo: the backend there is without a GPU; NCCL needs CUDA) and Run:ai's distributed mode (RUNAI_STREAMER_DIST=1,
is_distributed=True) splits the reads among them and broadcasts the rest.
The ranks are forked after this process has imported torch and the loader once (8 interpreters importing torch
side by side take minutes on the 2-core VM, and say nothing about loading); each is its own process with its own
descriptors and mappings, as vLLM's workers are. One JSON line: bytes (all ranks' slices), load_s (from the
forks to the last rank's slices in memory), ranks_load_s (each rank's own), import_s, total_s."""
import json, os, sys, time

T0 = time.perf_counter()
world, src, urls = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
import torch  # noqa: E402
if src.startswith("--runai"):
    from runai_model_streamer import SafetensorsStreamer  # noqa: E402
    if src == "--runai-dist":
        import torch.distributed as dist  # noqa: E402
else:
    from safetensors import safe_open  # noqa: E402
T_IMPORT = time.perf_counter()


def load(rank):
    t = time.perf_counter()
    n = nbytes = acc = 0

    def part(rows):
        return rows * rank // world, rows * (rank + 1) // world

    if src.startswith("--runai"):
        if src == "--runai-dist":
            dist.init_process_group("gloo", rank=rank, world_size=world)
        with SafetensorsStreamer() as s:
            s.stream_files(urls, device="cpu", is_distributed=src == "--runai-dist")
            for name, tensor in s.get_tensors():
                if tensor.dim():
                    a, b = part(tensor.shape[0])
                    tensor = tensor[a:b].clone()
                n += 1
                nbytes += tensor.numel() * tensor.element_size()
    else:
        for name in sorted(f for f in os.listdir(src) if f.endswith(".safetensors")):
            with safe_open(os.path.join(src, name), framework="pt") as fh:
                for k in fh.keys():
                    sl = fh.get_slice(k)
                    shape = sl.get_shape()
                    if shape:
                        a, b = part(shape[0])
                        x = sl[a:b]
                    else:
                        x = fh.get_tensor(k)
                    u = x.reshape(-1).view(torch.uint8)
                    if u.numel():
                        acc ^= int(u[::4096].sum())   # every page read
                    n += 1
                    nbytes += u.numel()
    return {"rank": rank, "tensors": n, "bytes": nbytes, "acc": acc, "load_s": round(time.perf_counter() - t, 3)}


t = time.perf_counter()
kids = []
for r in range(world):
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        code = 0
        try:
            out = json.dumps(load(r)) + "\n"
        except BaseException as e:   # said on stderr, and the parent sees no line
            print(f"rank_go: rank {r}: {type(e).__name__}: {e}", file=sys.stderr)
            out, code = "", 1
        os.write(wr, out.encode())
        os._exit(code)
    os.close(wr)
    kids.append((pid, rd))
outs = []
for pid, rd in kids:
    # a rank is done when it has its slices and says so, not when it has exited; read in rank order, the last
    # line read marks the last rank done
    with os.fdopen(rd) as f:
        line = f.readline().strip()
    if not line:
        sys.exit(f"rank_go: a rank failed ({os.waitpid(pid, 0)[1]})")
    outs.append(json.loads(line))
end = time.perf_counter()
for pid, rd in kids:
    if os.waitpid(pid, 0)[1] != 0:
        sys.exit("rank_go: a rank failed after its slices")
print(json.dumps({"ranks": world, "bytes": sum(o["bytes"] for o in outs), "load_s": round(end - t, 3),
                  "ranks_load_s": [o["load_s"] for o in outs], "import_s": round(T_IMPORT - T0, 3),
                  "total_s": round(time.perf_counter() - T0, 3)}))
