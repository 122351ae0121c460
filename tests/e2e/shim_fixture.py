#!/usr/bin/env python3
"""shim_fixture.py OUTDIR - writes two small models for the shim tests and their manifests (docs/manifest.md):
OUTDIR/src/hf   an HF cache repo folder (blobs/, refs/main, snapshots/<rev>/ symlinks into ../../blobs)
OUTDIR/src/flat a --local-dir style folder (files, a nested dir, an empty file, a relative symlink)
OUTDIR/hf.json, OUTDIR/flat.json   their manifests (sorted bytewise, every parent dir listed)
OUTDIR/loop.json                   a manifest with a symlink loop (readers refuse it)"""
import hashlib, json, os, sys

out = sys.argv[1]
REV = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"


def sha(b):
    return hashlib.sha256(b).hexdigest()


def write_tree(root, files, links):
    for p, data in files.items():
        fp = os.path.join(root, p)
        os.makedirs(os.path.dirname(fp), exist_ok=True)
        with open(fp, "wb") as f:
            f.write(data)
    for p, t in links.items():
        fp = os.path.join(root, p)
        os.makedirs(os.path.dirname(fp), exist_ok=True)
        os.symlink(t, fp)


def manifest(root, layout):
    ents = {}
    for dp, dns, fns in os.walk(root):
        rel = os.path.relpath(dp, root)
        for n in dns + fns:
            p = n if rel == "." else rel + "/" + n
            fp = os.path.join(root, p)
            if os.path.islink(fp):
                ents[p] = {"path": p, "type": "symlink", "target": os.readlink(fp)}
            elif os.path.isdir(fp):
                ents[p] = {"path": p, "type": "dir"}
            else:
                data = open(fp, "rb").read()
                ents[p] = {"path": p, "type": "file", "size": len(data), "sha256": sha(data),
                           "etag": '"%s"' % hashlib.md5(data).hexdigest(), "mtime": 1764496800}
    keys = sorted(ents, key=lambda s: s.encode())
    return {"hfs3_manifest": 1, "layout": layout, "generator": "shim_fixture", "entries": [ents[k] for k in keys]}


config = json.dumps({"model_type": "tiny", "hidden_size": 8}, indent=1).encode()
shard1 = bytes(range(256)) * 64 + b"shard-1"
shard2 = b"\x00" * 5000 + b"shard-2"
index = json.dumps({"metadata": {"total_size": len(shard1) + len(shard2)},
                    "weight_map": {"a": "model-00001-of-00002.safetensors",
                                   "b": "model-00002-of-00002.safetensors"}}).encode()
nested = b"nested file\n"
files = {"refs/main": REV.encode()}
links = {}
for name, data in [("config.json", config), ("model-00001-of-00002.safetensors", shard1),
                   ("model-00002-of-00002.safetensors", shard2), ("model.safetensors.index.json", index)]:
    files["blobs/" + sha(data)] = data
    links["snapshots/%s/%s" % (REV, name)] = "../../blobs/" + sha(data)
files["blobs/" + sha(nested)] = nested
links["snapshots/%s/sub/nested.txt" % REV] = "../../../blobs/" + sha(nested)
write_tree(os.path.join(out, "src/hf"), files, links)

write_tree(os.path.join(out, "src/flat"),
           {"a.txt": b"hello from a\n", "dir/b.bin": os.urandom(3000), "dir/deeper/c.txt": b"c\n",
            "empty": b"", "same.txt": b"hello from a\n"},
           {"link-to-a": "a.txt", "dir/up": "../dir/deeper", "dirlink": "dir"})

for name, layout in [("hf", "hf-cache"), ("flat", "flat")]:
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(manifest(os.path.join(out, "src", name), layout), f, indent=0)

loop = {"hfs3_manifest": 1, "layout": "flat", "generator": "shim_fixture", "entries": [
    {"path": "a", "type": "symlink", "target": "b"}, {"path": "b", "type": "symlink", "target": "a"}]}
with open(os.path.join(out, "loop.json"), "w") as f:
    json.dump(loop, f)
print(REV)
