/* A C client whose calls hang: dlopens the library in argv[1] and, on the test's commands read
 * from stdin, starts calls on two threads that the event file makes hang, then calls others from
 * the main thread while those are blocked. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef void *nvmlEventSet_t;
typedef struct {
  nvmlDevice_t device; unsigned long long eventType, eventData; unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

#define SYM(name, ret, args) ret(*name) args = (ret(*) args)dlsym(lib, #name); if (!name) { printf("missing %s\n", #name); return 1; }

static nvmlReturn_t (*get_name)(nvmlDevice_t, char *, unsigned int);
static nvmlReturn_t (*driver_version)(char *, unsigned int);
static nvmlDevice_t gpu[2];
/* What the two hung calls returned, and whether they have. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int done[2];
static nvmlReturn_t result[2];
static char text[2][96];

/* Records a hung call's result, and says on stderr (beside the library's own lines) that it
 * returned, so the test sees a call that did not hang. */
static void finish(int i, nvmlReturn_t r) {
  pthread_mutex_lock(&mu);
  result[i] = r;
  done[i] = 1;
  fprintf(stderr, "client: %s returned\n", i == 0 ? "gpu 0 name" : "driver version");
  pthread_mutex_unlock(&mu);
}

static const char *still(int i) {
  pthread_mutex_lock(&mu);
  int d = done[i];
  pthread_mutex_unlock(&mu);
  return d ? "no" : "yes";
}

static void *hung_name(void *unused) {
  (void)unused;
  finish(0, get_name(gpu[0], text[0], sizeof text[0]));
  return NULL;
}

static void *hung_driver_version(void *unused) {
  (void)unused;
  finish(1, driver_version(text[1], sizeof text[1]));
  return NULL;
}

/* Waits for the test's next command. */
static int next(const char *want) {
  char line[64];
  fflush(stdout);
  if (!fgets(line, sizeof line, stdin)) return 0;
  line[strcspn(line, "\n")] = 0;
  if (strcmp(line, want) != 0) {
    printf("expected %s, got %s\n", want, line);
    return 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  (void)argc;
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) { printf("dlopen failed: %s\n", dlerror()); return 1; }
  SYM(nvmlInit_v2, nvmlReturn_t, (void));
  SYM(nvmlShutdown, nvmlReturn_t, (void));
  SYM(nvmlErrorString, const char *, (nvmlReturn_t));
  SYM(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int, nvmlDevice_t *));
  SYM(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t, char *, unsigned int));
  SYM(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t, char *, unsigned int));
  SYM(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int *));
  SYM(nvmlSystemGetDriverVersion, nvmlReturn_t, (char *, unsigned int));
  SYM(nvmlEventSetCreate, nvmlReturn_t, (nvmlEventSet_t *));
  SYM(nvmlEventSetWait_v2, nvmlReturn_t, (nvmlEventSet_t, nvmlEventData_t *, unsigned int));
  get_name = nvmlDeviceGetName;
  driver_version = nvmlSystemGetDriverVersion;

  printf("init: %d\n", nvmlInit_v2());
  for (unsigned int i = 0; i < 2; i++) printf("handle %u: %d\n", i, nvmlDeviceGetHandleByIndex_v2(i, &gpu[i]));
  nvmlEventSet_t set;
  printf("set create: %d\n", nvmlEventSetCreate(&set));
  printf("ready\n");

  if (!next("start")) return 1;
  pthread_t a, b;
  pthread_create(&a, NULL, hung_name, NULL);
  pthread_create(&b, NULL, hung_driver_version, NULL);

  if (!next("others")) return 1;
  char buf[96] = "";
  nvmlReturn_t r = nvmlDeviceGetUUID(gpu[0], buf, sizeof buf);
  printf("gpu 0 uuid: %s %s\n", nvmlErrorString(r), buf);
  r = nvmlDeviceGetName(gpu[1], buf, sizeof buf);
  printf("gpu 1 name: %s %s\n", nvmlErrorString(r), buf);
  unsigned int n = 0;
  r = nvmlDeviceGetCount_v2(&n);
  printf("count: %s %u\n", nvmlErrorString(r), n);
  nvmlEventData_t e;
  printf("wait 0 ms: %s\n", nvmlErrorString(nvmlEventSetWait_v2(set, &e, 0)));
  printf("still hung: gpu 0 name %s, driver version %s\n", still(0), still(1));

  if (!next("release")) return 1;
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  printf("gpu 0 name: %s %s\n", nvmlErrorString(result[0]), text[0]);
  printf("driver version: %s %s\n", nvmlErrorString(result[1]), text[1]);

  if (!next("again")) return 1;
  r = nvmlDeviceGetName(gpu[0], buf, sizeof buf);
  printf("gpu 0 name again: %s %s\n", nvmlErrorString(r), buf);
  r = nvmlDeviceGetCount_v2(&n);
  printf("count after a short hang: %s %u\n", nvmlErrorString(r), n);
  printf("shutdown: %d\n", nvmlShutdown());
  return 0;
}
