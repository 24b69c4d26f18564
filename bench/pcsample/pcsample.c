/* pcsample.c - where a running persistent kernel's warps stall, sampled: a CUDA injection library
 * (CUDA_INJECTION64_PATH) that turns on CUPTI's PC sampling in continuous mode on every context
 * the process creates, so that the executor, which never ends while the host talks to it and
 * which ncu therefore cannot profile, is sampled as it runs. A thread drains the samples every
 * 50 ms; at the process's end (or its context's destruction) the counts per PC and stall reason
 * go to $MW_PCSAMPLE_OUT (default pcsample.txt), and each module loaded to OUT.<module id>.cubin
 * for the offsets' disassembly (nvdisasm). bench/pcsample/report.lua reads them.
 * Build: cc -O2 -shared -fPIC bench/pcsample/pcsample.c -I$CUDA/include -L$CUPTI_LIB -lcupti
 *        -ldl -lpthread -o libmwpcsample.so
 * Use:   CUDA_INJECTION64_PATH=$PWD/libmwpcsample.so MW_PCSAMPLE_OUT=/tmp/ps.txt luajit ...
 * $MW_PCSAMPLE_PERIOD: the sampling period, 2^p cycles for p from 5 to 31 (default 5); $MW_PCSAMPLE_HWBUF_MB:
 * the hardware buffer CUPTI fills, in MB (default 1024). */
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <cupti_pcsampling.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_CUPTI(call)                                                                        \
  do {                                                                                           \
    CUptiResult r_ = (call);                                                                     \
    if (r_ != CUPTI_SUCCESS) {                                                                   \
      const char *s_ = "?";                                                                      \
      cuptiGetResultString(r_, &s_);                                                             \
      fprintf(stderr, "pcsample: %s: %s\n", #call, s_);                                          \
    }                                                                                            \
  } while (0)

enum { BUF_PCS = 8192, MAX_REASONS = 64, TABLE = 1 << 16 };

/* the counts of one (function, pc offset): samples per stall reason (by position in reasons[]) */
typedef struct {
  char *fn;
  uint64_t pc;
  uint64_t n[MAX_REASONS];
} pc_row;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pc_row *table; /* open addressing on (fn, pc) */
static size_t nreasons;
static uint32_t reason_index[MAX_REASONS];
static char *reason_name[MAX_REASONS];
static CUcontext sampled; /* the one context sampled (the first created) */
static CUpti_PCSamplingData config_buf, drain_buf;
static uint64_t total_samples, dropped_samples, lost_rows, drains, drained_pcs, full_reads;
static size_t nrows;
static int running, written, configured; /* configured: this process sampled a context */
static pthread_t drainer;
static const char *out_path(void) {
  const char *p = getenv("MW_PCSAMPLE_OUT");
  return p && *p ? p : "pcsample.txt";
}

static void alloc_buf(CUpti_PCSamplingData *b) {
  memset(b, 0, sizeof *b);
  b->size = sizeof *b;
  b->collectNumPcs = BUF_PCS;
  b->pPcData = calloc(BUF_PCS, sizeof *b->pPcData);
  for (size_t i = 0; i < BUF_PCS; ++i) {
    b->pPcData[i].size = sizeof b->pPcData[i];
    b->pPcData[i].stallReason = calloc(MAX_REASONS, sizeof *b->pPcData[i].stallReason);
  }
}

static int reason_pos(uint32_t index) {
  for (size_t i = 0; i < nreasons; ++i)
    if (reason_index[i] == index) return (int)i;
  return -1;
}

/* adds the PCs of b to the table (the lock held) */
static void absorb(const CUpti_PCSamplingData *b) {
  total_samples += b->totalSamples;
  dropped_samples += b->droppedSamples;
  for (size_t i = 0; i < b->totalNumPcs; ++i) {
    const CUpti_PCSamplingPCData *d = &b->pPcData[i];
    const char *fn = d->functionName ? d->functionName : "?";
    uint64_t h = d->pcOffset * 0x9E3779B97F4A7C15ull;
    for (const char *s = fn; *s; ++s) h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    size_t j = h & (TABLE - 1);
    while (table[j].fn && (table[j].pc != d->pcOffset || strcmp(table[j].fn, fn))) j = (j + 1) & (TABLE - 1);
    if (!table[j].fn) {
      if (nrows + 1 >= TABLE) { /* full: counted, not kept */
        ++lost_rows;
        continue;
      }
      ++nrows;
      table[j].fn = strdup(fn);
      table[j].pc = d->pcOffset;
    }
    for (size_t k = 0; k < d->stallReasonCount; ++k) {
      int p = reason_pos(d->stallReason[k].pcSamplingStallReasonIndex);
      if (p >= 0) table[j].n[p] += d->stallReason[k].samples;
    }
  }
}

/* drains what CUPTI holds for the sampled context (the lock held) */
static void drain(void) {
  if (!sampled) return;
  for (int rounds = 0; rounds < 64; ++rounds) {
    CUpti_PCSamplingGetDataParams p = {0};
    p.size = CUpti_PCSamplingGetDataParamsSize;
    p.ctx = sampled;
    p.pcSamplingData = &drain_buf;
    drain_buf.totalNumPcs = 0;
    CUptiResult r = cuptiPCSamplingGetData(&p);
    if (r == CUPTI_ERROR_OUT_OF_MEMORY) { /* the hardware buffer filled: what came is kept, and counted */
      if (!full_reads++)
        fprintf(stderr, "pcsample: the hardware buffer filled (samples lost); a longer period (MW_PCSAMPLE_PERIOD) or a larger buffer (MW_PCSAMPLE_HWBUF_MB) keeps up\n");
      ++drains;
      drained_pcs += drain_buf.totalNumPcs;
      absorb(&drain_buf);
      break;
    }
    if (r != CUPTI_SUCCESS) {
      static int told;
      const char *msg = "?";
      cuptiGetResultString(r, &msg);
      if (!told++) fprintf(stderr, "pcsample: cuptiPCSamplingGetData: %s\n", msg);
      break;
    }
    ++drains;
    drained_pcs += drain_buf.totalNumPcs;
    absorb(&drain_buf);
    if (drain_buf.hardwareBufferFull) fprintf(stderr, "pcsample: the hardware buffer filled; samples lost\n");
    if (drain_buf.remainingNumPcs == 0) break;
  }
}

static void write_out(void) {
  if (written) return;
  written = 1;
  const char *path = out_path();
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return;
  }
  fprintf(f, "# pcsample: total samples %llu, dropped %llu, PCs not kept (table full) %llu\n# reasons:",
          (unsigned long long)total_samples, (unsigned long long)dropped_samples, (unsigned long long)lost_rows);
  for (size_t i = 0; i < nreasons; ++i) fprintf(f, " %s", reason_name[i]);
  fprintf(f, "\n# function pc_offset samples_per_reason...\n");
  for (size_t j = 0; j < TABLE; ++j) {
    if (!table[j].fn) continue;
    fprintf(f, "%s 0x%llx", table[j].fn, (unsigned long long)table[j].pc);
    for (size_t i = 0; i < nreasons; ++i) fprintf(f, " %llu", (unsigned long long)table[j].n[i]);
    fputc('\n', f);
  }
  fclose(f);
  fprintf(stderr, "pcsample (pid %d): %llu samples (%llu dropped), %llu PCs from %llu reads (%llu with the buffer full), in %s\n",
          (int)getpid(), (unsigned long long)total_samples, (unsigned long long)dropped_samples,
          (unsigned long long)drained_pcs, (unsigned long long)drains, (unsigned long long)full_reads, path);
}

static void *drain_loop(void *arg) {
  (void)arg;
  /* the sampled context current here too, for CUPTI's reads. The driver's entry is looked up in
   * the driver the process loaded: linked against it, this library would not load where the
   * process opened the driver with dlopen (RTLD_LOCAL), and the driver drops an injection library
   * that fails to load without a word */
  CUresult (*set_current)(CUcontext) = NULL;
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (drv) *(void **)&set_current = dlsym(drv, "cuCtxSetCurrent");
  pthread_mutex_lock(&lock);
  if (sampled && set_current) set_current(sampled);
  else if (sampled) fprintf(stderr, "pcsample: no cuCtxSetCurrent in the loaded driver (%s)\n", dlerror());
  pthread_mutex_unlock(&lock);
  while (__atomic_load_n(&running, __ATOMIC_ACQUIRE)) {
    usleep(50000);
    pthread_mutex_lock(&lock);
    drain();
    pthread_mutex_unlock(&lock);
  }
  return NULL;
}

/* the end of sampling: drain, turn off, write (once) */
static void finish(void) {
  if (__atomic_exchange_n(&running, 0, __ATOMIC_ACQ_REL)) pthread_join(drainer, NULL);
  pthread_mutex_lock(&lock);
  if (sampled) {
    drain();
    CUpti_PCSamplingDisableParams d = {0};
    d.size = CUpti_PCSamplingDisableParamsSize;
    d.ctx = sampled;
    CHECK_CUPTI(cuptiPCSamplingDisable(&d));
    drained_pcs += config_buf.totalNumPcs;
    absorb(&config_buf); /* what the disable flushed into the configured buffer */
    config_buf.totalNumPcs = 0;
    sampled = NULL;
  }
  if (configured) write_out(); /* a process that sampled nothing leaves the file to the one that did */
  pthread_mutex_unlock(&lock);
}

/* the whole number in environment variable name, from lo to hi; def where it is unset, and
 * where it is anything else, said so */
static long env_whole(const char *name, long lo, long hi, long def) {
  const char *e = getenv(name);
  if (!e || !*e) return def;
  char *end = NULL;
  long v = strtol(e, &end, 10);
  if (!*end && v >= lo && v <= hi) return v;
  fprintf(stderr, "pcsample: %s is a whole number from %ld to %ld, got '%s'; %ld it is\n", name, lo, hi, e, def);
  return def;
}

static void configure(CUcontext ctx) {
  CUpti_PCSamplingEnableParams e = {0};
  e.size = CUpti_PCSamplingEnableParamsSize;
  e.ctx = ctx;
  CHECK_CUPTI(cuptiPCSamplingEnable(&e));
  size_t n = 0;
  CUpti_PCSamplingGetNumStallReasonsParams np = {0};
  np.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
  np.ctx = ctx;
  np.numStallReasons = &n;
  CHECK_CUPTI(cuptiPCSamplingGetNumStallReasons(&np));
  if (n > MAX_REASONS) n = MAX_REASONS;
  nreasons = n;
  for (size_t i = 0; i < n; ++i) reason_name[i] = calloc(1, CUPTI_STALL_REASON_STRING_SIZE);
  CUpti_PCSamplingGetStallReasonsParams rp = {0};
  rp.size = CUpti_PCSamplingGetStallReasonsParamsSize;
  rp.ctx = ctx;
  rp.numStallReasons = n;
  rp.stallReasonIndex = reason_index;
  rp.stallReasons = reason_name;
  CHECK_CUPTI(cuptiPCSamplingGetStallReasons(&rp));

  const uint32_t period = (uint32_t)env_whole("MW_PCSAMPLE_PERIOD", 5, 31, 5);
  /* the hardware buffer (MB) and how often CUPTI's threads decode it: at the default 512 MB and
   * 100 ms, a period of 2^8 cycles over 528 resident warps filled it (v81) */
  const size_t hwbuf_mb = (size_t)env_whole("MW_PCSAMPLE_HWBUF_MB", 16, 16384, 1024);
  CUpti_PCSamplingConfigurationInfo info[8];
  memset(info, 0, sizeof info);
  info[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
  info[0].attributeData.samplingPeriodData.samplingPeriod = period;
  info[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
  info[1].attributeData.stallReasonData.stallReasonCount = n;
  info[1].attributeData.stallReasonData.pStallReasonIndex = reason_index;
  info[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
  info[2].attributeData.collectionModeData.collectionMode = CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
  info[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT;
  info[3].attributeData.outputDataFormatData.outputDataFormat = CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
  info[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
  info[4].attributeData.samplingDataBufferData.samplingDataBuffer = &config_buf;
  info[5].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE;
  info[5].attributeData.scratchBufferSizeData.scratchBufferSize = (size_t)64 << 20;
  CUpti_PCSamplingConfigurationInfoParams cp = {0};
  cp.size = CUpti_PCSamplingConfigurationInfoParamsSize;
  cp.ctx = ctx;
  info[6].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE;
  info[6].attributeData.hardwareBufferSizeData.hardwareBufferSize = hwbuf_mb << 20;
  info[7].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN;
  info[7].attributeData.workerThreadPeriodicSleepSpanData.workerThreadPeriodicSleepSpan = 10; /* ms */
  cp.numAttributes = 8;
  cp.pPCSamplingConfigurationInfo = info;
  CHECK_CUPTI(cuptiPCSamplingSetConfigurationAttribute(&cp));
  sampled = ctx;
  configured = 1;
  running = 1;
  pthread_create(&drainer, NULL, drain_loop, NULL);
  fprintf(stderr, "pcsample (pid %d): sampling context %p, %zu stall reasons, period 2^%u cycles\n", (int)getpid(),
          (void *)ctx, n, period);
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId id, const void *data) {
  (void)ud;
  if (dom != CUPTI_CB_DOMAIN_RESOURCE) return;
  const CUpti_ResourceData *rd = data;
  if (id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    pthread_mutex_lock(&lock);
    int first = sampled == NULL && !written;
    pthread_mutex_unlock(&lock);
    if (first) configure(rd->context);
  } else if (id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    if (rd->context == sampled) finish();
  } else if (id == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
    const CUpti_ModuleResourceData *m = rd->resourceDescriptor;
    char path[4096];
    snprintf(path, sizeof path, "%s.%u.cubin", out_path(), m->moduleId);
    FILE *f = fopen(path, "wb");
    if (f) {
      fwrite(m->pCubin, 1, m->cubinSize, f);
      fclose(f);
    }
  }
}

/* every process that loads this library says so, so that a run without samples tells a
 * library never loaded from a driver that never called it */
__attribute__((constructor)) static void loaded(void) {
  fprintf(stderr, "pcsample (pid %d): loaded, writing to %s\n", (int)getpid(), out_path());
}

/* called by the driver at cuInit when CUDA_INJECTION64_PATH names this library */
int InitializeInjection(void) {
  fprintf(stderr, "pcsample (pid %d): initialised by the driver\n", (int)getpid());
  table = calloc(TABLE, sizeof *table);
  alloc_buf(&config_buf);
  alloc_buf(&drain_buf);
  CUpti_SubscriberHandle sub;
  CHECK_CUPTI(cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_callback, NULL));
  CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
  CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));
  CHECK_CUPTI(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED));
  atexit(finish);
  return 1;
}
