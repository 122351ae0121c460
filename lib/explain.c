/* explain.c - boolean settings and S3 failures worded for the user (include/hfs3/explain.h). Reads the
 * one-line message s3.c left ("s3: GET key: 404 NoSuchBucket: ...") and says what it means for the remote. */
#include "hfs3/explain.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hfs3/log.h"
#include "hfs3/util.h"

static pthread_mutex_t warned_mu = PTHREAD_MUTEX_INITIALIZER;
static char warned[8][32]; /* the variables already warned about in this process */

static void warn_once(const char *name, const char *value, int dflt)
{
    pthread_mutex_lock(&warned_mu);
    size_t i;
    for (i = 0; i < sizeof warned / sizeof warned[0] && warned[i][0]; i++)
        if (!strcmp(warned[i], name))
            break;
    int first = i < sizeof warned / sizeof warned[0] && !warned[i][0];
    if (first)
        snprintf(warned[i], sizeof warned[i], "%s", name);
    pthread_mutex_unlock(&warned_mu);
    if (first)
        hfs3_warn("%s='%.64s' is not a boolean (1/0, true/false, yes/no, on/off); ignored, using %s", name, value,
                  dflt ? "1" : "0");
}

int hfs3_env_bool(const char *name, int dflt)
{
    static const char *const t[] = {"1", "true", "yes", "on"};
    static const char *const f[] = {"0", "false", "no", "off"};
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (!strcasecmp(v, t[i]))
            return 1;
        if (!strcasecmp(v, f[i]))
            return 0;
    }
    warn_once(name, v, dflt);
    return dflt;
}

/* S3 error codes that mean "these credentials were refused". */
static int refused_code(const char *msg)
{
    static const char *const codes[] = {" 403 SignatureDoesNotMatch", " 403 InvalidAccessKeyId",
                                        " 403 AccessDenied", " 403 InvalidToken", " 403 ExpiredToken",
                                        " 400 ExpiredToken", " 400 InvalidToken", " 403 Forbidden",
                                        " 401 "};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (strstr(msg, codes[i]))
            return 1;
    return 0;
}

/* curl's failures to reach the server at all (a server down, a wrong host or port). */
static int unreachable(const char *msg)
{
    static const char *const what[] = {"Couldn't connect to server", "Could not resolve host",
                                       "Couldn't resolve host", "Connection refused", "No route to host"};
    for (size_t i = 0; i < sizeof what / sizeof what[0]; i++)
        if (strstr(msg, what[i]))
            return 1;
    return 0;
}

int hfs3_explain_s3(const hfs3_remote *r, const char *key, int rc)
{
    if (rc >= 0 || !r)
        return rc;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", hfs3_errmsg());
    char *mkey = hfs3_remote_manifest_key(r);
    int is_manifest = key && mkey && !strcmp(key, mkey);
    if (strstr(msg, " 404 NoSuchBucket")) {
        hfs3_err(rc, "%s: bucket %s does not exist at %s: check the bucket name in %s, or create the bucket", r->spec,
                 r->bucket, r->endpoint, r->spec);
    } else if (rc == -ENOENT && is_manifest) {
        hfs3_err(rc, "no manifest at s3://%s/%s: run hfs3-manifest build %s", r->bucket, mkey, r->spec);
    } else if (rc == -ENOENT && key && strstr(msg, " 404 NoSuchKey")) {
        hfs3_err(rc, "%s: s3://%s/%s is gone (404 NoSuchKey): the prefix changed since the manifest was built; "
                 "run hfs3-manifest build %s (hfs3-manifest verify %s lists every difference)", r->spec, r->bucket,
                 key, r->spec, r->spec);
    } else if (rc == -EBADMSG && strstr(msg, "sha256 mismatch")) {
        hfs3_err(rc, "%s: %s: the object changed since the manifest was built, or was damaged; run hfs3-manifest "
                 "build %s if the change is wanted", r->spec, msg, r->spec);
    } else if (rc == -ESTALE && strstr(msg, "changed since the manifest was built")) {
        /* fetch.c's If-Match saw another ETag: what to run is the same as for other bytes */
        int named = !strncmp(msg, r->spec, strlen(r->spec)) && msg[strlen(r->spec)] == ':';
        hfs3_err(rc, "%s%s%s; run hfs3-manifest build %s (hfs3-manifest verify %s lists every difference)",
                 named ? "" : r->spec, named ? "" : ": ", msg, r->spec, r->spec);
    } else if (refused_code(msg)) {
        /* the message s3.c wrote names the request, the status and S3's code; cut S3's long prose */
        char *prose = strstr(msg, "SignatureDoesNotMatch: ");
        if (prose)
            prose[strlen("SignatureDoesNotMatch")] = 0;
        if (r->cred_source)
            hfs3_err(rc, "%s: %s: the server refused the credentials from %s: check the secret key (and the "
                     "access key and session token) there", r->spec, msg, r->cred_source);
        else
            hfs3_err(rc, "%s: %s: no credentials were found for %s, so the request was anonymous: set its keys "
                     "(see hfs3-manifest --help, REMOTE)", r->spec, msg, r->spec);
    } else if (unreachable(msg)) {
        /* curl's words say what failed, not what to do about it */
        hfs3_err(rc, "%s: %s: is the server at %s up and reachable from here? if so, check the endpoint of %s",
                 r->spec, msg, r->endpoint, r->spec);
    } else if (strncmp(msg, r->spec, strlen(r->spec)) != 0 || msg[strlen(r->spec)] != ':') {
        hfs3_err(rc, "%s: %s", r->spec, msg);
    }
    free(mkey);
    return rc;
}
