/* durable.h - when a verified blob reaches the disk (docs/internals.md "Durability"). A blob is installed
 * under its name as soon as its bytes are verified and in the page cache; the flush (fdatasync of the blob,
 * fsync of blobs/) happens afterwards, in a detached process once the helper has answered. Until then
 * CACHE/unflushed/<name> (<sha256> for blobs/<sha256>, <sha256>.m<key> for a chunk-checked mounts/<key>/cblobs/
 * <sha256>, which the flush then moves into blobs/ once its whole sha256 matched) holds the boot id (/proc/sys/kernel/random/boot_id) of
 * the kernel whose page cache has the bytes. The record is fsynced, and its directory too, before the blob is
 * renamed into blobs/, so a blob name that survived a crash always has its record beside it; it is removed only
 * after the blob and blobs/ were flushed. Under the boot that wrote it a recorded blob is served (the page cache
 * is the truth); under another boot it is hashed again before use (the helper) or taken as missing (the shim,
 * which cannot hash: the helper's _get then re-verifies it). HFS3_DURABLE=sync keeps the old way (each blob
 * flushed before its install, no record). Owns: the records, the boot id, the flush and the move into blobs/. */
#ifndef HFS3_DURABLE_H
#define HFS3_DURABLE_H

#include <stdint.h>
#include <sys/types.h>

#include "hfs3/cache.h"

/* 1 when HFS3_DURABLE=sync asks for each blob to be flushed before it is installed (the old path, for
 * comparison); 0 (the default, HFS3_DURABLE=later) flushes after the install. */
int hfs3_durable_sync(void);

/* This boot's id into out (37 bytes: 36 characters + NUL): HFS3_TEST_BOOT_ID when set (tests only: it simulates
 * a reboot), else /proc/sys/kernel/random/boot_id. 0, or -errno when it cannot be read (then nothing may be
 * left unflushed: callers flush before the install). */
int hfs3_boot_id(char out[37]);

/* Stamps the file open as fd as verified (include/hfs3/serve.h, HFS3_STAMP_XATTR): what ("<sha256>" hashed whole,
 * "<sha256>.m<key>" checked by that mount's chunk digests), followed by this boot's id unless flushed (the bytes
 * are on disk). The file must be this process's own (or root's, as root). A file without its owner's write bit
 * gets it for the moment of the fsetxattr: the caller holds the blob's lock. 0, -ENOTSUP (the file system has no
 * user extended attributes: nothing to stamp), or another -errno (logged at debug). */
int hfs3_stamp_set(int fd, const char *what, int flushed);

/* 1 when unflushed/ is a directory nobody but uid or root can remove another's record from (theirs, sticky when
 * group-writable): then a record's absence says the blob is on disk, and a stamp's boot id (serve.h) need not be
 * this boot's. A member's unflushed/ (it made it first) could have removed a crash's record (issue 44 item 4). */
int hfs3_unflushed_trusted(const hfs3_cache *c, uid_t uid);

/* Records blob `name` (of size bytes) as unflushed, with this boot's id: "<boot id>\n<size>\n", written, fsynced,
 * and unflushed/ fsynced. Must succeed before the blob is renamed into blobs/ without a flush. 0 or -errno with a
 * message. */
int hfs3_unflushed_mark(const hfs3_cache *c, const char *name, uint64_t size);

/* The record of blob `name`, whose file is owner's: 0 none (the blob is on disk), or none that speaks for that
 * file (a record of a user other than owner and root: a member's record cannot deny another user's file), 1
 * written under this boot, 2 written under another boot, or unreadable, or writable by another (the blob must be
 * verified again before it is trusted). Decided on the record's descriptor (fstat). */
int hfs3_unflushed_state(const hfs3_cache *c, const char *name, uid_t owner);

/* Flushes the blob open as fd (fdatasync, then its directory dir) and removes its record name; a chunk-checked
 * blob's record (<sha256>.m<key>) is written again under this boot instead, for hfs3_flush_pending to promote
 * it. 0 or -errno. */
int hfs3_unflushed_settle(const hfs3_cache *c, int dir, const char *name, int fd);

/* Flushes every blob recorded under this boot whose lock is free (a blob being fetched is its fetcher's), and
 * removes a record whose blob is gone. A chunk-checked blob (a mount's cblobs/, fetch.h) is then hashed whole
 * and moved into blobs/ when it matches its sha256 (else it stays its mount's own). Records of another boot are left for the next use, which verifies the
 * blob. Returns the number of blobs flushed. */
int hfs3_flush_pending(const hfs3_cache *c);

/* hfs3_flush_pending in a detached process (double fork, its own session, /dev/null for 0-2, no inherited
 * descriptor, the cache opened again): the caller does not wait for the disk. HFS3_TEST_NO_FLUSH=1 (tests only)
 * skips it, leaving the records as a crash would. */
void hfs3_flush_spawn(const hfs3_cache *c);

#endif
