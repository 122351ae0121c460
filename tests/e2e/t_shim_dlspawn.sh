#!/usr/bin/env bash
# t_shim_dlspawn.sh - the two calls whose path the shim cannot follow into their callee (issue 22 item 13): dlopen
# of a library in a mount (python3 ctypes, a C program: the library shipped beside the weights, a custom kernel) and a
# posix_spawn file-action open of a file in a mount (python3 os.posix_spawn, the child's stdin). Both work, and a
# bare library name is still looked up with the calling program's own RUNPATH (the shim's dlopen is a tail call).
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"; trap s3env_stop EXIT
mkdir -p "$WORK/src/lib" "$WORK/bin/lib"
echo 'int tiny(void) { return 42; }' >"$WORK/tiny.c"
cc -shared -fPIC -o "$WORK/src/lib/libtiny.so" "$WORK/tiny.c"
cp "$WORK/src/lib/libtiny.so" "$WORK/bin/lib/libtiny.so"
head -c 100000 /dev/urandom >"$WORK/src/data.bin"
cat >"$WORK/dl.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        void *h = dlopen(argv[i], RTLD_NOW);
        int (*f)(void) = h ? (int (*)(void))dlsym(h, "tiny") : NULL;
        printf("%s: %s\n", argv[i], f ? (f() == 42 ? "42" : "wrong") : dlerror());
    }
    return 0;
}
C
# RUNPATH $ORIGIN/lib: a bare name is found there only when dlopen's caller is this program
cc -o "$WORK/bin/dl" "$WORK/dl.c" -ldl -Wl,--enable-new-dtags,-rpath,'$ORIGIN/lib'
rclone copy "$WORK/src" s3test:models/dl
"$HFS3_BIN" build s3test:models/dl >"$WORK/build.out" 2>&1 || { cat "$WORK/build.out"; fail "build"; }
M=/models/dl
export HFS3_MOUNTS="$M=s3test:models/dl" HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$HFS3_BIN
P() { LD_PRELOAD=$HFS3_SHIM "$@"; }

out=$(P "$WORK/bin/dl" $M/lib/libtiny.so libtiny.so $M/lib/missing.so 2>&1)
grep -qx "$M/lib/libtiny.so: 42" <<<"$out" || { echo "$out"; fail "dlopen of a library in a mount"; }
ok "dlopen of a library in a mount (a C program)"
grep -qx "libtiny.so: 42" <<<"$out" || { echo "$out"; fail "a bare name: the caller's RUNPATH"; }
ok "dlopen of a bare name still searches the calling program's RUNPATH"
grep -q "^$M/lib/missing.so: $M/lib/missing.so: cannot open shared object file: No such file or directory$" <<<"$out" ||
  { echo "$out"; fail "dlopen of a missing library in a mount: the loader's own message"; }
ok "dlopen of a name missing in a mount: the loader's message, on the path as given"
ln -s $M/lib "$WORK/linkdir"
r=$(P python3 -c 'import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).tiny(), ctypes.CDLL(sys.argv[2]).tiny())' \
  $M/lib/libtiny.so "$WORK/linkdir/libtiny.so" 2>&1) && [ "$r" = "42 42" ] || { echo "$r"; fail "python3 ctypes"; }
ok "python3 ctypes.CDLL of a library in a mount, directly and through a real symlink"

cat >"$WORK/spawn.py" <<'PY'
import os, sys
src, out = sys.argv[1], sys.argv[2]
pid = os.posix_spawn("/bin/cat", ["cat"], os.environ, file_actions=[
    (os.POSIX_SPAWN_OPEN, 0, src, os.O_RDONLY, 0),
    (os.POSIX_SPAWN_OPEN, 1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)])
print(os.waitpid(pid, 0)[1])
PY
r=$(P python3 "$WORK/spawn.py" $M/data.bin "$WORK/spawn.out" 2>&1) && [ "$r" = 0 ] && cmp -s "$WORK/src/data.bin" "$WORK/spawn.out" ||
  { echo "$r"; fail "posix_spawn with a file-action open of a file in a mount"; }
ok "posix_spawn's file-action open of a file in a mount: the child reads it"
(cd "$WORK" && P python3 - $M <<'PY'
import os, sys
os.chdir(sys.argv[1])
pid = os.posix_spawn("/bin/cat", ["cat"], os.environ, file_actions=[
    (os.POSIX_SPAWN_OPEN, 0, "lib/libtiny.so", os.O_RDONLY, 0),
    (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)])
assert os.waitpid(pid, 0)[1] == 0
for p in ("new.txt", sys.argv[1] + "/lib/new.txt", "lib/libtiny.so"):
    try:
        os.posix_spawn("/bin/true", ["true"], os.environ, file_actions=[
            (os.POSIX_SPAWN_OPEN, 3, p, os.O_WRONLY | os.O_CREAT, 0o644)])
        raise SystemExit("a file action writing %s was taken" % p)
    except OSError as e:
        assert e.errno == 30, e   # EROFS, as an open in the mount gives
assert not os.path.exists("new.txt")
PY
) || fail "posix_spawn: a relative path from a cwd in a mount; a create fails"
ok "posix_spawn: a relative file-action path from a cwd in a mount reads; a write is refused (EROFS), nothing created"
