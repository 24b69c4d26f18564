-- tasks.lua - the task programs of the benchmarks, shared by bench/suite.lua and bench/core.lua.
return [[
task int nop() { return 1; }
// returns ms after about ms milliseconds of the device timer, sleeping (lanes agree on the start)
task int snooze(int ms) {
  unsigned long long t0 = __shfl_sync(0xffffffffu, (unsigned long long)MW_GLOBALTIMER(), 0);
  while (MW_GLOBALTIMER() - t0 < (unsigned long long)ms * 1000000ull) __nanosleep(200000);
  return ms;
}
// busy for us microseconds of the device clock (the suite's wake-up figure)
task int busy_us(int us) {
  unsigned long long t0 = __shfl_sync(0xffffffffu, (unsigned long long)MW_GLOBALTIMER(), 0);
  while (MW_GLOBALTIMER() - t0 < (unsigned long long)us * 1000ull) __nanosleep(1000);
  return us;
}
task int step(int i) { return i & 1; }
task long chain(int n) {
  local future f;
  local int i;
  local long s;
  s = 0;
  for (i = 0; i < n; ++i) {
    f = spawn(step, i);
    await(f);
    s += (long)value(f);
    release(f);
  }
  return s;
}
task long fib(int n) {
  local future a, b;
  if (n < 2) return n;
  a = spawn(fib, n - 1);
  b = spawn(fib, n - 2);
  await_all(a, b);
  return value(a) + value(b);
}
// bulk: instance `index` handles 1024 consecutive elements. A worker is one warp and the
// executor keeps few warps per SM, so each lane keeps eight 16-byte loads of x and y in flight.
task void saxpy(float a, const float *x, float *y, long n) {
  long lo = (long)index * 1024;
  if (lo + 1024 <= n && (((long)x | (long)y) & 15) == 0) {
    const float4 *x4 = (const float4 *)(x + lo);
    float4 *y4 = (float4 *)(y + lo);
    float4 xv[8], yv[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      xv[k] = x4[lane + 32 * k];
      yv[k] = y4[lane + 32 * k];
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      yv[k].x = a * xv[k].x + yv[k].x;
      yv[k].y = a * xv[k].y + yv[k].y;
      yv[k].z = a * xv[k].z + yv[k].z;
      yv[k].w = a * xv[k].w + yv[k].w;
      y4[lane + 32 * k] = yv[k];
    }
  } else {
    for (long i = lo + lane; i < n && i < lo + 1024; i += 32) y[i] = a * x[i] + y[i];
  }
}
// pipeline over `batch` 16x16 tiles: scale/shift -> multiply by m -> inverse scale
task void stage_in(float *t, int batch) {
  for (int i = lane; i < 256; i += 32) t[index * 256 + i] = t[index * 256 + i] * 0.5f + 1.0f;
}
task void stage_mm(const float *t, const float *m, float *u, int batch) {
  for (int e = lane; e < 256; e += 32) {
    int r = e / 16, c = e % 16;
    float s = 0.0f;
    for (int k = 0; k < 16; ++k) s += t[index * 256 + r * 16 + k] * m[k * 16 + c];
    u[index * 256 + e] = s;
  }
}
task void stage_out(float *u, int batch) {
  for (int i = lane; i < 256; i += 32) u[index * 256 + i] = (u[index * 256 + i] - 1.0f) * 2.0f;
}
task int pipeline(float *t, const float *m, float *u, int batch) {
  local future f;
  f = spawn_bulk(stage_in, batch, t, batch);
  await(f);
  f = spawn_bulk(stage_mm, batch, t, m, u, batch);
  await(f);
  f = spawn_bulk(stage_out, batch, u, batch);
  await(f);
  return batch;
}
// dynamic fan-out: one expert task per non-empty group, sized by data read on the device
task long expert(const int *items, int first, int count) {
  long s = 0;
  for (int i = lane; i < count; i += 32) s += items[first + i];
  for (int d = 16; d > 0; d /= 2) s += __shfl_down_sync(0xffffffffu, s, d);
  return __shfl_sync(0xffffffffu, s, 0);
}
task long route(const int *counts, const int *items, int groups) {
  local future fs[48];
  local int g, k, first;
  local long total;
  k = 0;
  first = 0;
  for (g = 0; g < groups; ++g) {
    if (counts[g] > 0) fs[k++] = spawn(expert, items, first, counts[g]);
    first += counts[g];
  }
  total = 0;
  for (g = 0; g < k; ++g) {
    await(fs[g]);
    total += (long)value(fs[g]);
  }
  return total;
}
]]
