#!/usr/bin/env python3
"""report.py RESULTS_DIR OUT_MD OUT_PNG - bench/results/latest.md (the tables) and a gnuplot chart of wall and
CPU seconds per GiB per tool, from what bench_nginx.sh and the other benchmarks left in RESULTS_DIR."""
import json, os, platform, subprocess, sys, time

res, out_md, out_png = sys.argv[1:4]
ref = json.load(open(os.path.join(res, "ref.json")))
mem = json.load(open(os.path.join(res, "mem.json"))) if os.path.exists(os.path.join(res, "mem.json")) else []
L = []
L.append("# hfs3 benchmark results (`make bench`)\n")
L.append(f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, kernel {platform.release()}. "
         f"Reproduce: `make bench` (BENCH_ROUNDS={ref['rounds']}, BENCH_GIB={ref['gib']:.0f}).\n")
L.append(f"## Cold download from nginx (reference server), {ref['gib']:.2f} GiB in {ref['files']} files\n")
L.append(f"Median of {ref['rounds']} interleaved rounds (min-max in brackets); CPU = user + system of the client's "
         f"whole process tree ({ref['cpu_source']}); `x curl` / `x fetch`: median of the per-round ratios.\n")
L.append("| tool | writes the files | wall s/GiB | CPU s/GiB | x curl (wall) | x fetch (wall) |")
L.append("|---|---|---|---|---|---|")
for r in ref["rows"]:
    writes = r["writes"] if isinstance(r["writes"], str) else "yes" if r["writes"] else "no (/dev/null)"
    L.append(f"| {r['tool']} | {writes} | {r['wall_per_gib']:.2f} "
             f"({r['wall_min']:.2f}-{r['wall_max']:.2f}) | {r['cpu_per_gib']:.2f} ({r['cpu_min']:.2f}-{r['cpu_max']:.2f}) "
             f"| {r['x_curl']:.2f}x | {r['x_fetch']:.2f}x |")
if "cpu_floor" in ref:
    fetch_cpu = next(r["cpu_per_gib"] for r in ref["rows"] if r["tool"].startswith("hfs3-manifest fetch"))
    L.append(f"\nThe CPU floor of a verified download before it writes a byte, each byte received (curl to /dev/null) "
             f"and hashed (sha256 alone) once, summed per round: {ref['cpu_floor']:.2f} CPU-s/GiB; `fetch`, which also "
             f"writes and flushes every byte, spends {fetch_cpu:.2f} ({fetch_cpu / ref['cpu_floor']:.2f}x that floor).\n")
if "overlap" in ref:
    L.append("\nA cold load against the download and the same loader's warm load one after the other (`fetch` wall + "
             "warm-load wall, per round; below 1: that much of the loader's own work overlapped the download): " +
             ", ".join(f"{k} {v:.2f}x" for k, v in ref["overlap"].items()) + ".\n")
if "floor" in ref:
    L.append("The floor of a cold load when each file is verified whole before it opens: the download (`fetch`) and "
             f"then the loader's work on the last file it reads (`{ref['last_file']}`, its share of the warm load by "
             "size), which no download can overlap. Per round: " +
             "; ".join(f"{k}: the floor is {v['floor_x_fetch']:.2f}x fetch, the cold load {v['cold_x_floor']:.2f}x the floor"
                       for k, v in ref["floor"].items()) + ".\n")
L.append(f"\nFirst open to first byte of the first shard (mmap loader): {ref['mmap_first_byte_s']:.3f} s "
         f"(its shard is {ref['shard_bytes'] / 2**20:.0f} MiB); the Python loader's time to first byte from its "
         f"start: {ref['py_ttfb_s']:.3f} s.\n")
if mem:
    L.append("## Peak memory (RSS)\n")
    L.append("| model | `fetch` | cold load through the shim (mmap loader) | same loader, local copy, no shim | shim adds |")
    L.append("|---|---|---|---|---|")
    for m in mem:
        L.append(f"| {m['model']} | {m['fetch_mib']:.1f} MiB | {m['load_shim_mib']:.1f} MiB | {m['load_plain_mib']:.1f} MiB "
                 f"| {m['shim_minus_plain_mib']:.1f} MiB |")
    L.append("")
for name, title in [("shim.txt", "The shim outside its mounts"), ("node.txt", "Against the local Node S3 server"),
                    ("hash.txt", "Hashing")]:
    p = os.path.join(res, name)
    if os.path.exists(p):
        L.append(f"## {title}\n\n```\n{open(p).read().strip()}\n```\n")
L.append(f"![wall and CPU seconds per GiB per tool]({os.path.basename(out_png)})\n")
open(out_md, "w").write("\n".join(L))

dat = os.path.join(res, "chart.dat")
with open(dat, "w") as f:
    for r in ref["rows"]:
        label = r["tool"].replace("curl, 8 ranged GETs per file, to /dev/null", "curl to /dev/null")
        label = label.replace("curl, 1 GET per file, writing the files", "curl writing")
        label = label.replace("cold load through the shim: ", "shim cold: ")
        label = label.replace("warm load through the shim (all cached): ", "shim warm: ").split(" (")[0].split(",")[0]
        f.write(f"\"{label}\" {r['wall_per_gib']:.3f} {r['cpu_per_gib']:.3f}\n")
gp = f"""set terminal pngcairo size 1000,520 font ',10'
set output '{out_png}'
set title '{ref["gib"]:.0f} GiB model from nginx: download, cold and warm loads, hashing and writing alone; median of {ref["rounds"]} rounds ({os.cpu_count()} cores)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set ylabel 'seconds per GiB'
set yrange [0:*]
set xtics rotate by -20 scale 0
set key top right
set grid ytics
plot '{dat}' using 2:xtic(1) title 'wall', '' using 3 title 'CPU (user+system)'
"""
try:
    subprocess.run(["gnuplot"], input=gp.encode(), check=True)
except (OSError, subprocess.CalledProcessError) as e:
    try:
        subprocess.run(["gnuplot"], input=gp.replace("pngcairo", "png").encode(), check=True)
    except (OSError, subprocess.CalledProcessError):
        print(f"report: no chart ({e})", file=sys.stderr)
print(f"report: wrote {out_md} and {out_png}")
