"""shim_magic.py ROOT - paths through the magic links of /proc and /dev/fd and raw opens by syscall() (issue 41
item 6), one line per operation: run on a local folder and on the same tree through the shim, the transcripts
(ROOT written as ROOT) must be equal. Reads only."""
import ctypes, errno, os, stat, sys, threading

ROOT = sys.argv[1]
out = []


def say(name, f):
    try:
        r = f()
    except OSError as e:
        r = "E" + errno.errorcode.get(e.errno, str(e.errno))
    if isinstance(r, bytes):
        r = r.decode("latin-1")
    r = str(r).replace(ROOT, "ROOT")
    for k, v in FDS.items():   # descriptor numbers are not compared here
        r = r.replace("/fd/%d" % v, "/fd/" + k)
    out.append("%s: %s" % (name, r.replace("/proc/%d/" % os.getpid(), "/proc/PID/")))


FDS = {}


def read(p):
    with open(p, "rb") as f:
        return f.read()


def kind(st):
    return "dir" if stat.S_ISDIR(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else "file %d" % st.st_size


os.chdir(ROOT + "/dir")
pid = os.getpid()
for base in ("/proc/self/cwd", "/proc/thread-self/cwd", "/proc/%d/cwd" % pid,
             "/proc/self/task/%d/cwd" % threading.get_native_id()):
    b = base.replace(str(pid), "PID").replace(str(threading.get_native_id()), "TID")
    say(b + "/b.bin", lambda: len(read(base + "/b.bin")))
    say(b + " list", lambda: sorted(os.listdir(base)))
    say(b + "/ list", lambda: sorted(os.listdir(base + "/")))
    say(b + "/deeper stat", lambda: kind(os.stat(base + "/deeper")))
    say(b + "/up list", lambda: sorted(os.listdir(base + "/up")))
    say(b + "/../a.txt", lambda: read(base + "/../a.txt"))
    say(b + "/missing", lambda: read(base + "/missing"))
    say(b + "/b.bin/x", lambda: read(base + "/b.bin/x"))
    say(b + " readlink", lambda: os.readlink(base))
    say(b + " realpath", lambda: os.path.realpath(base + "/b.bin"))
    say(b + " lstat", lambda: kind(os.lstat(base)))
    say(b + " stat", lambda: kind(os.stat(base)))
    say(b + " O_NOFOLLOW", lambda: os.close(os.open(base, os.O_RDONLY | os.O_NOFOLLOW)))
    say(b + " access", lambda: os.access(base + "/b.bin", os.R_OK))

d = os.open(ROOT, os.O_RDONLY | os.O_DIRECTORY)
sub = os.open(ROOT + "/dir", os.O_RDONLY | os.O_DIRECTORY)
f = os.open(ROOT + "/a.txt", os.O_RDONLY)
fp = os.open(ROOT + "/a.txt", os.O_PATH)
FDS.update(D=d, SUB=sub, F=f, FPATH=fp)
for name, fd in (("D", d), ("SUB", sub)):
    for pre in ("/proc/self/fd/", "/dev/fd/", "/proc/%d/fd/" % pid, "/proc/thread-self/fd/"):
        base = pre + str(fd)
        b = pre.replace(str(pid), "PID") + name
        say(b + " list", lambda: sorted(os.listdir(base)))
        say(b + " scandir", lambda: sorted((e.name, e.is_dir(), e.is_symlink()) for e in os.scandir(base)))
        say(b + " readlink", lambda: os.readlink(base))
        say(b + " stat", lambda: kind(os.stat(base)))
        say(b + " lstat", lambda: kind(os.lstat(base)))
        say(b + " walk", lambda: [(p, sorted(ds), sorted(fs)) for p, ds, fs in os.walk(base)][:4])
    say("/proc/self/fd/" + name + "/a.txt", lambda: read("/proc/self/fd/%d/a.txt" % fd))
    say("/dev/fd/" + name + "/a.txt", lambda: read("/dev/fd/%d/a.txt" % fd))
    say("/dev/fd/" + name + "/b.bin", lambda: len(read("/dev/fd/%d/b.bin" % fd)))
    say("/dev/fd/" + name + "/link-to-a", lambda: read("/dev/fd/%d/link-to-a" % fd))
    say("/dev/fd/" + name + "/dirlink/b.bin", lambda: len(read("/dev/fd/%d/dirlink/b.bin" % fd)))
    say("/dev/fd/" + name + "/deeper", lambda: kind(os.stat("/dev/fd/%d/deeper" % fd)))
# from /proc/self: a relative spelling through the link
os.chdir("/proc/self")
say("fd/D/a.txt from /proc/self", lambda: read("fd/%d/a.txt" % d))
say("fd/SUB/b.bin from /proc/self", lambda: len(read("fd/%d/b.bin" % sub)))
os.chdir(ROOT)
for name, fd in (("F", f), ("FPATH", fp)):
    say("readlink /proc/self/fd/" + name, lambda: os.readlink("/proc/self/fd/%d" % fd))
    say("realpath /dev/fd/" + name, lambda: os.path.realpath("/dev/fd/%d" % fd))
    say("read /proc/self/fd/" + name, lambda: read("/proc/self/fd/%d" % fd))
    say("/proc/self/fd/" + name + "/x", lambda: read("/proc/self/fd/%d/x" % fd))

# raw opens through libc's syscall(): openat2 (as onnx.load opens external data), openat
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_openat2, SYS_openat = 437, 257
RESOLVE_NO_XDEV, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS, RESOLVE_BENEATH, RESOLVE_IN_ROOT = 1, 2, 4, 8, 16


class OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def raw(fd):
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    try:
        return os.read(fd, 64) if not stat.S_ISDIR(os.fstat(fd).st_mode) else sorted(os.listdir(fd))
    finally:
        os.close(fd)


def openat2(dfd, p, flags, res):
    how = OpenHow(flags, 0, res)
    return raw(libc.syscall(ctypes.c_long(SYS_openat2), ctypes.c_long(dfd), ctypes.c_char_p(p.encode()),
                            ctypes.byref(how), ctypes.c_long(ctypes.sizeof(how))))


for p in ("a.txt", "dir/deeper", "dir", "link-to-a", "dirlink/b.bin", "dir/up", "dir/../a.txt", "../a.txt",
          "dir/../../a.txt", ROOT + "/a.txt", "missing", "a.txt/x", "dir/up/../b.bin", "/"):
    for res, rn in ((0, "0"), (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, "BENEATH|NO_SYMLINKS"),
                    (RESOLVE_BENEATH, "BENEATH"), (RESOLVE_IN_ROOT, "IN_ROOT"), (RESOLVE_NO_SYMLINKS, "NO_SYMLINKS")):
        say("openat2(D, %s, %s)" % (p.replace(ROOT, "ROOT"), rn), lambda: openat2(d, p, os.O_RDONLY | os.O_CLOEXEC, res))
say("openat2(D, link-to-a, O_PATH|O_NOFOLLOW, NO_SYMLINKS)",
    lambda: kind(os.fstat(libc.syscall(ctypes.c_long(SYS_openat2), ctypes.c_long(d), b"link-to-a",
                                       ctypes.byref(OpenHow(os.O_PATH | os.O_NOFOLLOW, 0, RESOLVE_NO_SYMLINKS)),
                                       ctypes.c_long(24)))))
say("openat2(D, link-to-a, O_NOFOLLOW)", lambda: openat2(d, "link-to-a", os.O_RDONLY | os.O_NOFOLLOW, 0))
say("openat2(D, a.txt, mode without O_CREAT)",
    lambda: raw(libc.syscall(ctypes.c_long(SYS_openat2), ctypes.c_long(d), b"a.txt",
                             ctypes.byref(OpenHow(os.O_RDONLY, 0o644, 0)), ctypes.c_long(24))))
say("openat(D, dir/b.bin)", lambda: len(raw(libc.syscall(ctypes.c_long(SYS_openat), ctypes.c_long(d), b"dir/b.bin",
                                                         ctypes.c_long(os.O_RDONLY), ctypes.c_long(0)))))
say("openat2 /proc/self/fd/D/a.txt NO_MAGICLINKS", lambda: openat2(-100, "/proc/self/fd/%d/a.txt" % d, os.O_RDONLY,
                                                                   RESOLVE_NO_MAGICLINKS))
say("openat2 /proc/self/fd/D/a.txt", lambda: openat2(-100, "/proc/self/fd/%d/a.txt" % d, os.O_RDONLY, 0))
# how as the kernel checks it before the path (none of these opens or creates anything): sizes below, above and past
# a page, non-zero bytes past the three fields, flags and modes openat2 refuses (where openat ignores them),
# RESOLVE_CACHED with a create (EAGAIN), an unreadable how (EFAULT); then an absolute spelling under IN_ROOT (from
# dirfd), and "fd/D/x" from a descriptor of /proc/self (through the magic link, refused under NO_MAGICLINKS)
import struct


def openat2_raw(dfd, p, flags, mode, res, size, extra=b""):
    buf = ctypes.create_string_buffer(struct.pack("QQQ", flags, mode, res) + extra, max(size, 24) + 8)
    return raw(libc.syscall(ctypes.c_long(SYS_openat2), ctypes.c_long(dfd), ctypes.c_char_p(p.encode()), buf,
                            ctypes.c_long(size)))


for size, extra in ((16, b""), (23, b""), (32, b"\0" * 8), (32, b"\1" + b"\0" * 7), (40, b"\0" * 15 + b"\1"),
                    (4097, b""), (8192, b"")):
    say("openat2(D, a.txt, size %d, %r)" % (size, extra.strip(b"\0")), lambda: openat2_raw(d, "a.txt", 0, 0, 0, size, extra))
for flags, mode, res in ((os.O_PATH | os.O_RDWR, 0, 0), (0x80000000, 0, 0), (1 << 33, 0, 0), (0o40000000, 0, 0),
                         (os.O_CREAT | os.O_WRONLY, 0o10000, 0), (os.O_CREAT | os.O_WRONLY, 0o644, 0x20),
                         (os.O_TRUNC | os.O_WRONLY, 0, 0x20), (0, 0, 0x40), (0, 0, 1 << 40)):
    for p in ("a.txt", "dir", "new"):
        say("openat2(D, %s, flags %#x, mode %o, resolve %#x)" % (p, flags, mode, res),
            lambda: openat2_raw(d, p, flags, mode, res, 24))
say("openat2(D, a.txt, how unreadable)", lambda: raw(libc.syscall(ctypes.c_long(SYS_openat2), ctypes.c_long(d), b"a.txt",
                                                                  ctypes.c_void_p(8), ctypes.c_long(24))))
for p in ("/a.txt", "//dir/../a.txt", "/../../dir/b.bin", "/", "/link-to-a", "/dirlink/b.bin"):
    for res, rn in ((RESOLVE_IN_ROOT, "IN_ROOT"), (RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS, "IN_ROOT|NO_SYMLINKS")):
        say("openat2(D, %s, %s)" % (p, rn), lambda: openat2(d, p, os.O_RDONLY, res))
say("openat2(D, '', 0)", lambda: openat2(d, "", os.O_RDONLY, 0))
proc = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
for res, rn in ((0, "0"), (RESOLVE_NO_MAGICLINKS, "NO_MAGICLINKS"), (RESOLVE_NO_SYMLINKS, "NO_SYMLINKS"),
                (RESOLVE_BENEATH, "BENEATH")):
    say("openat2(/proc/self, fd/D/a.txt, %s)" % rn, lambda: openat2(proc, "fd/%d/a.txt" % d, os.O_RDONLY, res))
    say("openat2(/proc/self, fd/D/dirlink/b.bin, %s)" % rn,
        lambda: len(openat2(proc, "fd/%d/dirlink/b.bin" % d, os.O_RDONLY, res)))
say("openat2(/proc/self, cwd/a.txt, 0)", lambda: openat2(proc, "cwd/a.txt", os.O_RDONLY, 0))
os.close(proc)
# from a real directory above the mount (the work dir, three levels up): its relative spellings, scoped or not
anc = os.path.dirname(os.path.dirname(os.path.dirname(ROOT)))
ancfd = os.open(anc, os.O_RDONLY | os.O_DIRECTORY)
for p in ("a.txt", "dirlink/../a.txt", "link-to-a", "dir/up/c.txt", "../flat/a.txt", "dirlink"):
    rel = os.path.relpath(ROOT, anc) + "/" + p
    for res, rn in ((0, "0"), (RESOLVE_BENEATH, "BENEATH"), (RESOLVE_IN_ROOT, "IN_ROOT"),
                    (RESOLVE_NO_SYMLINKS, "NO_SYMLINKS"), (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, "BENEATH|NO_SYMLINKS")):
        say("openat2(ancestor, .../%s, %s)" % (p, rn), lambda: openat2(ancfd, rel, os.O_RDONLY, res))
os.close(ancfd)
if len(sys.argv) > 2:   # the mount only (the local folder is writable): writes answer as on a read-only mount
    say("openat2(D, a.txt, O_WRONLY)", lambda: openat2(d, "a.txt", os.O_WRONLY, 0))
    say("openat2(D, new, O_CREAT)", lambda: openat2(d, "new", os.O_WRONLY | os.O_CREAT, 0))
    say("openat(D, new, O_CREAT)", lambda: raw(libc.syscall(ctypes.c_long(SYS_openat), ctypes.c_long(d), b"new",
                                                             ctypes.c_long(os.O_WRONLY | os.O_CREAT), ctypes.c_long(0o644))))
    # spelled outside the mounts: the skeleton's own path in the cache (argv[2]), a write the guard refuses
    say("openat2(skeleton/new, O_CREAT)", lambda: openat2(-100, sys.argv[2] + "/new", os.O_WRONLY | os.O_CREAT, 0))
print("\n".join(out))
