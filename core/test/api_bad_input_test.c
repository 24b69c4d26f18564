/* api_bad_input_test.c - every entry point of moonwarp.h given NULL, zero, out-of-range and stale
 * values, on the sim backend: each must return what the header's rule for them says, and none
 * may crash. Prints "N checks, M failed"; exits non-zero when one failed. */
#define _GNU_SOURCE
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "moonwarp.h"

static int checks, failures;

static void expect_int(const char *what, int got, int want) {
  ++checks;
  if (got != want) {
    ++failures;
    printf("FAIL %s: got %d (%s), want %d (%s); last error: %s\n", what, got, mw_err_name(got), want,
           mw_err_name(want), mw_last_error());
  }
}

static void expect_true(const char *what, int ok) {
  ++checks;
  if (!ok) {
    ++failures;
    printf("FAIL %s\n", what);
  }
}

/* a NULL argument is named in the thread's last error */
static void expect_named(const char *what, const char *arg) {
  ++checks;
  if (!strstr(mw_last_error(), arg) || !strstr(mw_last_error(), "must not be NULL")) {
    ++failures;
    printf("FAIL %s: last error '%s' does not name %s\n", what, mw_last_error(), arg);
  }
}

#define EXPECT(call, want) expect_int(#call, (call), (want))

/* Compiles src with cd, runs its task 0 and checks that it returns want. */
static void expect_runs(mw_runtime *rt, const char *src, const mw_compile_desc *cd, long long want,
                        const char *what) {
  mw_program *q = NULL;
  mw_future f = 0;
  mw_result res;
  memset(&res, 0, sizeof res);
  EXPECT(mw_program_compile(rt, src, cd, &q), 0);
  EXPECT(q ? mw_spawn(rt, q, 0, NULL, 0, 5, &f) : MW_EINVAL, 0);
  EXPECT(f ? mw_future_await(rt, f, 30, &res) : MW_EINVAL, 0);
  expect_true(what, res.status == MW_OK && res.value.i == want);
  if (f) EXPECT(mw_future_release(rt, f), 0);
}

static const char *SRC = "task int sq(int x) { return x * x; }\n"
                         "task void fill(int *p) { if (lane == 0) p[index] = (int)index; }\n"
                         "task int hold(int *flag) { long long t0 = clock64();\n"
                         "  while (*(volatile int *)flag == 0 && clock64() - t0 < 60000000000LL)\n"
                         "    __nanosleep(100000);\n"
                         "  return 5; }\n";

int main(void) {
  mw_runtime *rt = NULL;
  mw_program *p = NULL;
  mw_buffer *b = NULL;
  mw_future f = 0;
  mw_result res;
  mw_stats st;
  mw_task_info info;
  uint64_t kinds[4];
  const char *name = NULL;
  int data[4] = {1, 2, 3, 4};
  mw_value arg = {.i = 7};
  char *text = NULL, *err = NULL;
  int fd = -7, idx = -7;
  volatile int flag = 0;
  mw_future many[4] = {0, 0, 0, 0};
  mw_value many_args[4] = {{.i = 1}, {.i = 2}, {.i = 3}, {.i = 4}};
  uint32_t spawned = 99;
  void *cubin = NULL;
  size_t size = 0;
  uint32_t cycles[2] = {7, 7};

  /* without a runtime */
  EXPECT(mw_runtime_create(NULL, NULL), MW_EINVAL);
  expect_named("mw_runtime_create(NULL, NULL) names out", "out");
  EXPECT(mw_runtime_close(NULL, 0), MW_EINVAL);
  expect_true("mw_runtime_backend(NULL) is \"\"", !strcmp(mw_runtime_backend(NULL), ""));
  expect_true("mw_runtime_last_error(NULL) is a string", mw_runtime_last_error(NULL) != NULL);
  EXPECT(mw_runtime_faulted(NULL), MW_EINVAL);
  EXPECT(mw_runtime_stats(NULL, &st), MW_EINVAL);
  EXPECT(mw_runtime_kind_stats(NULL, 0, kinds), MW_EINVAL);
  EXPECT(mw_runtime_kinds_stats(NULL, 0, 1, &kinds), MW_EINVAL);
  EXPECT(mw_runtime_kinds_instance_cycles(NULL, 0, 1, cycles), MW_EINVAL);
  EXPECT(mw_runtime_kind_name(NULL, 0, &name), MW_EINVAL);
  EXPECT(mw_runtime_poll(NULL), 0);
  EXPECT(mw_program_compile(NULL, SRC, NULL, &p), MW_EINVAL);
  EXPECT(mw_program_task_count(NULL), MW_EINVAL);
  EXPECT(mw_program_task(NULL, 0, &info), MW_EINVAL);
  EXPECT(mw_program_find(NULL, "sq"), MW_EINVAL);
  EXPECT(mw_generate_source(SRC, NULL, "sim", NULL, NULL), MW_EINVAL);
  expect_named("mw_generate_source without out_source names it", "out_source");
  EXPECT(mw_generate_source(NULL, NULL, "sim", &text, NULL), MW_EINVAL);
  EXPECT(mw_generate_source("task int", "bad.cu", "sim", &text, &err), MW_ECOMPILE);
  expect_true("a parse error comes back in out_error", err && strstr(err, "bad.cu:1"));
  free(err);
  EXPECT(mw_compile_cubin(SRC, NULL, NULL, NULL, &size, NULL), MW_EINVAL);
  EXPECT(mw_compile_cubin(SRC, NULL, NULL, &cubin, NULL, NULL), MW_EINVAL);
  EXPECT(mw_compile_cubin(NULL, NULL, NULL, &cubin, &size, NULL), MW_EINVAL);
  EXPECT(mw_compile_cubin(SRC, NULL, "sm_1", &cubin, &size, NULL), MW_EINVAL);
  EXPECT(mw_compile_cubin_desc(SRC, NULL, NULL, &size, NULL), MW_EINVAL);
  EXPECT(mw_compile_cubin_desc(SRC, NULL, &cubin, NULL, NULL), MW_EINVAL);
  EXPECT(mw_compile_cubin_desc(NULL, NULL, &cubin, &size, NULL), MW_EINVAL);
  {
    const char *bad[] = {"1N=2"};
    mw_compile_desc cd = {.arch = "sm_90", .defines = bad, .ndefines = 1};
    EXPECT(mw_compile_cubin_desc(SRC, &cd, &cubin, &size, NULL), MW_EINVAL);
    expect_true("mw_compile_cubin_desc names a bad define",
                strstr(mw_last_error(), "option 'defines': '1N' is not an identifier") != NULL);
    expect_true("a refused mw_compile_cubin_desc hands out nothing", cubin == NULL && size == 0);
    mw_compile_desc odd = {.arch = "sm_90", .frame_bytes = 200};
    EXPECT(mw_compile_cubin_desc(SRC, &odd, &cubin, &size, NULL), MW_EINVAL);
    expect_true("mw_compile_cubin_desc names a bad frame_bytes",
                strstr(mw_last_error(), "option 'frame_bytes' must be a multiple of 16 in 128..65536, got 200") != NULL);
  }
  EXPECT(mw_spawn(NULL, NULL, 0, &arg, 1, 0, &f), MW_EINVAL);
  EXPECT(mw_future_poll(NULL, 1, &res), MW_EINVAL);
  EXPECT(mw_future_await(NULL, 1, 0, NULL), MW_EINVAL);
  EXPECT(mw_future_cancel(NULL, 1, 0), MW_EINVAL);
  EXPECT(mw_future_release(NULL, 1), MW_EINVAL);
  EXPECT(mw_spawn_n(NULL, NULL, 0, 1, &arg, 1, 0, &f, NULL), MW_EINVAL);
  EXPECT(mw_future_await_any(NULL, &f, 1, 0, &idx, &res), MW_EINVAL);
  EXPECT(mw_runtime_fd(NULL, &fd), MW_EINVAL);
  expect_true("mw_runtime_fd(NULL, &fd) writes nothing", fd == -7);
  EXPECT(mw_runtime_set_interrupt(NULL, &flag), MW_EINVAL);
  EXPECT(mw_buffer_alloc(NULL, 16, &b), MW_EINVAL);
  EXPECT(mw_buffer_write(NULL, 0, data, 4), MW_EINVAL);
  EXPECT(mw_buffer_read(NULL, 0, data, 4), MW_EINVAL);
  expect_true("mw_buffer_address(NULL) is 0", mw_buffer_address(NULL) == 0);
  expect_true("mw_buffer_size(NULL) is 0", mw_buffer_size(NULL) == 0);
  mw_buffer_free(NULL);
  EXPECT(mw_trace_start(NULL, 0), MW_EINVAL);
  EXPECT(mw_trace_stop(NULL, NULL, NULL), MW_EINVAL);
  expect_true("mw_strerror of an unknown code is a string", mw_strerror(12345) != NULL);
  expect_true("mw_err_name of an unknown code is a string", mw_err_name(-9999) != NULL);
  expect_true("mw_type_name out of range is \"?\"", !strcmp(mw_type_name((mw_type)99), "?"));

  /* with a runtime and a program */
  mw_runtime_desc d = {0};
  d.backend = "sim";
  d.capacity = 256;
  d.host_futures = 16;
  int rc = mw_runtime_create(&d, &rt);
  if (rc) {
    printf("FAIL the sim runtime did not open: %s\n", mw_last_error());
    printf("%d checks, %d failed\n", checks + 1, failures + 1);
    return 1;
  }
  d.frame_bytes = 100; /* not a multiple of 16 */
  mw_runtime *rt2 = NULL;
  EXPECT(mw_runtime_create(&d, &rt2), MW_EINVAL);
  expect_true("a refused runtime is not handed out", rt2 == NULL);
  d.frame_bytes = 0;
  d.build = "fast"; /* neither "parts" nor "one_unit" */
  EXPECT(mw_runtime_create(&d, &rt2), MW_EINVAL);
  expect_true("a bad build is said", strstr(mw_last_error(), "option 'build'") != NULL);
  d.build = NULL;
  d.stack_bytes = 1024; /* below 4096 */
  EXPECT(mw_runtime_create(&d, &rt2), MW_EINVAL);
  expect_true("a bad stack_bytes is said", strstr(mw_last_error(), "option 'stack_bytes'") != NULL);
  d.stack_bytes = 0;
  EXPECT(mw_program_release(NULL), MW_EINVAL);
  EXPECT(mw_runtime_stats(rt, NULL), MW_EINVAL);
  EXPECT(mw_runtime_kind_stats(rt, 0, NULL), MW_EINVAL);
  EXPECT(mw_runtime_kinds_stats(rt, 0, 1, NULL), MW_EINVAL);
  EXPECT(mw_runtime_kinds_instance_cycles(rt, 0, 1, NULL), MW_EINVAL);
  EXPECT(mw_runtime_faulted(rt), 0);
  expect_true("mw_runtime_backend names the backend", !strcmp(mw_runtime_backend(rt), "sim"));
  EXPECT(mw_program_compile(rt, NULL, NULL, &p), MW_EINVAL);
  EXPECT(mw_program_compile(rt, SRC, NULL, NULL), MW_EINVAL);
  EXPECT(mw_program_compile(rt, "task int broken(", NULL, &p), MW_ECOMPILE);
  expect_true("a failed compile hands out no program", p == NULL);
  EXPECT(mw_program_compile(rt, SRC, NULL, &p), 0);
  EXPECT(mw_runtime_kind_stats(rt, 999, kinds), MW_ENOTASK);
  EXPECT(mw_runtime_kinds_stats(rt, 0, 999, &kinds), MW_ENOTASK);
  EXPECT(mw_runtime_kinds_instance_cycles(rt, 0, 999, cycles), MW_ENOTASK);
  EXPECT(mw_runtime_kinds_instance_cycles(rt, 0, 1, cycles), 0);
  expect_true("a kind never run was never timed", cycles[0] == 0);
  EXPECT(mw_runtime_kind_name(rt, 0, NULL), MW_EINVAL);
  EXPECT(mw_runtime_kind_name(rt, 999, &name), MW_ENOTASK);
  EXPECT(mw_runtime_kind_name(rt, 0, &name), 0);
  expect_true("mw_runtime_kind_name gives the task's name", name && !strcmp(name, "sq"));
  EXPECT(mw_program_task_count(p), 3);
  EXPECT(mw_program_task(p, 0, NULL), MW_EINVAL);
  EXPECT(mw_program_task(p, -1, &info), MW_ENOTASK);
  EXPECT(mw_program_task(p, 3, &info), MW_ENOTASK);
  EXPECT(mw_program_find(p, NULL), MW_EINVAL);
  EXPECT(mw_program_find(p, "nosuch"), MW_ENOTASK);
  EXPECT(mw_program_find(p, "sq"), 0);

  /* compile options: each bad one is MW_EINVAL naming it, and hands out no program */
  {
    static const char *const bad_name[] = {"N-1=3"}, *const reserved[] = {"mw_ctx"},
                             *const word[] = {"await=1"}, *const twice[] = {"N=1", "N"},
                             *const line2[] = {"N=1\n2"}, *const backslash[] = {"N=1\\"},
                             *const null_entry[] = {NULL},
                             *const no_dir[] = {"/nonexistent/moonwarp-include"},
                             *const file_dir[] = {"/dev/null"};
    static const struct {
      const char *const *defines;
      int ndefines;
      const char *const *dirs;
      int ndirs;
      const char *says;
    } rows[] = {
        {bad_name, 1, NULL, 0, "option 'defines': 'N-1' is not an identifier"},
        {reserved, 1, NULL, 0, "option 'defines': 'mw_ctx' is reserved"},
        {word, 1, NULL, 0, "option 'defines': 'await' is a word of the task language"},
        {twice, 2, NULL, 0, "option 'defines': 'N' is defined twice"},
        {line2, 1, NULL, 0, "option 'defines': the value of 'N' must be one line"},
        {backslash, 1, NULL, 0, "option 'defines': the value of 'N' ends with a backslash"},
        {null_entry, 1, NULL, 0, "option 'defines': entry 0 is NULL"},
        {NULL, 1, NULL, 0, "option 'defines' is NULL with ndefines > 0"},
        {bad_name, -1, NULL, 0, "option 'ndefines' is negative"},
        {NULL, 0, no_dir, 1, "option 'include_dirs': no directory '/nonexistent/moonwarp-include'"},
        {NULL, 0, file_dir, 1, "option 'include_dirs': '/dev/null' is not a directory"},
        {NULL, 0, null_entry, 1, "option 'include_dirs': entry 0 is NULL"},
        {NULL, 0, NULL, 1, "option 'include_dirs' is NULL with ninclude_dirs > 0"},
        {NULL, 0, no_dir, -1, "option 'ninclude_dirs' is negative"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; ++i) {
      mw_compile_desc cd = {.filename = "opts.c", .defines = rows[i].defines,
                            .ndefines = rows[i].ndefines, .include_dirs = rows[i].dirs,
                            .ninclude_dirs = rows[i].ndirs};
      mw_program *q = NULL;
      char what[160];
      snprintf(what, sizeof what, "bad compile option %zu (%s)", i, rows[i].says);
      expect_int(what, mw_program_compile(rt, "task int opt() { return 1; }\n", &cd, &q), MW_EINVAL);
      expect_true(rows[i].says, strstr(mw_runtime_last_error(rt), rows[i].says) != NULL &&
                                    strstr(mw_last_error(), rows[i].says) != NULL && q == NULL);
    }
  }

  EXPECT(mw_spawn(rt, NULL, 0, &arg, 1, 0, &f), MW_EINVAL);
  EXPECT(mw_spawn(rt, p, 0, &arg, 1, 0, NULL), MW_EINVAL);
  expect_named("mw_spawn without out names it", "out");
  EXPECT(mw_spawn(rt, p, 0, NULL, 1, 0, &f), MW_EINVAL);
  EXPECT(mw_spawn(rt, p, 0, &arg, 2, 0, &f), MW_EINVAL);
  EXPECT(mw_spawn(rt, p, -1, &arg, 1, 0, &f), MW_ENOTASK);
  EXPECT(mw_spawn(rt, p, 7, &arg, 1, 0, &f), MW_ENOTASK);
  EXPECT(mw_spawn_bulk(rt, p, 1, 0, &arg, 1, 0, &f), MW_EINVAL);

  EXPECT(mw_future_poll(rt, 0, &res), MW_ESTALE);
  EXPECT(mw_future_poll(rt, (mw_future)1 << 40 | 3, &res), MW_ESTALE);
  EXPECT(mw_future_await(rt, 0, 0, NULL), MW_ESTALE);
  EXPECT(mw_future_cancel(rt, 0, 0), MW_ESTALE);
  EXPECT(mw_future_release(rt, 0), MW_ESTALE);
  EXPECT(mw_spawn(rt, p, 0, &arg, 1, 5, &f), 0);
  EXPECT(mw_future_await(rt, f, 30, NULL), 0); /* no result wanted: NULL is allowed */
  EXPECT(mw_future_await(rt, f, 30, &res), 0);
  expect_true("sq(7) is 49", res.value.i == 49);
  EXPECT(mw_future_release(rt, f), 0);
  EXPECT(mw_future_release(rt, f), MW_ESTALE); /* released twice */
  EXPECT(mw_future_poll(rt, f, &res), MW_ESTALE);

  /* n spawns in one call */
  EXPECT(mw_spawn_n(rt, NULL, 0, 4, many_args, 1, 0, many, NULL), MW_EINVAL);
  EXPECT(mw_spawn_n(rt, p, 0, 4, NULL, 1, 0, many, &spawned), MW_EINVAL);
  expect_named("mw_spawn_n without args names it", "args");
  expect_true("a refused mw_spawn_n spawned nothing", spawned == 0);
  EXPECT(mw_spawn_n(rt, p, 0, 4, many_args, 2, 0, many, NULL), MW_EINVAL);
  EXPECT(mw_spawn_n(rt, p, 9, 4, many_args, 1, 0, many, NULL), MW_ENOTASK);
  EXPECT(mw_spawn_n(rt, p, 0, 0, many_args, 1, 0, many, &spawned), 0);
  expect_true("mw_spawn_n of 0 spawns nothing", spawned == 0);
  EXPECT(mw_spawn_n(rt, p, 0, 4, many_args, 1, 5, many, &spawned), 0);
  expect_true("mw_spawn_n made all 4", spawned == 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT(mw_future_await(rt, many[i], 30, &res), 0);
    expect_true("mw_spawn_n: spawn i read args[i]", res.value.i == (i + 1) * (i + 1));
    EXPECT(mw_future_release(rt, many[i]), 0);
  }
  /* fire-and-forget: no futures; more spawns than host futures (16), each slot reused */
  EXPECT(mw_runtime_stats(rt, &st), 0);
  uint64_t before = st.host_completed;
  for (int round = 0; round < 10; ++round)
    EXPECT(mw_spawn_n(rt, p, 0, 4, many_args, 1, 5, NULL, &spawned), 0);
  for (int i = 0; i < 3000; ++i) {
    EXPECT(mw_runtime_stats(rt, &st), 0);
    if (st.host_completed - before == 40) break;
    mw_runtime_poll(rt);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  expect_true("40 fire-and-forget spawns completed and counted", st.host_completed - before == 40);
  expect_true("fire-and-forget spawns hold no host future", st.host_futures_held == 0);

  /* the first to complete of several */
  idx = -7;
  EXPECT(mw_future_await_any(rt, many, 1, 0, NULL, &res), MW_EINVAL);
  EXPECT(mw_future_await_any(rt, NULL, 1, 0, &idx, &res), MW_EINVAL);
  expect_true("mw_future_await_any(rt, NULL, ...) writes nothing", idx == -7);
  EXPECT(mw_future_await_any(rt, many, 0, 0, &idx, &res), MW_EINVAL);
  EXPECT(mw_spawn_n(rt, p, 0, 2, many_args + 2, 1, 5, many, NULL), 0);
  mw_future stale[3] = {many[0], 0, many[1]};
  EXPECT(mw_future_await_any(rt, stale, 3, 0, &idx, &res), MW_ESTALE);
  expect_true("mw_future_await_any names the stale future", idx == 1);
  EXPECT(mw_future_await_any(rt, many, 2, 30, &idx, &res), 0);
  expect_true("mw_future_await_any gives the index and result of a complete one",
              (idx == 0 && res.value.i == 9) || (idx == 1 && res.value.i == 16));
  EXPECT(mw_future_await(rt, many[0], 30, NULL), 0);
  EXPECT(mw_future_await(rt, many[1], 30, NULL), 0);
  EXPECT(mw_future_await_any(rt, many, 2, 0, &idx, &res), 0);
  expect_true("both complete: the lowest index", idx == 0 && res.value.i == 9);

  /* the interrupt flag ends waits with MW_EINTR, the future left as it was */
  mw_buffer *gate = NULL;
  int zero = 0, one = 1;
  EXPECT(mw_buffer_alloc(rt, 4, &gate), 0);
  EXPECT(mw_buffer_write(gate, 0, &zero, 4), 0);
  mw_value gate_arg = {.u = mw_buffer_address(gate)};
  EXPECT(mw_runtime_set_interrupt(rt, &flag), 0);
  EXPECT(mw_spawn(rt, p, 2, &gate_arg, 1, 5, &f), 0); /* holds until the gate opens */
  flag = 1;
  EXPECT(mw_future_await(rt, f, 30, &res), MW_EINTR);
  EXPECT(mw_future_await_any(rt, &f, 1, 30, &idx, &res), MW_EINTR);
  EXPECT(mw_future_poll(rt, f, &res), MW_EAGAIN);
  flag = 0;
  EXPECT(mw_buffer_write(gate, 0, &one, 4), 0);
  EXPECT(mw_future_await(rt, f, 30, &res), 0);
  expect_true("the interrupted future completes as before", res.value.i == 5);
  EXPECT(mw_runtime_set_interrupt(rt, NULL), 0);
  EXPECT(mw_future_release(rt, f), 0);
  mw_buffer_free(gate);

  /* the completion fd */
  EXPECT(mw_runtime_fd(rt, NULL), MW_EINVAL);
  EXPECT(mw_runtime_fd(rt, &fd), 0);
  int fd2 = -1;
  EXPECT(mw_runtime_fd(rt, &fd2), 0);
  expect_true("mw_runtime_fd gives one fd", fd >= 0 && fd == fd2);
  EXPECT(mw_spawn(rt, p, 0, &arg, 1, 5, &f), 0);
  struct pollfd pfd = {fd, POLLIN, 0};
  expect_true("the fd becomes readable when the task completes", poll(&pfd, 1, 30000) == 1);
  expect_true("mw_runtime_poll processes it", mw_runtime_poll(rt) == 1);
  pfd.revents = 0;
  expect_true("and drains the fd", poll(&pfd, 1, 0) == 0);
  EXPECT(mw_future_await(rt, f, 0, &res), 0);
  EXPECT(mw_future_release(rt, f), 0);

  EXPECT(mw_buffer_alloc(rt, 16, NULL), MW_EINVAL);
  EXPECT(mw_buffer_alloc(rt, 0, &b), MW_EINVAL);
  EXPECT(mw_buffer_alloc(rt, 16, &b), 0);
  EXPECT(mw_buffer_write(b, 0, NULL, 4), MW_EINVAL);
  EXPECT(mw_buffer_write(b, 0, NULL, 0), 0);
  EXPECT(mw_buffer_write(b, 100, data, 4), MW_ERANGE);
  EXPECT(mw_buffer_write(b, SIZE_MAX, data, 4), MW_ERANGE);
  EXPECT(mw_buffer_write(b, 8, data, 16), MW_ERANGE);
  EXPECT(mw_buffer_read(b, 0, NULL, 4), MW_EINVAL);
  EXPECT(mw_buffer_read(b, 16, data, 1), MW_ERANGE);
  EXPECT(mw_buffer_write(b, 0, data, 16), 0);
  memset(data, 0, sizeof data);
  EXPECT(mw_buffer_read(b, 0, data, 16), 0);
  expect_true("a buffer reads back what was written", data[0] == 1 && data[3] == 4);
  expect_true("mw_buffer_size is the size asked for", mw_buffer_size(b) == 16);

  /* compile options that are good: a define per program, a header from an include folder */
  {
    char dir[] = "/tmp/mw-api-test-XXXXXX", header[64];
    expect_true("a temporary folder", mkdtemp(dir) != NULL);
    snprintf(header, sizeof header, "%s/api_opts.h", dir);
    FILE *hf = fopen(header, "w");
    if (hf) {
      fputs("#define FROM_HEADER 100\n", hf);
      fclose(hf);
    }
    const char *defs[] = {"N=40", "ONE"}, *dirs[] = {dir};
    mw_compile_desc cd = {.filename = "opts.c", .first_line = 1, .defines = defs, .ndefines = 2,
                          .include_dirs = dirs, .ninclude_dirs = 1, .debug = 1};
    expect_runs(rt, "#include \"api_opts.h\"\ntask int opt() { return N + ONE + FROM_HEADER; }\n", &cd,
                141, "the defines and the header make opt() 141");
    /* the define is the first program's own: a second one without it does not see N */
    mw_compile_desc other = {.filename = "frames.c", .frame_bytes = 4096};
    mw_program *none = NULL;
    EXPECT(mw_program_compile(rt, "task int g() { return 1; }\n", &other, &none), MW_EINVAL);
    expect_true("a program compile refuses frames other than its runtime's",
                none == NULL && strstr(mw_runtime_last_error(rt), "option 'frame_bytes' (4096) is not the runtime's") != NULL);
    mw_compile_desc plain = {.filename = "plain.c", .first_line = 1};
    expect_runs(rt, "task int plain() {\n#ifdef N\n  return -1;\n#else\n  return 7;\n#endif\n}\n", &plain,
                7, "a define stays in its program");
    unlink(header);
    rmdir(dir);
  }

  EXPECT(mw_trace_start(rt, MW_TRACE_MAX_EVENTS_PER_WORKER + 1), MW_EINVAL);
  EXPECT(mw_trace_stop(rt, NULL, NULL), MW_EINVAL); /* not tracing */
  EXPECT(mw_runtime_stats(rt, &st), 0);
  mw_buffer_free(b);
  EXPECT(mw_runtime_close(rt, 10), 0);

  printf("%d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
