/* fuzz_config.c - libFuzzer target for the INI readers of lib/config.c, through hfs3_remote_parse.
 *
 * Input: "REMOTE\n" then the rclone.conf bytes, optionally followed by a NUL and the bytes of an AWS
 * shared config file, a NUL and an AWS credentials file. The files are written to a private temp directory
 * named by RCLONE_CONFIG, AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE (HOME points there too; every
 * other AWS_* / RCLONE_* / HFS3_* variable is cleared once at start). Checks: no crash, no leak, no UB; a
 * success gives a remote with bucket, prefix, endpoint and region set. Built and run by tests/fuzz/run.sh; seeds in tests/fuzz/corpus/config. */
#include "hfs3/config.h"
#include "hfs3/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static char dir[256], rc_path[300], aws_conf[300], aws_cred[300];

static void die(const char *what)
{
    fprintf(stderr, "fuzz_config: %s (%s)\n", what, hfs3_errmsg());
    abort();
}

static void clean_env(void)
{
    for (;;) {
        int again = 0;
        for (char **e = environ; *e; e++) {
            if (strncmp(*e, "AWS_", 4) == 0 || strncmp(*e, "RCLONE_", 7) == 0 || strncmp(*e, "HFS3_", 5) == 0 ||
                strncmp(*e, "XDG_", 4) == 0) {
                char name[256];
                size_t n = strcspn(*e, "=");
                if (n >= sizeof name)
                    n = sizeof name - 1;
                memcpy(name, *e, n);
                name[n] = 0;
                unsetenv(name);
                again = 1;
                break;
            }
        }
        if (!again)
            return;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/hfs3-fuzz-config.XXXXXX", base);
    if (!mkdtemp(dir))
        die("mkdtemp");
    snprintf(rc_path, sizeof rc_path, "%s/rclone.conf", dir);
    snprintf(aws_conf, sizeof aws_conf, "%s/aws-config", dir);
    snprintf(aws_cred, sizeof aws_cred, "%s/aws-credentials", dir);
    clean_env();
    setenv("HOME", dir, 1);
    setenv("RCLONE_CONFIG", rc_path, 1);
    setenv("AWS_CONFIG_FILE", aws_conf, 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", aws_cred, 1);
    setenv("HFS3_LOG", "error", 1);
    return 0;
}

static void put(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        die("cannot write a temp file");
    if (n && fwrite(p, 1, n, f) != n)
        die("short write");
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    if (!nl || memchr(data, 0, (size_t)(nl - data)))
        return 0;
    char *spec = hfs3_strndup((const char *)data, (size_t)(nl - data));
    if (!spec)
        return 0;
    const uint8_t *p = nl + 1, *end = data + size;
    const uint8_t *parts[3] = {p, NULL, NULL};
    size_t lens[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        if (!parts[i])
            break;
        const uint8_t *z = memchr(parts[i], 0, (size_t)(end - parts[i]));
        lens[i] = (size_t)((z ? z : end) - parts[i]);
        if (z && i < 2)
            parts[i + 1] = z + 1;
    }
    put(rc_path, parts[0], lens[0]);
    put(aws_conf, parts[1] ? parts[1] : (const uint8_t *)"", lens[1]);
    put(aws_cred, parts[2] ? parts[2] : (const uint8_t *)"", lens[2]);

    hfs3_remote *r = NULL;
    if (hfs3_remote_parse(spec, &r) == 0) {
        if (!r || !r->bucket || !r->prefix || !r->endpoint || !r->region)
            die("a parsed remote misses a field");
        char *k = hfs3_remote_manifest_key(r);
        free(k);
        hfs3_remote_free(r);
    } else if (r) {
        die("failed parse left *out set");
    }
    free(spec);
    return 0;
}
