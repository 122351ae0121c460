/* walk.c - glibc's nftw(3) and ftw(3) over a tree (issue 6, item 12). Usage: walk nftw|nftw-phys|nftw-depth|ftw DIR
 * Prints one line per entry: its type and its path, in the order the walk gives them. */
#include <ftw.h>
#include <stdio.h>
#include <string.h>

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
    printf("%s %d %s %lld\n", tname(t), f->level, p, t == FTW_F ? (long long)st->st_size : 0LL);
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
    else
        r = nftw(argv[2], on, 8, !strcmp(argv[1], "nftw-phys") ? FTW_PHYS : !strcmp(argv[1], "nftw-depth") ? FTW_PHYS | FTW_DEPTH : 0);
    printf("result %d\n", r);
    return r != 0;
}
