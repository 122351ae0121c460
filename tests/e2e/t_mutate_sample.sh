#!/usr/bin/env bash
# t_mutate_sample.sh - `make mutate-sample` does not rot (issue 42): universalmutator (requirements-mutate.txt, in
# a venv of this test's own) draws the same mutants twice from one seed, another seed draws others, and each
# drawn entry is one mutate.py can run: its old text occurs once in its file, its new text differs, it names
# tests that exist. The sampled run itself is not part of `make test` (hours); this is its dry run.
set -euo pipefail
source "$HFS3_ROOT/tests/e2e/lib.sh"
cd "$HFS3_ROOT"
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q --disable-pip-version-check -r requirements-mutate.txt >"$WORK/pip.log" 2>&1 ||
  { cat "$WORK/pip.log"; fail "universalmutator did not install from requirements-mutate.txt"; }
draw() {  # SEED OUT
  PATH="$WORK/venv/bin:$PATH" python3 tests/mutate/sample.py --dry-run --seed "$1" --per-file 3 \
    --files shim/hub.c --out "$2" >"$2.log" 2>&1 || { cat "$2.log"; fail "sample.py --dry-run (seed $1) failed"; }
  grep -q "^sample: seed $1," "$2.log" || { cat "$2.log"; fail "the seed is not printed"; }
}
draw 7 "$WORK/a.txt"
draw 7 "$WORK/b.txt"
draw 8 "$WORK/c.txt"
cmp -s "$WORK/a.txt" "$WORK/b.txt" || { diff "$WORK/a.txt" "$WORK/b.txt" | head; fail "one seed drew two samples"; }
ok "one seed draws one sample"
! cmp -s "$WORK/a.txt" "$WORK/c.txt" || fail "seeds 7 and 8 drew the same sample"
ok "another seed draws another sample"
python3 - "$WORK/a.txt" <<'PY' || fail "a drawn entry mutate.py could not run"
import os, sys
sys.path.insert(0, "tests/mutate")
import mutate
ms = mutate.parse_list(sys.argv[1])
assert len(ms) == 3, f"{len(ms)} entries drawn, wanted 3"
tests = set(mutate.all_tests("."))
for m in ms:
    text = open(m["file"], encoding="utf-8").read()
    assert text.count(m["old"]) == 1, f"{m['id']}: old text occurs {text.count(m['old'])} times"
    assert m["new"] != m["old"], f"{m['id']}: no change"
    assert m["tests"] and set(m["tests"]) <= tests, f"{m['id']}: tests {m['tests']}"
PY
ok "each drawn entry applies once, changes the code and names tests that exist"
