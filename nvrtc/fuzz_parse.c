/* fuzz_parse.c - a libFuzzer target for the task-declaration parser and the source generator:
 * any input gives a program or a "file:line: message" error, never a crash, a leak or
 * undefined behaviour; the same input read as a compiler's log (or an executor's message) is
 * put in the user's terms without fault. Built and run by scripts/fuzz.sh (clang, -fsanitize=fuzzer). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0 || size > 65536) return 0;
  /* the first byte picks the options, the rest is the source */
  uint8_t opts = data[0];
  char *src = malloc(size);
  if (!src) return 0;
  memcpy(src, data + 1, size - 1);
  src[size - 1] = 0;
  free(mw__user_log(src, (opts & 4) ? "/tmp/moonwarp-sim-x/program.cpp" : "moonwarp.cu"));
  mw__parsed p;
  char err[512];
  memset(&p, 0, sizeof p);
  int rc = mw__parse(src, "fuzz.cu", 1 + (opts >> 4), &p, err, sizeof err);
  if (rc == 0) {
    for (int i = 0; i < p.ntasks; ++i) p.tasks[i].kind = (uint32_t)i;
    mw__parsed *list[1] = {&p};
    mw__gen_opts go = {opts & 1, (opts & 2) ? 1024u : 256u, (opts & 8) != 0};
    char *gen = mw__generate(list, 1, &go);
    free(gen);
    free(mw__user_places(src, list, 1));
    mw__parsed_free(&p);
  } else if (!memchr(err, ':', sizeof err)) {
    abort(); /* an error must say where */
  }
  free(src);
  return 0;
}
