#!/usr/bin/env bash
# t_cli_help.sh - the CLI as people expect it: `--help` of every command (and of the program) on stdout with exit
# 0, naming what it does, its flags, the variables it reads and the exit codes; --version; usage errors on stderr
# with exit 2, prefixed "hfs3-manifest CMD:"; the man pages render. Then the reference that cannot drift (issue
# 24): helper/main.c's tables (commands, options, variables) against the code's variables, both man pages,
# docs/reference.md and the bash completion; every help line within 100 columns. No S3 server needed.
set -euo pipefail
source "$HFS3_ROOT/tests/e2e/lib.sh"
H=$HFS3_BIN
for cmd in build show verify fetch; do
  expect_exit 0 "$cmd --help" "$H" "$cmd" --help
  [ ! -s "$WORK/err" ] || { cat "$WORK/err"; fail "$cmd --help wrote to stderr"; }
  for want in "^usage: hfs3-manifest $cmd " "^Options:" "^Variables:" "HFS3_LOG" "^Exit status: 0 success, 1 .*, 2 " "^REMOTE is "; do
    grep -q -- "$want" "$WORK/out" || { cat "$WORK/out"; fail "$cmd --help lacks '$want'"; }
  done
  expect_exit 0 "$cmd -h" "$H" "$cmd" -h
  expect_exit 0 "help $cmd" "$H" help "$cmd"
  grep -q "^usage: hfs3-manifest $cmd " "$WORK/out" || fail "help $cmd"
  expect_exit 2 "$cmd --no-such-flag" "$H" "$cmd" --no-such-flag s3test:b/p
  [ ! -s "$WORK/out" ] || fail "$cmd: a usage error wrote to stdout"
  grep -q "^usage: hfs3-manifest $cmd" "$WORK/err" || { cat "$WORK/err"; fail "$cmd: usage line"; }
  grep -q "^Try 'hfs3-manifest $cmd --help'" "$WORK/err" || { cat "$WORK/err"; fail "$cmd: pointer to --help"; }
  expect_exit 2 "$cmd without REMOTE" "$H" "$cmd"
  grep -q "^hfs3-manifest $cmd: REMOTE missing" "$WORK/err" || { cat "$WORK/err"; fail "$cmd: REMOTE missing"; }
done
grep -q "HFS3_CACHE_DIR" <("$H" fetch --help) || fail "fetch --help names HFS3_CACHE_DIR"
grep -q "HFS3_OFFLINE" <("$H" fetch --help) || fail "fetch --help names HFS3_OFFLINE"
grep -q -- "--local DIR" <("$H" build --help) || fail "build --help names --local"
for sub in du gc verify; do
  expect_exit 0 "cache $sub --help" "$H" cache "$sub" --help
  grep -q "^usage: hfs3-manifest cache $sub " "$WORK/out" && grep -q "^Variables:" "$WORK/out" || { cat "$WORK/out"; fail "cache $sub --help"; }
done
"$H" status --help | grep -q HFS3_CONNECTIONS && fail "status --help names HFS3_CONNECTIONS, which status does not read"
"$H" cache gc --help | grep -q HFS3_CACHE_MAX || fail "cache gc --help lacks HFS3_CACHE_MAX"
ok "every command's --help on stdout with exit 0; usage errors on stderr with exit 2"

expect_exit 0 "--help" "$H" --help
grep -q "^Commands:" "$WORK/out" && grep -q "^Exit status" "$WORK/out" || { cat "$WORK/out"; fail "--help"; }
# one line per command with what it does, as git and rclone list theirs: "  NAME  description" (cache's
# subcommands indented under it), every public command of the table, none without its description
nodesc=$(sed -n '/^Commands:/,/^$/p' "$WORK/out" | sed 1d | sed '/^$/d' |
  awk '{ line = $0; sub(/^ +/, "", line); if ($1 == "cache" && NF > 1 && $2 ~ /^(du|gc|verify)$/) sub(/^cache [a-z]+ +/, "", line); else sub(/^[a-z]+ +/, "", line); if (split(line, w, " ") < 4) print }')
[ -z "$nodesc" ] || { cat "$WORK/out"; fail "--help: commands without a one-line description: $nodesc"; }
for c in build show verify fetch cache status run; do
  grep -Eq "^  $c +[a-z].{20,}" "$WORK/out" || { cat "$WORK/out"; fail "--help: no line describing $c"; }
done
for c in du gc verify; do
  grep -Eq "^    cache $c +[a-z].{20,}" "$WORK/out" || { cat "$WORK/out"; fail "--help: no line describing cache $c"; }
done
grep -Eq "^  fetch +warm this machine's cache" "$WORK/out" || { cat "$WORK/out"; fail "--help: fetch's description"; }
expect_exit 2 "no arguments" "$H"
grep -q "^usage: hfs3-manifest" "$WORK/err" || fail "no arguments: usage on stderr"
expect_exit 0 "--version" "$H" --version
grep -Eq "^hfs3-manifest [0-9]+\.[0-9]+\.[0-9]+$" "$WORK/out" || { cat "$WORK/out"; fail "--version"; }
expect_exit 2 "unknown command" "$H" frobnicate
grep -q "^hfs3-manifest: unknown command 'frobnicate'" "$WORK/err" || { cat "$WORK/err"; fail "unknown command"; }
expect_exit 2 "build --layout" "$H" build --layout odd s3test:b/p
grep -q "^hfs3-manifest build: --layout must be auto, flat or hf-cache, not 'odd'" "$WORK/err" || { cat "$WORK/err"; fail "build --layout"; }
expect_exit 2 "a malformed REMOTE" "$H" show nocolon
grep -q "^hfs3-manifest show: REMOTE 'nocolon': expected name:bucket/prefix or s3://bucket/prefix" "$WORK/err" || { cat "$WORK/err"; fail "malformed REMOTE"; }
: >"$WORK/empty.conf"
RCLONE_CONFIG=$WORK/empty.conf expect_exit 2 "an unknown rclone remote" "$H" show nosuch:b/p
grep -q "^hfs3-manifest show: nosuch:b/p: remote nosuch: not found in rclone config $WORK/empty.conf (nor RCLONE_CONFIG_NOSUCH_TYPE)" "$WORK/err" || { cat "$WORK/err"; fail "unknown remote"; }
one_line "$WORK/err"
ok "--help, --version, unknown commands, unknown remotes and bad values"

# One source for commands, options and variables: the tables of helper/main.c, which --help prints. The man
# pages, docs/reference.md and the bash completion are checked against it, and it against the code: a variable
# the code reads that the docs lack fails here.
R=$HFS3_ROOT
"$H" --help >"$WORK/overview"
cmds=$(sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\).*/\1/p' "$WORK/overview")
subs=$(sed -n '/^Commands:/,/^$/s/^    \([a-z][a-z-]*\) \([a-z][a-z-]*\).*/\1 \2/p' "$WORK/overview")
[ -n "$cmds" ] && [ -n "$subs" ] || fail "--help lists no commands"
"$H" help variables >"$WORK/vars" || fail "help variables"
sed 's/\\-/-/g' "$R/docs/hfs3-manifest.1" >"$WORK/man1"
sed 's/\\-/-/g' "$R/docs/hfs3.7" >"$WORK/man7"
long=""
for c in "" $cmds "cache du" "cache gc" "cache verify" "help variables"; do
  if [ "${c%% *}" = help ]; then out=$("$H" $c); else out=$("$H" $c --help); fi
  long+=$(awk -v c="$c" 'length > 100 {print c ": " length ": " $0}' <<<"$out")
done
[ -z "$long" ] || fail "help lines over 100 columns: $long"
vars=$(awk '/^  HFS3_/ {print $1 ":" $2}' "$WORK/vars")
code=$(cd "$R" && grep -rhoE '"HFS3_[A-Z0-9_]+' lib shim helper include --exclude=main.c | tr -d '"' | sort -u)
for v in $code; do grep -q "^$v:" <<<"$vars" || fail "$v is read by the code but not in helper/main.c's vars[] (help variables)"; done
for vw in $vars; do
  v=${vw%%:*} w=${vw#*:}
  inh=$(cd "$R" && grep -rlE "\"$v\b" lib helper include --exclude=main.c | head -1 || true)
  ins=$(cd "$R" && grep -rlE "\"$v\b" shim | head -1 || true)
  case "$w" in *t*) ;; *)
    if [ -n "$inh" ] && [ "$w" = "${w#*h}" ]; then fail "$v: read by the helper ($inh) but vars[] says '$w'"; fi
    if [ -z "$inh" ] && [ "$w" != "${w#*h}" ]; then fail "$v: vars[] says the helper reads it; nothing in lib/ or helper/ does"; fi
    if [ -n "$ins" ] && [ "$w" = "${w#*s}" ]; then fail "$v: read by the shim ($ins) but vars[] says '$w'"; fi
    if [ -z "$ins" ] && [ "$w" != "${w#*s}" ]; then fail "$v: vars[] says the shim reads it; nothing in shim/ does"; fi
    grep -q "\b$v\b" "$WORK/man7" || fail "$v is not in hfs3(7)"
    if [ "$w" != "${w#*h}" ]; then grep -q "\b$v\b" "$WORK/man1" || fail "$v is not in hfs3-manifest(1)"; fi ;;
  esac
  grep -q "\b$v\b" "$R/docs/reference.md" || fail "$v is not in docs/reference.md"
done
comp() { bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _hfs3_manifest; echo "${COMPREPLY[*]}"' _ \
  "$R/scripts/hfs3-manifest.bash-completion" "$H" "$@"; }
for c in $cmds; do
  grep -q "^\.B hfs3-manifest $c\b" "$WORK/man1" || fail "hfs3-manifest(1) SYNOPSIS lacks $c"
  grep -q "hfs3-manifest $c\b" "$R/docs/reference.md" || fail "docs/reference.md lacks hfs3-manifest $c"
  grep -qw -- "$c" <<<"$(comp "${c:0:2}")" || fail "completion of '${c:0:2}' lacks $c: $(comp "${c:0:2}")"
done
for s in $(sed -n 's/^cache //p' <<<"$subs"); do
  grep -qw -- "$s" <<<"$(comp cache "")" || fail "completion of 'cache ' lacks $s"
done
while read -r c; do
  flags=$("$H" $c --help | sed -n '/^Options:/,/^$/s/^  \(-.*\)/\1/p' | sed 's/  .*//' | grep -o -- '-[-a-zA-Z]*' | grep -vx -e -h -e --help || true)
  got=$(comp $c -)
  for f in $flags; do
    grep -q -- "$f\b" "$WORK/man1" || fail "hfs3-manifest(1) lacks $c $f"
    grep -q -- "$f\b" "$R/docs/reference.md" || fail "docs/reference.md lacks $c $f"
    grep -qw -- "$f" <<<"$got" || fail "completion of '$c -' lacks $f: $got"
  done
done < <(printf '%s\n' $cmds; printf '%s\n' "$subs")
ok "commands, options and variables: --help (lines within 100 columns), help variables, the code, both man pages, docs/reference.md and the completion agree"

if command -v man >/dev/null || command -v groff >/dev/null; then
  for page in docs/hfs3-manifest.1 docs/hfs3.7; do
    if command -v man >/dev/null; then out=$(MANWIDTH=100 man -l "$HFS3_ROOT/$page" 2>"$WORK/manerr")
    else out=$(groff -man -Tutf8 "$HFS3_ROOT/$page" 2>"$WORK/manerr"); fi
    [ -n "$out" ] || fail "$page renders empty"
    ! grep -qi "warning" "$WORK/manerr" || { cat "$WORK/manerr"; fail "$page: warnings"; }
  done
  ok "the man pages render"
else
  for page in docs/hfs3-manifest.1 docs/hfs3.7; do grep -q '^\.TH ' "$HFS3_ROOT/$page" || fail "$page"; done
  ok "the man pages exist (no man or groff here to render them)"
fi
# make install puts the man pages and the bash completion under PREFIX/share (the build's own PREFIX, so that
# installing rebuilds nothing under the other tests' feet)
prefix=$(cat "$HFS3_ROOT/$BUILD/prefix.stamp")
make -s --no-print-directory -C "$HFS3_ROOT" install BUILD="$BUILD" DESTDIR="$WORK/root" PREFIX="$prefix" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; fail "make install"; }
S=$WORK/root$prefix/share
[ -f "$S/man/man1/hfs3-manifest.1" ] && [ -f "$S/man/man7/hfs3.7" ] || fail "man pages not installed"
[ -f "$S/bash-completion/completions/hfs3-manifest" ] || fail "bash completion not installed"
export PATH=$WORK/root$prefix/bin:$PATH
words=$(bash -c 'source "$1"; COMP_WORDS=(hfs3-manifest build --la); COMP_CWORD=2; _hfs3_manifest; echo "${COMPREPLY[*]}"' _ "$S/bash-completion/completions/hfs3-manifest")
[ "$words" = "--layout" ] || fail "completion of 'build --la': '$words'"
words=$(bash -c 'source "$1"; COMP_WORDS=(hfs3-manifest build --layout h); COMP_CWORD=3; _hfs3_manifest; echo "${COMPREPLY[*]}"' _ "$S/bash-completion/completions/hfs3-manifest")
[ "$words" = "hf-cache" ] || fail "completion of '--layout h': '$words'"
ok "make install: man1/hfs3-manifest.1, man7/hfs3.7, bash completion (which completes)"
echo "all ok"
