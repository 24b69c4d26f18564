/* cache.c - the on-disk compile cache: BLAKE2b keys, checked entries, atomic writes, eviction. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "moonwarp.h"

/* An entry file is a 48-byte header followed by the payload:
 *   0  "MWC1"
 *   4  4 bytes, zero
 *   8  payload size, 8 bytes little-endian
 *   16 BLAKE2b-256 of the payload
 * The writer does not fsync: a crash may leave a short or garbled file under the final name,
 * and the size and checksum make the reader drop it and recompile. */
#define HEADER_SIZE 48
#define HASH_SIZE 32
#define MAX_PAYLOAD ((uint64_t)1 << 30)
#define DEFAULT_MAX_MB 256.0
#define STALE_TEMP_SECONDS 3600 /* temp files older than this were left by a dead writer */

static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;
static int sodium_ok;

static void init_sodium(void) { sodium_ok = sodium_init() >= 0; }

static int have_sodium(void) {
  pthread_once(&sodium_once, init_sodium);
  return sodium_ok;
}

static void put_u64le(unsigned char *p, uint64_t v) {
  int i;
  for (i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64le(const unsigned char *p) {
  uint64_t v = 0;
  int i;
  for (i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

int mw__cache_key(const void *const *parts, const size_t *lens, int nparts, char out_hex[65]) {
  crypto_generichash_state st;
  unsigned char len_le[8], digest[HASH_SIZE];
  size_t n;
  int i;

  if (!out_hex || nparts < 0 || (nparts > 0 && !parts)) return MW_EINVAL;
  if (!have_sodium()) return MW_EIO;
  crypto_generichash_init(&st, NULL, 0, sizeof digest);
  for (i = 0; i < nparts; i++) {
    if (!parts[i] && (!lens || lens[i])) return MW_EINVAL;
    n = lens ? lens[i] : strlen(parts[i]);
    put_u64le(len_le, (uint64_t)n);
    crypto_generichash_update(&st, len_le, sizeof len_le);
    if (n) crypto_generichash_update(&st, parts[i], n);
  }
  crypto_generichash_final(&st, digest, sizeof digest);
  sodium_bin2hex(out_hex, 65, digest, sizeof digest);
  return 0;
}

/* ---- directories ---- */

/* mkdir -p; 0 when path is (now) a directory. */
static int make_dirs(const char *path, mode_t mode) {
  char buf[PATH_MAX];
  struct stat st;
  size_t len = strlen(path), i;

  if (len == 0 || len >= sizeof buf) return -1;
  memcpy(buf, path, len + 1);
  for (i = 1; i <= len; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    if (buf[i - 1] == '/') continue; /* "//" */
    buf[i] = '\0';
    if (mkdir(buf, mode) != 0 && errno != EEXIST) return -1;
    buf[i] = path[i];
  }
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

static int usable_dir(const char *path, mode_t mode) {
  return make_dirs(path, mode) == 0 && access(path, W_OK | X_OK) == 0;
}

static int env_set(const char *name) {
  const char *v = getenv(name);
  return v && *v;
}

/* Says on stderr, once per process, that compiles are not kept: the cache folder cannot be
 * made or written (what), or an entry could not be written there. Nothing else changes: the
 * compile goes on without the cache. */
static pthread_once_t unusable_once = PTHREAD_ONCE_INIT;
static char unusable_msg[PATH_MAX + 160];
static void say_unusable(void) { fprintf(stderr, "%s\n", unusable_msg); }
static void unusable(const char *path, const char *what, int err) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&mu);
  if (!unusable_msg[0])
    snprintf(unusable_msg, sizeof unusable_msg,
             "moonwarp: the compile cache %s %s (%s): compiles are not kept; set "
             "MOONWARP_CACHE_DIR to a writable folder, or MOONWARP_NO_CACHE=1",
             path, what, strerror(err));
  pthread_mutex_unlock(&mu);
  pthread_once(&unusable_once, say_unusable);
}

const char *mw__cache_dir(void) {
  static _Thread_local char buf[PATH_MAX];
  const char *v = getenv("MOONWARP_NO_CACHE");
  int n;

  if (v && *v && strcmp(v, "0") != 0) return NULL;
  if (!have_sodium()) return NULL;
  if (env_set("MOONWARP_CACHE_DIR"))
    n = snprintf(buf, sizeof buf, "%s", getenv("MOONWARP_CACHE_DIR"));
  else if (env_set("XDG_CACHE_HOME") && getenv("XDG_CACHE_HOME")[0] == '/')
    n = snprintf(buf, sizeof buf, "%s/moonwarp", getenv("XDG_CACHE_HOME"));
  else if (env_set("HOME"))
    n = snprintf(buf, sizeof buf, "%s/.cache/moonwarp", getenv("HOME"));
  else
    return NULL;
  if (n < 0 || (size_t)n >= sizeof buf) return NULL;
  if (usable_dir(buf, 0700)) return buf;
  unusable(buf, "folder cannot be made or written", errno ? errno : EACCES);
  return NULL;
}

const char *mw__cache_dump_dir(void) {
  static _Thread_local char buf[PATH_MAX];
  const char *v = getenv("MOONWARP_DUMP_DIR");
  int n;

  if (!v || !*v) return NULL;
  n = snprintf(buf, sizeof buf, "%s", v);
  if (n < 0 || (size_t)n >= sizeof buf) return NULL;
  return usable_dir(buf, 0755) ? buf : NULL;
}

/* ---- atomic writes ---- */

static int write_all(int fd, const void *data, size_t n) {
  const char *p = data;
  ssize_t w;

  while (n > 0) {
    w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Writes the concatenation of the parts to a fresh temporary file next to path, then renames
 * it over path. rename() within one directory is atomic, so a reader opens either the old file
 * or the complete new one, and of two concurrent writers the last rename wins whole. */
static int write_parts_atomic(const char *path, const void *const *parts, const size_t *lens,
                              int nparts) {
  char tmp[PATH_MAX];
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  int dirlen = slash ? (int)(slash - path) : 0, fd = -1, attempt, i, n;
  uint64_t nonce;

  if (!*base) return MW_EIO;
  for (attempt = 0; attempt < 8 && fd < 0; attempt++) {
    if (have_sodium())
      randombytes_buf(&nonce, sizeof nonce);
    else
      nonce = (uint64_t)time(NULL) * 2654435761u + (uint64_t)attempt;
    n = snprintf(tmp, sizeof tmp, "%.*s%s.%s.tmp.%ld.%016llx", dirlen, path, slash ? "/" : "",
                 base, (long)getpid(), (unsigned long long)nonce);
    if (n < 0 || (size_t)n >= sizeof tmp) return MW_EIO;
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return MW_EIO;
  }
  if (fd < 0) return MW_EIO;

  for (i = 0; i < nparts; i++)
    if (lens[i] && write_all(fd, parts[i], lens[i]) != 0) goto fail;
  if (close(fd) != 0) {
    fd = -1;
    goto fail;
  }
  fd = -1;
  if (rename(tmp, path) != 0) goto fail;
  return 0;

fail:
  if (fd >= 0) close(fd);
  unlink(tmp);
  return MW_EIO;
}

int mw__write_file_atomic(const char *path, const void *data, size_t n) {
  const void *parts[1];
  size_t lens[1];

  if (!path || (!data && n)) return MW_EINVAL;
  parts[0] = data;
  lens[0] = n;
  return write_parts_atomic(path, parts, lens, 1);
}

/* ---- entries ---- */

static int valid_key(const char *key, size_t len) {
  size_t i;
  if (len < 16 || len > 128) return 0;
  for (i = 0; i < len; i++)
    if (!((key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f'))) return 0;
  return 1;
}

static int valid_ext(const char *ext) {
  size_t i, len = strlen(ext);
  if (len < 1 || len > 16) return 0;
  for (i = 0; i < len; i++)
    if (!((ext[i] >= '0' && ext[i] <= '9') || (ext[i] >= 'a' && ext[i] <= 'z'))) return 0;
  return 1;
}

/* Whether a directory entry is a cache entry; nothing else in the directory is ever counted or
 * removed, so pointing MOONWARP_CACHE_DIR at a shared directory loses no foreign file. */
static int is_entry_name(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot && valid_key(name, (size_t)(dot - name)) && valid_ext(dot + 1);
}

static int entry_path(char *buf, size_t len, const char *dir, const char *key,
                      const char *ext) {
  int n;
  if (!key || !ext || !valid_key(key, strlen(key)) || !valid_ext(ext)) return MW_EINVAL;
  n = snprintf(buf, len, "%s/%s.%s", dir, key, ext);
  return n < 0 || (size_t)n >= len ? MW_EINVAL : 0;
}

static int read_all(int fd, void *data, size_t n) {
  char *p = data;
  ssize_t r;

  while (n > 0) {
    r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* Removes a bad entry, unless a writer has renamed a new file into its place since we opened
 * it. */
static void remove_entry(const char *path, const struct stat *opened) {
  struct stat now;
  if (lstat(path, &now) == 0 && now.st_dev == opened->st_dev && now.st_ino == opened->st_ino)
    unlink(path);
}

int mw__cache_get(const char *key, const char *ext, void **data, size_t *size) {
  char path[PATH_MAX];
  unsigned char header[HEADER_SIZE], digest[HASH_SIZE];
  const char *dir;
  struct stat st;
  uint64_t payload;
  unsigned char *buf = NULL;
  int fd, rc;

  if (!data || !size) return MW_EINVAL;
  *data = NULL;
  *size = 0;
  if (!key || !ext || !valid_key(key, strlen(key)) || !valid_ext(ext)) return MW_EINVAL;
  if (!(dir = mw__cache_dir())) return MW_EAGAIN;
  if ((rc = entry_path(path, sizeof path, dir, key, ext)) != 0) return rc;

  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MW_EAGAIN;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return MW_EAGAIN;
  }
  if (st.st_size < HEADER_SIZE || read_all(fd, header, HEADER_SIZE) != 0) goto corrupt;
  payload = get_u64le(header + 8);
  if (memcmp(header, "MWC1\0\0\0\0", 8) != 0 || payload > MAX_PAYLOAD ||
      payload != (uint64_t)st.st_size - HEADER_SIZE)
    goto corrupt;
  if (!(buf = malloc((size_t)payload + 1))) {
    close(fd);
    return MW_ENOMEM;
  }
  if (read_all(fd, buf, (size_t)payload) != 0) goto corrupt;
  crypto_generichash(digest, sizeof digest, buf, (size_t)payload, NULL, 0);
  if (memcmp(digest, header + 16, HASH_SIZE) != 0) goto corrupt;

  futimens(fd, NULL); /* recently used: the eviction order */
  close(fd);
  buf[payload] = 0;
  *data = buf;
  *size = (size_t)payload;
  return 0;

corrupt:
  free(buf);
  close(fd);
  remove_entry(path, &st);
  return MW_EAGAIN;
}

int mw__cache_remove(const char *key, const char *ext) {
  char path[PATH_MAX];
  const char *dir;
  int rc;
  if (!key || !ext || !valid_key(key, strlen(key)) || !valid_ext(ext)) return MW_EINVAL;
  if (!(dir = mw__cache_dir())) return 0;
  if ((rc = entry_path(path, sizeof path, dir, key, ext)) != 0) return rc;
  unlink(path);
  return 0;
}

/* ---- eviction ---- */

typedef struct entry_info {
  char name[200];
  off_t size;
  struct timespec mtime;
} entry_info;

static int older_first(const void *a, const void *b) {
  const entry_info *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

static double max_bytes(void) {
  const char *v = getenv("MOONWARP_CACHE_MAX_MB");
  char *end;
  double mb;

  if (!v || !*v) return DEFAULT_MAX_MB * 1048576.0;
  mb = strtod(v, &end);
  if (end == v || *end || mb < 0) return DEFAULT_MAX_MB * 1048576.0;
  return mb * 1048576.0; /* 0: no bound */
}

/* Removes the least recently used entries until the entries' total size is within the bound.
 * The entry just written (keep) goes last: only when it alone exceeds the bound. Other
 * processes may be evicting at the same time; an entry already gone is simply skipped. */
static void evict(const char *dir, const char *keep) {
  double bound = max_bytes(), total = 0;
  entry_info *list = NULL, *grown;
  size_t n = 0, cap = 0, i;
  char path[PATH_MAX];
  struct dirent *de;
  struct stat st;
  time_t now = time(NULL);
  DIR *d;

  if (bound <= 0 || !(d = opendir(dir))) return;
  while ((de = readdir(d)) != NULL) {
    const char *name = de->d_name;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) continue;
    if (name[0] == '.') {
      if (strstr(name, ".tmp.") && lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
          now - st.st_mtim.tv_sec > STALE_TEMP_SECONDS)
        unlink(path);
      continue;
    }
    if (strlen(name) >= sizeof list->name || !is_entry_name(name)) continue;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      if (!(grown = realloc(list, cap * sizeof *list))) break;
      list = grown;
    }
    memcpy(list[n].name, name, strlen(name) + 1);
    list[n].size = st.st_size;
    list[n].mtime = st.st_mtim;
    total += (double)st.st_size;
    n++;
  }
  closedir(d);

  if (total > bound) {
    qsort(list, n, sizeof *list, older_first);
    for (i = 0; i < n && total > bound; i++) {
      if (strcmp(list[i].name, keep) == 0) continue;
      snprintf(path, sizeof path, "%s/%s", dir, list[i].name);
      if (unlink(path) == 0 || errno == ENOENT) total -= (double)list[i].size;
    }
    if (total > bound) {
      snprintf(path, sizeof path, "%s/%s", dir, keep);
      unlink(path);
    }
  }
  free(list);
}

int mw__cache_put(const char *key, const char *ext, const void *data, size_t size) {
  char path[PATH_MAX];
  unsigned char header[HEADER_SIZE];
  const void *parts[2];
  size_t lens[2];
  const char *dir;
  int rc;

  if (!key || !ext || !valid_key(key, strlen(key)) || !valid_ext(ext) || (!data && size))
    return MW_EINVAL;
  if ((uint64_t)size > MAX_PAYLOAD) return MW_EINVAL;
  if (!(dir = mw__cache_dir())) return 0;
  if ((rc = entry_path(path, sizeof path, dir, key, ext)) != 0) return rc;

  memset(header, 0, sizeof header);
  memcpy(header, "MWC1", 4);
  put_u64le(header + 8, (uint64_t)size);
  crypto_generichash(header + 16, HASH_SIZE, data, size, NULL, 0);
  parts[0] = header;
  lens[0] = sizeof header;
  parts[1] = data;
  lens[1] = size;
  if ((rc = write_parts_atomic(path, parts, lens, 2)) != 0) {
    unusable(dir, "could not keep an entry", errno ? errno : EIO);
    return rc;
  }

  evict(dir, strrchr(path, '/') + 1);
  return 0;
}
