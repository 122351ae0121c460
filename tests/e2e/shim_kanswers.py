"""shim_kanswers.py ROOT [child FD] - the answers of t_shim_kanswers.sh (issue 33 item 6), one line each, over ROOT
(a read-only bind mount of the source tree, or the same tree as a mount through the shim): st_blocks (and a
directory's st_size) of every entry, opens with O_TMPFILE, an O_PATH descriptor of a file re-opened through
/proc/self/fd/N, and the modes of "." and ".." of a directory descriptor inherited through exec."""
import errno
import os
import subprocess
import sys


def err(f):
    try:
        r = f()
        return "ok" if r is None else r
    except OSError as e:
        return errno.errorcode[e.errno]


if sys.argv[1] == "child":   # the exec'd program: what it sees through the inherited descriptor
    fd = int(sys.argv[2])
    print("inherited . %o" % os.stat(".", dir_fd=fd).st_mode, "inherited .. %o" % os.stat("..", dir_fd=fd).st_mode,
          "inherited . lstat %o" % os.lstat(".", dir_fd=fd).st_mode, sep="\n")
    sys.exit(0)

root = sys.argv[1]
for dp, dns, fns in sorted(os.walk(root)):
    for n in sorted(dns + fns) + ([] if dp != root else ["."]):
        p = os.path.join(dp, n)
        st = os.lstat(p)
        rel = os.path.relpath(p, root)
        if rel in sys.argv[2:]:
            continue   # the test looks at those against the cached copy
        print("blocks %s %d%s" % (rel, st.st_blocks, " size %d" % st.st_size if os.path.isdir(p) else ""))
T = os.O_TMPFILE
for rel, fl in (("sub", T | os.O_RDWR), ("sub", T | os.O_WRONLY), ("sub", T | os.O_RDONLY), ("small", T | os.O_RDWR),
                ("nope", T | os.O_RDWR), ("sub", T | os.O_RDWR | os.O_CREAT), (".", T | os.O_RDWR)):
    print("O_TMPFILE %s %o" % (rel, fl & ~T), err(lambda: os.close(os.open(os.path.join(root, rel), fl, 0o600))))
fd = os.open(os.path.join(root, "sub/x"), os.O_PATH)
print("O_PATH reopen", err(lambda: "%d bytes" % len(open("/proc/self/fd/%d" % fd, "rb").read())))
print("O_PATH reopen O_DIRECTORY", err(lambda: os.close(os.open("/proc/self/fd/%d" % fd, os.O_RDONLY | os.O_DIRECTORY))))
os.close(fd)
d = os.open(os.path.join(root, "sub"), os.O_RDONLY | os.O_DIRECTORY)
print("parent . %o" % os.stat(os.path.join(root, "sub")).st_mode, "parent .. %o" % os.stat(root).st_mode, sep="\n")
sys.stdout.flush()
subprocess.run([sys.executable, __file__, "child", str(d)], pass_fds=(d,), check=True)
