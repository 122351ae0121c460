/* creds.h - the AWS credential chain, in the order the AWS SDKs and CLI use it, for s3:// remotes and rclone
 * remotes with env_auth = true:
 *   1. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN) in the environment
 *   2. the profile's role_arn with source_profile or credential_source: STS AssumeRole, signed with the source's keys
 *   3. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+ AWS_ROLE_SESSION_NAME), or the profile's
 *      web_identity_token_file + role_arn: STS AssumeRoleWithWebIdentity (unsigned)
 *   4. SSO (sso_start_url, sso_session): refused with a clear line
 *   5. static keys of the profile in the credentials file
 *   6. the profile's credential_process
 *   7. static keys of the profile in the config file
 *   8. container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI (ECS, EKS Pod Identity), with
 *      AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or _TOKEN
 *   9. IMDSv2 (EC2 instance metadata) unless AWS_EC2_METADATA_DISABLED=true; none there: anonymous requests
 * Planning (hfs3_creds_plan) reads only the environment and the files config.c loaded: no network, no process.
 * Sources 2, 3, 6, 8 and 9 are asked on the first request that needs keys (hfs3_creds_get), their temporary
 * keys are kept in a private per-user cache file and reused by later processes until 5 minutes before they
 * expire, and refreshed during a long run. Messages name the source ("web identity: AccessDenied: ...") and
 * never hold a secret, a session token or a web identity token. */
#ifndef HFS3_CREDS_H
#define HFS3_CREDS_H

typedef struct hfs3_creds hfs3_creds;

/* One set of keys. access_key NULL: anonymous (unsigned) requests. */
typedef struct hfs3_cred {
    char *access_key;
    char *secret_key;
    char *session_token; /* may be NULL */
    long long expires;   /* seconds since the epoch; 0: does not expire */
} hfs3_cred;

/* Wipes the secrets and frees every member; c is left zeroed. */
void hfs3_cred_clear(hfs3_cred *c);

/* How the chain reads the AWS shared files that config.c loaded. get returns a non-empty value or NULL:
 * file 0 is the credentials file ([NAME] sections), file 1 the config file ([profile NAME], [default],
 * [services NAME]); sub is the nested key (`sts =` then an indented `endpoint_url = ...`), else NULL. */
typedef struct hfs3_aws_files {
    const char *(*get)(void *ud, int file, const char *sect, const char *key, const char *sub);
    int (*has)(void *ud, int file, const char *sect); /* the section exists */
    void *ud;
    const char *cred_path, *conf_path; /* for messages */
    const char *profile;               /* the selected profile ("default" when none is named) */
} hfs3_aws_files;

/* Walks the chain for f's profile and the environment. Static keys (1, 5, 7) are copied into *keys; any
 * other source becomes a provider in *out (owned by the caller, hfs3_creds_free). Never both.
 * Errors: -EINVAL naming ctx and the cause (half a key pair, role_arn without a source, SSO, a loop of
 * source profiles, a container URI hfs3 must not send a token to...). */
int hfs3_creds_plan(const hfs3_aws_files *f, const char *ctx, hfs3_cred *keys, hfs3_creds **out);

/* Where the provider's requests go: the region for the regional STS endpoint (sts.REGION.amazonaws.com)
 * unless AWS_ENDPOINT_URL_STS & co named one, and the TLS settings of the remote. */
int hfs3_creds_set_net(hfs3_creds *c, const char *region, const char *ca_bundle, int tls_verify);

/* The keys to sign the next request with, into *out (the caller clears it with hfs3_cred_clear). Fetched on
 * first use (from the per-user cache when it holds keys valid for 5 more minutes, else from the source),
 * fetched again when fewer than 5 minutes are left. Thread-safe. Errors: the source's, one line
 * "SOURCE: ..." (-EACCES for a refusal, -EIO otherwise); callers name the remote. */
int hfs3_creds_get(hfs3_creds *c, hfs3_cred *out);

/* "web identity", "assume role", "credential_process", "container credentials", "instance metadata". */
const char *hfs3_creds_source(const hfs3_creds *c);

void hfs3_creds_free(hfs3_creds *c);

#endif
