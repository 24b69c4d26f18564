/* hello_host.c - a C host embedding moonwarp: compile a program, spawn a task, await its result. */
#include <stdio.h>
#include <stdlib.h>

#include "moonwarp.h"

static const char *source =
    "task long fib(int n) {\n"
    "  local future a, b;\n"
    "  if (n < 2) return n;\n"
    "  a = spawn(fib, n - 1);\n"
    "  b = spawn(fib, n - 2);\n"
    "  await_all(a, b);\n"
    "  return value(a) + value(b);\n"
    "}\n";

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20;
  mw_runtime *rt;
  int rc = mw_runtime_create(NULL, &rt);
  if (rc) {
    fprintf(stderr, "runtime: %s: %s\n", mw_err_name(rc), mw_last_error());
    return 1;
  }
  mw_program *prog;
  mw_compile_desc cd = {.filename = "hello_host.c", .first_line = 9};
  if ((rc = mw_program_compile(rt, source, &cd, &prog))) {
    fprintf(stderr, "compile: %s\n%s\n", mw_err_name(rc), mw_runtime_last_error(rt));
    mw_runtime_close(rt, 0);
    return 1;
  }
  mw_value arg = {.i = n};
  mw_future f;
  mw_result res;
  if ((rc = mw_spawn(rt, prog, mw_program_find(prog, "fib"), &arg, 1, -1, &f)) ||
      (rc = mw_future_await(rt, f, 60.0, &res))) {
    fprintf(stderr, "fib: %s: %s\n", mw_err_name(rc), mw_runtime_last_error(rt));
    mw_runtime_close(rt, 0);
    return 1;
  }
  if (res.status != MW_OK) {
    fprintf(stderr, "fib failed: %s\n", res.message);
    mw_runtime_close(rt, 0);
    return 1;
  }
  printf("fib(%d) = %lld on %s\n", n, (long long)res.value.i, mw_runtime_backend(rt));
  mw_future_release(rt, f);
  return mw_runtime_close(rt, 0) ? 1 : 0;
}
