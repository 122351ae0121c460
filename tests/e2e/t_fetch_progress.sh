#!/usr/bin/env bash
# t_fetch_progress.sh - fetch's progress people can read (issue 24 §4): with stderr no terminal (an init
# container's log), a plain line every few seconds (percent, bytes, files, rate, ETA, current file); on a terminal
# (a tmux pane 40 columns wide), one bar line that fits the width and never wraps; the summary in human units.
# The download goes through a proxy that paces each response, so that it lasts a few seconds.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
TM="tmux -L hfs3-t-fetch-progress-$$"
cleanup() { $TM kill-server 2>/dev/null || true; stop_proxies; s3env_stop; }
s3env_start "$WORK"; trap cleanup EXIT
fetch_model "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
start_proxy slow $((3 << 20))    # about 7 s: a plain line comes every 5 s
start_proxy quick $((8 << 20))   # about 3 s: the bar is there from the start
export HFS3_CONNECTIONS=2
total=$(human_bytes "$(cat "$WORK"/m/config.json "$WORK"/m/tokenizer.json "$WORK"/m/model.safetensors | wc -c)")

# stderr not a terminal: plain lines every few seconds, then the summary on stdout in human units
HFS3_CACHE_DIR=$WORK/c1 "$HFS3_BIN" fetch slow:models/m1 >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "fetch"; }
cat "$WORK/err"
grep -Eq "^fetch: [0-9]{1,2}% of $total \([0-9.]+ [KMG]?i?B\), [0-3]/4 files, [0-9.]+ [kMG]?B/s, ETA [0-9]+:[0-9]{2}, model.safetensors$" "$WORK/err" ||
  fail "no plain progress line while stderr is no terminal"
! grep -Ev '^fetch: [0-9]+% of ' "$WORK/err" || fail "stderr holds more than progress lines"
grep -Eq "^slow:models/m1: 4 files, $total fetched, 0 B already cached, [0-9.]+ s, [0-9.]+ [kMG]?B/s, 0 failed$" "$WORK/out" ||
  { cat "$WORK/out"; fail "the summary in human units"; }
ok "not a terminal: $(grep -c . "$WORK/err") plain progress line(s), e.g. '$(head -1 "$WORK/err")'; summary '$(cat "$WORK/out")'"

# a terminal 40 columns wide: one line with the bar, the percent and the ETA, within the width, no wrap
command -v tmux >/dev/null || skip_test fetch-progress-tty "no tmux"
$TM new-session -d -x 40 -y 6 "env HFS3_CACHE_DIR=$WORK/c2 $HFS3_BIN fetch quick:models/m1 2>&1; echo EXIT=\$?; sleep 60"
seen=""
for i in $(seq 1 300); do
  $TM capture-pane -p >"$WORK/pane" 2>/dev/null || true; cat "$WORK/pane" >>"$WORK/allpanes"
  if grep -Eq '^fetch +[0-9]+% \[[#.]+\] .*ETA [0-9]+:[0-9]{2}$' "$WORK/pane" && [ -z "$seen" ]; then cp "$WORK/pane" "$WORK/pane.bar"; seen=1; fi
  grep -q '^EXIT=' "$WORK/pane" && break
  sleep 0.1
done
[ -n "$seen" ] || { sort -u "$WORK/allpanes" | head -20; fail "no bar line in a 40-column terminal"; }
cat "$WORK/pane.bar"
awk 'length($0) > 39 { bad = 1 } END { exit bad }' "$WORK/pane.bar" || fail "a line of the display reaches the last column"
[ "$(grep -c . "$WORK/pane.bar")" = 1 ] || fail "the display takes more than one line (it wrapped or scrolled)"
grep -q '^EXIT=0$' "$WORK/pane" || { cat "$WORK/pane"; fail "fetch in the terminal"; }
grep -q '^quick:models/m1: 4 files, ' "$WORK/pane" || { cat "$WORK/pane"; fail "the bar was not cleared before the summary"; }
ok "a 40-column terminal: one bar line within the width, '$(grep . "$WORK/pane.bar")'"
echo "all ok"
