/* test_jit.c - tests of the NVRTC compiler, the compile cache and the CUDA driver loader.
 *
 * Standalone; from the repository root:
 *   gcc -std=c11 -Wall -Wextra -Icore/include -Icore/src -Invrtc nvrtc/test_jit.c nvrtc/jit.c \
 *       nvrtc/cache.c core/src/cuda_api.c -lsodium -ldl -lpthread -o test_jit && ./test_jit
 * Each test runs in its own process (the loaders run once per process, and tests set the
 * environment), with a timeout. Needs NVRTC; on a machine with a GPU the driver test also
 * compiles, loads and runs a kernel.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "cuda_api.h"
#include "jit.h"
#include "moonwarp.h"

/* ---- harness ---- */

#define FAIL(...)                                                   \
  do {                                                              \
    fprintf(stderr, "    %s:%d: ", __FILE__, __LINE__);             \
    fprintf(stderr, __VA_ARGS__);                                   \
    fprintf(stderr, "\n");                                          \
    exit(1);                                                        \
  } while (0)
#define CHECK(c) \
  do {           \
    if (!(c)) FAIL("check failed: %s", #c); \
  } while (0)
#define CHECK_INT(a, b)                                                        \
  do {                                                                         \
    long long a_ = (long long)(a), b_ = (long long)(b);                        \
    if (a_ != b_) FAIL("%s == %lld, expected %s == %lld", #a, a_, #b, b_);     \
  } while (0)
#define CHECK_HAS(s, sub)                                                              \
  do {                                                                                 \
    const char *s_ = (s);                                                              \
    if (!s_ || !strstr(s_, (sub))) FAIL("%s does not contain \"%s\": %s", #s, (sub), \
                                        s_ ? s_ : "(null)");                           \
  } while (0)

static char root[256]; /* a fresh temporary directory for the whole run */

static void tmp_path(char *buf, size_t n, const char *rel) { snprintf(buf, n, "%s/%s", root, rel); }

static void write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  CHECK(fwrite(data, 1, n, f) == n);
  CHECK(fclose(f) == 0);
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* A cache in a directory of its own under root. */
static const char *fresh_cache(const char *name) {
  static char dir[512];
  tmp_path(dir, sizeof dir, name);
  setenv("MOONWARP_CACHE_DIR", dir, 1);
  unsetenv("MOONWARP_NO_CACHE");
  unsetenv("MOONWARP_CACHE_MAX_MB");
  return dir;
}

static void make_key(const char *text, char key[65]) {
  const void *parts[1] = {text};
  CHECK_INT(mw__cache_key(parts, NULL, 1, key), 0);
}

static size_t dir_entry_bytes(const char *dir, int *count) {
  char cmd[PATH_MAX + 64];
  size_t total = 0;
  long long sz;
  FILE *p;
  snprintf(cmd, sizeof cmd, "find '%s' -maxdepth 1 -type f -name '*.bin' -printf '%%s\\n'", dir);
  p = popen(cmd, "r");
  CHECK(p != NULL);
  *count = 0;
  while (fscanf(p, "%lld", &sz) == 1) {
    total += (size_t)sz;
    (*count)++;
  }
  pclose(p);
  return total;
}

/* ---- NVRTC ---- */

static const char *kernel_src =
    "extern \"C\" __global__ void fill(int *out, int v) {\n"
    "  out[threadIdx.x] = v + (int)threadIdx.x;\n"
    "}\n";

static void test_nvrtc_loads_and_has_a_version(void) {
  char err[1024];
  int major = 0, minor = 0, target = 0, cubin = 0;
  CHECK_INT(mw__nvrtc_load(err, sizeof err), 0);
  CHECK_INT(mw__nvrtc_version(&major, &minor), 0);
  CHECK(major >= 11);
  CHECK_INT(mw__nvrtc_target(90, &target, &cubin), 0);
  printf("    NVRTC %d.%d; sm_90 -> %s_%d\n", major, minor, cubin ? "sm" : "compute", target);
}

static void test_compiles_a_kernel_to_an_sm90_cubin(void) {
  void *image;
  size_t size;
  int is_cubin = -1;
  char *log;
  int rc = mw__nvrtc_compile(kernel_src, "fill.cu", 90, NULL, 0, &image, &size, &is_cubin, &log);
  if (rc) FAIL("rc %d: %s", rc, log ? log : "");
  CHECK_INT(is_cubin, 1);
  CHECK(size > 4);
  CHECK(memcmp(image, "\x7f" "ELF", 4) == 0);
  printf("    cubin: %zu bytes, log: %s\n", size, log ? "warnings" : "none");
  free(image);
  free(log);
}

static void test_compile_error_names_the_users_file_and_line(void) {
  const char *src = "#line 3 \"user.cu\"\n"
                    "__device__ int broken(int x) { return x + ; }\n";
  void *image = (void *)1;
  size_t size = 1;
  int is_cubin;
  char *log = NULL;
  CHECK_INT(mw__nvrtc_compile(src, "generated.cu", 90, NULL, 0, &image, &size, &is_cubin, &log),
            MW_ECOMPILE);
  CHECK(image == NULL);
  CHECK_INT(size, 0);
  CHECK_HAS(log, "user.cu(3)");
  CHECK_HAS(log, "error");
  printf("    log: %.*s\n", (int)strcspn(log, "\n"), log);
  free(log);
}

static void test_warnings_of_a_good_compile_are_in_the_log(void) {
  const char *src = "__device__ int f() { int unused_local; return 1; }\n";
  void *image;
  size_t size;
  int is_cubin;
  char *log = NULL;
  CHECK_INT(mw__nvrtc_compile(src, "warn.cu", 90, NULL, 0, &image, &size, &is_cubin, &log), 0);
  CHECK_HAS(log, "unused_local");
  free(image);
  free(log);
}

static void test_caller_options_are_passed(void) {
  const char *src = "#if FLAVOUR != 7\n#error FLAVOUR is not 7\n#endif\n"
                    "__global__ void k() {}\n";
  const char *opts[] = {"-DFLAVOUR=7"};
  void *image;
  size_t size;
  int is_cubin;
  char *log = NULL;
  CHECK_INT(mw__nvrtc_compile(src, "opt.cu", 90, opts, 1, &image, &size, &is_cubin, &log), 0);
  free(image);
  free(log);
  CHECK_INT(mw__nvrtc_compile(src, "opt.cu", 90, NULL, 0, &image, &size, &is_cubin, &log),
            MW_ECOMPILE);
  CHECK_HAS(log, "FLAVOUR is not 7");
  free(log);
}

/* memmem for a string in a binary image */
static int image_has(const void *image, size_t size, const char *s) {
  return memmem(image, size, s, strlen(s)) != NULL;
}

static void test_debug_replaces_lineinfo(void) {
  const char *opts[] = {"-G"};
  void *image;
  size_t size;
  int is_cubin;
  char *log = NULL;
  CHECK_INT(mw__nvrtc_compile(kernel_src, "fill.cu", 90, NULL, 0, &image, &size, &is_cubin, &log), 0);
  CHECK(image_has(image, size, ".debug_line"));
  CHECK(!image_has(image, size, ".debug_info"));
  free(image);
  free(log);
  log = NULL;
  CHECK_INT(mw__nvrtc_compile(kernel_src, "fill.cu", 90, opts, 1, &image, &size, &is_cubin, &log), 0);
  CHECK(image_has(image, size, ".debug_info"));
  /* -lineinfo left out: ptxas would say the two conflict */
  if (log && strstr(log, "onflicting")) FAIL("-G with -lineinfo: %s", log);
  free(image);
  free(log);
}

static void test_a_device_newer_than_nvrtc_gets_ptx(void) {
  void *image;
  size_t size;
  int is_cubin = -1, target = 0, cubin_flag = -1;
  char *log = NULL, want[32];
  CHECK_INT(mw__nvrtc_target(999, &target, &cubin_flag), 0);
  CHECK_INT(cubin_flag, 0);
  CHECK(target >= 90 && target < 999);
  CHECK_INT(mw__nvrtc_compile(kernel_src, "fill.cu", 999, NULL, 0, &image, &size, &is_cubin, &log),
            0);
  CHECK_INT(is_cubin, 0);
  CHECK(size > 1 && ((char *)image)[size - 1] == '\0');
  snprintf(want, sizeof want, ".target sm_%d", target);
  CHECK_HAS((char *)image, want);
  CHECK_HAS((char *)image, ".entry fill");
  printf("    sm_999 -> PTX for compute_%d, %zu bytes\n", target, size);
  free(image);
  free(log);
}

static void test_a_device_older_than_nvrtc_is_refused(void) {
  void *image;
  size_t size;
  int is_cubin;
  char *log = NULL;
  CHECK_INT(mw__nvrtc_compile(kernel_src, "fill.cu", 20, NULL, 0, &image, &size, &is_cubin, &log),
            MW_ENODEV);
  CHECK_HAS(log, "sm_20");
  free(log);
}

static void test_a_bad_option_is_einval_and_named(void) {
  const char *opts[] = {"--no-such-option"};
  void *image;
  size_t size;
  int is_cubin;
  char *log = NULL;
  CHECK_INT(mw__nvrtc_compile(kernel_src, "fill.cu", 90, opts, 1, &image, &size, &is_cubin, &log),
            MW_EINVAL);
  CHECK_HAS(log, "--no-such-option");
  free(log);
}

static void test_a_missing_nvrtc_is_reported(void) {
  char err[1024];
  void *image;
  size_t size;
  int is_cubin, major;
  char *log = NULL;
  setenv("MOONWARP_NVRTC", "/nonexistent/libnvrtc.so", 1);
  CHECK_INT(mw__nvrtc_load(err, sizeof err), MW_ENODEV);
  CHECK_HAS(err, "MOONWARP_NVRTC");
  CHECK_HAS(err, "/nonexistent/libnvrtc.so");
  CHECK_INT(mw__nvrtc_version(&major, NULL), MW_ENODEV);
  CHECK_INT(mw__nvrtc_compile(kernel_src, NULL, 90, NULL, 0, &image, &size, &is_cubin, &log),
            MW_ENODEV);
  CHECK_HAS(log, "/nonexistent/libnvrtc.so");
  free(log);
}

/* ---- CUDA driver ---- */

/* On a machine with a GPU: compile for the device, load the module and run a kernel. */
static void run_on_device(void) {
  mw_CUdevice dev;
  mw_CUcontext ctx;
  mw_CUmodule mod;
  mw_CUfunction fn;
  mw_CUstream stream;
  mw_CUdeviceptr d;
  int major, minor, sms, count, blocks, v = 40, out[32], zero[32] = {0}, i, is_cubin;
  char *log = NULL;
  void *image, *params[2];
  size_t size;

  CHECK_INT(mw__cu.cuDeviceGetCount(&count), 0);
  CHECK(count > 0);
  CHECK_INT(mw__cu.cuDeviceGet(&dev, 0), 0);
  CHECK_INT(mw__cu.cuDeviceGetAttribute(&major, MW_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                        dev), 0);
  CHECK_INT(mw__cu.cuDeviceGetAttribute(&minor, MW_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                        dev), 0);
  CHECK_INT(mw__cu.cuDeviceGetAttribute(&sms, MW_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
            0);
  printf("    device 0: sm_%d%d, %d SMs, driver %d\n", major, minor, sms, mw__cu.driver_version);
  CHECK_INT(mw__cu.cuCtxCreate(&ctx, MW_CU_CTX_SCHED_SPIN, dev), 0);
  CHECK_INT(mw__nvrtc_compile(kernel_src, "fill.cu", major * 10 + minor, NULL, 0, &image, &size,
                              &is_cubin, &log), 0);
  CHECK_INT(mw__cu.cuModuleLoadData(&mod, image), 0);
  CHECK_INT(mw__cu.cuModuleGetFunction(&fn, mod, "fill"), 0);
  CHECK_INT(mw__cu.cuModuleGetFunction(&fn, mod, "no_such_kernel"), MW_CUDA_ERROR_NOT_FOUND);
  CHECK_INT(mw__cu.cuModuleGetFunction(&fn, mod, "fill"), 0);
  CHECK_INT(mw__cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, 32, 0), 0);
  CHECK(blocks > 0);
  CHECK_INT(mw__cu.cuStreamCreate(&stream, MW_CU_STREAM_NON_BLOCKING), 0);
  CHECK_INT(mw__cu.cuMemAlloc(&d, sizeof out), 0);
  CHECK_INT(mw__cu.cuMemcpyHtoDAsync(d, zero, sizeof zero, stream), 0);
  params[0] = &d;
  params[1] = &v;
  CHECK_INT(mw__cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, NULL), 0);
  CHECK_INT(mw__cu.cuStreamSynchronize(stream), 0);
  CHECK_INT(mw__cu.cuStreamQuery(stream), 0);
  CHECK_INT(mw__cu.cuMemcpyDtoHAsync(out, d, sizeof out, stream), 0);
  CHECK_INT(mw__cu.cuStreamSynchronize(stream), 0);
  for (i = 0; i < 32; i++) CHECK_INT(out[i], 40 + i);
  CHECK_INT(mw__cu.cuMemFree(d), 0); /* the stream goes with the context */
  CHECK_INT(mw__cu.cuModuleUnload(mod), 0);
  CHECK_INT(mw__cu.cuCtxDestroy(ctx), 0);
  {
    /* the fallback cuda_api.c uses should a driver drop cuCtxCreate_v2 */
    void *lib = dlopen(mw__cu.path, RTLD_NOW | RTLD_NOLOAD);
    mw_CUresult (*v4)(mw_CUcontext *, void *, unsigned int, mw_CUdevice);
    void *sym = lib ? dlsym(lib, "cuCtxCreate_v4") : NULL;
    if (sym) {
      memcpy(&v4, &sym, sizeof sym);
      CHECK_INT(v4(&ctx, NULL, 0, dev), 0);
      CHECK_INT(mw__cu.cuCtxDestroy(ctx), 0);
      printf("    cuCtxCreate_v4 with no parameter block: ok\n");
    }
  }
  printf("    ran fill<<<1,32>>> from a %s: ok\n", is_cubin ? "cubin" : "PTX");
  free(image);
  free(log);
}

static void test_cuda_load_says_what_is_missing(void) {
  char err[512] = "";
  int rc;
  unsetenv("MOONWARP_LIBCUDA");
  rc = mw__cuda_load(err, sizeof err);
  if (rc == 0) {
    run_on_device();
    return;
  }
  CHECK_INT(rc, MW_ENODEV);
  CHECK_HAS(err, "libcuda");
  printf("    %s\n", err);
  CHECK_INT(mw__cuda_load(NULL, 0), MW_ENODEV); /* the outcome is kept */
}

static void test_a_stub_libcuda_is_named_as_such(void) {
  const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  char err[512] = "";
  if (!exists(stub)) {
    printf("    skipped: no %s\n", stub);
    return;
  }
  setenv("MOONWARP_LIBCUDA", stub, 1);
  CHECK_INT(mw__cuda_load(err, sizeof err), MW_ENODEV);
  CHECK_HAS(err, "stub");
  printf("    %s\n", err);
}

static void test_a_bad_libcuda_override_is_named(void) {
  char err[512] = "";
  setenv("MOONWARP_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  CHECK_INT(mw__cuda_load(err, sizeof err), MW_ENODEV);
  CHECK_HAS(err, "MOONWARP_LIBCUDA");
  CHECK_HAS(err, "/nonexistent/libcuda.so.1");
}

static void test_cuda_errors_are_named_and_mapped(void) {
  static const struct {
    mw_CUresult r;
    const char *name;
    int code;
    int sticky;
  } cases[] = {
      {MW_CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", MW_ENOMEM, 0},
      {MW_CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", MW_EFAULT, 1},
      {MW_CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", MW_EFAULT, 1},
      {MW_CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", MW_ECUDA, 0},
      {MW_CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", MW_ENODEV, 0},
      {12345, "CUDA error 12345", MW_ECUDA, 0},
  };
  char err[256];
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CHECK_HAS(mw__cuda_errstr(cases[i].r), cases[i].name);
    CHECK_INT(mw__cuda_is_sticky(cases[i].r), cases[i].sticky);
    CHECK_INT(mw__cuda_error(cases[i].r, "cuMemAlloc", err, sizeof err), cases[i].code);
    CHECK_HAS(err, "cuMemAlloc: ");
    CHECK_HAS(err, cases[i].name);
  }
  CHECK_INT(mw__cuda_error(MW_CUDA_SUCCESS, "x", err, sizeof err), 0);
}

/* ---- cache ---- */

static void test_cache_keys_hash_every_part_and_its_length(void) {
  const void *ab_c[2] = {"ab", "c"}, *a_bc[2] = {"a", "bc"}, *ab_d[2] = {"ab", "d"};
  const size_t lens[2] = {2, 1};
  char k1[65], k2[65], k3[65], k4[65];
  size_t i;
  CHECK_INT(mw__cache_key(ab_c, NULL, 2, k1), 0);
  CHECK_INT(mw__cache_key(a_bc, NULL, 2, k2), 0);
  CHECK_INT(mw__cache_key(ab_d, NULL, 2, k3), 0);
  CHECK_INT(mw__cache_key(ab_c, lens, 2, k4), 0);
  CHECK_INT(strlen(k1), 64);
  for (i = 0; i < 64; i++) CHECK(strchr("0123456789abcdef", k1[i]) != NULL);
  CHECK(strcmp(k1, k2) != 0);
  CHECK(strcmp(k1, k3) != 0);
  CHECK(strcmp(k1, k4) == 0);
  CHECK_INT(mw__cache_key(ab_c, NULL, -1, k1), MW_EINVAL);
}

static void test_cache_round_trip(void) {
  char key[65], other[65], path[PATH_MAX];
  const char *dir = fresh_cache("roundtrip/a/b");
  const char payload[] = "\x7f" "ELF and some bytes\0with a NUL inside";
  void *data;
  size_t size;
  struct stat st;

  make_key("round trip", key);
  make_key("never stored", other);
  CHECK_INT(mw__cache_get(key, "cubin", &data, &size), MW_EAGAIN);
  CHECK_INT(mw__cache_put(key, "cubin", payload, sizeof payload), 0);
  CHECK_INT(mw__cache_get(key, "cubin", &data, &size), 0);
  CHECK_INT(size, sizeof payload);
  CHECK(memcmp(data, payload, size) == 0);
  CHECK_INT(((char *)data)[size], 0);
  free(data);
  CHECK_INT(mw__cache_get(key, "ptx", &data, &size), MW_EAGAIN);
  CHECK_INT(mw__cache_get(other, "cubin", &data, &size), MW_EAGAIN);
  CHECK_INT(mw__cache_put(key, "cubin", "", 0), 0); /* replaced by an empty payload */
  CHECK_INT(mw__cache_get(key, "cubin", &data, &size), 0);
  CHECK_INT(size, 0);
  free(data);
  CHECK_INT(stat(dir, &st), 0);
  CHECK_INT(st.st_mode & 0777, 0700);
  snprintf(path, sizeof path, "%s/%s.cubin", dir, key);
  CHECK(exists(path));
  CHECK_INT(mw__cache_put("../../etc/passwd", "cubin", "x", 1), MW_EINVAL);
  CHECK_INT(mw__cache_put(key, "a/b", "x", 1), MW_EINVAL);
  CHECK_INT(mw__cache_get("XYZ", "cubin", &data, &size), MW_EINVAL);
}

static void test_a_damaged_entry_is_a_miss_and_is_removed(void) {
  static const struct {
    const char *what;
    long offset;   /* byte to flip, or -1 */
    long truncate; /* new length, or -1 */
  } cases[] = {
      {"payload byte flipped", 48 + 1000, -1},
      {"checksum byte flipped", 20, -1},
      {"magic damaged", 0, -1},
      {"size field damaged", 9, -1},
      {"truncated payload", -1, 48 + 4000},
      {"truncated header", -1, 30},
      {"empty file", -1, 0},
  };
  const char *dir = fresh_cache("damaged");
  char key[65], path[PATH_MAX], payload[8192];
  void *data;
  size_t size, i;
  FILE *f;
  int c;

  for (i = 0; i < sizeof payload; i++) payload[i] = (char)(i * 7);
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    make_key(cases[i].what, key);
    snprintf(path, sizeof path, "%s/%s.cubin", dir, key);
    CHECK_INT(mw__cache_put(key, "cubin", payload, sizeof payload), 0);
    if (cases[i].offset >= 0) {
      f = fopen(path, "r+b");
      CHECK(f != NULL);
      fseek(f, cases[i].offset, SEEK_SET);
      c = fgetc(f);
      fseek(f, cases[i].offset, SEEK_SET);
      fputc(c ^ 0x20, f);
      fclose(f);
    } else {
      CHECK_INT(truncate(path, cases[i].truncate), 0);
    }
    if (mw__cache_get(key, "cubin", &data, &size) != MW_EAGAIN)
      FAIL("%s: not a miss", cases[i].what);
    if (exists(path)) FAIL("%s: entry not removed", cases[i].what);
  }
}

static void test_a_hit_refreshes_the_entry_mtime(void) {
  const char *dir = fresh_cache("mtime");
  char key[65], path[PATH_MAX];
  struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  struct stat st;
  void *data;
  size_t size;
  make_key("mtime", key);
  snprintf(path, sizeof path, "%s/%s.cubin", dir, key);
  CHECK_INT(mw__cache_put(key, "cubin", "abc", 3), 0);
  CHECK_INT(utimensat(AT_FDCWD, path, old, 0), 0);
  CHECK_INT(mw__cache_get(key, "cubin", &data, &size), 0);
  free(data);
  CHECK_INT(stat(path, &st), 0);
  CHECK(st.st_mtim.tv_sec > time(NULL) - 60);
}

static void test_cache_dir_follows_the_environment(void) {
  char file[PATH_MAX], want[3][PATH_MAX];
  static const struct {
    const char *no_cache, *cache_dir, *xdg, *home; /* relative to root unless absolute */
    int want;                                      /* index into want, -1 = NULL */
  } cases[] = {
      {NULL, "env/explicit", "env/xdg", "env/home", 0},
      {"0", "env/explicit", NULL, NULL, 0},
      {"", "env/explicit", NULL, NULL, 0},
      {"1", "env/explicit", "env/xdg", "env/home", -1},
      {"yes", "env/explicit", "env/xdg", "env/home", -1},
      {NULL, NULL, "env/xdg", "env/home", 1},
      {NULL, NULL, "relative/xdg", "env/home", 2}, /* a relative XDG_CACHE_HOME is ignored */
      {NULL, NULL, NULL, "env/home", 2},
      {NULL, NULL, NULL, NULL, -1},
      {NULL, "env/a-file/sub", NULL, NULL, -1}, /* mkdir cannot succeed under a file */
  };
  char buf[PATH_MAX];
  const char *dir;
  size_t i;

  tmp_path(want[0], PATH_MAX, "env/explicit");
  tmp_path(want[1], PATH_MAX, "env/xdg/moonwarp");
  tmp_path(want[2], PATH_MAX, "env/home/.cache/moonwarp");
  tmp_path(buf, sizeof buf, "env");
  mkdir(buf, 0700);
  tmp_path(file, sizeof file, "env/a-file");
  write_bytes(file, "x", 1);

  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
#define SET(var, v)                                                    \
  do {                                                                 \
    if (!(v))                                                          \
      unsetenv(var);                                                   \
    else if ((v)[0] == '/' || strncmp((v), "relative", 8) == 0 || !*(v) || \
             strcmp(var, "MOONWARP_NO_CACHE") == 0)                    \
      setenv(var, (v), 1);                                             \
    else {                                                             \
      tmp_path(buf, sizeof buf, (v));                                  \
      setenv(var, buf, 1);                                             \
    }                                                                  \
  } while (0)
    SET("MOONWARP_NO_CACHE", cases[i].no_cache);
    SET("MOONWARP_CACHE_DIR", cases[i].cache_dir);
    SET("XDG_CACHE_HOME", cases[i].xdg);
    SET("HOME", cases[i].home);
#undef SET
    dir = mw__cache_dir();
    if (cases[i].want < 0) {
      if (dir) FAIL("case %zu: expected no cache dir, got %s", i, dir);
    } else {
      if (!dir || strcmp(dir, want[cases[i].want]) != 0)
        FAIL("case %zu: expected %s, got %s", i, want[cases[i].want], dir ? dir : "(null)");
      CHECK(exists(dir));
    }
  }
}

static void test_an_unusable_cache_is_off(void) {
  char dir[PATH_MAX + 16], file[PATH_MAX], key[65];
  void *data;
  size_t size;
  tmp_path(file, sizeof file, "plain-file");
  write_bytes(file, "x", 1);
  snprintf(dir, sizeof dir, "%s/cache", file);
  setenv("MOONWARP_CACHE_DIR", dir, 1);
  make_key("off", key);
  CHECK(mw__cache_dir() == NULL);
  CHECK_INT(mw__cache_put(key, "cubin", "abc", 3), 0);
  CHECK_INT(mw__cache_get(key, "cubin", &data, &size), MW_EAGAIN);
  setenv("MOONWARP_CACHE_DIR", root, 1);
  setenv("MOONWARP_NO_CACHE", "1", 1);
  CHECK(mw__cache_dir() == NULL);
  CHECK_INT(mw__cache_put(key, "cubin", "abc", 3), 0);
  CHECK_INT(mw__cache_get(key, "cubin", &data, &size), MW_EAGAIN);
}

static void test_eviction_keeps_the_cache_within_its_bound(void) {
  const char *dir = fresh_cache("evict");
  static char payload[600 * 1024];
  char keys[3][65], name[32];
  void *data;
  size_t size, total;
  int i, count;

  setenv("MOONWARP_CACHE_MAX_MB", "1", 1);
  for (i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "entry %d", i);
    make_key(name, keys[i]);
    memset(payload, 'a' + i, sizeof payload);
    CHECK_INT(mw__cache_put(keys[i], "bin", payload, sizeof payload), 0);
    total = dir_entry_bytes(dir, &count);
    CHECK(total <= 1024 * 1024);
  }
  CHECK_INT(count, 1);
  CHECK_INT(mw__cache_get(keys[0], "bin", &data, &size), MW_EAGAIN);
  CHECK_INT(mw__cache_get(keys[1], "bin", &data, &size), MW_EAGAIN);
  CHECK_INT(mw__cache_get(keys[2], "bin", &data, &size), 0);
  CHECK_INT(((char *)data)[0], 'c');
  free(data);
  printf("    3 x 600 KB under a 1 MB bound: %d entry, %zu bytes left\n", count, total);
}

static void test_eviction_removes_the_least_recently_used(void) {
  const char *dir = fresh_cache("lru");
  static char payload[600 * 1024];
  char a[65], b[65], c[65], path[PATH_MAX], foreign[PATH_MAX], stale[PATH_MAX];
  struct timespec t[2];
  void *data;
  size_t size;

  setenv("MOONWARP_CACHE_MAX_MB", "1.5", 1);
  make_key("a", a);
  make_key("b", b);
  make_key("c", c);
  CHECK_INT(mw__cache_put(a, "bin", payload, sizeof payload), 0);
  CHECK_INT(mw__cache_put(b, "bin", payload, sizeof payload), 0);
  /* a is older than b on disk, but is read after b was written */
  t[0].tv_sec = t[1].tv_sec = time(NULL) - 100;
  t[0].tv_nsec = t[1].tv_nsec = 0;
  snprintf(path, sizeof path, "%s/%s.bin", dir, a);
  CHECK_INT(utimensat(AT_FDCWD, path, t, 0), 0);
  t[0].tv_sec = t[1].tv_sec = time(NULL) - 50;
  snprintf(path, sizeof path, "%s/%s.bin", dir, b);
  CHECK_INT(utimensat(AT_FDCWD, path, t, 0), 0);
  CHECK_INT(mw__cache_get(a, "bin", &data, &size), 0);
  free(data);
  /* files that are not entries are neither counted nor removed; old temp files are */
  snprintf(foreign, sizeof foreign, "%s/notes.txt", dir);
  write_bytes(foreign, payload, sizeof payload);
  snprintf(stale, sizeof stale, "%s/.x.bin.tmp.1.0123456789abcdef", dir);
  write_bytes(stale, "x", 1);
  t[0].tv_sec = t[1].tv_sec = time(NULL) - 7200;
  CHECK_INT(utimensat(AT_FDCWD, stale, t, 0), 0);

  CHECK_INT(mw__cache_put(c, "bin", payload, sizeof payload), 0);
  CHECK_INT(mw__cache_get(b, "bin", &data, &size), MW_EAGAIN);
  CHECK_INT(mw__cache_get(a, "bin", &data, &size), 0);
  free(data);
  CHECK_INT(mw__cache_get(c, "bin", &data, &size), 0);
  free(data);
  CHECK(exists(foreign));
  CHECK(!exists(stale));
}

/* Writers race on one key while a reader reads it: every hit is one writer's whole payload. */
static void test_concurrent_writers_leave_a_whole_entry(void) {
  enum { WRITERS = 4, ROUNDS = 40, SIZE = 64 * 1024 };
  char key[65];
  pid_t pids[WRITERS + 1];
  int i, j, status;
  void *data;
  size_t size, k;
  char *p;

  fresh_cache("race");
  make_key("race", key);
  for (i = 0; i <= WRITERS; i++) {
    pids[i] = fork();
    CHECK(pids[i] >= 0);
    if (pids[i] == 0) {
      static char payload[SIZE];
      memset(payload, 'A' + i, sizeof payload);
      for (j = 0; j < ROUNDS * 4; j++) {
        if (i < WRITERS) {
          if (j < ROUNDS && mw__cache_put(key, "bin", payload, sizeof payload) != 0) _exit(2);
          continue;
        }
        if (mw__cache_get(key, "bin", &data, &size) == 0) {
          p = data;
          if (size != SIZE) _exit(3);
          for (k = 0; k < size; k++)
            if (p[k] != p[0]) _exit(4);
          free(data);
        }
      }
      _exit(0);
    }
  }
  for (i = 0; i <= WRITERS; i++) {
    CHECK(waitpid(pids[i], &status, 0) == pids[i]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      FAIL("child %d ended with status %d", i, status);
  }
  CHECK_INT(mw__cache_get(key, "bin", &data, &size), 0);
  CHECK_INT(size, SIZE);
  p = data;
  CHECK(p[0] >= 'A' && p[0] < 'A' + WRITERS);
  for (k = 0; k < size; k++) CHECK(p[k] == p[0]);
  free(data);
}

static void test_dump_dir_and_atomic_file_writes(void) {
  char dir[PATH_MAX], path[PATH_MAX], cmd[PATH_MAX + 64], line[64];
  const char *d;
  FILE *f, *p;
  unsetenv("MOONWARP_DUMP_DIR");
  CHECK(mw__cache_dump_dir() == NULL);
  setenv("MOONWARP_DUMP_DIR", "", 1);
  CHECK(mw__cache_dump_dir() == NULL);
  tmp_path(dir, sizeof dir, "dump/nested");
  setenv("MOONWARP_DUMP_DIR", dir, 1);
  d = mw__cache_dump_dir();
  CHECK(d && strcmp(d, dir) == 0);
  snprintf(path, sizeof path, "%s/prog.cu", d);
  CHECK_INT(mw__write_file_atomic(path, "old", 3), 0);
  CHECK_INT(mw__write_file_atomic(path, "new contents", 12), 0);
  f = fopen(path, "r");
  CHECK(f && fgets(line, sizeof line, f));
  fclose(f);
  CHECK(strcmp(line, "new contents") == 0);
  snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", d);
  p = popen(cmd, "r");
  CHECK(p && fgets(line, sizeof line, p));
  pclose(p);
  CHECK_INT(atoi(line), 1); /* no temporary file left behind */
  snprintf(path, sizeof path, "%s/no-such-dir/prog.cu", d);
  CHECK_INT(mw__write_file_atomic(path, "x", 1), MW_EIO);
}

/* ---- runner ---- */

static const struct {
  const char *name;
  void (*fn)(void);
} tests[] = {
#define T(f) {#f, f}
    T(test_nvrtc_loads_and_has_a_version),
    T(test_compiles_a_kernel_to_an_sm90_cubin),
    T(test_compile_error_names_the_users_file_and_line),
    T(test_warnings_of_a_good_compile_are_in_the_log),
    T(test_caller_options_are_passed),
    T(test_debug_replaces_lineinfo),
    T(test_a_device_newer_than_nvrtc_gets_ptx),
    T(test_a_device_older_than_nvrtc_is_refused),
    T(test_a_bad_option_is_einval_and_named),
    T(test_a_missing_nvrtc_is_reported),
    T(test_cuda_load_says_what_is_missing),
    T(test_a_stub_libcuda_is_named_as_such),
    T(test_a_bad_libcuda_override_is_named),
    T(test_cuda_errors_are_named_and_mapped),
    T(test_cache_keys_hash_every_part_and_its_length),
    T(test_cache_round_trip),
    T(test_a_damaged_entry_is_a_miss_and_is_removed),
    T(test_a_hit_refreshes_the_entry_mtime),
    T(test_cache_dir_follows_the_environment),
    T(test_an_unusable_cache_is_off),
    T(test_eviction_keeps_the_cache_within_its_bound),
    T(test_eviction_removes_the_least_recently_used),
    T(test_concurrent_writers_leave_a_whole_entry),
    T(test_dump_dir_and_atomic_file_writes),
#undef T
};

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

int main(int argc, char **argv) {
  size_t i, failed = 0, run = 0;
  int status;
  pid_t pid;

  snprintf(root, sizeof root, "%s/mw-test-jit-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
    run++;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
      alarm(120);
      tests[i].fn();
      exit(0); /* through atexit, so a leak checker linked in reports per test */
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid) status = -1;
    if (status == 0) {
      printf("ok   %s\n", tests[i].name);
    } else {
      failed++;
      if (WIFSIGNALED(status))
        printf("FAIL %s (signal %d%s)\n", tests[i].name, WTERMSIG(status),
               WTERMSIG(status) == SIGALRM ? ": timed out" : "");
      else
        printf("FAIL %s\n", tests[i].name);
    }
  }
  nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  printf("%zu/%zu passed\n", run - failed, run);
  return failed ? 1 : 0;
}
