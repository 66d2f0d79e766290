/* A plain C NVML client: dlopens the library named in argv[1] and prints what it answers.
 * The structs are declared here from nvml.h's layout, so this checks the ABI, not our Rust. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef void *nvmlGpuInstance_t;
typedef void *nvmlComputeInstance_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct {
  unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
      sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;
typedef struct { unsigned int start, size; } nvmlPlacement_t;
typedef struct { nvmlDevice_t device; unsigned int id, profileId; nvmlPlacement_t placement; } nvmlGpuInstanceInfo_t;
typedef struct {
  unsigned char clusterUuid[16]; nvmlReturn_t status; unsigned int cliqueId; unsigned char state;
} nvmlGpuFabricInfo_t;
typedef struct {
  unsigned int version; unsigned char clusterUuid[16]; nvmlReturn_t status; unsigned int cliqueId;
  unsigned char state; unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;

#define SYM(name, ret, args) ret(*name) args = (ret(*) args)dlsym(lib, #name); if (!name) { printf("missing %s\n", #name); return 1; }

int main(int argc, char **argv) {
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) { printf("dlopen failed: %s\n", dlerror()); return 1; }
  SYM(nvmlInit_v2, nvmlReturn_t, (void));
  SYM(nvmlShutdown, nvmlReturn_t, (void));
  SYM(nvmlErrorString, const char *, (nvmlReturn_t));
  SYM(nvmlSystemGetDriverVersion, nvmlReturn_t, (char *, unsigned int));
  SYM(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int *));
  SYM(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int, nvmlDevice_t *));
  SYM(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t, char *, unsigned int));
  SYM(nvmlDeviceGetMemoryInfo, nvmlReturn_t, (nvmlDevice_t, nvmlMemory_t *));
  SYM(nvmlDeviceGetMemoryInfo_v2, nvmlReturn_t, (nvmlDevice_t, nvmlMemory_v2_t *));
  SYM(nvmlDeviceGetCudaComputeCapability, nvmlReturn_t, (nvmlDevice_t, int *, int *));
  SYM(nvmlDeviceGetMigMode, nvmlReturn_t, (nvmlDevice_t, unsigned int *, unsigned int *));
  SYM(nvmlDeviceGetMaxMigDeviceCount, nvmlReturn_t, (nvmlDevice_t, unsigned int *));
  SYM(nvmlDeviceGetMigDeviceHandleByIndex, nvmlReturn_t, (nvmlDevice_t, unsigned int, nvmlDevice_t *));
  SYM(nvmlDeviceGetAttributes_v2, nvmlReturn_t, (nvmlDevice_t, nvmlDeviceAttributes_t *));
  SYM(nvmlDeviceGetGpuInstanceId, nvmlReturn_t, (nvmlDevice_t, unsigned int *));
  SYM(nvmlDeviceGetGpuInstanceById, nvmlReturn_t, (nvmlDevice_t, unsigned int, nvmlGpuInstance_t *));
  SYM(nvmlGpuInstanceGetInfo, nvmlReturn_t, (nvmlGpuInstance_t, nvmlGpuInstanceInfo_t *));
  SYM(nvmlDeviceGetGpuFabricInfo, nvmlReturn_t, (nvmlDevice_t, nvmlGpuFabricInfo_t *));
  SYM(nvmlDeviceGetGpuFabricInfoV, nvmlReturn_t, (nvmlDevice_t, nvmlGpuFabricInfo_v2_t *));

  unsigned int count = 0;
  printf("before init: %s\n", nvmlErrorString(nvmlDeviceGetCount_v2(&count)));
  printf("init: %d\n", nvmlInit_v2());
  char buf[96];
  printf("driver: %d %s\n", nvmlSystemGetDriverVersion(buf, sizeof buf), buf);
  printf("driver in 4 bytes: %s\n", nvmlErrorString(nvmlSystemGetDriverVersion(buf, 4)));
  nvmlDeviceGetCount_v2(&count);
  printf("count: %u\n", count);
  for (unsigned int i = 0; i < count; i++) {
    nvmlDevice_t dev;
    nvmlDeviceGetHandleByIndex_v2(i, &dev);
    nvmlDeviceGetName(dev, buf, sizeof buf);
    nvmlMemory_t mem;
    nvmlDeviceGetMemoryInfo(dev, &mem);
    int major = -1, minor = -1;
    nvmlReturn_t cc = nvmlDeviceGetCudaComputeCapability(dev, &major, &minor);
    printf("gpu %u: %s, %llu MiB, compute %d.%d (ret %d)\n", i, buf, mem.total >> 20, major, minor, cc);
    nvmlReturn_t r;
    nvmlMemory_v2_t mem2 = {0};
    printf("  memory v2 without version: %s\n", nvmlErrorString(nvmlDeviceGetMemoryInfo_v2(dev, &mem2)));
    mem2.version = (unsigned int)sizeof(nvmlMemory_v2_t) | (2u << 24);
    r = nvmlDeviceGetMemoryInfo_v2(dev, &mem2);
    printf("  memory v2: %d %llu MiB\n", r, mem2.total >> 20);
    unsigned int cur = 9, pend = 9, max = 9;
    r = nvmlDeviceGetMigMode(dev, &cur, &pend);
    printf("  mig mode: %s %u %u\n", nvmlErrorString(r), cur, pend);
    if (r == 0 && nvmlDeviceGetMaxMigDeviceCount(dev, &max) == 0) {
      printf("  max mig: %u\n", max);
      for (unsigned int m = 0; m <= max; m++) {
        nvmlDevice_t mig;
        r = nvmlDeviceGetMigDeviceHandleByIndex(dev, m, &mig);
        if (r != 0) { printf("  mig %u: %s\n", m, nvmlErrorString(r)); continue; }
        nvmlDeviceAttributes_t a;
        nvmlDeviceGetAttributes_v2(mig, &a);
        unsigned int gi_id;
        nvmlDeviceGetGpuInstanceId(mig, &gi_id);
        nvmlGpuInstance_t gi;
        nvmlGpuInstanceInfo_t info;
        nvmlDeviceGetGpuInstanceById(dev, gi_id, &gi);
        nvmlGpuInstanceGetInfo(gi, &info);
        nvmlDeviceGetName(mig, buf, sizeof buf);
        printf("  mig %u: %s gi %u profile %u, %llu MiB, %u SMs, %u/%u slices, parent ok %d\n", m, buf, gi_id,
               info.profileId, a.memorySizeMB, a.multiprocessorCount, a.computeInstanceSliceCount,
               a.gpuInstanceSliceCount, info.device == dev);
      }
    }
    nvmlGpuFabricInfo_t fab;
    r = nvmlDeviceGetGpuFabricInfo(dev, &fab);
    if (r == 0) printf("  fabric: state %u status %d clique %u uuid %02x%02x..%02x\n", fab.state, fab.status,
                       fab.cliqueId, fab.clusterUuid[0], fab.clusterUuid[1], fab.clusterUuid[15]);
    else printf("  fabric: %s\n", nvmlErrorString(r));
    nvmlGpuFabricInfo_v2_t fab2 = {0};
    fab2.version = (unsigned int)sizeof(nvmlGpuFabricInfo_v2_t) | (2u << 24);
    r = nvmlDeviceGetGpuFabricInfoV(dev, &fab2);
    if (r == 0) printf("  fabric v2: clique %u\n", fab2.cliqueId);
  }
  nvmlDevice_t bogus = (nvmlDevice_t)&count;
  printf("bogus handle: %s\n", nvmlErrorString(nvmlDeviceGetName(bogus, buf, sizeof buf)));
  nvmlReturn_t first = nvmlShutdown();
  printf("shutdown: %d, again: %s\n", first, nvmlErrorString(nvmlShutdown()));
  return 0;
}
