/* glob.c - probe: glob(3) (glibc walks with its internal opendir, so the shim passes GLOB_ALTDIRFUNC). */
#include <glob.h>
#include "probe.h"

int main(int argc, char **argv)
{
    char b[4096];
    glob_t g;
    int r = glob(P(b, "*.txt"), 0, NULL, &g);
    OK(r == 0 && g.gl_pathc == 2 && strstr(g.gl_pathv[0], "/a.txt") && strstr(g.gl_pathv[1], "/same.txt"),
       "glob *.txt -> %zu", r == 0 ? g.gl_pathc : 0);
    if (r == 0)
        globfree(&g);
    r = glob(P(b, "*/deep*/*"), GLOB_MARK, NULL, &g);
    OK(r == 0 && g.gl_pathc == 2 && strstr(g.gl_pathv[0], "/dir/deeper/c.txt") &&
           strstr(g.gl_pathv[1], "/dirlink/deeper/c.txt"), "glob nested (also through dirlink)");
    if (r == 0)
        globfree(&g);
    r = glob(P(b, "d*"), GLOB_ONLYDIR | GLOB_MARK, NULL, &g);
    OK(r == 0 && g.gl_pathc >= 1, "glob ONLYDIR");
    if (r == 0)
        globfree(&g);
    OK(glob(P(b, "*.nope"), 0, NULL, &g) == GLOB_NOMATCH, "glob no match");
    OK(glob("/etc/host*", 0, NULL, &g) == 0 && g.gl_pathc >= 1, "glob outside the mounts");
    DONE();
}
