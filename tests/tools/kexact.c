/* kexact.c - one normalised line per operation on a read-only tree (issue 6, items 11 and 13). Usage:
 *   kexact ROOT [LROOT]
 * ROOT holds the flat fixture (a.txt, same.txt with a.txt's bytes, dir/, link-to-a, dirlink -> dir, dir/up ->
 * ../dir/deeper); LROOT the links tree of t_shim_kernel.sh (a/b/f.txt, a/c/x.txt, lnk -> a/b, deep -> a/b/../c),
 * where a link's parent is not its target's parent. glibc's fts (FTS_PHYSICAL and FTS_LOGICAL) walks both. Run once over a read-only tmpfs and once over the mounts
 * through the shim: the two transcripts must agree, but for the differences t_shim_kernel.sh lists with their
 * reasons. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *root;

static void line(const char *op, int r)
{
    printf("%-40s %s\n", op, r >= 0 ? "ok" : strerrorname_np(errno));
}

/* "ok:TYPE" after a successful stat, else the errno's name */
static void line_st(const char *op, int r, const struct stat *st)
{
    if (r < 0) {
        line(op, r);
        return;
    }
    printf("%-40s ok:%s\n", op, S_ISDIR(st->st_mode) ? "dir" : S_ISREG(st->st_mode) ? "file" : S_ISLNK(st->st_mode) ? "link" : "other");
}

/* "ok:NAME" with the last component of a path the call returned (the roots differ: ro/ and the mount) */
static void line_name(const char *op, const char *path)
{
    if (!path) {
        line(op, -1);
        return;
    }
    char b[PATH_MAX];
    snprintf(b, sizeof b, "%s", path);
    printf("%-40s ok:%s\n", op, basename(b));
}

static int byname(const FTSENT **a, const FTSENT **b)
{
    return strcmp((*a)->fts_name, (*b)->fts_name);
}

/* glibc's fts over the tree: one line per entry, "fts-MODE(LEVEL REL) INFO[:SIZE]" (siblings by name) */
static void fts_lines(const char *mode, int opt)
{
    static const char *n[] = {"?", "D", "DC", "DEFAULT", "DNR", "DOT", "DP", "ERR", "F", "INIT", "NS", "NSOK", "SL", "SLNONE", "W"};
    char *roots[] = {(char *)root, NULL};
    FTS *sp = fts_open(roots, opt, byname);
    if (!sp) {
        printf("%-40s %s\n", mode, strerrorname_np(errno));
        return;
    }
    FTSENT *p;
    size_t rl = strlen(root);
    while ((p = fts_read(sp))) {
        char op[PATH_MAX + 64];
        snprintf(op, sizeof op, "fts-%s(%d %s)", mode, p->fts_level, p->fts_path[rl] ? p->fts_path + rl + 1 : ".");
        if (p->fts_info == FTS_F || p->fts_info == FTS_SL)
            printf("%-40s %s:%lld\n", op, n[p->fts_info], (long long)p->fts_statp->st_size);
        else
            printf("%-40s %s\n", op, p->fts_info <= 14 ? n[p->fts_info] : "?");
    }
    printf("%-40s %s\n", "fts end", errno ? strerrorname_np(errno) : "ok");
    fts_close(sp);
}

static const char *P(const char *rel)
{
    static char b[4][1024];
    static int i;
    i = (i + 1) % 4;
    snprintf(b[i], sizeof b[i], "%s/%s", root, rel);
    return b[i];
}

static int op_open(const char *rel, int flags)
{
    int fd = open(P(rel), flags, 0644);
    if (fd >= 0)
        close(fd);
    return fd;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3)
        return 2;
    root = argv[1];
    struct stat st, st2;
    char buf[64], name[400];
    line("open(a.txt, O_RDONLY|O_CREAT)", op_open("a.txt", O_RDONLY | O_CREAT));
    line("open(a.txt, O_RDONLY|O_CREAT|O_EXCL)", op_open("a.txt", O_RDONLY | O_CREAT | O_EXCL));
    line("open(missing, O_RDONLY|O_CREAT)", op_open("missing", O_RDONLY | O_CREAT));
    line("open(missing, O_RDONLY)", op_open("missing", O_RDONLY));
    line("open(dir, O_WRONLY)", op_open("dir", O_WRONLY));
    line("open(dir, O_RDONLY|O_TRUNC)", op_open("dir", O_RDONLY | O_TRUNC));
    line("open(a.txt, O_WRONLY)", op_open("a.txt", O_WRONLY));
    line("open(a.txt, O_RDONLY|O_TRUNC)", op_open("a.txt", O_RDONLY | O_TRUNC));
    line("open(a.txt, O_RDONLY|O_APPEND)", op_open("a.txt", O_RDONLY | O_APPEND));
    line("open(a.txt, O_RDONLY|O_DIRECTORY)", op_open("a.txt", O_RDONLY | O_DIRECTORY));
    line("open(a.txt/, O_RDONLY)", op_open("a.txt/", O_RDONLY));
    line("open(link-to-a, O_RDONLY|O_NOFOLLOW)", op_open("link-to-a", O_RDONLY | O_NOFOLLOW));
    line("readlink(link-to-a, buf, 0)", (int)readlink(P("link-to-a"), buf, 0));
    line("readlink(a.txt)", (int)readlink(P("a.txt"), buf, sizeof buf));
    memset(name, 'x', 300);
    name[300] = 0;
    line("stat(300-byte name)", stat(P(name), &st));
    line("stat(a.txt/..)", stat(P("a.txt/.."), &st));
    line("stat(missing/..)", stat(P("missing/.."), &st));
    line("stat(dir/..)", stat(P("dir/.."), &st));
    /* ".." after a prefix inside the tree goes up from what the prefix names (not lexically) */
    line("stat(link-to-a/..)", stat(P("link-to-a/.."), &st));
    line("stat(dir/deeper/c.txt/..)", stat(P("dir/deeper/c.txt/.."), &st));
    line("stat(a.txt/../same.txt)", stat(P("a.txt/../same.txt"), &st));
    line("stat(missing/../a.txt)", stat(P("missing/../a.txt"), &st));
    line("stat(dir/missing/../b.bin)", stat(P("dir/missing/../b.bin"), &st));
    line_st("stat(dir/deeper/../b.bin)", stat(P("dir/deeper/../b.bin"), &st), &st);
    line_st("stat(dir/up/../b.bin)", stat(P("dir/up/../b.bin"), &st), &st);
    line_st("stat(dir/deeper/..)", stat(P("dir/deeper/.."), &st), &st);
    line_st("lstat(dirlink/..)", lstat(P("dirlink/.."), &st), &st);
    line_st("lstat(dirlink/deeper/..)", lstat(P("dirlink/deeper/.."), &st), &st);
    line_st("lstat(dirlink/deeper/../b.bin)", lstat(P("dirlink/deeper/../b.bin"), &st), &st);
    line_st("lstat(dir/up/../up)", lstat(P("dir/up/../up"), &st), &st);
    line("open(a.txt/.., O_RDONLY)", op_open("a.txt/..", O_RDONLY));
    line("open(missing/../a.txt, O_RDONLY)", op_open("missing/../a.txt", O_RDONLY));
    line("open(dirlink/deeper/../b.bin, O_RDONLY)", op_open("dirlink/deeper/../b.bin", O_RDONLY));
    line("access(a.txt/.., R_OK)", access(P("a.txt/.."), R_OK));
    line("access(missing/.., F_OK)", access(P("missing/.."), F_OK));
    line("readlink(link-to-a/..)", (int)readlink(P("link-to-a/.."), buf, sizeof buf));
    line("readlink(dirlink/deeper/..)", (int)readlink(P("dirlink/deeper/.."), buf, sizeof buf));
    char *rp = realpath(P("a.txt/.."), NULL);
    line_name("realpath(a.txt/..)", rp);
    free(rp);
    rp = realpath(P("missing/.."), NULL);
    line_name("realpath(missing/..)", rp);
    free(rp);
    rp = realpath(P("dirlink/deeper/.."), NULL);
    line_name("realpath(dirlink/deeper/..)", rp);
    free(rp);
    DIR *dp = opendir(P("a.txt/.."));
    line("opendir(a.txt/..)", dp ? 0 : -1);
    if (dp)
        closedir(dp);
    dp = opendir(P("missing/.."));
    line("opendir(missing/..)", dp ? 0 : -1);
    if (dp)
        closedir(dp);
    dp = opendir(P("dirlink/deeper/.."));
    int nb = 0;
    struct dirent *de;
    while (dp && (de = readdir(dp)))
        nb += !strcmp(de->d_name, "b.bin");
    printf("%-40s %s\n", "opendir(dirlink/deeper/..) has b.bin", dp ? nb == 1 ? "ok:yes" : "ok:no" : strerrorname_np(errno));
    if (dp)
        closedir(dp);
    int here = open(".", O_RDONLY | O_DIRECTORY);
    line("chdir(a.txt/..)", chdir(P("a.txt/..")));
    line("chdir(missing/..)", chdir(P("missing/..")));
    if (chdir(P("dirlink/deeper/..")) == 0) {
        char cwd[PATH_MAX];
        line_name("chdir(dirlink/deeper/..), getcwd", getcwd(cwd, sizeof cwd));
        /* relative to a cwd inside the tree */
        line("stat(./b.bin/..) from there", stat("./b.bin/..", &st));
        line_st("stat(deeper/../b.bin) from there", stat("deeper/../b.bin", &st), &st);
        line_st("stat(up/..) from there", stat("up/..", &st), &st);
    } else {
        line("chdir(dirlink/deeper/..)", -1);
    }
    fchdir(here);
    close(here);
    int rd = open(P("dir"), O_RDONLY | O_DIRECTORY);
    line("fstatat(dir fd, b.bin/..)", fstatat(rd, "b.bin/..", &st, 0));
    line_st("fstatat(dir fd, up/../b.bin)", fstatat(rd, "up/../b.bin", &st, AT_SYMLINK_NOFOLLOW), &st);
    close(rd);
    /* a ".." that climbs out of the tree's root: still lexical through the shim (a known limit) */
    {
        char b[PATH_MAX], up[PATH_MAX + 16];
        snprintf(b, sizeof b, "%s", root);
        snprintf(up, sizeof up, "a.txt/../../%s", basename(b));
        line("stat(a.txt/../../ROOT)", stat(P(up), &st));
    }
    line("mkdir(new)", mkdir(P("new"), 0755));
    line("unlink(a.txt)", unlink(P("a.txt")));
    line("rmdir(dir)", rmdir(P("dir")));
    line("rename(a.txt, b)", rename(P("a.txt"), P("b")));
    line("symlink(x, new)", symlink("x", P("new")));
    /* issue 22 item 6: a create walks its whole spelling first (a last "." names an existing directory or none), an
     * entry under "name/" is there (EEXIST), a write-open of ".": its directory; link resolves its destination (its
     * parent missing: ENOENT) before it says EXDEV; rmdir of "." (EINVAL) from a spelling outside the mounts */
    line("mkdir(missing/.)", mkdir(P("missing/."), 0755));
    line("mkdir(dir/.)", mkdir(P("dir/."), 0755));
    line("symlink(x, a.txt/)", symlink("x", P("a.txt/")));
    line("mknod(fifo, missing/..)", mknod(P("missing/.."), S_IFIFO | 0600, 0));
    line("open(dir/., O_CREAT|O_EXCL)", open(P("dir/."), O_CREAT | O_EXCL | O_WRONLY, 0644));
    line("open(missing/., O_CREAT)", open(P("missing/."), O_CREAT | O_WRONLY, 0644));
    line("open(a.txt/, O_CREAT)", open(P("a.txt/"), O_CREAT | O_RDONLY, 0644));
    {
        FILE *f = fopen(P("missing/."), "a");
        line("fopen(missing/., a)", f ? 0 : -1);
        if (f)
            fclose(f);
        f = fopen(P("dir/."), "w");
        line("fopen(dir/., w)", f ? 0 : -1);
        if (f)
            fclose(f);
    }
    line("link(a.txt, ../../../nodir/x)", link(P("a.txt"), P("../../../nodir/x")));
    {
        char dots[PATH_MAX + 16];
        int here = open(".", O_PATH | O_DIRECTORY);
        snprintf(dots, sizeof dots, "%s/dir/.", root + 1);
        if (chdir("/") == 0)
            line("cwd /: rmdir(ROOT/dir/.)", rmdir(dots));
        /* a spelling the guard resolves into the cache: the kernel's answer for its last "." or "..", not EROFS */
        if (chdir(P("dir")) == 0) {
            line("cwd dir: rmdir(/proc/self/cwd/.)", rmdir("/proc/self/cwd/."));
            line("cwd dir: unlink(/proc/self/cwd/..)", unlink("/proc/self/cwd/.."));
        }
        if (here >= 0 && fchdir(here) == 0)
            close(here);
    }
    line("chmod(a.txt)", chmod(P("a.txt"), 0600));
    line("truncate(a.txt)", truncate(P("a.txt"), 0));
    line("access(a.txt, W_OK)", access(P("a.txt"), W_OK));
    line("access(a.txt, R_OK)", access(P("a.txt"), R_OK));
    int d = open(P("a.txt"), O_PATH);
    line("openat(O_PATH fd of a file, x)", openat(d, "x", O_RDONLY));
    line("fchdir(O_PATH fd of a file)", fchdir(d));
    close(d);
    if (argc == 3) {
        /* ".." after a symlink to a directory: the parent of the link's target */
        root = argv[2];
        line_st("stat(lnk/../c/x.txt)", stat(P("lnk/../c/x.txt"), &st), &st);
        line_st("lstat(lnk/..)", lstat(P("lnk/.."), &st), &st);
        line_st("stat(deep/../b/f.txt)", stat(P("deep/../b/f.txt"), &st), &st);
        line("stat(lnk/f.txt/..)", stat(P("lnk/f.txt/.."), &st));
        line("stat(lnk/../missing/..)", stat(P("lnk/../missing/.."), &st));
        rp = realpath(P("lnk/.."), NULL);
        line_name("realpath(lnk/..)", rp);
        free(rp);
        line("access(lnk/../c/x.txt, R_OK)", access(P("lnk/../c/x.txt"), R_OK));
        line("open(lnk/../c/x.txt, O_RDONLY)", op_open("lnk/../c/x.txt", O_RDONLY));
        dp = opendir(P("lnk/.."));
        nb = 0;
        while (dp && (de = readdir(dp)))
            nb += !strcmp(de->d_name, "c");
        printf("%-40s %s\n", "opendir(lnk/..) has c", dp ? nb == 1 ? "ok:yes" : "ok:no" : strerrorname_np(errno));
        if (dp)
            closedir(dp);
        here = open(".", O_RDONLY | O_DIRECTORY);
        if (chdir(P("lnk/..")) == 0) {
            char cwd[PATH_MAX];
            line_name("chdir(lnk/..), getcwd", getcwd(cwd, sizeof cwd));
            line_st("stat(c/../../lnk/../c) from there", stat("c/../../lnk/../c", &st), &st);
        } else {
            line("chdir(lnk/..)", -1);
        }
        fchdir(here);
        close(here);
        /* the kernel is still inside the tree (at a/), but lexically the path left it: a known limit */
        line_st("stat(lnk/../../a/c/x.txt)", stat(P("lnk/../../a/c/x.txt"), &st), &st);
        fts_lines("phys", FTS_PHYSICAL);
        fts_lines("log", FTS_LOGICAL);
        root = argv[1];
    }
    fts_lines("phys", FTS_PHYSICAL);
    fts_lines("log", FTS_LOGICAL);
    stat(P("a.txt"), &st);
    stat(P("same.txt"), &st2);
    printf("%-40s %s\n", "a.txt and same.txt (equal content)", st.st_ino == st2.st_ino ? "one inode" : "two inodes");
    stat(P("link-to-a"), &st2);
    printf("%-40s %s\n", "a.txt and link-to-a", st.st_ino == st2.st_ino ? "one inode" : "two inodes");
    return 0;
}
