/* Internal model of the fake NVML library: the machine it pretends to be and its injected state.
 *
 * Owns the in-memory machine (GPUs, MIG devices, links, PCIe levels), the
 * control-journal records (injected events and errors) and the one lock that
 * guards them. api.c answers NVML calls from this model, mig.c the MIG profile
 * queries from its per-product tables; state.c fills it.
 * Nothing here may call back into Python or print except to stderr on load errors.
 */
#ifndef KUBEGPU_FAKE_NVML_FAKE_H
#define KUBEGPU_FAKE_NVML_FAKE_H

#include <pthread.h>
#include <stddef.h>

#include "nvml_abi.h"

#define FAKE_MAX_GPUS 64
#define FAKE_MAX_MIG 8
#define FAKE_MAX_LINKS 36

#define MAGIC_GPU 0x47505530u
#define MAGIC_MIG 0x4d494730u
#define MAGIC_GI 0x47493030u
#define MAGIC_CI 0x43493030u
#define MAGIC_SET 0x53455430u

typedef struct fake_mig fake_mig;
typedef struct fake_gpu fake_gpu;

/* One GPU-instance profile a product offers (mig.c holds the tables). */
typedef struct {
    unsigned profile; /* NVML_GPU_INSTANCE_PROFILE_* */
    unsigned id;      /* the profile id the board reports: nvmlGpuInstanceInfo_t.profileId, `mig -lgip` */
    char name[32];    /* go-nvlib's spelling without the "MIG " prefix, e.g. 1g.10gb+me */
    unsigned slices, instances, multiprocessors;
    unsigned copy_engines, decoders, encoders, jpeg_engines, ofa_engines;
    unsigned long long memory_mib;
} fake_gi_profile;

/* The handle NVML hands out for a GPU instance or compute instance of a MIG device. */
typedef struct {
    unsigned magic;
    fake_mig *mig;
} fake_instance;

struct fake_mig {
    unsigned magic;
    fake_gpu *parent;
    int index;
    char uuid[96];
    char profile[48];
    unsigned gi_id, ci_id;
    unsigned gi_profile;    /* NVML_GPU_INSTANCE_PROFILE_* enum */
    unsigned gi_profile_id; /* the id the board reports for it */
    unsigned ci_profile_id; /* NVML_COMPUTE_INSTANCE_PROFILE_* (compute-instance ids equal their enums) */
    unsigned long long memory_mib;
    unsigned multiprocessors, gi_slices, ci_slices;
    unsigned copy_engines, decoders, encoders, jpeg_engines, ofa_engines;
    fake_instance gi, ci;
};

typedef struct {
    int type; /* NVML_NVLINK_DEVICE_TYPE_* */
    char remote_bus_id[32];
} fake_link;

struct fake_gpu {
    unsigned magic;
    int index, minor;
    char uuid[96], name[96], bus_id[32], serial[32], vbios[32];
    unsigned long long memory_mib;
    int cc_major, cc_minor, mig_capable, mig_enabled;
    double power_limit_w;
    unsigned max_sm_clock, max_mem_clock, multiprocessors, pci_device_id;
    int n_mig;
    fake_mig mig[FAKE_MAX_MIG];
    int n_links, link_capacity;
    fake_link links[FAKE_MAX_LINKS];
    /* the NVLink fabric (the machine's "fabric" key): registered, its cluster UUID and clique */
    int fabric_attached;
    unsigned char cluster_uuid[16];
    unsigned clique_id;
    /* the MIG profiles the product offers: a table of mig.c, or read off the layout (derived) */
    const fake_gi_profile *gi_profiles;
    int n_gi_profiles, ci_rev1, n_derived;
    fake_gi_profile derived[FAKE_MAX_MIG];
    /* state folded from the control journal */
    int lost;
    unsigned long long ecc_sbe, ecc_dbe;
    nvmlReturn_t register_error; /* what nvmlDeviceRegisterEvents answers, NVML_SUCCESS normally */
};

typedef struct {
    char driver_version[80];
    int cuda_version; /* 12040 for CUDA 12.4 */
    int n_gpus;
    fake_gpu *gpus;
    int *pcie; /* n_gpus x n_gpus NVML_TOPOLOGY_* levels */
} fake_machine;

enum record_kind { REC_XID, REC_SBE, REC_DBE, REC_LOST, REC_RECOVER, REC_WAIT_ERROR, REC_REGISTER_ERROR };

/* One line of the control journal, in order of appearance. */
typedef struct {
    enum record_kind kind;
    int gpu;
    unsigned long long data; /* the XID */
    unsigned gi, ci;         /* 0xFFFFFFFF: the whole GPU */
    nvmlReturn_t code;       /* REC_WAIT_ERROR / REC_REGISTER_ERROR */
} fake_record;

typedef struct {
    unsigned magic;
    unsigned long long mask[FAKE_MAX_GPUS];
    size_t cursor;           /* next journal record this set has not looked at */
    unsigned long long lost; /* bit i: registered GPU i was lost; every wait now answers GPU_IS_LOST */
} fake_event_set;

extern pthread_mutex_t fake_lock;
extern int fake_init_count;
extern fake_machine *fake_m;
extern fake_record *fake_records;
extern size_t fake_n_records;
extern double fake_boot; /* when this process's fake GPUs "booted" (seconds since the epoch) */

/* Load the machine named by KUBEGPU_FAKE_NVML_PROFILE and read the control journal from the start.
 * Returns NVML_SUCCESS or the code nvmlInit must answer. Called with fake_lock held. */
nvmlReturn_t fake_load(void);
/* Read journal lines appended since the last call and fold them into the state. Lock held. */
void fake_sync_control(void);
/* Seconds since the epoch, as a double (telemetry curves use the wall clock so processes agree). */
double fake_now(void);
/* Tie GPU g's MIG devices to the profiles its product offers (mig.c); fallback_profile names the
 * profile enum of a device of a product without a table. Returns 0 with a message in err when a
 * device matches no profile or disagrees with it (memory, slices, SMs, engines). */
int fake_mig_resolve(fake_gpu *g, int (*fallback_profile)(const fake_mig *m), char *err, size_t errlen);

#endif
