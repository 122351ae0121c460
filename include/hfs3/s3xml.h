/* s3xml.h - streaming parsers (libexpat) for the two S3 XML bodies hfs3 reads: a ListObjectsV2 result
 * and an <Error> body. Entities (&quot; in ETags, &amp; in keys) are decoded by expat; malformed XML
 * is an error, never a guess. */
#ifndef HFS3_S3XML_H
#define HFS3_S3XML_H

#include <stddef.h>
#include "hfs3/s3.h"

/* Appends each <Contents> (Key, Size, ETag, LastModified) to out. *truncated gets IsTruncated,
 * *next_token (malloc'd or NULL) NextContinuationToken. -EINVAL (message says where) on malformed XML,
 * a missing Key/Size, or a Size that is not a whole number below 2^53. */
int hfs3_s3xml_parse_list(const char *xml, size_t n, hfs3_s3_list *out, int *truncated, char **next_token);
/* The same, and each <CommonPrefixes><Prefix> of a delimiter listing appended to prefixes (as an object with
 * only its key set; prefixes may be NULL: ignored). On failure neither list keeps anything of this page. */
int hfs3_s3xml_parse_list_dir(const char *xml, size_t n, hfs3_s3_list *out, hfs3_s3_list *prefixes,
                              int *truncated, char **next_token);

/* Extracts Code and Message of an <Error> document (each malloc'd, NULL when absent).
 * -EINVAL when the body is not such a document. */
int hfs3_s3xml_parse_error(const char *xml, size_t n, char **code, char **message);

/* "2026-11-30T11:28:56.527Z" -> seconds since the epoch (UTC). -EINVAL when malformed. */
int hfs3_s3xml_parse_time(const char *s, long long *out);

#endif
