"""shim_writes.py - the write calls of t_shim_writes.sh, one line each: "NAME: ok" or "NAME: ERRNO".
Usage: shim_writes.py all R W        every call, run under the shim and on a read-only bind mount (the oracle)
       shim_writes.py noproc R W BLOB  the spellings that reach the cache without /proc (answers fixed)
R: the mounts' parent (a synthesized ancestor under the shim, holding flat/ and hf/), W: a writable directory
outside, BLOB: a blob's path in the cache. Numbers: the items of the brief (1 a file of a mount reached again
for writing, 2 glibc's internal creates and bind, 4 a cwd in an ancestor, 5 O_CREAT on directories, 6 errnos)."""
import ctypes, errno, os, socket, stat, sys
part, R, W = sys.argv[1], sys.argv[2], sys.argv[3]
F = R + "/flat"
libc = ctypes.CDLL(None, use_errno=True)
b = os.fsencode
for fn, res, args in (("fopen", ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p]),
                      ("freopen", ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p]),
                      ("fclose", ctypes.c_int, [ctypes.c_void_p]),
                      ("mkstemp", ctypes.c_int, [ctypes.c_char_p]), ("mkstemps", ctypes.c_int, [ctypes.c_char_p, ctypes.c_int]),
                      ("mkostemp", ctypes.c_int, [ctypes.c_char_p, ctypes.c_int]),
                      ("mkdtemp", ctypes.c_void_p, [ctypes.c_char_p]), ("mkfifo", ctypes.c_int, [ctypes.c_char_p, ctypes.c_uint]),
                      ("mkfifoat", ctypes.c_int, [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]),
                      ("mknod", ctypes.c_int, [ctypes.c_char_p, ctypes.c_uint, ctypes.c_ulong]),
                      ("linkat", ctypes.c_int, [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]),
                      ("creat", ctypes.c_int, [ctypes.c_char_p, ctypes.c_uint])):
    getattr(libc, fn).restype = res
    getattr(libc, fn).argtypes = args
def chk(r):
    if r is None or (isinstance(r, int) and r < 0):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
def err(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
out = []
def t(name, f):
    out.append("%s: %s" % (name, err(f)))
def x():
    p = W + "/x"
    if not os.path.exists(p):
        open(p, "w").write("x")
    return p
def oc(p, fl, **kw):
    return lambda: os.close(os.open(p, fl, 0o644, **kw))
def fopen(p, mode):
    def f():
        fp = chk(libc.fopen(b(p), mode))
        libc.fclose(fp)
    return f
def freopen(mode):
    def f():
        fp = chk(libc.fopen(b(F + "/a.txt"), b"r"))
        r = libc.freopen(None, mode, fp)
        e = ctypes.get_errno()
        if r:
            libc.fclose(r)
        else:
            raise OSError(e, "")
    return f
def tmpl(fn, p, *a):
    return lambda: chk(fn(ctypes.create_string_buffer(b(p)), *a))
def bindu(p):
    def f():
        s = socket.socket(socket.AF_UNIX)
        try:
            s.bind(p)
        finally:
            s.close()
    return f
AT_FDCWD, AT_EMPTY_PATH, AT_SYMLINK_FOLLOW = -100, 0x1000, 0x400
if part == "noproc":
    B = sys.argv[4]
    os.symlink(B, W + "/b")
    fd = os.open(F + "/a.txt", os.O_RDONLY)
    dfd = os.open(F + "/dir", os.O_RDONLY | os.O_DIRECTORY)
    t("open a symlink to a blob O_WRONLY", oc(W + "/b", os.O_WRONLY))
    t("open a symlink to a blob O_RDONLY", oc(W + "/b", os.O_RDONLY))
    t("truncate a symlink to a blob", lambda: os.truncate(W + "/b", 0))
    t("chmod a symlink to a blob", lambda: os.chmod(W + "/b", 0o666))
    t("linkat a symlink to a blob AT_SYMLINK_FOLLOW", lambda: chk(libc.linkat(AT_FDCWD, b(W + "/b"), AT_FDCWD, b(W + "/l1"), AT_SYMLINK_FOLLOW)))
    t("linkat N AT_EMPTY_PATH", lambda: chk(libc.linkat(fd, b"", AT_FDCWD, b(W + "/l2"), AT_EMPTY_PATH)))
    t("fchmod N", lambda: os.fchmod(fd, 0o666))
    t("mkdirat(fd of M/dir, n)", lambda: os.mkdir("n", dir_fd=dfd))
    t("openat O_CREAT(fd of M/dir, n)", oc("n", os.O_WRONLY | os.O_CREAT, dir_fd=dfd))
    t("mkfifoat(fd of M/dir, n)", lambda: chk(libc.mkfifoat(dfd, b"n", 0o644)))
    t("mkdir W/ok", lambda: os.mkdir(W + "/ok"))
    t("open O_CREAT W/ok2", oc(W + "/ok2", os.O_WRONLY | os.O_CREAT))
    os.chdir(R)
    t("cwd R: mkdir n", lambda: os.mkdir("n"))
    t("cwd R: creat n2", lambda: os.close(chk(libc.creat(b"n2", 0o644))))
    t("cwd R: symlink n3", lambda: os.symlink("t", "n3"))
    os.chdir(F + "/dir")
    t("cwd M/dir: mkdir ../../n4", lambda: os.mkdir("../../n4"))
    t("cwd M/dir: creat ../../../n5", lambda: os.close(chk(libc.creat(b"../../../n5", 0o644))))
    print("\n".join(out))
    sys.exit(0)
fd = os.open(F + "/a.txt", os.O_RDONLY)
P = "/proc/self/fd/%d" % fd
dfd = os.open(F, os.O_RDONLY | os.O_DIRECTORY)
D = "/proc/self/fd/%d" % dfd
if not os.path.lexists(W + "/s"):
    os.symlink(F + "/a.txt", W + "/s")
long = "n" * 256
# item 1: a file opened in a mount, reached again for writing
t("1 open /proc/self/fd/N O_RDWR", oc(P, os.O_RDWR))
t("1 open /proc/self/fd/N O_WRONLY|O_APPEND", oc(P, os.O_WRONLY | os.O_APPEND))
t("1 open /proc/self/fd/N O_RDONLY|O_TRUNC", oc(P, os.O_RDONLY | os.O_TRUNC))
t("1 open /proc/self/fd/N O_RDONLY", oc(P, os.O_RDONLY))
t("1 open a symlink to M/a.txt O_WRONLY", oc(W + "/s", os.O_WRONLY))
t("1 open O_TMPFILE /proc/self/fd/D", oc(D, os.O_TMPFILE | os.O_WRONLY))
t("1 fopen r+ a symlink to M/a.txt", fopen(W + "/s", b"r+"))
t("1 fopen w /proc/self/fd/N", fopen(P, b"w"))
t("1 fopen a /proc/self/fd/N", fopen(P, b"a"))
t("1 truncate /proc/self/fd/N", lambda: os.truncate(P, 0))
t("1 chmod /proc/self/fd/N", lambda: os.chmod(P, 0o666))
t("1 chown /proc/self/fd/N", lambda: os.chown(P, os.getuid(), os.getgid()))
t("1 utime /proc/self/fd/N", lambda: os.utime(P))
t("1 setxattr /proc/self/fd/N", lambda: os.setxattr(P, "user.x", b"1"))
t("1 fchmod N", lambda: os.fchmod(fd, 0o666))
t("1 linkat N AT_EMPTY_PATH", lambda: chk(libc.linkat(fd, b"", AT_FDCWD, b(W + "/l1"), AT_EMPTY_PATH)))
t("1 linkat /proc/self/fd/N AT_SYMLINK_FOLLOW", lambda: chk(libc.linkat(AT_FDCWD, b(P), AT_FDCWD, b(W + "/l2"), AT_SYMLINK_FOLLOW)))
t("1 link M/a.txt out", lambda: os.link(F + "/a.txt", W + "/l3"))
t("1 freopen NULL r+", freopen(b"r+"))
t("1 freopen NULL a", freopen(b"a"))
t("1 freopen NULL r", freopen(b"r"))
# item 2: glibc's internal creates and bind
t("2 mkfifo M/new", lambda: chk(libc.mkfifo(b(F + "/new"), 0o644)))
t("2 mkfifo M/a.txt (there)", lambda: chk(libc.mkfifo(b(F + "/a.txt"), 0o644)))
t("2 mkfifo /proc/self/fd/D/new", lambda: chk(libc.mkfifo(b(D + "/new"), 0o644)))
t("2 mkfifoat D new", lambda: chk(libc.mkfifoat(dfd, b"new", 0o644)))
t("2 mknod fifo M/new", lambda: chk(libc.mknod(b(F + "/new"), stat.S_IFIFO | 0o644, 0)))
t("2 mkstemp M/tXXXXXX", tmpl(libc.mkstemp, F + "/tXXXXXX"))
t("2 mkstemp /proc/self/fd/D/tXXXXXX", tmpl(libc.mkstemp, D + "/tXXXXXX"))
t("2 mkstemps M/tXXXXXX.s", tmpl(libc.mkstemps, F + "/tXXXXXX.s", 2))
t("2 mkostemp M/tXXXXXX", tmpl(libc.mkostemp, F + "/tXXXXXX", os.O_CLOEXEC))
t("2 mkstemp M/bad (no XXXXXX)", tmpl(libc.mkstemp, F + "/bad"))
t("2 mkstemp M/missing/tXXXXXX", tmpl(libc.mkstemp, F + "/missing/tXXXXXX"))
t("2 mkdtemp M/dXXXXXX", tmpl(libc.mkdtemp, F + "/dXXXXXX"))
t("2 mkdtemp /proc/self/fd/D/dXXXXXX", tmpl(libc.mkdtemp, D + "/dXXXXXX"))
t("2 bind M/sock", bindu(F + "/sock"))
t("2 bind M/a.txt (there)", bindu(F + "/a.txt"))
t("2 bind /proc/self/fd/D/sock", bindu(D + "/sock"))
t("2 bind ancestor R/sock", bindu(R + "/sock"))
# item 5: O_CREAT on directories
for name, p in (("M/dir", F + "/dir"), ("M", F), ("ancestor R", R)):
    t("5 open %s O_RDONLY|O_CREAT" % name, oc(p, os.O_RDONLY | os.O_CREAT))
    t("5 open %s O_CREAT|O_DIRECTORY" % name, oc(p, os.O_RDONLY | os.O_CREAT | os.O_DIRECTORY))
    t("5 open %s O_RDWR" % name, oc(p, os.O_RDWR))
    t("5 open %s O_WRONLY|O_CREAT|O_TRUNC" % name, oc(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
    t("5 open %s O_CREAT|O_EXCL" % name, oc(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
# item 6: the kernel's errno for each write call, in a mount and in an ancestor
for name, base in (("M", F), ("R", R)):
    for what, p in (("dir", base + "/dir"), ("a.txt", base + "/a.txt"), ("flat", base + "/flat"), ("new", base + "/new"),
                    ("missing/x", base + "/missing/x"), ("a.txt/x", base + "/a.txt/x"), ("long", base + "/" + long),
                    ("dir/", base + "/dir/"), ("new/", base + "/new/")):
        t("6 mkdir %s/%s" % (name, what), lambda p=p: os.mkdir(p))
        t("6 symlink %s/%s" % (name, what), lambda p=p: os.symlink("t", p))
        t("6 creat %s/%s" % (name, what), lambda p=p: os.close(chk(libc.creat(b(p), 0o644))))
        t("6 fopen w %s/%s" % (name, what), fopen(p, b"w"))
        t("6 fopen a %s/%s" % (name, what), fopen(p, b"a"))
        t("6 fopen r+ %s/%s" % (name, what), fopen(p, b"r+"))
        t("6 fopen wx %s/%s" % (name, what), fopen(p, b"wx"))
        t("6 open O_WRONLY %s/%s" % (name, what), oc(p, os.O_WRONLY))
        t("6 link in %s/%s" % (name, what), lambda p=p: os.link(x(), p))
        t("6 rename in %s/%s" % (name, what), lambda p=p: os.rename(x(), p))
        t("6 rename out %s/%s" % (name, what), lambda p=p: os.rename(p, W + "/out"))
t("6 rename M/a.txt M/b", lambda: os.rename(F + "/a.txt", F + "/b"))
t("6 link M/a.txt M/b", lambda: os.link(F + "/a.txt", F + "/b"))
# item 4: a cwd in a synthesized ancestor
os.chdir(R)
t("4 cwd R: mkdir n", lambda: os.mkdir("n"))
t("4 cwd R: creat n2", lambda: os.close(chk(libc.creat(b"n2", 0o644))))
t("4 cwd R: open O_CREAT n2", oc("n2", os.O_WRONLY | os.O_CREAT))
t("4 cwd R: symlink n3", lambda: os.symlink("t", "n3"))
t("4 cwd R: mkfifo n4", lambda: chk(libc.mkfifo(b"n4", 0o644)))
t("4 cwd R: mkstemp tXXXXXX", tmpl(libc.mkstemp, "tXXXXXX"))
t("4 cwd R: bind sock", bindu("sock"))
t("4 cwd R: fopen w n5", fopen("n5", b"w"))
t("4 cwd R: mkdir flat", lambda: os.mkdir("flat"))
t("4 cwd R: mkdir long", lambda: os.mkdir(long))
t("4 cwd R: rename n6", lambda: os.rename(x(), "n6"))
t("4 cwd R: rmdir flat", lambda: os.rmdir("flat"))
os.chdir(F + "/dir")
t("4 cwd M/dir: mkdir ../n", lambda: os.mkdir("../n"))
t("4 cwd M/dir: creat n", lambda: os.close(chk(libc.creat(b"n", 0o644))))
t("4 cwd M/dir: mkdir ../../n", lambda: os.mkdir("../../n"))
print("\n".join(out))
