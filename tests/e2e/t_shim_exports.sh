#!/usr/bin/env bash
# The shim links libc only and exports every name of the interposer list (shim/) that python3 (the one on PATH,
# and its libpython) and coreutils import; it exports nothing but interposers.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
deps=$(ldd "$HFS3_SHIM" | awk '{print $1}' | grep -v '^linux-vdso' | sort | tr '\n' ' ')
echo "ldd: $deps"
shim_check "ldd shows libc and the loader only" test "$deps" = "/lib64/ld-linux-x86-64.so.2 libc.so.6 "
LIST="open open64 openat openat64 __open_2 __open64_2 __openat_2 __openat64_2 creat creat64
fopen fopen64 freopen freopen64
stat stat64 lstat lstat64 fstatat fstatat64 statx __xstat __xstat64 __lxstat __lxstat64 __fxstatat __fxstatat64
fstat fstat64 __fxstat __fxstat64
access faccessat eaccess euidaccess readlink readlinkat __readlink_chk __readlinkat_chk
realpath __realpath_chk canonicalize_file_name
opendir fdopendir readdir readdir64 readdir_r readdir64_r closedir dirfd rewinddir seekdir telldir scandir scandir64 scandirat
chdir fchdir getcwd __getcwd_chk get_current_dir_name
getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr
statfs statfs64 statvfs statvfs64 fstatfs fstatfs64
mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2 link linkat symlink symlinkat truncate truncate64
chmod fchmodat chown lchown fchownat utimensat utimes mknod mknodat setxattr lsetxattr fsetxattr removexattr lremovexattr fremovexattr
mkfifo mkfifoat mkstemp mkstemp64 mkostemp mkostemp64 mkstemps mkstemps64 mkostemps mkostemps64 mkdtemp bind
fts_open fts_read fts_children fts_set fts_close fts64_open fts64_read fts64_children fts64_set fts64_close
dlopen posix_spawn_file_actions_addopen posix_spawn_file_actions_addchdir_np posix_spawn_file_actions_addfchdir_np
posix_spawn_file_actions_destroy posix_spawn_file_actions_adddup2 posix_spawn_file_actions_addclose
posix_spawn_file_actions_addclosefrom_np posix_spawn_file_actions_addtcsetpgrp_np posix_spawn posix_spawnp
lchmod remove open_by_handle_at __open __open64 _IO_fopen _IO_file_fopen _IO_file_open setmntent updwtmp updwtmpx utmpname utmpxname pututline pututxline login logout logwtmp
lchown lutimes futimesat utime fchmod fchown futimens futimes __xmknod __xmknodat syscall"
exported=$(nm -D --defined-only "$HFS3_SHIM" | awk '{print $3}' | sed 's/@.*//' | sort -u)
want=$(tr ' ' '\n' <<<"$LIST" | grep . | sort -u)
missing=$(comm -23 <(echo "$want") <(echo "$exported") | grep . | tr '\n' ' ')
shim_check "every listed name is exported (missing: $missing)" test -z "$missing"
py=$(python3 -c 'import sys; print(sys.executable)')
bins="$py"
libpy=$(ldd "$py" | awk '/libpython/ {print $3}')
[ -n "$libpy" ] && bins="$bins $libpy"
for b in ls cp cat stat du find realpath readlink sha256sum; do bins="$bins $(command -v $b)"; done
for b in $bins; do
  imports=$(objdump -T "$b" | awk '/\*UND\*/ {print $NF}' | sed 's/@.*//' | sort -u)
  used=$(comm -12 <(echo "$want") <(echo "$imports"))
  notexp=$(comm -23 <(echo "$used") <(echo "$exported") | grep . | tr '\n' ' ')
  shim_check "$b: imports $(echo $used | wc -w) listed names, all exported (missing: $notexp)" test -z "$notexp"
done
# only interposers: no helper of ours leaks into the host's namespace
extra=$(grep -v -x -F -f <(tr ' ' '\n' <<<"$LIST" | grep .) <<<"$exported" | grep -v -x -E 'close|dup|dup2|dup3|fcntl|fcntl64|fchmod|fchown|futimens|futimes|lutimes|futimesat|utime|__xmknod|__xmknodat|scandir64|scandirat64|fstatvfs|fstatvfs64|glob|glob64|nftw|nftw64|ftw|ftw64' || true)
shim_check "nothing exported beyond the interposers (${extra//$'\n'/ })" test -z "$extra"
exit $((SHIM_FAILS > 0))
