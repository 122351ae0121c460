#!/usr/bin/env python3
"""verify_scale.py SIZE_MIB ROUNDS OUT_JSON - the verification throughput of one file (issue 21): its 8 MiB chunk
digests computed by 1 and by 2 threads (each thread hashes whole chunks, as fetch's receiving threads do with the
bytes still hot), against one sha256 stream over the whole file, which no number of cores makes faster.
OpenSSL's SHA-256 through hashlib (the helper's is OpenSSL's too; hashlib releases the GIL on large buffers). The
bytes are in memory, as they are when a range arrives. Interleaved rounds, median."""
import hashlib, json, os, statistics, sys, time
from concurrent.futures import ThreadPoolExecutor

size, rounds, out = int(sys.argv[1]) << 20, int(sys.argv[2]), sys.argv[3]
CHUNK = 8 << 20
buf = memoryview(bytearray(os.urandom(1 << 20)) * (size >> 20))
chunks = [buf[o:o + CHUNK] for o in range(0, size, CHUNK)]


def chunked(threads):
    t = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(lambda c: hashlib.sha256(c).digest(), chunks))
    return time.perf_counter() - t


def whole():
    t = time.perf_counter()
    hashlib.sha256(buf).digest()
    return time.perf_counter() - t


res = {"1": [], "2": [], "whole": []}
for _ in range(rounds):
    res["1"].append(chunked(1))
    res["2"].append(chunked(2))
    res["whole"].append(whole())
gb = size / 1e9
med = statistics.median
summary = {"size_mib": size >> 20, "rounds": rounds, "cpus": os.cpu_count(),
           "gbps_1": gb / med(res["1"]), "gbps_2": gb / med(res["2"]), "gbps_whole": gb / med(res["whole"]),
           "x_2_over_1": med([a / b for a, b in zip(res["1"], res["2"])])}
json.dump(summary, open(out, "w"), indent=1)
print(f"verification of one {size >> 20} MiB file, 8 MiB chunk digests, median of {rounds} rounds on "
      f"{os.cpu_count()} CPUs: 1 thread {summary['gbps_1']:.2f} GB/s, 2 threads {summary['gbps_2']:.2f} GB/s "
      f"({summary['x_2_over_1']:.2f}x; target 1.8x); one whole-file sha256 stream {summary['gbps_whole']:.2f} GB/s")
