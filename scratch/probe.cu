// probe: can a process create a new context after a sticky fault in another one?
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
__global__ void bad(int *p) { p[1 << 30] = 1; }
__global__ void good(int *p) { p[0] = 42; }
static void check(const char *what, CUresult r) { const char *s = 0; cuGetErrorName(r, &s); printf("%-40s %d %s\n", what, (int)r, s ? s : "?"); }
int main(int argc, char **argv) {
  int mode = argc > 1 ? atoi(argv[1]) : 0;
  cuInit(0);
  CUdevice dev; cuDeviceGet(&dev, 0);
  CUcontext a, b;
  check("create A", cuCtxCreate(&a, NULL, CU_CTX_SCHED_SPIN | CU_CTX_MAP_HOST, dev));
  CUmodule m; CUfunction fb, fg;
  check("load", cuModuleLoad(&m, "probe.cubin"));
  cuModuleGetFunction(&fb, m, "_Z3badPi"); cuModuleGetFunction(&fg, m, "_Z4goodPi");
  CUdeviceptr p; cuMemAlloc(&p, 4);
  CUstream s; cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  void *args[] = {&p};
  check("launch bad", cuLaunchKernel(fb, 1,1,1, 32,1,1, 0, s, args, 0));
  check("sync", cuStreamSynchronize(s));
  if (mode == 1) check("setcurrent null", cuCtxSetCurrent(NULL));
  check("destroy A", cuCtxDestroy(a));
  CUcontext c = 0; cuCtxGetCurrent(&c); printf("current after destroy %p\n", (void*)c);
  if (mode == 2) check("primary reset", cuDevicePrimaryCtxReset(dev));
  CUresult r = cuCtxCreate(&b, NULL, CU_CTX_SCHED_SPIN | CU_CTX_MAP_HOST, dev);
  check("create B", r);
  if (r) { check("primary reset", cuDevicePrimaryCtxReset(dev)); r = cuCtxCreate(&b, NULL, CU_CTX_SCHED_SPIN | CU_CTX_MAP_HOST, dev); check("create B again", r); }
  if (!r) {
    check("load B", cuModuleLoad(&m, "probe.cubin"));
    cuModuleGetFunction(&fg, m, "_Z4goodPi");
    check("alloc B", cuMemAlloc(&p, 4));
    check("launch good", cuLaunchKernel(fg, 1,1,1, 32,1,1, 0, 0, args, 0));
    check("sync B", cuCtxSynchronize());
    int v = 0; cuMemcpyDtoH(&v, p, 4); printf("value %d\n", v);
  }
  return 0;
}
