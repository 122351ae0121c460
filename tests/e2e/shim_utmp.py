"""shim_utmp.py BLOB W - the utmp/wtmp writers by the system's own names, run under the shim in a mount namespace
whose /run and /var/log are fresh tmpfs (t_shim_writes.sh): one line each, "NAME: ok" or "NAME: ERRNO".
/run/utmp and /var/log/wtmp are made symlinks to BLOB (a file of the cache) or plain files. glibc's x names stand
for the plain ones when they are not there; login, logout and logwtmp write those files with glibc's own calls;
logout names _PATH_UTMP with glibc's own utmpname (round 5 review: each wrote records into the blob)."""
import ctypes, errno, os, sys
c = ctypes.CDLL(None, use_errno=True)
c.pututline.restype = c.pututxline.restype = ctypes.c_void_p
blob, w = sys.argv[1], sys.argv[2]
out = []
def rec():
    return ctypes.create_string_buffer(384)
def res(name, ok):
    out.append("%s: %s" % (name, "ok" if ok else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))))
def void(name, f):
    ctypes.set_errno(0)
    f()
    res(name, ctypes.get_errno() == 0)
def make(path, target):
    """path a symlink to target, or (None) an empty regular file"""
    if os.path.lexists(path):
        os.unlink(path)
    if target:
        os.symlink(target, path)
    else:
        open(path, "w").close()
# descriptors 0-19 open, each known: a refusal must close none of them (round 5 review: a refused pututline closed
# whatever number an earlier call left on the stack, stdin after a refused link)
for fd in range(20):
    try:
        os.fstat(fd)
    except OSError:
        os.dup2(os.open("/dev/null", os.O_RDONLY), fd)
ids = [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in range(20)]
def kept():
    try:
        return [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in range(20)] == ids
    except OSError:
        return False
make("/run/utmp", blob)
make("/var/log/wtmp", blob)
try:
    os.link(blob, w + "/hl")
except OSError:
    pass
c.utmpxname(b"/var/run/utmpx")
ctypes.set_errno(0)
res("pututxline, utmpxname /var/run/utmpx (not there: /var/run/utmp, the blob's)", c.pututxline(rec()))
c.endutent()
void("updwtmpx /var/log/wtmpx (not there: /var/log/wtmp, the blob's)", lambda: c.updwtmpx(b"/var/log/wtmpx", rec()))
void("login (utmp and wtmp the blob's)", lambda: c.login(rec()))
ctypes.set_errno(0)
res("logout (utmp the blob's)", c.logout(b"tty9"))
void("logwtmp (wtmp the blob's)", lambda: c.logwtmp(b"tty9", b"u", b"h"))
res("descriptors 0-19 still open, each the same", kept())
# logout names _PATH_UTMP with glibc's own utmpname: what the shim checks at the write follows
make("/run/utmp", None)
open(w + "/ok", "w").close()
c.utmpname((w + "/ok").encode())
c.logout(b"no-such-tty")
make("/run/utmp", blob)
c.setutent()
ctypes.set_errno(0)
res("pututline after logout, utmp made the blob's", c.pututline(rec()))
c.endutent()
# the same names on plain files still write
make("/run/utmp", None)
make("/var/log/wtmp", None)
c.utmpxname(b"/var/run/utmpx")
res("pututxline, utmpxname /var/run/utmpx (a file)", c.pututxline(rec()))
c.endutent()
void("updwtmpx /var/log/wtmpx (a file)", lambda: c.updwtmpx(b"/var/log/wtmpx", rec()))
void("logwtmp (a file)", lambda: c.logwtmp(b"tty9", b"u", b"h"))
res("utmp holds 1 record, wtmp 2", (os.path.getsize("/run/utmp"), os.path.getsize("/var/log/wtmp")) == (384, 768))
print("\n".join(out))
