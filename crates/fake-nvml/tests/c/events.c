/* A C client of the health and event calls: dlopens the library in argv[1], prints what the
 * health calls answer, then waits for the events the test appends to FAKE_NVML_EVENTS. The
 * structs are declared from nvml.h's layout, so this checks the ABI, not our Rust. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef void *nvmlEventSet_t;
typedef struct {
  nvmlDevice_t device; unsigned long long eventType, eventData; unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;
typedef union { double dVal; int siVal; unsigned int uiVal; unsigned long ulVal; unsigned long long ullVal;
  long long sllVal; unsigned short usVal; } nvmlValue_t;
typedef struct {
  unsigned int fieldId, scopeId; long long timestamp, latencyUsec; int valueType; nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

#define SYM(name, ret, args) ret(*name) args = (ret(*) args)dlsym(lib, #name); if (!name) { printf("missing %s\n", #name); return 1; }

int main(int argc, char **argv) {
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) { printf("dlopen failed: %s\n", dlerror()); return 1; }
  SYM(nvmlInit_v2, nvmlReturn_t, (void));
  SYM(nvmlShutdown, nvmlReturn_t, (void));
  SYM(nvmlErrorString, const char *, (nvmlReturn_t));
  SYM(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int, nvmlDevice_t *));
  SYM(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t, char *, unsigned int));
  SYM(nvmlDeviceGetEccMode, nvmlReturn_t, (nvmlDevice_t, int *, int *));
  SYM(nvmlDeviceGetTotalEccErrors, nvmlReturn_t, (nvmlDevice_t, int, int, unsigned long long *));
  SYM(nvmlDeviceGetRetiredPagesPendingStatus, nvmlReturn_t, (nvmlDevice_t, int *));
  SYM(nvmlDeviceGetRemappedRows, nvmlReturn_t, (nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *, unsigned int *));
  SYM(nvmlDeviceGetFieldValues, nvmlReturn_t, (nvmlDevice_t, int, nvmlFieldValue_t *));
  SYM(nvmlEventSetCreate, nvmlReturn_t, (nvmlEventSet_t *));
  SYM(nvmlDeviceGetSupportedEventTypes, nvmlReturn_t, (nvmlDevice_t, unsigned long long *));
  SYM(nvmlDeviceRegisterEvents, nvmlReturn_t, (nvmlDevice_t, unsigned long long, nvmlEventSet_t));
  SYM(nvmlEventSetWait_v2, nvmlReturn_t, (nvmlEventSet_t, nvmlEventData_t *, unsigned int));
  SYM(nvmlEventSetWait, nvmlReturn_t, (nvmlEventSet_t, nvmlEventData_t *, unsigned int));
  SYM(nvmlEventSetFree, nvmlReturn_t, (nvmlEventSet_t));

  printf("init: %d\n", nvmlInit_v2());
  nvmlDevice_t gpu[2];
  for (unsigned int i = 0; i < 2; i++) {
    nvmlDevice_t d;
    nvmlDeviceGetHandleByIndex_v2(i, &d);
    gpu[i] = d;
    int cur = -1, pend = -1;
    nvmlReturn_t r = nvmlDeviceGetEccMode(d, &cur, &pend);
    printf("gpu %u ecc mode: %s %d %d\n", i, nvmlErrorString(r), cur, pend);
    unsigned long long n[4] = {0};
    for (int k = 0; k < 4; k++) r = nvmlDeviceGetTotalEccErrors(d, k & 1, k >> 1, &n[k]);
    printf("  ecc counts: %s cv %llu uv %llu ca %llu ua %llu\n", nvmlErrorString(r), n[0], n[1], n[2], n[3]);
    printf("  bad counter type: %s\n", nvmlErrorString(nvmlDeviceGetTotalEccErrors(d, 1, 7, &n[0])));
    int retired = -1;
    r = nvmlDeviceGetRetiredPagesPendingStatus(d, &retired);
    printf("  retired pending: %s %d\n", nvmlErrorString(r), retired);
    unsigned int c = 9, u = 9, p = 9, f = 9;
    r = nvmlDeviceGetRemappedRows(d, &c, &u, &p, &f);
    printf("  remapped: %s %u %u %u %u\n", nvmlErrorString(r), c, u, p, f);
    nvmlFieldValue_t v[6] = {{0}};
    unsigned int ids[6] = {31, 142, 143, 144, 145, 1};
    for (int k = 0; k < 6; k++) v[k].fieldId = ids[k];
    r = nvmlDeviceGetFieldValues(d, 6, v);
    printf("  fields: %s", nvmlErrorString(r));
    for (int k = 0; k < 6; k++) printf(" %u=%d/%u", v[k].fieldId, v[k].nvmlReturn, v[k].nvmlReturn ? 0 : v[k].value.uiVal);
    printf("\n");
    unsigned long long types = 0;
    r = nvmlDeviceGetSupportedEventTypes(d, &types);
    printf("  event types: %s %llu\n", nvmlErrorString(r), types);
  }
  nvmlEventSet_t set, other;
  nvmlReturn_t created = nvmlEventSetCreate(&set);
  printf("set create: %d %d\n", created, nvmlEventSetCreate(&other));
  printf("register all on gpu 0: %d\n", nvmlDeviceRegisterEvents(gpu[0], 8 | 2 | 1 | 16384, set));
  printf("register dbe on gpu 1: %s\n", nvmlErrorString(nvmlDeviceRegisterEvents(gpu[1], 2, set)));
  printf("register xid on gpu 1: %d\n", nvmlDeviceRegisterEvents(gpu[1], 8, set));
  printf("other set, dbe on gpu 0: %d\n", nvmlDeviceRegisterEvents(gpu[0], 2, other));
  nvmlEventData_t e;
  printf("wait 0 ms: %s\n", nvmlErrorString(nvmlEventSetWait_v2(set, &e, 0)));
  printf("waiting\n");
  fflush(stdout);
  /* The test appends its lines now; each wait must see them while blocked. */
  for (int k = 0; k < 6; k++) {
    nvmlReturn_t r = k == 5 ? nvmlEventSetWait(set, &e, 10000) : nvmlEventSetWait_v2(set, &e, 10000);
    if (r != 0) { printf("event %d: %s\n", k, nvmlErrorString(r)); continue; }
    printf("event %d: gpu %d type %llu data %llu", k, e.device == gpu[0] ? 0 : e.device == gpu[1] ? 1 : -1,
           e.eventType, e.eventData);
    if (k < 5) printf(" gi %d ci %d", (int)e.gpuInstanceId, (int)e.computeInstanceId);
    printf("\n");
  }
  printf("other set: %s", nvmlErrorString(nvmlEventSetWait_v2(other, &e, 0)));
  printf(" type %llu", e.eventType);
  printf(", then %s\n", nvmlErrorString(nvmlEventSetWait_v2(other, &e, 0)));
  unsigned int c, u, p, f;
  printf("remapped after set: %s", nvmlErrorString(nvmlDeviceGetRemappedRows(gpu[0], &c, &u, &p, &f)));
  printf(" %u %u %u %u\n", c, u, p, f);
  unsigned long long uv = 0;
  nvmlDeviceGetTotalEccErrors(gpu[0], 1, 0, &uv);
  printf("uncorrected volatile after dbe: %llu\n", uv);
  char name[96];
  printf("gpu 1 after lost: %s\n", nvmlErrorString(nvmlDeviceGetName(gpu[1], name, sizeof name)));
  nvmlDevice_t again;
  printf("gpu 1 handle after lost: %s\n", nvmlErrorString(nvmlDeviceGetHandleByIndex_v2(1, &again)));
  printf("gpu 0 still: %d\n", nvmlDeviceGetName(gpu[0], name, sizeof name));
  nvmlReturn_t freed = nvmlEventSetFree(set);
  printf("free: %d, again: %s\n", freed, nvmlErrorString(nvmlEventSetFree(set)));
  nvmlEventSetFree(other);
  printf("shutdown: %d\n", nvmlShutdown());
  return 0;
}
