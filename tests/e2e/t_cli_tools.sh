#!/usr/bin/env bash
# t_cli_tools.sh - every command that README.md, CONTRIBUTING.md, docs/, the helper's messages (helper/*.c, lib/*.c),
# python/hfs3 and the demo name for a tool the project pins exists in the version pinned, with the flags given to
# it (issue 46: README said `huggingface-cli download --local-dir`, which huggingface_hub 2.4.0 no longer installs;
# `hf cache scan` is "No such command"): hf, huggingface-cli, aws and pip from requirements.txt in .venv, rclone
# from Debian, `python -m MODULE` with .venv's Python. tests/e2e/doc_commands.py finds them and runs each one's
# --help (aws: help), so that a bump of a pin that renames a command fails here. First a check of the checker:
# a page with three wrong commands gives three problems.
set -euo pipefail
source "$HFS3_ROOT/tests/e2e/lib.sh"
[ -x "${HFS3_PY:-}" ] || skip_test venv "no ${HFS3_PY:-.venv/bin/python}: scripts/deps.sh installs requirements.txt there"
command -v rclone >/dev/null || fail "rclone is not installed (scripts/deps.sh installs it)"
DC=$HFS3_ROOT/tests/e2e/doc_commands.py

# the checker finds what issue 46 found: a tool not installed, a subcommand that is gone, a flag that is not there
cat >"$WORK/wrong.md" <<'MD'
Download it with `huggingface-cli download --local-dir ./m Qwen/Qwen3-1.7B`, then look at it with `hf cache scan`.
Upload it with rclone copy --no-such-flag ./m minio:models/m, as an rclone remote does.
MD
if python3 "$DC" "$HFS3_PY" "$WORK/wrong.md" >"$WORK/wrong.out" 2>&1; then cat "$WORK/wrong.out"; fail "doc_commands.py passed a page of wrong commands"; fi
grep -q "wrong.md:1: \`huggingface-cli\` is not installed" "$WORK/wrong.out" &&
  grep -q "wrong.md:1: \`hf cache scan\`: hf cache has no command 'scan'" "$WORK/wrong.out" &&
  grep -q "wrong.md:2: \`rclone copy\` has no flag --no-such-flag" "$WORK/wrong.out" &&
  [ "$(grep -c '^problem:' "$WORK/wrong.out")" = 3 ] || { cat "$WORK/wrong.out"; fail "doc_commands.py: the three problems of the wrong page"; }
ok "the checker: a tool not installed, a subcommand that is gone and a flag that is not there are three problems; 'an rclone remote' none"

cd "$HFS3_ROOT"
files=(README.md CONTRIBUTING.md docs/*.md docs/*.1 docs/*.7 helper/*.c lib/*.c python/hfs3/*.py scripts/demo.sh)
python3 "$DC" "$HFS3_PY" "${files[@]}" >"$WORK/docs.out" 2>&1 || { cat "$WORK/docs.out"; fail "a command named in the docs does not exist in the version pinned (problems above)"; }
n=$(grep -c '^checked:' "$WORK/docs.out")
[ "$n" -ge 10 ] || { cat "$WORK/docs.out"; fail "only $n commands found in the docs: the checker lost them"; }
for want in "hf download --local-dir" "hf cache ls" "rclone copy --links" "aws s3 cp --recursive"; do
  grep -qx "checked: $want" "$WORK/docs.out" || { cat "$WORK/docs.out"; fail "'$want' (README, docs) was not checked"; }
done
ok "$n commands named in the docs and messages exist in the pinned versions: $(sed -n 's/^checked: //p' "$WORK/docs.out" | cut -d' ' -f1-3 | sort -u | tr '\n' ';' | sed 's/;/; /g')"
