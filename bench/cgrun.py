"""cgrun.py - one measured run of a command, as bench_ref.py measures its rows: a `sync` first (no run inherits
another's writeback), wall time, and CPU = user + system of the whole process tree, detached helpers included
(each run in its own cpuacct cgroup when the machine allows it, else getrusage of the waited-for tree)."""
import os, subprocess, tempfile, time

CG = "/sys/fs/cgroup/cpuacct"
use_cg = os.access(CG, os.W_OK)
cpu_source = "cgroup cpuacct" if use_cg else "getrusage"


def cg_read(d):
    try:
        u = int(open(d + "/cpuacct.usage_user").read()) / 1e9
        s = int(open(d + "/cpuacct.usage_sys").read()) / 1e9
        return u, s
    except OSError:
        st = dict(l.split() for l in open(d + "/cpuacct.stat"))
        hz = os.sysconf("SC_CLK_TCK")
        return int(st["user"]) / hz, int(st["system"]) / hz


def run(cmd, env=None, errfile="/dev/null", what="bench"):
    """wall seconds, cpu seconds (user+sys), peak RSS KiB of the top process, stdout; raises SystemExit on failure"""
    d = tempfile.mkdtemp(prefix="hfs3-bench.", dir=CG) if use_cg else None
    os.sync()
    t = time.perf_counter()
    err = open(errfile, "w+")
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err,
                         preexec_fn=(lambda: open(d + "/cgroup.procs", "w").write(str(os.getpid()))) if d else None)
    try:
        outb = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        if status != 0:
            err.seek(0)
            raise SystemExit(f"{what}: {cmd[:3]}... failed ({status}): {err.read()[-2000:]}")
        cpu = ru.ru_utime + ru.ru_stime
        if d:
            # wait for what the run left behind in its group (the shim's detached prefetcher), then count it all
            for _ in range(600):
                if not open(d + "/cgroup.procs").read().strip():
                    break
                time.sleep(0.1)
            u, s = cg_read(d)
            cpu = u + s
        return wall, cpu, ru.ru_maxrss, outb.decode()
    finally:
        err.close()
        if d:
            try:
                os.rmdir(d)
            except OSError:
                pass
