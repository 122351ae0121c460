/* explain.h - messages that say what to do: boolean settings read the way people write them, and S3 failures
 * (a missing bucket or manifest, refused credentials) turned into one line naming the remote as the user wrote
 * it, the object, the cause and the next step. */
#ifndef HFS3_EXPLAIN_H
#define HFS3_EXPLAIN_H

#include "hfs3/config.h"

/* A boolean environment variable: 1/0, true/false, yes/no, on/off (any case). Unset or empty: dflt. Any
 * other value: dflt, with one warning per variable and process naming the value and what it counts as. */
int hfs3_env_bool(const char *name, int dflt);

/* Rewrites the current error message (hfs3_errmsg) of an S3 request on r that failed with rc, and returns rc:
 * - 404 NoSuchBucket: "REMOTE: bucket B does not exist at ENDPOINT: check the bucket in REMOTE, or create it";
 * - 404 on the manifest's key (key is r's manifest key): "no manifest at s3://B/P/.hfs3/manifest.json: run
 *   hfs3-manifest build REMOTE"; 404 NoSuchKey on another key, or a sha256 mismatch (-EBADMSG): the prefix
 *   changed since the build, run build again;
 * - 403 (SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied ...): adds which credentials were used
 *   (r->cred_source: the variable, profile or rclone remote; never a key) and what to check;
 * - anything else: "REMOTE: " + the message, unless it already starts with the remote.
 * key may be NULL when the failed request was not for one object. */
int hfs3_explain_s3(const hfs3_remote *r, const char *key, int rc);

#endif
