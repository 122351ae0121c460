/* dir.c - probe: directory streams (readdir, d_type, errno at the end, rewind/seek, fdopendir, scandir). */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "probe.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static int count(DIR *d, int *types)
{
    struct dirent *e;
    int n = 0;
    *types = 0;
    errno = 4242;
    while ((e = readdir(d))) {
        n++;
        if (!strcmp(e->d_name, "a.txt") && e->d_type == DT_REG)
            *types |= 1;
        if (!strcmp(e->d_name, "dir") && e->d_type == DT_DIR)
            *types |= 2;
        if (!strcmp(e->d_name, "link-to-a") && e->d_type == DT_LNK)
            *types |= 4;
        errno = 4242;
    }
    return n;
}

int main(int argc, char **argv)
{
    char b[4096];
    int t;
    DIR *d = opendir(argv[1]);
    OK(d != NULL, "opendir mount");
    if (!d)
        DONE();
    int n = count(d, &t);
    OK(n == 8 && t == 7, "8 entries (. .. + 6) with d_type, got %d", n);
    OK(errno == 4242, "errno untouched at the end");
    rewinddir(d);
    struct dirent *e = readdir(d);
    long pos = telldir(d);
    e = readdir(d);
    char name[256];
    snprintf(name, sizeof name, "%s", e ? e->d_name : "");
    seekdir(d, pos);
    e = readdir(d);
    OK(e && !strcmp(e->d_name, name), "telldir/seekdir");
    struct stat st;
    OK(fstatat(dirfd(d), "a.txt", &st, 0) == 0 && st.st_size == 13, "fstatat on dirfd");
    struct dirent ent, *res;
    rewinddir(d);
    OK(readdir_r(d, &ent, &res) == 0 && res == &ent, "readdir_r");
    OK(closedir(d) == 0, "closedir");
    int fd = open(P(b, "dir"), O_RDONLY | O_DIRECTORY);
    d = fdopendir(fd);
    OK(d && dirfd(d) == fd, "fdopendir");
    int seen = 0;
    while (d && (e = readdir(d)))
        if (!strcmp(e->d_name, "deeper") || !strcmp(e->d_name, "b.bin") || !strcmp(e->d_name, "up"))
            seen++;
    OK(seen == 3, "fdopendir lists dir");
    if (d)
        closedir(d);
    struct dirent **list;
    n = scandir(argv[1], &list, NULL, alphasort);
    OK(n == 8 && !strcmp(list[2]->d_name, "a.txt"), "scandir sorted");
    for (int i = 0; i < n; i++)
        free(list[i]);
    if (n >= 0)
        free(list);
    errno = 0;
    OK(opendir(P(b, "a.txt")) == NULL && errno == ENOTDIR, "opendir on a file");
    OK(opendir(P(b, "nope")) == NULL && errno == ENOENT, "opendir missing");
    DONE();
}
