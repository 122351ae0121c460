#!/usr/bin/env bash
# t_shim_spawn.sh - children and their file actions (issue 33 items 1 and 2), with tests/tools/spawnw and python3:
#   1. a posix_spawn file action that would write goes through the write guard, whatever its spelling: an addopen
#      of /proc/self/fd/N, /dev/fd/N or /proc/PID/fd/N (N a read-only descriptor of a file in a mount: the shared
#      blob), of a symlink to a blob, of /proc/self/cwd/x or a relative name from a cwd in a mount, or after an
#      addchdir_np / addfchdir_np into a mount: EROFS at posix_spawn; reads and writes elsewhere still work (a
#      /proc/self/cwd/x after an addchdir_np out of a mount, from a cwd in one, is the child's directory's), and
#      an addchdir_np into a mount starts the child there. Spellings whose first component no mount shares
#      (/proc, /dev) and one whose first component a mount shares ($WORK/w/...). Nothing in the cache changes.
#      The child moves where its chdir action leads at the spawn, and the actions after it are judged from there
#      (issue 41 item 5): a chdir path not there when added and made a symlink into the cache later, a real
#      directory replaced by such a symlink, a descriptor not open then or replaced by dup2 before the spawn, every
#      descriptor closed and reused, two chdirs, a closefrom before or after a chdir; an open, dup2 or close action
#      before a chdir naming the number the shim's descriptor then gets; a child of the raw fork syscall (a vfork
#      child for the shim) adding write actions; a write spelled through a descriptor an earlier action gives the
#      child, through the child's own pid, or through a symlink to /proc/self/cwd after a chdir; 1100 live objects
#      with a chdir action each do not use up the program's descriptors (issue 33 round 4 review).
#   3. the actions are judged at posix_spawn, on the state then (issue 41 item 5; spawnw late): a relative or
#      /proc/self/cwd create added from W and spawned after the program's chdir into a mount is refused (the other
#      way round it is made in W); /proc/self/fd/N added while N was /dev/null and spawned after N was reused by a
#      mount's file is refused (by a file in W: written); O_RDONLY|O_CREAT of a mount's file opens it, O_EXCL added
#      gives EEXIST; A/.. from the real parent of a synthesized ancestor opens; /proc/self/fd/K of a K an action
#      gave the child another object than this process's K (issue 42 class 2: both ways); a child whose chdir
#      action the shim followed, or whose open action the shim made, has no descriptor of the shim's after its exec,
#      and a /proc/self/fd/K of the number the shim's own takes opens nothing; a dup2 action onto that number does
#      not move the child; a closefrom action closes the program's descriptors in the child (not the shim's it still
#      needs) and a /proc/self/fd/K after it is gone; an add glibc refuses leaves the record whole (the write after
#      it is still judged); /proc/thread-self/cwd after a chdir action is the child's directory. The kernel's answers on a read-only bind mount of the same tree are
#      the oracle (equal output), where the machine allows a mount namespace.
#   2. a child started in a mount from a cwd outside every mount, before anything touched a mount (the cache not
#      decided yet): python3 subprocess.run(cwd=) (vfork + chdir), posix_spawn with addchdir_np, fork + chdir +
#      exec and vfork + chdir + exec all run `pwd` there (it gave EIO in the vfork child).
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
T=$HFS3_ROOT/$BUILD/tools
# the blobs and the mounts' skeletons (what a write through a file action would change; the shim's own fails/,
# locks/, tmp/ aside)
cache_state() { (cd "$HFS3_CACHE_DIR" && find blobs mounts ! -name lock -printf '%p %m %n %s\n' | sort &&
  find blobs mounts -type f ! -name lock -exec sha256sum {} + | sort); }
cache_state >state.before
before=$(sha256sum <state.before)
mkdir w
BLOB=$(ls "$HFS3_CACHE_DIR/blobs" | head -1)
ln -s "$HFS3_CACHE_DIR/blobs/$BLOB" w/blob

# 1. the file actions
shim "$T/spawnw" guard "$M/flat" "$WORK/w" >guard.out 2>&1
cat guard.out
cat >guard.want <<EOF
addopen /proc/self/fd/N O_WRONLY|O_TRUNC: EROFS
addopen /proc/self/fd/N O_RDWR: EROFS
addopen /dev/fd/N O_WRONLY|O_APPEND: EROFS
addopen /proc/PID/fd/N O_WRONLY: EROFS
addopen /proc/self/fd/N O_RDONLY: ok
addopen /dev/null O_WRONLY: ok
addopen W/blob (a symlink to a blob) O_WRONLY: EROFS
addopen W/new.txt O_WRONLY|O_CREAT: ok
cwd M/dir: addopen /proc/self/cwd/x O_CREAT: EROFS
cwd M/dir: addopen x O_CREAT: EROFS
cwd M/dir: addopen deeper/c.txt O_RDONLY: ok
addchdir_np M/dir, addopen x O_CREAT: EROFS
addchdir_np M/dir, addopen /proc/self/cwd/x O_CREAT: EROFS
addchdir_np M/dir, addopen deeper/c.txt O_RDONLY: ok
addfchdir_np fd of M/dir, addopen x O_CREAT: EROFS
addchdir_np W, addopen made.txt O_CREAT: ok
cwd M/dir, addchdir_np W, addopen /proc/self/cwd/made3.txt O_CREAT: ok
addchdir_np W/later (not there; then a symlink to M/dir's fd), addopen x O_CREAT: EROFS
addchdir_np W/swap, then W/swap a symlink to M/dir's fd, addopen x3 O_CREAT: EROFS (W/swap.old/x3 missing)
addfchdir_np fd of W/harm, then dup2(fd of M/dir) onto it, addopen x2 O_CREAT: EROFS (W/harm/x2 missing)
addfchdir_np 900 (not open; then dup2(fd of M/dir, 900)), addopen x O_CREAT: EROFS
addchdir_np W, addchdir_np harm, addopen y O_CREAT: ok (W/harm/y made)
$M/flat/dir
addclosefrom_np 3, addchdir_np M/dir, pwd: ok 0
addclosefrom_np 3, addchdir_np M/dir, addopen x O_CREAT: EROFS
addchdir_np W, addclosefrom_np 3, addopen made2.txt O_CREAT: ok
adddup2(fd of M/dir) onto the next free number, addchdir_np W, addopen x4 O_CREAT: ok (W/x4 made)
addopen(M/dir) onto the next free number, addchdir_np W, addopen x5 O_CREAT: ok (W/x5 made)
addclose onto the next free number, addchdir_np W, addopen x6 O_CREAT: ok (W/x6 made)
raw fork child: addopen /proc/self/fd/N O_WRONLY|O_TRUNC: EROFS
raw fork child: addfchdir_np fd of M/dir, addopen x O_CREAT: EROFS
raw fork child: addchdir_np M/dir, addopen x O_CREAT: EROFS
adddup2(fd of a.txt, 60), addopen /proc/self/fd/60 O_WRONLY|O_TRUNC: EROFS
addopen(60, M/a.txt), addopen /dev/fd/60 O_WRONLY|O_APPEND: EROFS
adddup2(fd of M/dir, 60), addopen /proc/self/fd/60/x O_CREAT: EROFS
adddup2(fd of M/dir, 60), addopen W/fdlink/x (-> /proc/self/fd/60) O_CREAT: EROFS
addopen /proc/PID+1000000/fd/N (a pid not there: the child's?) O_WRONLY: EROFS
addchdir_np M/dir, addopen W/cwdlink/x (-> /proc/self/cwd) O_CREAT: EROFS
addopen /dev/stdout O_WRONLY (no action before it): ok
60 W here, adddup2(fd of M/dir, 60), addopen /proc/self/fd/60/x O_CREAT: EROFS
60 W here, adddup2(fd of M/dir, 60), addopen W/fdlink/x (-> /proc/self/fd/60) O_CREAT: EROFS
$M/flat/dir
addchdir_np M/dir, pwd: ok 0
addchdir_np M/dir, every descriptor closed and reused, addopen x O_CREAT: ok (61 of 61 still open)
addchdir_np M/dir, every descriptor closed and reused, posix_spawn: EROFS
EOF
shim_check "spawn file actions: every write refused (EROFS), reads and writes elsewhere work" diff guard.want guard.out
shim_check "  the writes outside the mounts landed" test -e w/new.txt -a -e w/made.txt -a -e w/made2.txt -a -e w/made3.txt
r=$(shim "$T/spawnw" many "$WORK/w" 2>&1)
shim_check "1100 live file-action objects with a chdir each: open() still works, the child starts there ($(echo $r))" \
  test "$r" = "1100 live objects with a chdir action (0 adds failed): open: ok
$WORK/w
the last one's child: ok 0"
# 3. the actions judged on the state at the spawn (issue 41 item 5, issue 42 class 2), beside the kernel's answers
#    for a read-only bind mount of the same tree (the flat fixture's source) where this machine allows one
mkdir w2
cat >late.want <<EOF
addopen late O_CREAT from W, chdir M/dir, spawn: EROFS (W/late missing)
addopen /proc/self/cwd/late O_CREAT from W, chdir M/dir, spawn: EROFS (W/late missing)
addopen late2 O_CREAT from M/dir, chdir W, spawn: ok (W/late2 made)
addopen /proc/self/fd/N O_WRONLY|O_TRUNC (N /dev/null), N reused by M/a.txt, echo PWNED: EROFS hello from a
addopen /proc/self/fd/N O_WRONLY|O_TRUNC (N /dev/null), N reused by W/target, echo PWNED: ok PWNED
addopen M/a.txt O_RDONLY|O_CREAT, cat: ok hello from a
addopen M/a.txt O_RDONLY|O_CREAT|O_EXCL: EEXIST
addopen M/new.txt O_RDONLY|O_CREAT: EROFS
addopen M/a.txt O_WRONLY: EROFS
addopen M/dir O_WRONLY: EISDIR
addopen M/dir/deeper/c.txt O_RDONLY|O_TRUNC: EROFS
from P: addopen A/.. O_RDONLY: ok
60 /dev/null here, addopen(60, M/a.txt), addopen /proc/self/fd/60 O_WRONLY|O_TRUNC, echo PWNED: EROFS hello from a
60 M/a.txt here, addopen(60, W/t2), addopen /proc/self/fd/60 O_WRONLY|O_TRUNC, echo PWNED: ok PWNED
addchdir_np W, ls /proc/self/fd: ok (the descriptors of a child without it)
addchdir_np M/dir, ls /proc/self/fd: ok (the descriptors of a child without it)
addfchdir_np fd of M/dir, ls /proc/self/fd: ok (the descriptors of a child without it)
addopen(50, M/a.txt), ls /proc/self/fd: the descriptors of a child without it and: ok 50
addopen(0, M/a.txt), ls /proc/self/fd: the descriptors of a child without it and: ok none
addopen(9, M/a.txt), addopen /proc/self/fd/K (K the next free number from 10) O_RDONLY: ENOENT
adddup2(pipe, 1), addopen(K+1, M/a.txt), addopen(K, M/dir/deeper/c.txt) (K the next free number), cat both: ok c hello from a
adddup2(pipe, 1), addclose(L) (L the next free number), addopen(2, M/a.txt), cat 2: ok hello from a
adddup2(pipe, 1), adddup2(0, L) (L the next free number), addopen(2, M/a.txt), cat 2: ok hello from a
adddup2(fd of M/dir, the next free number), addchdir_np W, pwd: ok W
a descriptor not close-on-exec, adddup2(pipe, 1), addclosefrom_np 3, addchdir_np W, ls /proc/self/fd: ok 0 1 2 3
addclosefrom_np 3, addopen /proc/self/fd/N (N W/target here) O_WRONLY: ENOENT
addopen(9, W/target), addclosefrom_np 3, addopen /proc/self/fd/9 O_WRONLY: ENOENT
addopen(-1): EBADF, then addopen /proc/self/fd/N (N M/a.txt) O_WRONLY|O_TRUNC, echo PWNED: EROFS hello from a
cwd M/dir, addchdir_np W, addopen /proc/thread-self/cwd/ts.txt O_CREAT: ok (W/ts.txt made)
cwd W, addchdir_np M/dir, addopen /proc/thread-self/cwd/ts2.txt O_CREAT: EROFS (W/ts2.txt missing)
EOF
# P A: $WORK and mnt (M is $WORK/mnt/models, not on disk: mnt is a synthesized ancestor seen from its real parent)
shim "$T/spawnw" late "$M/flat" "$WORK/w2" "$WORK" mnt >late.out 2>&1
shim_check "spawn file actions judged at the spawn: (a) (b) (c), a read-only tree's answers, A/.., /proc/self/fd/K of an action's K, no descriptor of the shim's after exec, /proc/thread-self/cwd" diff late.want late.out
if shim_oracle_ok; then
  mkdir -p ro/anc/flat w3
  unshare -m sh -c "mount --bind '$WORK/fx/src/flat' '$WORK/ro/anc/flat' && mount -o remount,bind,ro '$WORK/ro/anc/flat' &&
    '$T/spawnw' late '$WORK/ro/anc/flat' '$WORK/w3' '$WORK/ro' anc" >late.kernel 2>&1
  shim_check "  the kernel's answers on a read-only bind mount of the tree are the same" diff late.kernel late.out
else
  echo "SKIP kernel-oracle: a read-only bind mount needs root and unshare -m"
fi
# python3's os.posix_spawn: the same addopen, the shape the issue saw (the child truncates stdout = the blob)
r=$(shim python3 - "$M/flat" <<'PY' 2>&1
import os, sys
fd = os.open(sys.argv[1] + "/a.txt", os.O_RDONLY)
out = []
for p, fl in (("/proc/self/fd/%d" % fd, os.O_WRONLY | os.O_TRUNC), ("/proc/self/cwd/x", os.O_WRONLY | os.O_CREAT)):
    if p.startswith("/proc/self/cwd"):
        os.chdir(sys.argv[1] + "/dir")
    try:
        pid = os.posix_spawn("/bin/sh", ["sh", "-c", "echo overwritten"], os.environ,
                             file_actions=[(os.POSIX_SPAWN_OPEN, 1, p, fl, 0o644)])
        os.waitpid(pid, 0)
        out.append("taken")
    except OSError as e:
        out.append(os.strerror(e.errno))
print(" / ".join(out))
PY
)
shim_check "python3 os.posix_spawn: /proc/self/fd/N O_TRUNC and /proc/self/cwd/x O_CREAT refused ($r)" \
  test "$r" = "Read-only file system / Read-only file system"
shim_check "  a.txt still reads as its source" cmp -s "$WORK/fx/src/flat/a.txt" <(shim cat "$M/flat/a.txt")
after=$(cache_state | sha256sum)
[ "$after" = "$before" ] || cache_state | diff state.before -
shim_check "the cache did not change (blobs, skeletons)" test "$after" = "$before"

# 2. a child started in a mount, from / (outside every mount, no ancestor of one), the parent touching nothing first
want="$M/flat/dir"
r=$(cd / && shim python3 -c '
import subprocess, sys
r = subprocess.run(["pwd"], cwd=sys.argv[1], capture_output=True, text=True)
print(r.returncode, r.stdout.strip())
r = subprocess.run(["cat", "deeper/c.txt"], cwd=sys.argv[1], capture_output=True, text=True)
print(r.returncode, r.stdout.strip())' "$want" 2>&1)
shim_check "python3 subprocess.run(cwd=M/flat/dir) from /: pwd and a relative cat ($(echo $r))" \
  test "$r" = "0 $want
0 c"
r=$(cd / && shim "$T/spawnw" cwd "$want" 2>&1)
shim_check "a C program from /: posix_spawn addchdir_np, fork + chdir + exec, vfork + chdir + exec ($(echo $r))" \
  test "$r" = "posix_spawn addchdir_np: $want
fork + chdir + exec: $want
vfork + chdir + exec: $want"
shim_check "the cache did not change" test "$(cache_state | sha256sum)" = "$before"
exit $((SHIM_FAILS > 0))
