"""fusemount.py - the FUSE mounts of the peer and eight-rank tables (bench_peers.py, bench_ranks.py): rclone mount
and s3fs, each started in the foreground as a child (so its CPU can be read from /proc), ready when the kernel
lists the mount point, stopped with fusermount3 -u. A user's mount is up before the model is read (a DaemonSet,
a systemd unit), so the rows time the loader on a mount already up; the mount's own CPU during a run is added to
the row's (cpu_s). Keys reach the mounts by environment only (AWS_* for rclone's --s3-env-auth, AWSACCESSKEYID /
AWSSECRETACCESSKEY for s3fs), never argv."""
import os, shutil, subprocess, time


def rclone_args(server, endpoint, bp, mnt, mode, cache):
    """rclone mount with the flags rclone's docs give: --read-only, --vfs-cache-mode MODE (full: the mode its docs
    recommend for random reads and mmap), the VFS cache in CACHE; nginx through the http backend, RGW through s3"""
    if server == "nginx":
        src = ["--http-url", f"{endpoint}/{bp}/", ":http:"]
    else:
        src = ["--s3-provider", "Other", "--s3-endpoint", endpoint, "--s3-region", "us-east-1",
               "--s3-force-path-style", "--s3-env-auth", f":s3:{bp}/"]
    return (["rclone", "mount", "--config", "/dev/null"] + src +
            [mnt, "--read-only", "--vfs-cache-mode", mode, "--cache-dir", cache])


def s3fs_args(endpoint, bp, mnt, cache):
    """s3fs-fuse: bucket:/prefix, path-style requests to the endpoint, read-only; -o use_cache=DIR when cache"""
    bucket, prefix = bp.split("/", 1)
    a = ["s3fs", f"{bucket}:/{prefix}", mnt, "-f", "-o", f"url={endpoint}", "-o", "use_path_request_style",
         "-o", "ro", "-o", "endpoint=us-east-1"]
    return a + (["-o", f"use_cache={cache}"] if cache else [])


class Mount:
    def __init__(self, argv, mnt, env, log):
        self.mnt, self.log = mnt, log
        os.makedirs(mnt, exist_ok=True)
        self.p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=open(log, "a"),
                                  stderr=subprocess.STDOUT)
        for _ in range(300):
            if os.path.ismount(mnt):
                break
            if self.p.poll() is not None:
                raise SystemExit(f"fusemount: {argv[0]} mount {mnt} exited ({self.p.returncode}): "
                                 f"{open(log).read()[-1000:]}")
            time.sleep(0.05)
        else:
            self.stop()
            raise SystemExit(f"fusemount: {argv[0]} mount {mnt} not up after 15 s: {open(log).read()[-1000:]}")
        # s3fs lists lazily: the first listing of the folder answers before its objects are known
        for _ in range(100):
            if os.listdir(mnt):
                break
            time.sleep(0.05)

    def cpu(self):
        """user + system seconds of the mount process (all its threads) so far"""
        try:
            f = open(f"/proc/{self.p.pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError):
            return 0.0

    def stop(self):
        if self.p.poll() is None:
            subprocess.run(["fusermount3", "-u", self.mnt], stderr=subprocess.DEVNULL)
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                subprocess.run(["fusermount3", "-uz", self.mnt], stderr=subprocess.DEVNULL)


def timed(mount, fn):
    """fn() -> (wall, cpu, rss, out) of a run on the mount, the mount's CPU during it added"""
    c0 = mount.cpu()
    w, c, r, o = fn()
    return w, c + mount.cpu() - c0, r, o


def fresh_dir(p):
    shutil.rmtree(p, ignore_errors=True)
    os.makedirs(p)
    return p
