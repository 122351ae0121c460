/* creds_int.h - lib-internal: one credential source of the chain (creds.c plans them, credsrc.c asks them). */
#ifndef HFS3_CREDS_INT_H
#define HFS3_CREDS_INT_H

#include "hfs3/creds.h"

enum { SRC_STATIC, SRC_WEBID, SRC_ROLE, SRC_PROCESS, SRC_CONTAINER, SRC_IMDS };

/* Everything a source needs to be asked, copied at planning time (the files are gone by then). */
typedef struct credsrc {
    int kind;
    const char *name;           /* for messages: "web identity", "assume role", ... */
    hfs3_cred keys;             /* SRC_STATIC (a role's source keys) */
    char *role_arn, *session_name, *external_id, *duration; /* SRC_ROLE, SRC_WEBID */
    char *token_file;           /* SRC_WEBID */
    char *command;              /* SRC_PROCESS */
    char *uri, *auth, *auth_file; /* SRC_CONTAINER */
    char *imds_endpoint;        /* SRC_IMDS: "http://169.254.169.254" */
    long imds_timeout_ms;
    int imds_attempts;
    int optional;               /* SRC_IMDS as the chain's last resort: no IMDS here means anonymous */
    char *sts_endpoint;         /* SRC_ROLE, SRC_WEBID: configured STS URL, else NULL (regional) */
    struct credsrc *source;     /* SRC_ROLE: where the keys that sign AssumeRole come from */
    /* set by hfs3_creds_set_net for the whole tree */
    char *region, *ca_bundle;
    int tls_verify;
} credsrc;

void credsrc_free(credsrc *s);

/* The name of c's file in the per-user credentials cache: a sha256 of everything that decides whose keys the
 * source returns. For tests, which check that two identities never share one. */
const char *creds_cache_key(const hfs3_creds *c);

/* Asks the source for keys (network, or running the process). On success *out holds them (expires 0 when
 * the source gave no expiry; access_key NULL only for an optional IMDS that is not there). Errors: one line
 * starting with s->name, no secret in it; -EACCES when the source refused, -EIO otherwise. */
int credsrc_fetch(const credsrc *s, hfs3_cred *out);

/* POSIX shell-like word splitting of a credential_process command line (as Python's shlex.split, which the
 * AWS CLI uses): blanks separate words, '...' is literal, "..." allows \" and \\, a backslash outside quotes
 * escapes the next character. *argv is NULL-terminated, one allocation; -EINVAL for an open quote or no word. */
int credsrc_split(const char *cmd, char ***argv);

/* ISO 8601 / RFC 3339 time ("2026-12-01T10:00:00Z", with optional fraction and a +HH:MM offset) to seconds
 * since the epoch; -EINVAL when malformed. */
int credsrc_parse_time(const char *s, long long *out);

#endif
