/* main.c - hfs3-manifest: dispatches to one file per subcommand. Parsing and printing only. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: hfs3-manifest build|show|verify|fetch ... REMOTE\n");
        return 2;
    }
    fprintf(stderr, "hfs3-manifest: unknown command '%s'\n", argv[1]);
    return 2;
}
