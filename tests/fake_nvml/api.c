/* The NVML entry points of the fake libnvidia-ml.so.1: what kubegpu's NVML backend calls through
 * nvidia-ml-py and what NVIDIA's device plugin calls through go-nvml (handles by UUID for its
 * health checker), with NVML's return codes and struct layouts (nvml_abi.h). MIG profile queries
 * live in mig.c.
 *
 * Every call takes fake_lock, folds new control-journal lines into the state, then answers
 * from the machine in fake.h. Conventions that mirror real NVML and that the backend relies on:
 * MIG-enabled GPUs answer NOT_SUPPORTED for utilisation; engine attributes exist only for MIG
 * handles; page retirement exists before compute capability 8.0 and row remapping from 8.0;
 * memory temperature exists on HBM data-centre parts (7.0, 8.0, 9.0). A GPU marked lost keeps
 * answering identity queries (UUID, PCI, name, memory size, MIG layout, links) so discovery
 * still lists it, and answers NVML_ERROR_GPU_IS_LOST to every live reading and to event
 * registration.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake.h"

#define API __attribute__((visibility("default")))

#define BEGIN()                                  \
    pthread_mutex_lock(&fake_lock);              \
    if (!fake_init_count) {                      \
        pthread_mutex_unlock(&fake_lock);        \
        return NVML_ERROR_UNINITIALIZED;         \
    }                                            \
    fake_sync_control()

#define END(rc)                                  \
    do {                                         \
        nvmlReturn_t rc_ = (rc);                 \
        pthread_mutex_unlock(&fake_lock);        \
        return rc_;                              \
    } while (0)

#define NEED(cond)                               \
    if (!(cond)) END(NVML_ERROR_INVALID_ARGUMENT)

#define GPU(d, g)                                \
    fake_gpu *g = gpu_of(d);                     \
    NEED(g)

#define LIVE(g)                                  \
    if ((g)->lost) END(NVML_ERROR_GPU_IS_LOST)

static fake_gpu *gpu_of(nvmlDevice_t d) {
    fake_gpu *g = (fake_gpu *)d;
    return g && g->magic == MAGIC_GPU ? g : NULL;
}

static fake_mig *mig_of(nvmlDevice_t d) {
    fake_mig *m = (fake_mig *)d;
    return m && m->magic == MAGIC_MIG ? m : NULL;
}

static nvmlReturn_t copy_string(char *out, unsigned len, const char *s) {
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

/* A smooth value in 0..1 that moves over time, different per GPU. */
static double wave(const fake_gpu *g, double period, double shift) {
    return 0.5 + 0.5 * sin(2.0 * M_PI * fake_now() / period + g->index * 0.7 + shift);
}

static unsigned util_pct(const fake_gpu *g) { return (unsigned)(15.0 + 80.0 * wave(g, 97.0, 0.0)); }

static unsigned long long mib(unsigned long long n) { return n * 1024ULL * 1024ULL; }

static unsigned long long reserved_bytes(const fake_gpu *g) {
    unsigned long long r = mib(g->memory_mib) / 100;
    return r < mib(1024) ? r - r % mib(1) : mib(1024);
}

static unsigned cores_per_sm(int major, int minor) {
    if (major == 6) return minor == 0 ? 64 : 128;
    if (major == 7 || (major == 8 && minor == 0)) return 64;
    if (major >= 8) return 128;
    return major == 5 ? 128 : 192;
}

static void fill_pci(nvmlPciInfo_t *p, const char *bus_id, unsigned device_id) {
    unsigned domain = 0, bus = 0, dev = 0, fn = 0;
    sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
    memset(p, 0, sizeof *p);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%04X:%02X:%02X.%X", domain & 0xFFFF, bus, dev, fn);
    snprintf(p->busId, sizeof p->busId, "%08X:%02X:%02X.%X", domain, bus, dev, fn);
    p->domain = domain;
    p->bus = bus;
    p->device = dev;
    p->pciDeviceId = device_id;
    p->pciSubSystemId = 0x147E10DE;
}

/* --- init ---------------------------------------------------------------------------------- */

API nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    pthread_mutex_lock(&fake_lock);
    if (fake_init_count == 0) {
        nvmlReturn_t rc = fake_load();
        if (rc != NVML_SUCCESS) {
            pthread_mutex_unlock(&fake_lock);
            return rc;
        }
    }
    fake_init_count++;
    pthread_mutex_unlock(&fake_lock);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

API nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&fake_lock);
    if (fake_init_count == 0) {
        pthread_mutex_unlock(&fake_lock);
        return NVML_ERROR_UNINITIALIZED;
    }
    fake_init_count--;
    pthread_mutex_unlock(&fake_lock);
    return NVML_SUCCESS;
}

API const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
        case NVML_SUCCESS: return "Success";
        case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
        case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
        case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
        case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
        case NVML_ERROR_NOT_FOUND: return "Not Found";
        case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
        case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
        case NVML_ERROR_TIMEOUT: return "Timeout";
        case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
        case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
        case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
        default: return "Unknown Error";
    }
}

/* --- system -------------------------------------------------------------------------------- */

API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    BEGIN();
    END(copy_string(version, length, fake_m->driver_version));
}

API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    BEGIN();
    NEED(version);
    *version = fake_m->cuda_version;
    END(NVML_SUCCESS);
}

/* --- identity ------------------------------------------------------------------------------ */

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    BEGIN();
    NEED(count);
    *count = (unsigned)fake_m->n_gpus;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    BEGIN();
    NEED(device && index < (unsigned)fake_m->n_gpus);
    *device = (nvmlDevice_t)&fake_m->gpus[index];
    END(NVML_SUCCESS);
}

/* A device (GPU or MIG device) by UUID; NOT_FOUND when no device has it. */
static nvmlDevice_t device_by_uuid(const char *uuid) {
    for (int i = 0; i < fake_m->n_gpus; i++) {
        fake_gpu *g = &fake_m->gpus[i];
        if (strcmp(g->uuid, uuid) == 0) return (nvmlDevice_t)g;
        for (int j = 0; j < g->n_mig; j++)
            if (strcmp(g->mig[j].uuid, uuid) == 0) return (nvmlDevice_t)&g->mig[j];
    }
    return NULL;
}

API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    BEGIN();
    NEED(uuid && device);
    nvmlDevice_t found = device_by_uuid(uuid);
    if (!found) END(NVML_ERROR_NOT_FOUND);
    *device = found;
    END(NVML_SUCCESS);
}

/* The 16 bytes of a "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" UUID; 0 when it is not one. */
static int uuid_bytes(const char *uuid, unsigned char out[NVML_DEVICE_UUID_BINARY_LEN]) {
    const char *p = strchr(uuid, '-');
    int n = 0;
    if (!p) return 0;
    for (p++; *p && n < 2 * NVML_DEVICE_UUID_BINARY_LEN; p++) {
        if (*p == '-') continue;
        int v = isdigit((unsigned char)*p) ? *p - '0' : (tolower((unsigned char)*p) - 'a' + 10);
        if (v < 0 || v > 15) return 0;
        if (n % 2 == 0) out[n / 2] = (unsigned char)(v << 4);
        else out[n / 2] |= (unsigned char)v;
        n++;
    }
    return n == 2 * NVML_DEVICE_UUID_BINARY_LEN && *p == '\0';
}

API nvmlReturn_t nvmlDeviceGetHandleByUUIDV(const nvmlUUID_t *uuid, nvmlDevice_t *device) {
    BEGIN();
    NEED(uuid && device);
    if (uuid->version != NVML_UUID_V1_VERSION) END(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    nvmlDevice_t found = NULL;
    if (uuid->type == NVML_UUID_TYPE_ASCII) {
        char text[NVML_DEVICE_UUID_ASCII_LEN + 1];
        memcpy(text, uuid->value.str, NVML_DEVICE_UUID_ASCII_LEN);
        text[NVML_DEVICE_UUID_ASCII_LEN] = '\0';
        found = device_by_uuid(text);
    } else if (uuid->type == NVML_UUID_TYPE_BINARY) {
        unsigned char want[NVML_DEVICE_UUID_BINARY_LEN];
        for (int i = 0; i < fake_m->n_gpus && !found; i++) {
            fake_gpu *g = &fake_m->gpus[i];
            if (uuid_bytes(g->uuid, want) && memcmp(want, uuid->value.bytes, sizeof want) == 0) found = (nvmlDevice_t)g;
            for (int j = 0; j < g->n_mig && !found; j++)
                if (uuid_bytes(g->mig[j].uuid, want) && memcmp(want, uuid->value.bytes, sizeof want) == 0)
                    found = (nvmlDevice_t)&g->mig[j];
        }
    } else {
        END(NVML_ERROR_INVALID_ARGUMENT);
    }
    if (!found) END(NVML_ERROR_NOT_FOUND);
    *device = found;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
    BEGIN();
    GPU(device, g);
    NEED(minor);
    *minor = (unsigned)g->minor;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    BEGIN();
    fake_gpu *g = gpu_of(device);
    fake_mig *m = mig_of(device);
    NEED(g || m);
    END(copy_string(uuid, length, g ? g->uuid : m->uuid));
}

API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    BEGIN();
    fake_gpu *g = gpu_of(device);
    fake_mig *m = mig_of(device);
    NEED(g || m);
    if (g) END(copy_string(name, length, g->name));
    char buf[160];
    snprintf(buf, sizeof buf, "%s MIG %s", m->parent->name, m->profile);
    END(copy_string(name, length, buf));
}

API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length) {
    BEGIN();
    GPU(device, g);
    END(copy_string(serial, length, g->serial));
}

API nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length) {
    BEGIN();
    GPU(device, g);
    END(copy_string(version, length, g->vbios));
}

API nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *info) {
    BEGIN();
    GPU(device, g);
    NEED(info);
    /* A GPU without a multi-node NVLink fabric answers NOT_SUPPORTED, as a PCIe or HGX board does. */
    if (!g->fabric_attached) END(NVML_ERROR_NOT_SUPPORTED);
    memcpy(info->clusterUuid, g->cluster_uuid, sizeof info->clusterUuid);
    info->status = NVML_SUCCESS;
    info->cliqueId = g->clique_id;
    info->state = NVML_GPU_FABRIC_STATE_COMPLETED;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    BEGIN();
    GPU(device, g);
    NEED(pci);
    fill_pci(pci, g->bus_id, g->pci_device_id);
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    BEGIN();
    GPU(device, g);
    NEED(major && minor);
    *major = g->cc_major;
    *minor = g->cc_minor;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int *cores) {
    BEGIN();
    GPU(device, g);
    NEED(cores);
    *cores = g->multiprocessors * cores_per_sm(g->cc_major, g->cc_minor);
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit) {
    BEGIN();
    GPU(device, g);
    NEED(limit);
    *limit = (unsigned)llround(g->power_limit_w * 1000.0);
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(limit);
    *limit = (unsigned)llround(g->power_limit_w * 1000.0);
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock) {
    BEGIN();
    GPU(device, g);
    NEED(clock);
    switch (type) {
        case NVML_CLOCK_GRAPHICS:
        case NVML_CLOCK_SM: *clock = g->max_sm_clock; break;
        case NVML_CLOCK_MEM: *clock = g->max_mem_clock; break;
        case NVML_CLOCK_VIDEO: *clock = g->max_sm_clock * 9 / 10; break;
        default: END(NVML_ERROR_INVALID_ARGUMENT);
    }
    END(NVML_SUCCESS);
}

/* --- memory -------------------------------------------------------------------------------- */

static void memory_of(nvmlDevice_t device, unsigned long long *total, unsigned long long *reserved,
                      unsigned long long *used) {
    fake_gpu *g = gpu_of(device);
    fake_mig *m = mig_of(device);
    if (g) {
        *total = mib(g->memory_mib);
        *reserved = reserved_bytes(g);
        double share = 0.05 + 0.85 * wave(g, 131.0, 1.0);
        *used = (unsigned long long)((double)(*total - *reserved) * share) & ~0xFFFFFULL;
    } else {
        *total = mib(m->memory_mib);
        *reserved = 0;
        double share = 0.1 + 0.8 * wave(m->parent, 113.0, m->index);
        *used = (unsigned long long)((double)*total * share) & ~0xFFFFFULL;
    }
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    BEGIN();
    NEED(memory && (gpu_of(device) || mig_of(device)));
    unsigned long long total, reserved, used;
    memory_of(device, &total, &reserved, &used);
    memory->total = total;
    memory->used = used + reserved; /* the v1 struct counts reserved memory as used */
    memory->free = total - reserved - used;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    BEGIN();
    NEED(memory && (gpu_of(device) || mig_of(device)));
    if (memory->version != NVML_MEMORY_V2_VERSION) END(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    unsigned long long total, reserved, used;
    memory_of(device, &total, &reserved, &used);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total - reserved - used;
    END(NVML_SUCCESS);
}

/* --- topology and NVLink ------------------------------------------------------------------- */

API nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *level) {
    BEGIN();
    GPU(a, ga);
    GPU(b, gb);
    NEED(level && ga != gb);
    *level = fake_m->pcie[ga->index * fake_m->n_gpus + gb->index];
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, unsigned int *active) {
    BEGIN();
    GPU(device, g);
    NEED(active);
    if (g->link_capacity == 0) END(NVML_ERROR_NOT_SUPPORTED);
    NEED(link < (unsigned)g->link_capacity);
    *active = link < (unsigned)g->n_links;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
    BEGIN();
    GPU(device, g);
    NEED(pci);
    if (g->link_capacity == 0) END(NVML_ERROR_NOT_SUPPORTED);
    NEED(link < (unsigned)g->n_links);
    fill_pci(pci, g->links[link].remote_bus_id, g->links[link].type == NVML_NVLINK_DEVICE_TYPE_GPU ? g->pci_device_id : 0x22A310DEu);
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link, int *type) {
    BEGIN();
    GPU(device, g);
    NEED(type);
    if (g->link_capacity == 0) END(NVML_ERROR_NOT_SUPPORTED);
    NEED(link < (unsigned)g->n_links);
    *type = g->links[link].type;
    END(NVML_SUCCESS);
}

/* --- MIG ----------------------------------------------------------------------------------- */

API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    BEGIN();
    GPU(device, g);
    NEED(current && pending);
    if (!g->mig_capable) END(NVML_ERROR_NOT_SUPPORTED);
    *current = *pending = g->mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    BEGIN();
    GPU(device, g);
    NEED(count);
    if (!g->mig_capable) END(NVML_ERROR_NOT_SUPPORTED);
    *count = 7;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig) {
    BEGIN();
    GPU(device, g);
    NEED(mig);
    if (!g->mig_capable) END(NVML_ERROR_NOT_SUPPORTED);
    NEED(g->mig_enabled && index < 7);
    if (index >= (unsigned)g->n_mig) END(NVML_ERROR_NOT_FOUND);
    *mig = (nvmlDevice_t)&g->mig[index];
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *is_mig) {
    BEGIN();
    NEED(is_mig && (gpu_of(device) || mig_of(device)));
    *is_mig = mig_of(device) != NULL;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *device) {
    BEGIN();
    fake_mig *m = mig_of(mig);
    NEED(m && device);
    *device = (nvmlDevice_t)m->parent;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t mig, unsigned int *id) {
    BEGIN();
    fake_mig *m = mig_of(mig);
    NEED(m && id);
    *id = m->gi_id;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t mig, unsigned int *id) {
    BEGIN();
    fake_mig *m = mig_of(mig);
    NEED(m && id);
    *id = m->ci_id;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attrs) {
    BEGIN();
    NEED(attrs);
    fake_mig *m = mig_of(device);
    if (!m) END(gpu_of(device) ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT);
    attrs->multiprocessorCount = m->multiprocessors;
    attrs->sharedCopyEngineCount = m->copy_engines;
    attrs->sharedDecoderCount = m->decoders;
    attrs->sharedEncoderCount = m->encoders;
    attrs->sharedJpegCount = m->jpeg_engines;
    attrs->sharedOfaCount = m->ofa_engines;
    attrs->gpuInstanceSliceCount = m->gi_slices;
    attrs->computeInstanceSliceCount = m->ci_slices;
    attrs->memorySizeMB = m->memory_mib;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gi) {
    BEGIN();
    GPU(device, g);
    NEED(gi);
    if (!g->mig_capable) END(NVML_ERROR_NOT_SUPPORTED);
    for (int j = 0; j < g->n_mig; j++) {
        if (g->mig[j].gi_id == id) {
            *gi = (nvmlGpuInstance_t)&g->mig[j].gi;
            END(NVML_SUCCESS);
        }
    }
    END(NVML_ERROR_NOT_FOUND);
}

API nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t *info) {
    BEGIN();
    fake_instance *inst = (fake_instance *)gi;
    NEED(inst && inst->magic == MAGIC_GI && info);
    fake_mig *m = inst->mig;
    /* Placements count memory slices, eight on a GPU of seven compute slices (a 3g instance spans four,
     * a 7g all eight); instances are laid out in layout order, each at a multiple of its size. */
    unsigned start = 0, size = 0;
    for (int j = 0; j <= m->index; j++) {
        const fake_mig *d = &m->parent->mig[j];
        unsigned long long eighth = m->parent->memory_mib / 8;
        size = eighth ? (unsigned)((d->memory_mib + eighth - 1) / eighth) : d->gi_slices;
        if (size == 0) size = 1;
        if (j > 0) start = (start + size - 1) / size * size;
        if (j < m->index) start += size;
    }
    info->device = (nvmlDevice_t)m->parent;
    info->id = m->gi_id;
    info->profileId = m->gi_profile_id;
    info->placement.start = start;
    info->placement.size = size;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gi, unsigned int id,
                                                        nvmlComputeInstance_t *ci) {
    BEGIN();
    fake_instance *inst = (fake_instance *)gi;
    NEED(inst && inst->magic == MAGIC_GI && ci);
    if (inst->mig->ci_id != id) END(NVML_ERROR_NOT_FOUND);
    *ci = (nvmlComputeInstance_t)&inst->mig->ci;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t *info) {
    BEGIN();
    fake_instance *inst = (fake_instance *)ci;
    NEED(inst && inst->magic == MAGIC_CI && info);
    fake_mig *m = inst->mig;
    info->device = (nvmlDevice_t)m->parent;
    info->gpuInstance = (nvmlGpuInstance_t)&m->gi;
    info->id = m->ci_id;
    info->profileId = m->ci_profile_id;
    info->placement.start = 0;
    info->placement.size = m->ci_slices;
    END(NVML_SUCCESS);
}

/* --- events -------------------------------------------------------------------------------- */

#define SUPPORTED_EVENTS \
    (NVML_EVENT_SINGLE_BIT_ECC | NVML_EVENT_DOUBLE_BIT_ECC | NVML_EVENT_PSTATE | NVML_EVENT_XID_CRITICAL | NVML_EVENT_CLOCK)

API nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    BEGIN();
    NEED(set);
    fake_event_set *s = calloc(1, sizeof *s);
    if (!s) END(NVML_ERROR_UNKNOWN);
    s->magic = MAGIC_SET;
    s->cursor = fake_n_records; /* events injected before the set existed are not delivered to it */
    *set = (nvmlEventSet_t)s;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    BEGIN();
    fake_event_set *s = (fake_event_set *)set;
    NEED(s && s->magic == MAGIC_SET);
    s->magic = 0;
    free(s);
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *types) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(types);
    *types = SUPPORTED_EVENTS;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set) {
    BEGIN();
    GPU(device, g);
    fake_event_set *s = (fake_event_set *)set;
    NEED(s && s->magic == MAGIC_SET);
    LIVE(g);
    if (g->register_error != NVML_SUCCESS) END(g->register_error);
    if (types & ~SUPPORTED_EVENTS) END(NVML_ERROR_NOT_SUPPORTED);
    s->mask[g->index] |= types;
    END(NVML_SUCCESS);
}

/* The next record for this set, or 0: fills data and sets the code the wait must answer.
 * Like a real driver after XID 79, a set holding a GPU that fell off the bus answers GPU_IS_LOST
 * to every wait from the loss on (the events before it are still delivered, in order); only a new
 * set without that GPU watches again. */
static int next_event(fake_event_set *s, nvmlEventData_t *data, nvmlReturn_t *rc) {
    if (s->lost) {
        *rc = NVML_ERROR_GPU_IS_LOST;
        return 1;
    }
    while (s->cursor < fake_n_records) {
        const fake_record *r = &fake_records[s->cursor++];
        if (r->kind == REC_WAIT_ERROR) {
            *rc = r->code;
            return 1;
        }
        if (r->gpu < 0 || r->gpu >= fake_m->n_gpus || !s->mask[r->gpu]) continue;
        unsigned long long type = 0;
        switch (r->kind) {
            case REC_XID: type = NVML_EVENT_XID_CRITICAL; break;
            case REC_SBE: type = NVML_EVENT_SINGLE_BIT_ECC; break;
            case REC_DBE: type = NVML_EVENT_DOUBLE_BIT_ECC; break;
            case REC_LOST:
                s->lost |= 1ULL << r->gpu;
                *rc = NVML_ERROR_GPU_IS_LOST;
                return 1;
            default: continue;
        }
        if (!(s->mask[r->gpu] & type)) continue;
        data->device = (nvmlDevice_t)&fake_m->gpus[r->gpu];
        data->eventType = type;
        data->eventData = r->kind == REC_XID ? r->data : 0;
        data->gpuInstanceId = r->kind == REC_XID ? r->gi : 0xFFFFFFFFu;
        data->computeInstanceId = r->kind == REC_XID ? r->ci : 0xFFFFFFFFu;
        *rc = NVML_SUCCESS;
        return 1;
    }
    return 0;
}

API nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    double deadline = fake_now() + timeoutms / 1000.0;
    for (;;) {
        BEGIN();
        fake_event_set *s = (fake_event_set *)set;
        NEED(s && s->magic == MAGIC_SET && data);
        nvmlReturn_t rc;
        if (next_event(s, data, &rc)) END(rc);
        pthread_mutex_unlock(&fake_lock);
        double left = deadline - fake_now();
        if (left <= 0) return NVML_ERROR_TIMEOUT;
        /* Poll the journal every 2 ms: injected events reach the waiter well inside 100 ms. */
        struct timespec nap = {0, left < 0.002 ? (long)(left * 1e9) : 2000000L};
        nanosleep(&nap, NULL);
    }
}

/* --- telemetry ----------------------------------------------------------------------------- */

API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(util);
    if (g->mig_enabled) END(NVML_ERROR_NOT_SUPPORTED);
    util->gpu = util_pct(g);
    util->memory = util->gpu * 6 / 10;
    END(NVML_SUCCESS);
}

static nvmlReturn_t codec_util(nvmlDevice_t device, unsigned *util, unsigned *period, int encoder) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(util && period);
    if (g->mig_enabled) END(NVML_ERROR_NOT_SUPPORTED);
    *util = encoder ? 0 : util_pct(g) / 10;
    *period = 167000;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *util, unsigned int *period) {
    return codec_util(device, util, period, 1);
}

API nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *util, unsigned int *period) {
    return codec_util(device, util, period, 0);
}

API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(temp && sensor == NVML_TEMPERATURE_GPU);
    *temp = 32 + util_pct(g) * 45 / 100;
    END(NVML_SUCCESS);
}

static int has_hbm(const fake_gpu *g) { return g->cc_minor == 0 && g->cc_major >= 7; }

static unsigned long long nvlink_kib(const fake_gpu *g, unsigned link, int rx) {
    double since_boot = fake_now() - fake_boot;
    return (unsigned long long)(since_boot * (rx ? 3.1e3 : 2.9e3) * (1.0 + 0.01 * link) * (g->index + 1));
}

API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t *values) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(values && count >= 0);
    long long now_us = (long long)(fake_now() * 1e6);
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *v = &values[i];
        v->timestamp = now_us;
        v->latencyUsec = 0;
        v->nvmlReturn = NVML_SUCCESS;
        switch (v->fieldId) {
            case NVML_FI_DEV_MEMORY_TEMP:
                if (!has_hbm(g)) {
                    v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
                    break;
                }
                v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
                v->value.uiVal = 36 + util_pct(g) * 40 / 100;
                break;
            case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
            case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
                if (g->n_links == 0) {
                    v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
                    break;
                }
                if (v->scopeId >= (unsigned)g->n_links) {
                    v->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
                    break;
                }
                v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                v->value.ullVal = nvlink_kib(g, v->scopeId, v->fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX);
                break;
            default:
                v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
    }
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *mw) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(mw);
    *mw = (unsigned)(g->power_limit_w * 1000.0 * (0.2 + 0.7 * util_pct(g) / 100.0));
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *mj) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(mj);
    *mj = (unsigned long long)((fake_now() - fake_boot) * g->power_limit_w * 0.45 * 1000.0);
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(clock);
    double load = 0.7 + 0.3 * util_pct(g) / 100.0;
    switch (type) {
        case NVML_CLOCK_GRAPHICS:
        case NVML_CLOCK_SM: *clock = (unsigned)(g->max_sm_clock * load); break;
        case NVML_CLOCK_MEM: *clock = g->max_mem_clock; break;
        case NVML_CLOCK_VIDEO: *clock = (unsigned)(g->max_sm_clock * 0.9 * load); break;
        default: END(NVML_ERROR_INVALID_ARGUMENT);
    }
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, int counter, unsigned int *kib_per_s) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(kib_per_s && (counter == NVML_PCIE_UTIL_TX_BYTES || counter == NVML_PCIE_UTIL_RX_BYTES));
    double peak = counter == NVML_PCIE_UTIL_TX_BYTES ? 2.0e6 : 3.0e6;
    *kib_per_s = (unsigned)(peak * wave(g, counter ? 59.0 : 53.0, 2.0 + counter));
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *count) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(count);
    *count = 0;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type, int counter_type,
                                             unsigned long long *count) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(count && (counter_type == NVML_VOLATILE_ECC || counter_type == NVML_AGGREGATE_ECC));
    if (error_type == NVML_MEMORY_ERROR_TYPE_CORRECTED) *count = g->ecc_sbe;
    else if (error_type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED) *count = g->ecc_dbe;
    else END(NVML_ERROR_INVALID_ARGUMENT);
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, int cause, unsigned int *count,
                                           unsigned long long *addresses) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(count);
    if (g->cc_major >= 8) END(NVML_ERROR_NOT_SUPPORTED); /* Ampere and later remap rows instead */
    unsigned n = cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR ? (unsigned)g->ecc_dbe : 0;
    if (!addresses || *count < n) {
        *count = n;
        END(n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned i = 0; i < n; i++) addresses[i] = 0x1000ULL * (i + 1);
    *count = n;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, int *pending) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(pending);
    if (g->cc_major >= 8) END(NVML_ERROR_NOT_SUPPORTED);
    *pending = 0;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrected, unsigned int *uncorrected,
                                           unsigned int *pending, unsigned int *failure) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(corrected && uncorrected && pending && failure);
    if (g->cc_major < 8) END(NVML_ERROR_NOT_SUPPORTED);
    *corrected = (unsigned)g->ecc_sbe;
    *uncorrected = (unsigned)g->ecc_dbe;
    *pending = 0;
    *failure = 0;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device, int policy, nvmlViolationTime_t *t) {
    BEGIN();
    GPU(device, g);
    LIVE(g);
    NEED(t && (policy == NVML_PERF_POLICY_POWER || policy == NVML_PERF_POLICY_THERMAL));
    t->referenceTime = (unsigned long long)(fake_now() * 1e6);
    t->violationTime = policy == NVML_PERF_POLICY_POWER ? 1500000000ULL * (unsigned)g->index : 0;
    END(NVML_SUCCESS);
}
