@__device__ int helper(int x) { return x * 2; }
task void all(bool b, char c, short s, int i, long l, unsigned u, unsigned long ul, float f, double d, int *p, const float *q, future g) {
  local int k[4];
  local double acc;
  acc = 0;
  try_await(g);
  acc = failed(g);
  cancel(g);
}
task int bad(int x) { fail(3, "no"); }
