#!/usr/bin/env python3
"""report.py RESULTS_DIR OUT_MD OUT_PNG - bench/results/latest.md (the tables) and a gnuplot chart of wall and
CPU seconds per GiB per tool, from what bench_nginx.sh and the other benchmarks left in RESULTS_DIR."""
import json, os, platform, subprocess, sys, time

res, out_md, out_png = sys.argv[1:4]
ref = json.load(open(os.path.join(res, "ref.json")))
mem = json.load(open(os.path.join(res, "mem.json"))) if os.path.exists(os.path.join(res, "mem.json")) else []
# the eight-rank tables (bench_ranks.py), by size
ranks = sorted((json.load(open(os.path.join(res, f))) for f in os.listdir(res)
                if f.startswith("ranks-") and f.endswith(".json")), key=lambda p: p["gib"])
# the peer tables (bench_peers.py): nginx first, then RGW, each by size
peers = sorted((json.load(open(os.path.join(res, f))) for f in os.listdir(res)
                if f.startswith("peers-") and f.endswith(".json")),
               key=lambda p: (p["server"] != "nginx", p["gib"]))
# the fleet tables (bench_fleet.py), by node count
fleets = sorted((json.load(open(os.path.join(res, f))) for f in os.listdir(res)
                 if f.startswith("fleet-") and f.endswith(".json")), key=lambda p: p["nodes"])
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
if "targets" in ref:
    t = ref["targets"]
    short = lambda k: k.split(", ", 1)[1].split(" (")[0] if ", " in k else "default"
    L.append("\nIssue 21's targets (medians of per-round ratios to tools of the same round): `fetch` wall / rclone copy "
             "(target 0.8x or less): " + ", ".join(f"{short(k)} {v:.2f}x" for k, v in t["fetch_x_rclone"].items()) +
             "; `fetch` CPU / the floor (target 1.15x or less): " +
             ", ".join(f"{short(k)} {v:.2f}x" for k, v in t["fetch_cpu_x_floor"].items()) +
             "; cold load / (rclone copy + warm load) (target 0.75x or less): " +
             ", ".join(f"{k} {v:.2f}x" for k, v in t["cold_x_rclone_warm"].items()) + ".\n")
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
if peers:
    L.append("## Compared with the loaders a user would pick instead (peer table)\n")
    L.append("Run:ai Model Streamer streams the shards into CPU tensors; boto3, awscli and rclone download the model "
             "into a fresh local folder and then the same safetensors load runs on it (`bench/st_loader.py`: "
             "`safe_open(framework=\"pt\")` + `get_tensor` for every tensor, each tensor's pages read, since "
             "safetensors' tensors are lazy views of an mmap); hfs3 runs that load through the shim, from an empty "
             "cache (cold) and with everything cached (warm). Each row is one process tree, timed from its start to "
             "the last tensor in memory (a download-then-load row: download + load). Every row of a table reads "
             "the same objects from the same server in the same interleaved rounds; each run starts after a "
             "`sync`, from an empty destination folder or cache; the page cache is not dropped (the server "
             "reads from memory in every row). `x` columns: median of the per-round ratios. \"w/o imports\": "
             "the same run less the Python interpreter's start and its torch / safetensors / Run:ai imports "
             "(what the process reports), which every Python row pays before its first byte and which on this "
             "VM is a large fixed part of a 1 GiB load.\n")
    L.append("Servers. **nginx** (static files; the reference server above) for every client that needs only GET, "
             "HEAD and Range: Run:ai Model Streamer 0.17.1's CRT client works against it when given explicit object "
             "URLs (path style; it sends only ranged GETs: two small ones for each header, then 8 MiB pieces; no "
             "HEAD, no listing). `aws s3 cp --recursive` needs ListObjectsV2, which a static server has not, so it "
             "runs only in the **Ceph RGW** table (a real S3 API, scripts/rgwenv.sh, memstore), where every row "
             "runs again against RGW. rclone reads nginx through its http backend (autoindex) and RGW through its "
             "s3 backend.\n")
    L.append("Issue 31's rows: rclone mount (`--read-only`, `--vfs-cache-mode full` and `off`) and s3fs (`-o ro`, "
             "with and without `-o use_cache=DIR`; RGW only) run the same load on the mount, cold on a fresh mount "
             "with an empty cache and warm on the same mount right after (the mount is up before the row starts; "
             "its process's CPU during the run is added to the row's); Tensorizer streams the model serialized "
             "once into its format into CPU tensors (the conversion beside the table); the S3 connector for "
             "PyTorch reads each shard with its S3Checkpoint reader, then `safetensors.torch.load` (RGW only). "
             "Mountpoint for S3 is in neither Debian nor PyPI: no row (docs/performance.md).\n")
    for p in peers:
        rows = {r["tool"]: r for r in p["rows"]}
        curl = next(r for r in p["rows"] if r["tool"].startswith("curl"))
        # the rows that read from the server (not the warm load), by their time less the imports
        loads = [r for r in p["rows"] if r["kind"] in ("peer", "download", "hfs3", "fuse") and "warm" not in r["tool"]]
        fastest = min(loads, key=lambda r: r["net"])
        L.append(f"### {p['gib']:.3g} GiB model ({p['files']} files, {p['shards']} shards) from "
                 f"{'nginx' if p['server'] == 'nginx' else 'Ceph RGW'}, median of {p['rounds']} interleaved rounds\n")
        L.append("| what | wall s (min-max) | wall s/GiB | CPU s | w/o imports s | x Run:ai (wall) | x hfs3 cold (wall) "
                 "| x Run:ai (w/o imports) |")
        L.append("|---|---|---|---|---|---|---|---|")
        for r in p["rows"]:
            fails = (f" ({len(r['failures'])} failed runs, not timed; {sum(v is None for v in r['wall_runs'])} of "
                     f"{p['rounds']} rounds without a time: {r['failures'][0]})") if r.get("failures") else ""
            if r["wall"] != r["wall"]:   # NaN: failed in every round
                L.append(f"| {r['tool']}{fails} | failed | | | | | | |")
                continue
            L.append(f"| {r['tool']}{fails} | {r['wall']:.2f} ({r['wall_min']:.2f}-{r['wall_max']:.2f}) | "
                     f"{r['wall'] / p['gib']:.2f} | {r['cpu']:.2f} | {r['net']:.2f} | {r['x_runai']:.2f}x | "
                     f"{r['x_cold']:.2f}x | {r['x_runai_net']:.2f}x |")
        L.append("")
        if p.get("tensorizer_convert"):
            tc = p["tensorizer_convert"]
            L.append(f"Tensorizer's row reads the model serialized once into its format (`bench/tensorizer_convert.py`: "
                     f"the shards loaded, `TensorSerializer.write_state_dict`, {tc['bytes'] / 2**30:.2f} GiB written); "
                     f"that conversion, a cost its users pay once per model and not in the row, took "
                     f"{tc['convert_s']:.2f} s.\n")
        L.append(f"Which bounds the run: the server sends the model to curl (8 ranged GETs per file, /dev/null) in "
                 f"{curl['wall']:.2f} s ({curl['wall'] / p['gib']:.2f} s/GiB); the fastest row that reads from it, "
                 f"{fastest['tool']}, takes {fastest['net']:.2f} s without its imports "
                 f"({fastest['net'] / curl['wall']:.2f}x curl), so "
                 + ("the server is not what bounds these rows: the clients' own work (2 cores, shared with the "
                    "server) is." if fastest["net"] > 1.5 * curl["wall"] else
                    "the server's rate is close to what bounds these rows.") + "\n")
        L.append("| target (median of the per-round ratios) | actual | | w/o imports |")
        L.append("|---|---|---|---|")
        for t in p["targets"]:
            if t["ratio"] != t["ratio"]:   # NaN: the Run:ai row failed in every round
                L.append(f"| {t['what']} | n/a | Run:ai failed every run: no ratio | n/a |")
                continue
            met = t["met_net"] if t.get("judge") == "net" else t["met"]
            verdict = "met" if met else f"**not met**: {t['by']:.2f}x the target"
            L.append(f"| {t['what']} | {t['ratio']:.2f}x | {verdict} | {t['ratio_net']:.2f}x "
                     f"({'met' if t['met_net'] else 'not met'}) |")
        L.append("")
if ranks:
    L.append("## Eight ranks at once (the tensor-parallel pattern)\n")
    L.append("8 processes start together, each opens every shard with `safe_open(framework=\"pt\")` (an mmap of "
             "the file, as vLLM's loader does) and reads its own 1/8 of every tensor with `get_slice` (rows "
             "[r*n/8, (r+1)*n/8) of the first dimension), each slice's pages read (`bench/rank_go.py`). The ranks "
             "are forked from one process after its imports of torch and safetensors (8 interpreters importing "
             "torch side by side take minutes on this 2-core VM and say nothing about loading); each is its own "
             "process with its own descriptors and mappings. \"w/o imports\": from the forks to the last rank's "
             "slices in memory; wall: the whole run, that one import included. \"sent\": the body bytes nginx "
             "sent during the run (its access log) over the model's bytes. Every row reads the same objects from "
             "nginx in the same interleaved rounds (`bench/bench_ranks.py`).\n")
    def apart(r):
        """the most seconds between a run's first and last rank's end (a results file from before: -)"""
        v = [x for x in r.get("spread_runs") or [] if x is not None]
        return f"{max(v):.2f}" if v else "-"

    for p in ranks:
        L.append(f"### {p['gib']:.3g} GiB model ({p['shards']} shards) from nginx, {p['world']} ranks, median of "
                 f"{p['rounds']} interleaved rounds\n")
        L.append("| what | wall s | CPU s | w/o imports s (min-max) | x 8 ranks hfs3 cold (w/o imports) | "
                 "x 1 rank hfs3 cold (w/o imports) | sent / model | ranks apart s (most) |")
        L.append("|---|---|---|---|---|---|---|---|")
        for r in p["rows"]:
            fails = f" ({len(r['failures'])} failed runs: {r['failures'][0]})" if r.get("failures") else ""
            if r["wall"] != r["wall"]:
                L.append(f"| {r['tool']}{fails} | failed | | | | | | |")
                continue
            L.append(f"| {r['tool']}{fails} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['net']:.2f} "
                     f"({r['net_min']:.2f}-{r['net_max']:.2f}) | {r['x_cold_net']:.2f}x | {r['x_one_net']:.2f}x | "
                     f"{r['sent'] / p['model_bytes']:.2f}x | {apart(r)} |")
        L.append("")
        L.append("| target | actual | |")
        L.append("|---|---|---|")
        for t in p["targets"]:
            L.append(f"| {t['what']} | {t['ratio']:.2f} | " +
                     ("met" if t["met"] else f"**not met**: {t['by']:.2f}x the target") + " |")
        L.append("")
if peers or ranks:
    if os.path.exists(os.path.join(res, "peers-note.md")):   # a note on the run, written by whoever ran it
        L.append(open(os.path.join(res, "peers-note.md")).read().strip() + "\n")
for name, title in [("shim.txt", "The shim outside its mounts"), ("node.txt", "Against the local Node S3 server"),
                    ("hash.txt", "Hashing"), ("verify.txt", "Verification of one file by 1 and 2 threads (issue 21)")]:
    p = os.path.join(res, name)
    if os.path.exists(p):
        L.append(f"## {title}\n\n```\n{open(p).read().strip()}\n```\n")
L.append(f"![wall and CPU seconds per GiB per tool]({os.path.basename(out_png)})\n")
if fleets:
    L.append("\n## A fleet at once (`make bench BENCH_ONLY=fleet`, bench_fleet.py)\n")
    L.append("N nodes (separate processes, caches and credentials files) start together and cold-load one model "
             "through the shim against one origin (the Node server) behind a proxy acting as S3 under load: a "
             "request rate per prefix, 503 SlowDown beyond it; a bandwidth cap per connection and in total. Floor: "
             "max(origin bytes / bandwidth, origin requests / rate). No cache tier in between.\n")
    L.append("| nodes | model | rate limit | bandwidth (total / a connection) | last node has the model | floor "
             "(bytes; requests) | x floor | origin requests | origin bytes (x model per node) | 503 SlowDown | failed nodes |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for f in fleets:
        L.append(f"| {f['nodes']} | {f['model_bytes'] / 2**20:.1f} MiB, {f['files']} files | {f['rate']:g}/s a prefix | "
                 f"{f['bw'] / 2**20:.0f} / {f['conn_bw'] / 2**20:.0f} MiB/s | {f['wall']:.1f} s | {f['floor']:.1f} s "
                 f"({f['floor_bytes']:.1f}; {f['floor_requests']:.1f}) | {f['wall'] / f['floor']:.2f}x | {f['served']} | "
                 f"{f['origin_bytes'] / 2**20:.0f} MiB ({f['origin_bytes'] / f['model_bytes'] / f['nodes']:.2f}x) | "
                 f"{f['refused']} | {f['failed']} |")
open(out_md, "w").write("\n".join(L))

dat = os.path.join(res, "chart.dat")
with open(dat, "w") as f:
    for r in ref["rows"]:
        label = r["tool"].replace("curl, 8 ranged GETs per file, to /dev/null", "curl to /dev/null")
        label = label.replace("curl, 1 GET per file, writing the files", "curl writing")
        label = label.replace("cold load through the shim: ", "shim cold: ")
        label = label.replace("warm load through the shim (all cached): ", "shim warm: ").split(" (")[0].split(",")[0]
        f.write(f"\"{label}\" {r['wall_per_gib']:.3f} {r['cpu_per_gib']:.3f}\n")
gp = f"""set terminal pngcairo size 1000,{1060 if peers else 520} font ',10'
set output '{out_png}'
""" + ("set multiplot layout 2,1\n" if peers else "") + f"""set title '{ref["gib"]:.0f} GiB model from nginx: download, cold and warm loads, hashing and writing alone; median of {ref["rounds"]} rounds ({os.cpu_count()} cores)'
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
if peers:
    # the peer tables: wall s/GiB per row, one bar per table (a row a table has not: no bar)
    pdat = os.path.join(res, "peers-chart.dat")
    tools = list(dict.fromkeys(r["tool"] for p in sorted(peers, key=lambda p: -len(p["rows"])) for r in p["rows"]))
    short = lambda t: (t.replace("curl, 8 ranged GETs per file, to /dev/null (the server's rate)", "curl to /dev/null")
                       .replace("python: import torch + safetensors alone", "python + imports")
                       .replace("Run:ai Model Streamer, default concurrency", "Run:ai default")
                       .replace("Run:ai Model Streamer, concurrency 16", "Run:ai 16")
                       .replace(" download_file per file, then load", " + load")
                       .replace(" s3 cp --recursive, then load", " s3 cp + load")
                       .replace(" copy (8 streams), then load", " copy + load")
                       .replace("hfs3-manifest fetch alone (sha256, flushed; no load)", "hfs3 fetch alone")
                       .replace("hfs3 cold load through the shim", "hfs3 cold")
                       .replace("hfs3 warm load through the shim (all cached)", "hfs3 warm"))
    with open(pdat, "w") as f:
        for t in tools:
            vals = []
            for p in peers:
                r = next((r for r in p["rows"] if r["tool"] == t), None)
                vals.append(f"{r['wall'] / p['gib']:.3f}" if r else "?")
            f.write(f'"{short(t)}" ' + " ".join(vals) + "\n")
    cols = ", ".join(f"'' using {i + 2} title '{p['gib']:.3g} GiB, {p['server']}'" if i else
                     f"'{pdat}' using 2:xtic(1) title '{p['gib']:.3g} GiB, {p['server']}'" for i, p in enumerate(peers))
    gp += f"""set title 'peer table: wall seconds per GiB to every tensor in memory, median of {peers[0]["rounds"]} interleaved rounds'
set datafile missing '?'
plot {cols}
unset multiplot
"""
try:
    subprocess.run(["gnuplot"], input=gp.encode(), check=True)
except (OSError, subprocess.CalledProcessError) as e:
    try:
        subprocess.run(["gnuplot"], input=gp.replace("pngcairo", "png").encode(), check=True)
    except (OSError, subprocess.CalledProcessError):
        print(f"report: no chart ({e})", file=sys.stderr)
print(f"report: wrote {out_md} and {out_png}")
