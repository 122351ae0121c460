/* walk.c - glibc's nftw(3) and ftw(3) over a tree (issue 6, item 12). Usage:
 *   walk nftw|nftw-phys|nftw-depth|nftw-chdir|nftw-chdir-depth|ftw DIR
 * Prints one line per entry: its type and its path, in the order the walk gives them; with FTW_CHDIR also the
 * working directory the callback runs in and whether the entry's name (path + base) answers lstat there, and
 * the working directory after the walk. */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int chdir_mode;

static const char *tname(int t)
{
    switch (t) {
    case FTW_F: return "F";
    case FTW_D: return "D";
    case FTW_DNR: return "DNR";
    case FTW_DP: return "DP";
    case FTW_NS: return "NS";
    case FTW_SL: return "SL";
    case FTW_SLN: return "SLN";
    }
    return "?";
}

static int on(const char *p, const struct stat *st, int t, struct FTW *f)
{
    printf("%s %d %s %lld", tname(t), f->level, p, t == FTW_F ? (long long)st->st_size : 0LL);
    if (chdir_mode) {
        char cwd[PATH_MAX];
        struct stat s2;
        printf(" cwd=%s rel=%s", getcwd(cwd, sizeof cwd) ? cwd : "?",
               lstat(p + f->base, &s2) == 0 ? "ok" : strerrorname_np(errno));
    }
    printf("\n");
    return 0;
}

static int on_old(const char *p, const struct stat *st, int t)
{
    printf("%s %s\n", tname(t), p);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int r;
    if (!strcmp(argv[1], "ftw"))
        r = ftw(argv[2], on_old, 8);
    else {
        int fl = !strcmp(argv[1], "nftw-phys") ? FTW_PHYS : !strcmp(argv[1], "nftw-depth") ? FTW_PHYS | FTW_DEPTH : 0;
        if (!strcmp(argv[1], "nftw-chdir"))
            fl = FTW_PHYS | FTW_CHDIR, chdir_mode = 1;
        if (!strcmp(argv[1], "nftw-chdir-depth"))
            fl = FTW_PHYS | FTW_CHDIR | FTW_DEPTH, chdir_mode = 1;
        r = nftw(argv[2], on, 8, fl);
    }
    printf("result %d\n", r);
    if (chdir_mode) {
        char cwd[PATH_MAX];
        printf("cwd after: %s\n", getcwd(cwd, sizeof cwd) ? cwd : "?");
    }
    return r != 0;
}
