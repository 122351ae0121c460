#include "harness.h"
#include "hfs3/util.h"

#include <errno.h>
#include <stdlib.h>

static void buf_cap(void)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 8);
    CHECK_EQ_INT(hfs3_buf_adds(&b, "abcd"), 0);
    CHECK_EQ_INT(hfs3_buf_addf(&b, "%d", 123), 0);
    CHECK_EQ_STR(hfs3_buf_str(&b), "abcd123");
    CHECK_EQ_INT(hfs3_buf_adds(&b, "xy"), -E2BIG);
    CHECK(b.data == NULL && b.len == 0);
    hfs3_buf_init(&b, 0);
    for (int i = 0; i < 1000; i++)
        CHECK_EQ_INT(hfs3_buf_addf(&b, "%0300d", i), 0);
    CHECK_EQ_INT(b.len, 300000);
    size_t n;
    char *s = hfs3_buf_take(&b, &n);
    CHECK_EQ_INT(n, 300000);
    free(s);
}

static void hex_sha(void)
{
    char hex[65];
    hfs3_sha256_hexof("abc", 3, hex);
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(hfs3_is_sha256_hex(hex));
    CHECK(!hfs3_is_sha256_hex("BA7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    unsigned char raw[32];
    CHECK_EQ_INT(hfs3_unhex(hex, raw, 32), 0);
    CHECK_EQ_INT(raw[0], 0xba);
    CHECK_EQ_INT(hfs3_unhex("zz", raw, 1), -EINVAL);
    hfs3_sha256_ctx *h = hfs3_sha256_new();
    hfs3_sha256_update(h, "a", 1);
    hfs3_sha256_update(h, "bc", 2);
    unsigned char md[32];
    hfs3_sha256_final(h, md);
    hfs3_hex(md, 32, hex);
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    hfs3_sha256_free(h);
}

static void errors(void)
{
    CHECK_EQ_INT(hfs3_err(-ENOENT, "key %s", "a/b"), -ENOENT);
    CHECK_EQ_INT(hfs3_err_wrap(-ENOENT, "remote %s", "r:"), -ENOENT);
    CHECK_EQ_STR(hfs3_errmsg(), "remote r:: key a/b");
}

int main(void)
{
    TEST(buf_cap);
    TEST(hex_sha);
    TEST(errors);
    return t_done("test_util");
}
