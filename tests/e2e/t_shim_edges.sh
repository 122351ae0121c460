#!/usr/bin/env bash
# t_shim_edges.sh - the shim's edges that issue 22 found (items 3, 7, 8, 10, 11), each as the kernel answers:
# - `..` at the top, with the mount /hfs3-zz-PID/hf (its parent is a synthesized ancestor of "/"): stat of
#   "/ZZ/.." and "/ZZ/hf/../.." is "/", `ls -la /ZZ` shows "..", `cd /ZZ; ls ..` lists "/" (not the cache's
#   tree), chdir("../../..") from a mount's directory lands in "/"; in an ancestor "M/flat/a.txt/../.." is ENOTDIR
#   and "M/missing/../flat/a.txt" ENOENT; no spelling gives a path in the cache (realpath, getcwd);
# - spellings of PATH_MAX bytes or more into a mount ("./" and "//" runs, "dir/../" chains): ENAMETOOLONG;
# - fstat of a descriptor the table does not know (16384 and up, inherited through exec);
# - a subprocess's cwd in a symlinked directory of a mount the parent has not looked at yet (vfork child);
# - relative HFS3_CACHE_DIR: children inherit it absolute (`bash -c 'cd M/flat && ls'` lists the mount).
# Nothing is made at "/": the mount's top directory exists only in the shim.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
ZZ=/hfs3-zz-$$
[ -e "$ZZ" ] && { echo "SKIP: $ZZ exists"; exit 77; }
export HFS3_MOUNTS="$ZZ/hf=s3test:models/hf;$M/flat=s3test:models/flat"
A=$M   # an ancestor below $WORK (mnt/models), not on disk

cat >"$WORK/top.py" <<'PY'
import os, sys
zz, a, cache = sys.argv[1], sys.argv[2], sys.argv[3]
def st(p, f=os.stat):
    try:
        s = f(p)
        return "ok:%d:%d" % (s.st_dev, s.st_ino)
    except OSError as e:
        return os.strerror(e.errno)
root = os.stat("/")
rootid = "ok:%d:%d" % (root.st_dev, root.st_ino)
def t(name, got, want):
    print("%s %s: %s%s" % ("ok" if got == want else "not ok", name, got, "" if got == want else " (want %s)" % want))
t("stat ZZ/.. is /", st(zz + "/.."), rootid)
t("lstat ZZ/.. is /", st(zz + "/..", os.lstat), rootid)
t("stat ZZ/hf/../.. is /", st(zz + "/hf/../.."), rootid)
t("stat ZZ/hf/refs/../../.. is /", st(zz + "/hf/refs/../../.."), rootid)
t("stat ZZ/hf/../../etc/hostname", st(zz + "/hf/../../etc/hostname"), st("/etc/hostname"))
t("stat A/flat/a.txt/../..", st(a + "/flat/a.txt/../.."), "Not a directory")
t("stat A/missing/../flat/a.txt", st(a + "/missing/../flat/a.txt"), "No such file or directory")
t("stat A/flat/missing/../a.txt", st(a + "/flat/missing/../a.txt"), "No such file or directory")
t("stat A/flat/dirlink/../a.txt", st(a + "/flat/dirlink/../a.txt")[:2], "ok")
t("stat A/flat/dir/up/../../a.txt (up -> ../dir/deeper)", st(a + "/flat/dir/up/../../a.txt")[:2], "ok")
t("stat A/flat/dir/up/../c.txt", st(a + "/flat/dir/up/../c.txt"), "No such file or directory")
t("stat A/flat/dir/up/../../../flat/a.txt", st(a + "/flat/dir/up/../../../flat/a.txt")[:2], "ok")
t("listdir ZZ/.. is /", sorted(os.listdir(zz + "/..")), sorted(os.listdir("/")))
os.chdir(zz)
t("cd ZZ; listdir ..", sorted(os.listdir("..")) == sorted(os.listdir(zz + "/..")), True)
t("cd ZZ; stat ..", st(".."), rootid)
os.chdir(zz + "/hf/refs")
os.chdir("../../..")
t("chdir ../../.. from ZZ/hf/refs: getcwd", os.getcwd(), "/")
t("  and stat . is /", st("."), rootid)
os.chdir(a + "/flat/dir/deeper")
os.chdir("../../..")
t("chdir ../../.. from A/flat/dir/deeper: getcwd", os.getcwd(), a)
os.chdir("..")
t("  chdir .. again: getcwd", os.getcwd(), os.path.dirname(a))
t("  and it is the real directory", st("."), st(os.path.dirname(a)))
leaks = []
for p in [zz + "/..", zz + "/hf/..", zz + "/hf/../..", a + "/..", a + "/flat/dir/../..", a + "/flat/dirlink/../..",
          zz + "/hf/refs/../../..", a + "/flat/dir/up/../../../.."]:
    for f in (os.path.realpath, lambda q: os.path.realpath(q, strict=True)):
        try:
            r = f(p)
        except OSError:
            continue
        if r.startswith(cache):
            leaks.append(p + " -> " + r)
for start in [zz, zz + "/hf", a, a + "/flat/dir"]:
    for rel in ["..", "../..", "../../..", "../../../.."]:
        os.chdir(start)
        try:
            os.chdir(rel)
        except OSError:
            continue
        if os.getcwd().startswith(cache) or os.path.realpath(".").startswith(cache):
            leaks.append("cd %s; cd %s -> %s" % (start, rel, os.getcwd()))
        if any(n in ("mounts", "ancestors", "blobs") for n in os.listdir(".")) and not os.getcwd().startswith(os.path.dirname(cache)):
            leaks.append("cd %s; cd %s lists %s" % (start, rel, os.listdir(".")))
t("no spelling reaches the cache (realpath, getcwd, listings)", leaks, [])
# item 7: PATH_MAX and more, into a mount
for name, p in [("./ run", a + "/flat/" + "./" * 2100 + "a.txt"), ("// run", a + "/flat" + "/" * 4100 + "a.txt"),
                ("dir/../ chain", a + "/flat/" + "dir/../" * 600 + "a.txt"), ("./ run, relative", "./" * 2100 + "a.txt")]:
    os.chdir(a + "/flat")
    t("stat %s (%d bytes)" % (name, len(p)), st(p), "File name too long")
    try:
        os.close(os.open(p, os.O_RDONLY))
        r = "ok"
    except OSError as e:
        r = os.strerror(e.errno)
    t("open %s" % name, r, "File name too long")
    t("stat %s, one byte under PATH_MAX" % name, st(p[len(p) - 4095:] if p[0] != "/" else p[:0] + a + "/flat/" + "./" * ((4095 - len(a) - 12) // 2) + "a.txt")[:2], "ok")
PY
shim python3 "$WORK/top.py" "$ZZ" "$A" "$HFS3_CACHE_DIR" >"$WORK/top.out" 2>&1
cat "$WORK/top.out"
shim_check "the top and the ancestors: every check" test "$(grep -c '^ok ' "$WORK/top.out")" -ge 28 -a "$(grep -c '^not ok' "$WORK/top.out")" = 0

# ls -la at the top: ".." shown as "/" is
shim ls -la "$ZZ" >"$WORK/ls.out" 2>"$WORK/ls.err"
shim_check "ls -la ZZ: no error, no '?' entry" test ! -s "$WORK/ls.err" -a "$(grep -c '?' "$WORK/ls.out")" = 0
shim_check "ls -la ZZ: . .. hf" test "$(awk 'NR > 1 { print $NF }' "$WORK/ls.out" | tr '\n' ' ')" = ". .. hf "
shim_check "cd ZZ; ls .. lists /" test "$(shim bash -c "cd $ZZ && ls .." 2>&1)" = "$(ls /)"
shim_check "nothing was made at /" test ! -e "$ZZ"
# a cwd in a real directory above a synthesized ancestor: "." lists the mount's top (as the absolute spelling does)
shim_check "cd WORK; ls . names mnt (a synthesized ancestor)" test "$(shim bash -c "cd $WORK && ls -a . | grep -cx mnt")" = 1

# item 10: a subprocess whose cwd is a symlinked directory of a mount, the parent never having looked at the mount
# (Python's subprocess changes directory in a vfork child): it runs there; the next subprocess too (the parent
# found the mount loaded)
cat >"$WORK/sub.py" <<'PY'
import subprocess, sys
m = sys.argv[1]
for cwd in (m + "/flat/dirlink", m + "/flat/dir/up", m + "/flat/dirlink"):
    r = subprocess.run(["sh", "-c", "pwd -P; ls"], cwd=cwd, capture_output=True, text=True)
    print(cwd, r.returncode, r.stdout.split(), r.stderr.strip())
PY
shim python3 "$WORK/sub.py" "$M" >"$WORK/sub.out" 2>&1
cat "$WORK/sub.out"
shim_check "subprocess cwd=M/flat/dirlink (a symlink to dir), the mount untouched: runs in M/flat/dir" \
  test "$(sed -n 1p "$WORK/sub.out")" = "$M/flat/dirlink 0 ['$M/flat/dir', 'b.bin', 'deeper', 'up'] "
shim_check "subprocess cwd=M/flat/dir/up (-> ../dir/deeper): runs in M/flat/dir/deeper" \
  test "$(sed -n 2p "$WORK/sub.out")" = "$M/flat/dir/up 0 ['$M/flat/dir/deeper', 'c.txt'] "
shim_check "  and again" test "$(sed -n 3p "$WORK/sub.out")" = "$(sed -n 1p "$WORK/sub.out")"

# item 8: fstat of a descriptor numbered 16384 or more (dup2, F_DUPFD) answers as stat of its path; one inherited
# through exec that the new process's table does not know: a directory is not the cache's 0700 one
cat >"$WORK/fd.py" <<'PY'
import fcntl, os, resource, sys
m = sys.argv[1]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
def ident(s):
    return (s.st_mode, s.st_ino, s.st_size, int(s.st_mtime))
if hard < 19500:
    print("skip rlimit", hard)
else:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    for p in (m + "/flat/a.txt", m + "/flat/dir"):
        fd = os.open(p, os.O_RDONLY)
        want = ident(os.stat(p))
        hi = os.dup2(fd, 19000)
        print("dup2 19000 %s %s" % (os.path.basename(p), ident(os.fstat(hi)) == want))
        hi2 = fcntl.fcntl(fd, fcntl.F_DUPFD, 17000)
        print("F_DUPFD %d %s %s" % (hi2 >= 17000, os.path.basename(p), ident(os.fstat(hi2)) == want))
        os.close(hi); os.close(hi2); os.close(fd)
fd = os.open(m + "/flat/dir", os.O_RDONLY)
os.set_inheritable(fd, True)
os.execv(sys.executable, [sys.executable, "-c",
         "import os, stat; s = os.fstat(%d); print('exec dir mode %%o' %% stat.S_IMODE(s.st_mode), stat.S_ISDIR(s.st_mode))" % fd])
PY
shim python3 "$WORK/fd.py" "$M" >"$WORK/fd.out" 2>&1
cat "$WORK/fd.out"
if grep -q '^skip' "$WORK/fd.out"; then
  echo "SKIP fd-high: RLIMIT_NOFILE's hard limit is under 19500"
else
  shim_check "fstat of descriptors 19000 and 17000+ (a file, a directory): the identity stat gives" \
    test "$(grep -c '^\(dup2\|F_DUPFD 1\) .* True$' "$WORK/fd.out")" = 4 -a "$(grep -c 'False' "$WORK/fd.out")" = 0
fi
shim_check "fstat of a directory descriptor inherited through exec: mode 555" grep -qx 'exec dir mode 555 True' "$WORK/fd.out"

# item 11: a relative HFS3_CACHE_DIR reaches children absolute
mkdir -p "$WORK/elsewhere"
got=$(cd "$WORK" && HFS3_CACHE_DIR=cache shim bash -c "cd $M/flat && ls")
shim_check "relative HFS3_CACHE_DIR: bash -c 'cd M/flat && ls' lists the mount" test "$(echo $got)" = "$(ls "$WORK/fx/src/flat" | tr '\n' ' ' | sed 's/ $//')"
got=$(cd "$WORK" && HFS3_CACHE_DIR=cache shim bash -c 'cd elsewhere && printenv HFS3_CACHE_DIR')
shim_check "  and the child's HFS3_CACHE_DIR is absolute ($got)" test "$got" = "$WORK/cache"
exit $((SHIM_FAILS > 0))
