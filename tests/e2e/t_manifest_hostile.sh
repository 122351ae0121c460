#!/usr/bin/env bash
# Every hostile-manifest rule (tests/data/manifests/bad-*.json, with the words its message must carry from the
# unit test's table) stored in the bucket: `show` refuses each with exit 1 and one clear line.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"; trap s3env_stop EXIT
python3 - "$HFS3_ROOT" "$WORK/up" "$WORK/cases" <<'PY'
import os, re, shutil, sys
def check(cond, what):  # explicit: an assert would vanish under python -O / PYTHONOPTIMIZE
    if not cond:
        sys.exit(f"not ok: {what}")
root, up, cases = sys.argv[1:]
src = open(os.path.join(root, "tests/unit/test_manifest.c")).read()
rows = re.findall(r'\{"(bad-[^"]+\.json)", -E[A-Z0-9]+, "((?:[^"\\]|\\.)*)"\}', src)
check(len(rows) >= 50, len(rows))
with open(cases, "w") as out:
    for name, words in rows:
        d = os.path.join(up, name[:-5], ".hfs3")
        os.makedirs(d)
        shutil.copy(os.path.join(root, "tests/data/manifests", name), os.path.join(d, "manifest.json"))
        out.write(name[:-5] + "\t" + words.encode().decode("unicode_escape") + "\n")
PY
rclone copy "$WORK/up" s3test:models/hostile
n=0
while IFS=$'\t' read -r name words; do
  expect_exit 1 "$name" "$HFS3_BIN" show "s3test:models/hostile/$name"
  one_line "$WORK/err"
  IFS='|' read -ra ws <<<"$words"
  for w in "${ws[@]}"; do grep -qF -- "$w" "$WORK/err" || { cat "$WORK/err"; fail "$name: message lacks '$w'"; }; done
  grep -qF "hostile/$name" "$WORK/err" || { cat "$WORK/err"; fail "$name: message does not name the remote"; }
  n=$((n + 1))
done <"$WORK/cases"
ok "show refuses $n hostile manifests, each with one line naming the rule, e.g.: $(cat "$WORK/err")"
