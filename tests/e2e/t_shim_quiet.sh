#!/usr/bin/env bash
# t_shim_quiet.sh - the program's descriptors are the program's (issue 41 item 3). A cold load slowed by the fault
# proxy (~5 s, where progress once began after 2 s): with stderr a pipe nobody reads the program is not killed
# by SIGPIPE (it was: exit 141), a data file on descriptor 2 holds only the program's bytes, `prog 2>&1 | json`
# parses; the error line of a stalled fetch on a closed pipe or socket raises no SIGPIPE either (nor leaves one
# pending where the program blocks it). On a terminal (python's pty module) the shim draws one line that ends at
# "(100%), done" in MB/s; under `hfs3-manifest run` on a terminal, run draws the child's load and the child's
# shim draws nothing.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
cleanup() { stop_proxies; s3env_stop; }
trap cleanup EXIT
mkdir -p "$WORK/p"
head -c $((4 << 20)) /dev/urandom >"$WORK/p/big.bin"
head -c $((3 << 20)) /dev/urandom >"$WORK/p/hang.bin"
fetch_publish "$WORK/p" s3test:models/p
# without chunk digests: big.bin is 2 ranges of 2 MiB, with the .done sidecar that progress reads
"$HFS3_BIN" show --json s3test:models/p |
  python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("chunk_size", None); [e.pop("chunks", None) for e in d["entries"]]; json.dump(d, sys.stdout)' \
  >"$WORK/p.json" || fail "manifest without chunk digests"
rclone copyto "$WORK/p.json" s3test:models/p/.hfs3/manifest.json || fail "upload the manifest"
export HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0
unset HFS3_OFFLINE HFS3_LOG HFS3_PROGRESS
M=$WORK/mnt/p
start_proxy slow 400000        # 2 ranges of 2 MiB at 400 KB/s: ~5 s
start_proxy stuck 0 "--hang-first 50 --match hang.bin"
n=0
fresh() { n=$((n + 1)); export HFS3_CACHE_DIR=$WORK/cache-$n; }

cat >"$WORK/prog.py" <<'PY'
import json, os, sys
os.write(2, b"DATA1\n")
data = open(sys.argv[1], "rb").read()
os.write(2, b"DATA2\n")
print(json.dumps({"bytes": len(data)}))
PY
# runs argv with stderr on a pipe whose reader is gone (or a socket whose peer is), prints its exit status
cat >"$WORK/closed.py" <<'PY'
import os, socket, subprocess, sys
kind, argv = sys.argv[1], sys.argv[2:]
if kind == "pipe":
    r, w = os.pipe()
    os.close(r)
else:
    a, b = socket.socketpair()
    b.close()
    w = a.fileno()
p = subprocess.run(argv, stderr=w, stdout=subprocess.PIPE)
print(p.returncode, p.stdout.decode().strip())
PY
cat >"$WORK/stalled.py" <<'PY'
import errno, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)   # as a C program has it (python ignores it by default)
if sys.argv[2] == "block":
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGPIPE])
try:
    open(sys.argv[1], "rb").read()
    print("read")
except OSError as e:
    print(errno.errorcode[e.errno], "pending" if signal.SIGPIPE in signal.sigpending() else "none")
PY

# 1. stderr a pipe with no reader, during a cold open that succeeds (cat: SIGPIPE's default kills it)
fresh
out=$(HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM python3 "$WORK/closed.py" pipe sh -c 'cat "$1" >/dev/null && echo read' sh "$M/big.bin")
[ "$out" = '0 read' ] || fail "stderr a closed pipe during a cold open: $out (141/-13: SIGPIPE)"
ok "stderr a pipe nobody reads: a cold load of ~5 s exits 0, no SIGPIPE"

# 2. a data file on descriptor 2 stays the program's
fresh
HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM python3 "$WORK/prog.py" "$M/big.bin" >"$WORK/out" 2>"$WORK/data" ||
  fail "a cold load with a data file on fd 2"
[ "$(cat "$WORK/data")" = "$(printf 'DATA1\nDATA2')" ] || { cat "$WORK/data"; fail "the data file on fd 2 holds more than the program's bytes"; }
ok "a data file on descriptor 2 holds only the program's bytes after a cold load"

# 3. prog 2>&1 | a JSON reader
fresh
HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM python3 -c '
import json, sys; d = open(sys.argv[1], "rb").read(); print(json.dumps({"bytes": len(d)}))' "$M/big.bin" 2>&1 |
  python3 -c 'import json,sys; d = json.load(sys.stdin); assert d == {"bytes": 4194304}, d' ||
  fail "python prog 2>&1 | json.load: the cold load wrote into the program's output"
ok "prog 2>&1 | json.load parses after a cold load"

# 4. an error the user must see still comes, and raises no SIGPIPE: a stalled fetch (HFS3_STALL_TIMEOUT=2) on a
# closed pipe and on a closed socket; with SIGPIPE blocked by the program, none is left pending by the shim
for kind in pipe socket; do
  fresh
  out=$(HFS3_STALL_TIMEOUT=2 HFS3_MOUNTS="$M=stuck:models/p" LD_PRELOAD=$HFS3_SHIM \
        python3 "$WORK/closed.py" $kind python3 "$WORK/stalled.py" "$M/hang.bin" run)
  [ "$out" = "0 EIO none" ] || fail "a stalled fetch's error line on a closed $kind: $out (-13: SIGPIPE)"
done
fresh
out=$(HFS3_STALL_TIMEOUT=2 HFS3_MOUNTS="$M=stuck:models/p" LD_PRELOAD=$HFS3_SHIM \
      python3 "$WORK/closed.py" pipe python3 "$WORK/stalled.py" "$M/hang.bin" block)
[ "$out" = "0 EIO none" ] || fail "SIGPIPE blocked by the program: $out (pending: the shim's write left its SIGPIPE)"
fresh
HFS3_STALL_TIMEOUT=2 HFS3_MOUNTS="$M=stuck:models/p" LD_PRELOAD=$HFS3_SHIM \
  python3 "$WORK/stalled.py" "$M/hang.bin" run >"$WORK/out" 2>"$WORK/err" || fail "stalled: python"
[ "$(cat "$WORK/out")" = "EIO none" ] && grep -q "^hfs3: .*no progress for 2 s (HFS3_STALL_TIMEOUT)" "$WORK/err" ||
  { cat "$WORK/out" "$WORK/err"; fail "the stalled fetch's error line on a file"; }
ok "an error line on a closed pipe or socket raises no SIGPIPE, leaves none pending; on a file it is there"

# 5. on a terminal: one line updated in place, ended by the file's done line (python's pty module)
cat >"$WORK/onpty.py" <<'PY'
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out = b""
while True:
    try:
        b = os.read(fd, 65536)
    except OSError:
        break
    if not b:
        break
    out += b
_, st = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.exit(os.waitstatus_to_exitcode(st))
PY
fresh
HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM python3 "$WORK/onpty.py" python3 -c \
  'import sys; open(sys.argv[1], "rb").read(); print("read")' "$M/big.bin" >"$WORK/tty.out" || fail "on a terminal: the load"
python3 - "$WORK/tty.out" "$M" <<'PY' || fail "on a terminal: the progress line"
import re, sys
t = open(sys.argv[1], "rb").read().decode().replace("\r\n", "\n")
print(repr(t[-300:]))
lab = re.escape(sys.argv[2]) + r"/big\.bin"
ups = [u for u in t.split("\r") if u]
assert any(re.match(r"hfs3: " + lab + r": .* of 4\.0 MiB \(\d+%\), ", u) for u in ups), "no update"
assert "MiB/s" not in t and "KiB/s" not in t, "a rate in binary units"
assert re.search(r"\rhfs3: " + lab + r": 4\.0 MiB of 4\.0 MiB \(100%\), done in \d+ s\x1b\[K\nread\n$", t), "no done line"
PY
ok "on a terminal: $(tr '\r' '\n' <"$WORK/tty.out" | grep -c 'hfs3:') updates, the last one the file's 100%/done line"

# on a terminal, HFS3_LOG=error and HFS3_PROGRESS=0 each draw nothing
for v in HFS3_LOG=error HFS3_PROGRESS=0; do
  fresh
  env $v HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM python3 "$WORK/onpty.py" python3 -c \
    'import sys; open(sys.argv[1], "rb").read(); print("read")' "$M/big.bin" >"$WORK/tty.out" || fail "$v on a terminal: the load"
  [ "$(tr -d '\r' <"$WORK/tty.out")" = read ] || { cat -A "$WORK/tty.out" | head -5; fail "$v on a terminal: the shim drew"; }
done
ok "on a terminal, HFS3_LOG=error and HFS3_PROGRESS=0 draw nothing"

# 5b. a program that moves a data file onto descriptor 2 after a load drawn on its terminal: the next load draws
# nothing into the file (the shim asks whether descriptor 2 is a terminal at each line, not once)
fresh
HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM python3 "$WORK/onpty.py" python3 -c '
import os, sys
open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[3], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.dup2(fd, 2)
open(sys.argv[2], "rb").read()
os.write(2, b"DATA\n")
print("read")' "$M/big.bin" "$M/hang.bin" "$WORK/dup2.data" >"$WORK/tty2.out" || fail "dup2: the loads"
grep -q "(100%), done" "$WORK/tty2.out" && [ "$(cat "$WORK/dup2.data")" = DATA ] ||
  { cat "$WORK/dup2.data"; fail "a data file moved onto descriptor 2 after a load on the terminal got progress lines"; }
ok "a data file moved onto descriptor 2 after a load drawn on the terminal holds only the program's bytes"

# 6. `hfs3-manifest run` on a terminal draws its child's cold load; the child's shim draws nothing
fresh
python3 "$WORK/onpty.py" "$HFS3_BIN" run --mount "$M=slow:models/p" -- python3 -c \
  'import sys; open(sys.argv[1], "rb").read(); print("read")' "$M/big.bin" >"$WORK/run.out" || fail "run on a terminal"
python3 - "$WORK/run.out" "$M" <<'PY' || fail "run on a terminal: the progress display"
import re, sys
t = open(sys.argv[1], "rb").read().decode().replace("\r\n", "\n")
print(repr(t[-400:]))
assert "hfs3: " + sys.argv[2] + "/big.bin:" not in t, "the child's shim drew its own line"
assert "read\n" in t, "the program's output"
assert re.search(r"\rhfs3: loading +\d+% .*\x1b\[K", t), "no update from run"
assert re.search(r"\rhfs3: done 100% .*\x1b\[K\n", t), "no done line"
PY
ok "run on a terminal: $(tr '\r' '\n' <"$WORK/run.out" | grep -c 'hfs3: loading') updates of its child's load, then 100% done"
# run on a terminal exits with its child's status, and dies of the signal that killed it
rc=0; python3 "$WORK/onpty.py" "$HFS3_BIN" run --mount "$M=slow:models/p" -- sh -c 'exit 3' >/dev/null || rc=$?
[ $rc = 3 ] || fail "run on a terminal: exit $rc, the child's was 3"
rc=0; python3 "$WORK/onpty.py" "$HFS3_BIN" run --mount "$M=slow:models/p" -- sh -c 'kill -TERM $$' >/dev/null || rc=$?
[ $rc = $((256 - 15)) ] || fail "run on a terminal: exit $rc, not SIGTERM's death (python's sys.exit(-15): 241)"
ok "run on a terminal: the child's exit status 3, and its death by SIGTERM, are run's"
