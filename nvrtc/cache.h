/* cache.h - the on-disk compile cache (checked, atomic, bounded) and the source dump directory. */
#ifndef MW_CACHE_H
#define MW_CACHE_H

#include <stddef.h>

/* BLAKE2b-256 over the parts, each preceded by its length as 8 little-endian bytes (so no two
 * different part lists hash alike by shifting bytes between parts), hex-encoded into out_hex
 * (64 digits and a NUL). Callers pass everything the output depends on: generated source,
 * options, compiler version, target architecture. lens NULL means every part is a
 * NUL-terminated string. Returns 0, MW_EINVAL, or MW_EIO when libsodium cannot initialise. */
int mw__cache_key(const void *const *parts, const size_t *lens, int nparts, char out_hex[65]);

/* The cache directory, created on demand (mode 0700): $MOONWARP_CACHE_DIR, else
 * $XDG_CACHE_HOME/moonwarp (when absolute), else $HOME/.cache/moonwarp. NULL when the cache is
 * off: $MOONWARP_NO_CACHE is set to anything but "" or "0", or the directory cannot be created
 * or written. Read from the environment at each call; the string lives in a per-thread buffer
 * valid until the next call on the same thread. */
const char *mw__cache_dir(void);

/* Looks up the entry key.ext (key: lowercase hex as made by mw__cache_key; ext: a short
 * alphanumeric suffix such as "cubin"). 0 on a hit, with the payload in *data (malloc'd, the
 * caller frees it; one NUL byte follows the payload but is not counted in *size). MW_EAGAIN on
 * a miss: absent, cache off, unreadable, or an entry whose header or checksum does not match,
 * which is removed. A hit refreshes the entry's mtime, the age eviction goes by. MW_EINVAL for
 * a malformed key or ext, MW_ENOMEM. Safe against concurrent readers and writers in other
 * threads and processes. */
int mw__cache_get(const char *key, const char *ext, void **data, size_t *size);

/* Stores data as key.ext: written under a temporary name in the cache directory and renamed
 * into place, so readers see the old entry, the new one or none, never a partial one, and
 * concurrent writers of one key leave one whole entry. Then removes the least recently used
 * entries while the entries' total size exceeds $MOONWARP_CACHE_MAX_MB (default 256; "0"
 * means no bound; fractions allowed). Returns 0 (also when the cache is off), MW_EIO when the
 * entry could not be written, which callers may ignore, MW_EINVAL, MW_ENOMEM. */
int mw__cache_put(const char *key, const char *ext, const void *data, size_t size);

/* Removes the entry key.ext, if there is one: a payload that passed its checksum but that the
 * caller could not use (a program that does not load), so that the next build makes it
 * afresh. 0, also when there is none or the cache is off; MW_EINVAL for a malformed key or ext. */
int mw__cache_remove(const char *key, const char *ext);

/* $MOONWARP_DUMP_DIR, created on demand, where generated sources are written for users to
 * read; NULL when unset or empty or when it cannot be created. Per-thread buffer as above. */
const char *mw__cache_dump_dir(void);

/* Writes path atomically: a temporary file in the same directory, then rename(). 0, or MW_EIO
 * (nothing is left behind on failure). */
int mw__write_file_atomic(const char *path, const void *data, size_t n);

#endif /* MW_CACHE_H */
