/* A plain C NVML client for the topology calls: dlopens the library named in argv[1] and prints
 * what it answers. Structs and enum values are declared from nvml.h, so this checks the ABI. */
#include <dlfcn.h>
#include <stdio.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned int cpuCaps, gpusCaps; } nvmlConfComputeSystemCaps_t;
typedef struct { unsigned int environment, ccFeature, devToolsMode; } nvmlConfComputeSystemState_t;
typedef struct {
  unsigned int version, environment, ccFeature, devToolsMode, multiGpuMode;
} nvmlSystemConfComputeSettings_t;
#define SETTINGS_V1 ((unsigned int)(sizeof(nvmlSystemConfComputeSettings_t) | (1 << 24)))

#define SYM(name, args) nvmlReturn_t(*name) args = (nvmlReturn_t(*) args)dlsym(lib, #name); \
  if (!name) { printf("missing %s\n", #name); return 1; }

int main(int argc, char **argv) {
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) { printf("dlopen failed: %s\n", dlerror()); return 1; }
  const char *(*err)(nvmlReturn_t) = (const char *(*)(nvmlReturn_t))dlsym(lib, "nvmlErrorString");
  SYM(nvmlInit_v2, (void));
  SYM(nvmlShutdown, (void));
  SYM(nvmlDeviceGetCount_v2, (unsigned int *));
  SYM(nvmlDeviceGetHandleByIndex_v2, (unsigned int, nvmlDevice_t *));
  SYM(nvmlDeviceGetMaxPcieLinkGeneration, (nvmlDevice_t, unsigned int *));
  SYM(nvmlDeviceGetMaxPcieLinkWidth, (nvmlDevice_t, unsigned int *));
  SYM(nvmlDeviceGetCurrPcieLinkGeneration, (nvmlDevice_t, unsigned int *));
  SYM(nvmlDeviceGetCurrPcieLinkWidth, (nvmlDevice_t, unsigned int *));
  SYM(nvmlDeviceGetNumaNodeId, (nvmlDevice_t, unsigned int *));
  SYM(nvmlDeviceGetNvLinkState, (nvmlDevice_t, unsigned int, int *));
  SYM(nvmlDeviceGetNvLinkVersion, (nvmlDevice_t, unsigned int, unsigned int *));
  SYM(nvmlDeviceGetNvLinkRemoteDeviceType, (nvmlDevice_t, unsigned int, int *));
  SYM(nvmlDeviceGetNvLinkRemotePciInfo_v2, (nvmlDevice_t, unsigned int, nvmlPciInfo_t *));
  SYM(nvmlSystemGetConfComputeCapabilities, (nvmlConfComputeSystemCaps_t *));
  SYM(nvmlSystemGetConfComputeState, (nvmlConfComputeSystemState_t *));
  SYM(nvmlSystemGetConfComputeSettings, (nvmlSystemConfComputeSettings_t *));
  SYM(nvmlSystemGetConfComputeGpusReadyState, (unsigned int *));

  unsigned int v = 0, w = 0;
  printf("before init: %s\n", err(nvmlDeviceGetNumaNodeId(0, &v)));
  printf("init: %d\n", nvmlInit_v2());
  unsigned int count = 0;
  nvmlDeviceGetCount_v2(&count);
  for (unsigned int i = 0; i < count; i++) {
    nvmlDevice_t dev;
    nvmlDeviceGetHandleByIndex_v2(i, &dev);
    printf("gpu %u:\n", i);
    nvmlReturn_t a = nvmlDeviceGetMaxPcieLinkGeneration(dev, &v), b = nvmlDeviceGetMaxPcieLinkWidth(dev, &w);
    printf("  pcie max: %s gen %u, %s x%u\n", err(a), a ? 0 : v, err(b), b ? 0 : w);
    a = nvmlDeviceGetCurrPcieLinkGeneration(dev, &v), b = nvmlDeviceGetCurrPcieLinkWidth(dev, &w);
    printf("  pcie now: %s gen %u, %s x%u\n", err(a), a ? 0 : v, err(b), b ? 0 : w);
    a = nvmlDeviceGetNumaNodeId(dev, &v);
    printf("  numa: %s %u\n", err(a), a ? 0 : v);
    for (unsigned int l = 0; l <= 18; l++) {
      int active = -1, type = -1;
      nvmlReturn_t s = nvmlDeviceGetNvLinkState(dev, l, &active);
      if (s != 0) { printf("  link %u: %s\n", l, err(s)); break; }
      nvmlReturn_t ver = nvmlDeviceGetNvLinkVersion(dev, l, &v);
      nvmlReturn_t t = nvmlDeviceGetNvLinkRemoteDeviceType(dev, l, &type);
      nvmlPciInfo_t pci = {0};
      nvmlReturn_t p = nvmlDeviceGetNvLinkRemotePciInfo_v2(dev, l, &pci);
      printf("  link %u: active %d, version %s %u, remote %s %d, pci %s %s %02x:%02x id %08x\n", l, active,
             err(ver), ver ? 0 : v, err(t), type, err(p), pci.busId, pci.bus, pci.device, pci.pciDeviceId);
    }
  }
  nvmlDevice_t dev0;
  nvmlDeviceGetHandleByIndex_v2(0, &dev0);
  printf("link 18: %s\n", err(nvmlDeviceGetNvLinkState(dev0, 18, &(int){0})));
  nvmlConfComputeSystemCaps_t caps = {9, 9};
  nvmlReturn_t r = nvmlSystemGetConfComputeCapabilities(&caps);
  printf("cc caps: %s cpu %u gpus %u\n", err(r), caps.cpuCaps, caps.gpusCaps);
  nvmlConfComputeSystemState_t st = {9, 9, 9};
  r = nvmlSystemGetConfComputeState(&st);
  printf("cc state: %s env %u feature %u devtools %u\n", err(r), st.environment, st.ccFeature, st.devToolsMode);
  nvmlSystemConfComputeSettings_t set = {0};
  printf("cc settings without version: %s\n", err(nvmlSystemGetConfComputeSettings(&set)));
  set.version = SETTINGS_V1;
  r = nvmlSystemGetConfComputeSettings(&set);
  printf("cc settings: %s env %u feature %u multi-gpu %u\n", err(r), set.environment, set.ccFeature, set.multiGpuMode);
  r = nvmlSystemGetConfComputeGpusReadyState(&v);
  printf("cc ready: %s %u\n", err(r), v);
  printf("shutdown: %d\n", nvmlShutdown());
  return 0;
}
