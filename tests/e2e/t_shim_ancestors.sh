#!/usr/bin/env bash
# t_shim_ancestors.sh - a mount's ancestor that exists on disk lists its own entries and the mounts below it,
# each once (issue 6, item 6): an HF hub directory with real repos beside mounted ones.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
H=$WORK/srv/hub
mkdir -p "$H/models--real--one" && echo x >"$H/real.txt"
export HFS3_MOUNTS="$H/models--a--b=s3test:models/flat;$H/models--c--d=s3test:models/hf;$H/deep/models--e--f=s3test:models/flat"
want=$(printf '%s\n' deep models--a--b models--c--d models--real--one real.txt)
shim_check "ls of a real ancestor: its entries and the mounts, once each" test "$(LD_PRELOAD=$HFS3_SHIM ls "$H")" = "$want"
shim_check "python os.listdir agrees" test "$(LD_PRELOAD=$HFS3_SHIM python3 -c 'import os, sys; print("\n".join(sorted(os.listdir(sys.argv[1]))))' "$H")" = "$want"
shim_check "python os.scandir: mounts are directories" test "$(LD_PRELOAD=$HFS3_SHIM python3 -c 'import os, sys; print(sorted(e.name for e in os.scandir(sys.argv[1]) if e.is_dir()))' "$H")" = "['deep', 'models--a--b', 'models--c--d', 'models--real--one']"
shim_check "find -maxdepth 1 agrees" test "$(LD_PRELOAD=$HFS3_SHIM find "$H" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort)" = "$want"
shim_check "a real ancestor above it lists hub once" test "$(LD_PRELOAD=$HFS3_SHIM ls "$WORK/srv")" = hub
shim_check "a mount below a real ancestor answers" test "$(LD_PRELOAD=$HFS3_SHIM cat "$H/models--a--b/a.txt")" = "hello from a"
shim_check "the real entries are still real" test "$(LD_PRELOAD=$HFS3_SHIM cat "$H/real.txt")" = x
exit $((SHIM_FAILS > 0))
