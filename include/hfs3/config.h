/* config.h - what a REMOTE string means: bucket, prefix, endpoint, addressing, TLS and credentials.
 *
 * REMOTE is `name:bucket/prefix` (an rclone remote: $RCLONE_CONFIG or ~/.config/rclone/rclone.conf,
 * overridden by RCLONE_CONFIG_<NAME>_<KEY>) or `s3://bucket/prefix` (AWS_* variables, AWS_PROFILE with
 * ~/.aws/credentials and ~/.aws/config, or AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE).
 * Addressing: HFS3_S3_ADDRESSING=path|virtual|auto; auto is path-style for a custom endpoint and
 * virtual-hosted for AWS's own (rclone's force_path_style and ~/.aws/config addressing_style override).
 * TLS: HFS3_TLS_VERIFY=0 disables checks (with a warning); AWS_CA_BUNDLE / rclone ca_cert name a CA file.
 * No network here. Secrets live only in the struct, never in messages. */
#ifndef HFS3_CONFIG_H
#define HFS3_CONFIG_H

typedef struct hfs3_remote {
    char *spec;          /* the REMOTE string as given */
    char *bucket;
    char *prefix;        /* "" or "a/b" (no leading or trailing '/') */
    char *endpoint;      /* "scheme://host[:port]" with no trailing '/', e.g. https://s3.us-east-1.amazonaws.com */
    char *region;        /* never NULL; "us-east-1" when nothing says otherwise */
    char *access_key;    /* NULL together with secret_key: anonymous (unsigned) requests */
    char *secret_key;
    char *session_token; /* may be NULL */
    struct hfs3_creds *creds; /* NULL, or where keys come from when they are not static (creds.h): then the
                                 three above stay NULL and the S3 client asks hfs3_creds_get per request */
    char *ca_bundle;     /* may be NULL */
    char *cred_source;   /* where the keys came from, for messages (a variable, profile or rclone remote, never a
                            key); NULL when anonymous */
    int path_style;      /* 1: http://host/bucket/key, 0: http://bucket.host/key */
    int tls_verify;      /* 0 only when HFS3_TLS_VERIFY=0 */
} hfs3_remote;

/* Parses spec with the current environment and config files. On success *out is owned by the caller
 * (hfs3_remote_free). Errors: -EINVAL for a malformed spec or config (unknown rclone remote, type not
 * s3, bad addressing value...), with a message naming the remote and the cause. */
int hfs3_remote_parse(const char *spec, hfs3_remote **out);
void hfs3_remote_free(hfs3_remote *r);

/* The object key of a manifest-relative path: prefix + "/" + rel (just rel when prefix is empty).
 * Returns a malloc'd string or NULL on OOM. */
char *hfs3_remote_key(const hfs3_remote *r, const char *rel);

/* The manifest's key: prefix + "/.hfs3/manifest.json". */
char *hfs3_remote_manifest_key(const hfs3_remote *r);

/* What r resolves to, as one string: the endpoint with its scheme and host in lower case and the scheme's
 * default port (80, 443) dropped, then "/" bucket, then "/" prefix when there is one:
 * "http://127.0.0.1:9000/models/qwen". Two REMOTEs with the same identity name the same objects, however
 * they are spelled (an rclone remote or s3://, trailing slashes, path- or virtual-hosted addressing);
 * credentials and the region (which only signs, or is part of an AWS endpoint already) are not part of it.
 * The cache records it per mount (mounts/K/canonical) so that a mount cached under one spelling is found
 * under another. malloc'd; NULL on OOM or for a remote without endpoint, bucket or prefix (not parsed). */
char *hfs3_remote_identity(const hfs3_remote *r);

#endif
