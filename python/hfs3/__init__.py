"""hfs3 from a wheel: the helper and the shim as `make install` lays them out, inside this package.

    hfs3/bin/hfs3-manifest     the helper (``hfs3-manifest`` on PATH runs it through _main below)
    hfs3/lib/libhfs3shim.so    the LD_PRELOAD shim, libc only

``hfs3-manifest run`` finds the shim at ../lib beside its own binary, and the shim finds the helper at ../bin beside
itself, so nothing here is needed at run time except the launcher.
"""
import os
import signal
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def shim_path():
    """The absolute path of libhfs3shim.so in this package, for LD_PRELOAD set by hand."""
    return os.path.join(_HERE, "lib", "libhfs3shim.so")


def helper_path():
    """The absolute path of the hfs3-manifest binary in this package."""
    return os.path.join(_HERE, "bin", "hfs3-manifest")


def _main():
    """The ``hfs3-manifest`` console script: exec the bundled binary with the same arguments.

    A wheel's scripts directory is copied without its neighbours, so a binary put there would not find the libraries
    auditwheel bundles (their RPATH is relative to the package) nor the shim beside it. Exec replaces this process:
    the binary gets the same pid, arguments, environment and descriptors, and `run` execs the program from there.
    """
    exe = helper_path()
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: put back the defaults the
    # helper and the program `run` starts would have from a shell
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execv(exe, ["hfs3-manifest"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("hfs3-manifest: cannot run the bundled helper %s: %s (reinstall the hfs3 wheel)\n"
                         % (exe, e.strerror))
        return 127
