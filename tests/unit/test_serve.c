/* test_serve.c - include/hfs3/serve.h: the one rule of HFS3_VERIFY_FOREIGN=1 for "may this descriptor be served"
 * (the shim's sh_may_serve and the helper's blob check share it), on fstat results built by hand: every part of
 * the rule refuses on its own. */
#include "harness.h"

#include "hfs3/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#define ME 64101
#define OTHER 64102

static struct stat blob(uid_t uid, mode_t mode, nlink_t links, off_t size)
{
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_mode = S_IFREG | mode;
    st.st_uid = uid;
    st.st_gid = 64100;
    st.st_nlink = links;
    st.st_size = size;
    return st;
}

static struct stat dir(uid_t uid, mode_t mode)
{
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_mode = S_IFDIR | mode;
    st.st_uid = uid;
    return st;
}

static void file_rule(void)
{
    struct stat st = blob(ME, 0440, 1, 47);
    CHECK(hfs3_serve_refusal(&st, ME, 47) == NULL);       /* the user's own blob, as installed in a shared cache */
    st = blob(0, 0444, 1, 47);
    CHECK(hfs3_serve_refusal(&st, ME, 47) == NULL);       /* root's (an init container's prewarm) */
    st = blob(OTHER, 0440, 1, 47);
    CHECK(hfs3_serve_refusal(&st, ME, 47) != NULL);       /* a member's: copied, never served */
    st = blob(ME, 0640, 1, 47);
    CHECK(hfs3_serve_refusal(&st, ME, 47) != NULL);       /* a write bit: not as installed */
    st = blob(0, 0460, 1, 47);
    CHECK(hfs3_serve_refusal(&st, ME, 47) != NULL);       /* group-writable (an ACL mask with w too) */
    st = blob(ME, 0442, 1, 47);
    CHECK(hfs3_serve_refusal(&st, ME, 47) != NULL);       /* writable by others */
    st = blob(ME, 0440, 2, 47);
    CHECK(hfs3_serve_refusal(&st, ME, 47) != NULL);       /* a second name */
    st = blob(ME, 0440, 1, 46);
    CHECK(hfs3_serve_refusal(&st, ME, 47) != NULL);       /* not the manifest's size */
    st = blob(ME, 0440, 1, 47);
    st.st_mode = S_IFIFO | 0440;
    CHECK(hfs3_serve_refusal(&st, ME, 47) != NULL);       /* a FIFO */
    /* each refusal says why in words, for the log line that names the file (a sampled mutant emptied one) */
    static const struct {
        uid_t uid;
        mode_t mode;
        nlink_t links;
        off_t size;
        const char *words;
    } why[] = {{OTHER, 0440, 1, 47, "another user's file"},
               {ME, 0640, 1, 47, "a file with a write bit (blobs are read-only)"},
               {ME, 0440, 2, 47, "a file with a second name (a hard link)"},
               {ME, 0440, 1, 46, "not the size the manifest says"}};
    for (size_t i = 0; i < sizeof why / sizeof *why; i++) {
        st = blob(why[i].uid, why[i].mode, why[i].links, why[i].size);
        const char *r = hfs3_serve_refusal(&st, ME, 47);
        CHECK(r && strcmp(r, why[i].words) == 0);
    }
    st.st_mode = S_IFIFO | 0440;
    CHECK(strcmp(hfs3_serve_refusal(&st, ME, 47), "not a regular file") == 0);
}

static void dir_rule(void)
{
    struct stat d = dir(0, 03770);
    CHECK(hfs3_serve_dir_refusal(&d, ME) == NULL);        /* root's shared blobs/: sticky */
    d = dir(ME, 03770);
    CHECK(hfs3_serve_dir_refusal(&d, ME) == NULL);        /* the user's own mounts/K/cblobs/ */
    d = dir(ME, 0700);
    CHECK(hfs3_serve_dir_refusal(&d, ME) == NULL);        /* a private cache */
    d = dir(OTHER, 03770);
    CHECK(hfs3_serve_dir_refusal(&d, ME) != NULL);        /* a member's: it renames anything in it */
    d = dir(0, 02770);
    CHECK(hfs3_serve_dir_refusal(&d, ME) != NULL);        /* group-writable, not sticky */
    d = dir(0, 01777);
    CHECK(hfs3_serve_dir_refusal(&d, ME) != NULL);        /* writable by others */
    d = dir(ME, 0700);
    d.st_mode = S_IFREG | 0700;
    CHECK(hfs3_serve_dir_refusal(&d, ME) != NULL);
}

/* issue 44: the stamp (user.hfs3.verified) says what a file was verified as; on a real file in /tmp */
static void stamp_rule(void)
{
    const char *h1 = "1111111111111111111111111111111111111111111111111111111111111111";
    const char *h2 = "2222222222222222222222222222222222222222222222222222222222222222";
    const char *boot = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa", *other = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb";
    char path[] = "/tmp/hfs3-stamp-XXXXXX", v[160];
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    struct stat open_dir = dir(ME, 03770), own_dir = dir(ME, 0700);
    if (fsetxattr(fd, HFS3_STAMP_XATTR, "x", 1, 0) < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP)) {
        /* no user xattrs here: only a directory nobody else can write passes */
        CHECK(hfs3_stamp_check(fd, h1, NULL, boot) == HFS3_STAMP_UNSUP);
        CHECK(hfs3_stamp_refusal(fd, &open_dir, h1, NULL, boot, NULL) != NULL);
        CHECK(hfs3_stamp_refusal(fd, &own_dir, h1, NULL, boot, NULL) == NULL);
        close(fd);
        return;
    }
    fremovexattr(fd, HFS3_STAMP_XATTR);
    CHECK(hfs3_stamp_check(fd, h1, NULL, boot) == HFS3_STAMP_NONE);          /* an older version's file */
    CHECK(hfs3_stamp_refusal(fd, &own_dir, h1, NULL, boot, NULL) != NULL);
#define STAMP(s) CHECK(fsetxattr(fd, HFS3_STAMP_XATTR, s, strlen(s), 0) == 0)
    STAMP(h1);
    CHECK(hfs3_stamp_check(fd, h1, NULL, boot) == HFS3_STAMP_OK);            /* hashed whole: blobs/ */
    char fdp[40];
    snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", fd);
    int pfd = open(fdp, O_PATH | O_CLOEXEC);                                 /* the shim's O_PATH serve */
    CHECK(pfd >= 0 && hfs3_stamp_check(pfd, h1, NULL, boot) == HFS3_STAMP_OK);
    if (pfd >= 0)
        close(pfd);
    CHECK(hfs3_stamp_check(fd, h1, "0123456789abcdef", boot) == HFS3_STAMP_OK); /* and any mount's cblobs/ */
    CHECK(hfs3_stamp_check(fd, h2, NULL, boot) == HFS3_STAMP_OTHER);         /* moved under another name */
    CHECK(hfs3_stamp_refusal(fd, &open_dir, h1, NULL, boot, NULL) == NULL);
    CHECK(hfs3_stamp_refusal(fd, &open_dir, h2, NULL, boot, NULL) != NULL);
    snprintf(v, sizeof v, "%s.m0123456789abcdef", h1);
    STAMP(v);
    CHECK(hfs3_stamp_check(fd, h1, "0123456789abcdef", boot) == HFS3_STAMP_OK); /* chunk-checked: its mount */
    CHECK(hfs3_stamp_check(fd, h1, "0123456789abcdee", boot) == HFS3_STAMP_OTHER); /* another mount's */
    CHECK(hfs3_stamp_check(fd, h1, NULL, boot) == HFS3_STAMP_OTHER);         /* not blobs/ */
    snprintf(v, sizeof v, "%s %s", h1, boot);
    STAMP(v);
    CHECK(hfs3_stamp_check(fd, h1, NULL, boot) == HFS3_STAMP_OK);            /* not flushed, this boot */
    CHECK(hfs3_stamp_check(fd, h1, NULL, other) == HFS3_STAMP_BOOT);         /* after a reboot: verified again */
    CHECK(hfs3_stamp_check(fd, h1, NULL, NULL) == HFS3_STAMP_BOOT);
    snprintf(v, sizeof v, "%s.m0123456789abcdef %s", h1, boot);
    STAMP(v);
    CHECK(hfs3_stamp_check(fd, h1, "0123456789abcdef", boot) == HFS3_STAMP_OK);
    CHECK(hfs3_stamp_check(fd, h1, "0123456789abcdef", other) == HFS3_STAMP_BOOT);
    snprintf(v, sizeof v, "%s %sx", h1, boot);
    STAMP(v);
    CHECK(hfs3_stamp_check(fd, h1, NULL, boot) == HFS3_STAMP_OTHER);         /* malformed */
#undef STAMP
    close(fd);
}

int main(void)
{
    TEST(file_rule);
    TEST(dir_rule);
    TEST(stamp_rule);
    return t_done("test_serve");
}
