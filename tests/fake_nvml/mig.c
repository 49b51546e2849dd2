/* MIG profiles of the fake libnvidia-ml.so.1: what a GPU offers, not what is carved out of it.
 *
 * Owns the GPU-instance profile tables per product (A100 40/80 GB, H100 80 GB, H200), the
 * compute-instance profiles each GPU-instance profile offers, the rule that ties a MIG device of
 * the machine JSON to its profiles (and rejects a device that disagrees with them), and the
 * entry points nvmlDeviceGetGpuInstanceProfileInfo[V], nvmlDeviceGetGpuInstanceProfileInfoByIdV and
 * nvmlGpuInstanceGetComputeInstanceProfileInfo[V] with their v1/v2/v3 layouts.
 *
 * Facts mirrored from real NVML, which NVIDIA's plugin and go-nvlib rely on:
 * - the `profile` argument is an NVML_GPU_INSTANCE_PROFILE_* enum, while the profile's `id`
 *   (and nvmlGpuInstanceInfo_t.profileId) is the number the board reports in
 *   `nvidia-smi mig -lgip`: on these boards 1g is enum 0 but id 19, 7g enum 4 but id 0, so a
 *   caller finds a GPU instance's profile by walking the enums and comparing ids;
 * - a profile the GPU does not offer answers NOT_SUPPORTED, an enum past the last one and any
 *   engine profile but SHARED answer INVALID_ARGUMENT, a GPU without MIG answers NOT_SUPPORTED;
 * - compute-instance profile ids equal their enums, and their shared engine counts repeat the
 *   GPU instance's; a c-slice compute instance has as many SMs as the product's c-slice GPU
 *   instance (all of the GPU instance's when c equals its size).
 * Memory sizes and SM counts are those of kubegpu's simulated profiles (gpu/profiles.py), so both
 * backends tell one truth; tests/fake_nvml/test_mig_profiles.py holds the two tables together.
 * It must not model creating or destroying instances (the layout comes from the machine JSON).
 */
#include <stdio.h>
#include <string.h>

#include "fake.h"

#define API __attribute__((visibility("default")))

/* profile enum, reported id, name, slices, instances, SMs, CE, DEC, ENC, JPEG, OFA, memory MiB */
static const fake_gi_profile A100_80GB[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.10gb", 1, 7, 14, 1, 0, 0, 0, 0, 9856},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.10gb+me", 1, 1, 14, 1, 1, 0, 1, 1, 9856},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.20gb", 1, 4, 14, 1, 1, 0, 0, 0, 19968},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.20gb", 2, 3, 28, 2, 1, 0, 0, 0, 19968},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.40gb", 3, 2, 42, 3, 2, 0, 0, 0, 40192},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.40gb", 4, 1, 56, 4, 2, 0, 0, 0, 40192},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.80gb", 7, 1, 98, 7, 5, 0, 1, 1, 80384},
};

static const fake_gi_profile A100_40GB[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.5gb", 1, 7, 14, 1, 0, 0, 0, 0, 4864},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.5gb+me", 1, 1, 14, 1, 1, 0, 1, 1, 4864},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.10gb", 1, 4, 14, 1, 1, 0, 0, 0, 9856},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.10gb", 2, 3, 28, 2, 1, 0, 0, 0, 9856},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.20gb", 3, 2, 42, 3, 2, 0, 0, 0, 19968},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.20gb", 4, 1, 56, 4, 2, 0, 0, 0, 19968},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.40gb", 7, 1, 98, 7, 5, 0, 1, 1, 40192},
};

static const fake_gi_profile H100_80GB[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.10gb", 1, 7, 16, 1, 1, 0, 1, 0, 9984},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.10gb+me", 1, 1, 16, 1, 1, 0, 1, 1, 9984},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.20gb", 1, 4, 16, 1, 1, 0, 1, 0, 19968},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.20gb", 2, 3, 32, 2, 2, 0, 2, 0, 19968},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.40gb", 3, 2, 60, 3, 3, 0, 3, 0, 40448},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.40gb", 4, 1, 64, 4, 4, 0, 4, 0, 40448},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.80gb", 7, 1, 132, 8, 7, 0, 7, 1, 80896},
};

static const fake_gi_profile H200[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.18gb", 1, 7, 16, 1, 1, 0, 1, 0, 16896},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.18gb+me", 1, 1, 16, 1, 1, 0, 1, 1, 16896},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.35gb", 1, 4, 16, 1, 1, 0, 1, 0, 33536},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.35gb", 2, 3, 32, 2, 2, 0, 2, 0, 33536},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.71gb", 3, 2, 60, 3, 3, 0, 3, 0, 67840},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.71gb", 4, 1, 64, 4, 4, 0, 4, 0, 67840},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.141gb", 7, 1, 132, 8, 7, 0, 7, 1, 135424},
};

static const struct {
    const char *product;
    const fake_gi_profile *rows;
    int n;
    int ci_rev1; /* Hopper also offers the 1-slice compute-instance profile revision 1 */
} PRODUCTS[] = {
    {"NVIDIA A100-SXM4-80GB", A100_80GB, (int)(sizeof A100_80GB / sizeof A100_80GB[0]), 0},
    {"NVIDIA A100-SXM4-40GB", A100_40GB, (int)(sizeof A100_40GB / sizeof A100_40GB[0]), 0},
    {"NVIDIA H100 80GB HBM3", H100_80GB, (int)(sizeof H100_80GB / sizeof H100_80GB[0]), 1},
    {"NVIDIA H200", H200, (int)(sizeof H200 / sizeof H200[0]), 1},
};

/* The id a board with seven compute slices reports for a profile enum (nvidia-smi mig -lgip);
 * used for products without a table, where the profiles are read off the MIG layout. */
static unsigned reported_id(unsigned profile) {
    switch (profile) {
        case NVML_GPU_INSTANCE_PROFILE_1_SLICE: return 19;
        case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1: return 20;
        case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2: return 15;
        case NVML_GPU_INSTANCE_PROFILE_2_SLICE: return 14;
        case NVML_GPU_INSTANCE_PROFILE_3_SLICE: return 9;
        case NVML_GPU_INSTANCE_PROFILE_4_SLICE: return 5;
        case NVML_GPU_INSTANCE_PROFILE_7_SLICE: return 0;
        default: return 32 + profile; /* no published listing: an id no listed profile uses */
    }
}

static const fake_gi_profile *gi_row(const fake_gpu *g, unsigned profile) {
    for (int i = 0; i < g->n_gi_profiles; i++)
        if (g->gi_profiles[i].profile == profile) return &g->gi_profiles[i];
    return NULL;
}

/* The compute-instance profile enums a GPU instance of `slices` offers, as `nvidia-smi mig -lcip`
 * lists them; returns how many were written. */
static int ci_profiles(const fake_gpu *g, unsigned slices, unsigned out[8]) {
    static const unsigned by_size[][6] = {
        /* slices: list of compute-instance profile enums, 99-terminated */
        {99},
        {NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 99},
        {NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, 99},
        {NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
         NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, 99},
        {NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
         NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE, 99},
        {99},
        {99},
        {NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
         NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE,
         NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE, 99},
    };
    int n = 0;
    if (slices >= sizeof by_size / sizeof by_size[0]) return 0;
    for (int i = 0; by_size[slices][i] != 99; i++) out[n++] = by_size[slices][i];
    if (g->ci_rev1 && n > 0) out[n++] = NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1;
    return n;
}

static unsigned ci_slices_of(unsigned profile) {
    switch (profile) {
        case NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE:
        case NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1: return 1;
        case NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE: return 2;
        case NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE: return 3;
        case NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE: return 4;
        case NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE: return 6;
        case NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE: return 7;
        case NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE: return 8;
        default: return 0;
    }
}

/* SMs of a c-slice compute instance inside GPU instance `gi`. */
static unsigned ci_multiprocessors(const fake_gpu *g, const fake_gi_profile *gi, unsigned c) {
    if (c >= gi->slices) return gi->multiprocessors;
    static const unsigned plain[] = {0, NVML_GPU_INSTANCE_PROFILE_1_SLICE, NVML_GPU_INSTANCE_PROFILE_2_SLICE,
                                     NVML_GPU_INSTANCE_PROFILE_3_SLICE, NVML_GPU_INSTANCE_PROFILE_4_SLICE};
    const fake_gi_profile *same = c < sizeof plain / sizeof plain[0] ? gi_row(g, plain[c]) : NULL;
    return same ? same->multiprocessors : gi->multiprocessors * c / gi->slices;
}

/* The GPU-instance part of a MIG profile name: "1c.2g.20gb" -> "2g.20gb". */
static const char *gi_part(const char *profile) {
    const char *dot = strchr(profile, '.');
    return dot && dot > profile && dot[-1] == 'c' ? dot + 1 : profile;
}

int fake_mig_resolve(fake_gpu *g, int (*fallback_profile)(const fake_mig *m), char *err, size_t errlen) {
    g->gi_profiles = NULL;
    g->n_gi_profiles = 0;
    for (size_t p = 0; p < sizeof PRODUCTS / sizeof PRODUCTS[0]; p++) {
        if (strcmp(PRODUCTS[p].product, g->name) == 0) {
            g->gi_profiles = PRODUCTS[p].rows;
            g->n_gi_profiles = PRODUCTS[p].n;
            g->ci_rev1 = PRODUCTS[p].ci_rev1;
        }
    }
    for (int j = 0; j < g->n_mig; j++) {
        fake_mig *m = &g->mig[j];
        const fake_gi_profile *row = NULL;
        if (g->gi_profiles) {
            for (int i = 0; i < g->n_gi_profiles && !row; i++)
                if (strcmp(g->gi_profiles[i].name, gi_part(m->profile)) == 0) row = &g->gi_profiles[i];
            if (!row) {
                snprintf(err, errlen, "GPU %s: %s offers no MIG profile '%s'", g->uuid, g->name, m->profile);
                return 0;
            }
        } else {
            /* A product without a table: its profiles are the ones its MIG devices show. */
            int profile = fallback_profile(m);
            if (profile < 0) {
                snprintf(err, errlen, "GPU %s: no NVML profile for MIG profile '%s'", g->uuid, m->profile);
                return 0;
            }
            row = gi_row(g, (unsigned)profile);
            if (!row) {
                fake_gi_profile *d = &g->derived[g->n_derived++];
                memset(d, 0, sizeof *d);
                d->profile = (unsigned)profile;
                d->id = reported_id(d->profile);
                snprintf(d->name, sizeof d->name, "%s", gi_part(m->profile));
                d->slices = m->gi_slices;
                d->instances = 7 / (m->gi_slices ? m->gi_slices : 1);
                d->multiprocessors = m->ci_slices == m->gi_slices ? m->multiprocessors
                                                                  : m->multiprocessors * m->gi_slices / m->ci_slices;
                d->copy_engines = m->copy_engines;
                d->decoders = m->decoders;
                d->encoders = m->encoders;
                d->jpeg_engines = m->jpeg_engines;
                d->ofa_engines = m->ofa_engines;
                d->memory_mib = m->memory_mib;
                g->gi_profiles = g->derived;
                g->n_gi_profiles = g->n_derived;
                row = d;
            }
        }
        unsigned cis[8];
        int n = ci_profiles(g, row->slices, cis), ci = -1;
        for (int k = 0; k < n && ci < 0; k++)
            if (ci_slices_of(cis[k]) == m->ci_slices) ci = (int)cis[k];
        if (row->slices != m->gi_slices || row->memory_mib != m->memory_mib || ci < 0 ||
            ci_multiprocessors(g, row, m->ci_slices) != m->multiprocessors || row->copy_engines != m->copy_engines ||
            row->decoders != m->decoders || row->jpeg_engines != m->jpeg_engines ||
            row->ofa_engines != m->ofa_engines) {
            snprintf(err, errlen,
                     "GPU %s: MIG device %s (%s: %u+%u slices, %llu MiB, %u SMs) disagrees with the %s profile "
                     "(%u slices, %llu MiB, %u SMs)",
                     g->uuid, m->uuid, m->profile, m->gi_slices, m->ci_slices, m->memory_mib, m->multiprocessors,
                     row->name, row->slices, row->memory_mib, ci_multiprocessors(g, row, m->ci_slices));
            return 0;
        }
        m->gi_profile = row->profile;
        m->gi_profile_id = row->id;
        m->ci_profile_id = (unsigned)ci;
    }
    return 1;
}

/* --- entry points -------------------------------------------------------------------------- */

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

/* The GPU-instance profile `profile` of `device`, or the code the call must answer. */
static nvmlReturn_t find_gi_profile(nvmlDevice_t device, unsigned profile, const fake_gi_profile **out) {
    fake_gpu *g = (fake_gpu *)device;
    if (!g || g->magic != MAGIC_GPU) return NVML_ERROR_INVALID_ARGUMENT; /* also a MIG device handle */
    if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->mig_capable) return NVML_ERROR_NOT_SUPPORTED;
    *out = gi_row(g, profile);
    return *out ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

API nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                     nvmlGpuInstanceProfileInfo_t *info) {
    BEGIN();
    const fake_gi_profile *p = NULL;
    if (!info) END(NVML_ERROR_INVALID_ARGUMENT);
    nvmlReturn_t rc = find_gi_profile(device, profile, &p);
    if (rc != NVML_SUCCESS) END(rc);
    memset(info, 0, sizeof *info);
    info->id = p->id;
    info->isP2pSupported = 0;
    info->sliceCount = p->slices;
    info->instanceCount = p->instances;
    info->multiprocessorCount = p->multiprocessors;
    info->copyEngineCount = p->copy_engines;
    info->decoderCount = p->decoders;
    info->encoderCount = p->encoders;
    info->jpegCount = p->jpeg_engines;
    info->ofaCount = p->ofa_engines;
    info->memorySizeMB = p->memory_mib;
    END(NVML_SUCCESS);
}

/* The versioned form: the caller stamps the layout it passes (v2, or v3 which drops isP2pSupported
 * and appends capabilities); any other stamp is ARGUMENT_VERSION_MISMATCH. */
API nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                      nvmlGpuInstanceProfileInfo_v2_t *info) {
    BEGIN();
    const fake_gi_profile *p = NULL;
    if (!info) END(NVML_ERROR_INVALID_ARGUMENT);
    unsigned version = info->version;
    if (version != NVML_GPU_INSTANCE_PROFILE_INFO_V2_VERSION && version != NVML_GPU_INSTANCE_PROFILE_INFO_V3_VERSION)
        END(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    nvmlReturn_t rc = find_gi_profile(device, profile, &p);
    if (rc != NVML_SUCCESS) END(rc);
    if (version == NVML_GPU_INSTANCE_PROFILE_INFO_V3_VERSION) {
        nvmlGpuInstanceProfileInfo_v3_t *v3 = (nvmlGpuInstanceProfileInfo_v3_t *)info;
        memset(v3, 0, sizeof *v3);
        v3->version = version;
        v3->id = p->id;
        v3->sliceCount = p->slices;
        v3->instanceCount = p->instances;
        v3->multiprocessorCount = p->multiprocessors;
        v3->copyEngineCount = p->copy_engines;
        v3->decoderCount = p->decoders;
        v3->encoderCount = p->encoders;
        v3->jpegCount = p->jpeg_engines;
        v3->ofaCount = p->ofa_engines;
        v3->memorySizeMB = p->memory_mib;
        snprintf(v3->name, sizeof v3->name, "MIG %s", p->name);
        v3->capabilities = 0; /* neither P2P nor graphics on these boards */
        END(NVML_SUCCESS);
    }
    memset(info, 0, sizeof *info);
    info->version = version;
    info->id = p->id;
    info->isP2pSupported = 0;
    info->sliceCount = p->slices;
    info->instanceCount = p->instances;
    info->multiprocessorCount = p->multiprocessors;
    info->copyEngineCount = p->copy_engines;
    info->decoderCount = p->decoders;
    info->encoderCount = p->encoders;
    info->jpegCount = p->jpeg_engines;
    info->ofaCount = p->ofa_engines;
    info->memorySizeMB = p->memory_mib;
    snprintf(info->name, sizeof info->name, "MIG %s", p->name);
    END(NVML_SUCCESS);
}

/* The same answer, the profile named by the id the board reports instead of by its enum. */
API nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoByIdV(nvmlDevice_t device, unsigned int profile_id,
                                                          nvmlGpuInstanceProfileInfo_v2_t *info) {
    BEGIN();
    fake_gpu *g = (fake_gpu *)device;
    if (!g || g->magic != MAGIC_GPU || !info) END(NVML_ERROR_INVALID_ARGUMENT);
    if (!g->mig_capable) END(NVML_ERROR_NOT_SUPPORTED);
    int profile = -1;
    for (int i = 0; i < g->n_gi_profiles && profile < 0; i++)
        if (g->gi_profiles[i].id == profile_id) profile = (int)g->gi_profiles[i].profile;
    pthread_mutex_unlock(&fake_lock);
    if (profile < 0) return NVML_ERROR_NOT_SUPPORTED;
    return nvmlDeviceGetGpuInstanceProfileInfoV(device, (unsigned)profile, info);
}

typedef struct {
    unsigned id, slices, instances, multiprocessors;
    unsigned copy_engines, decoders, encoders, jpeg_engines, ofa_engines;
    char name[48];
} ci_answer;

/* The compute-instance profile `profile` of GPU instance `gi`, or the code the call must answer. */
static nvmlReturn_t find_ci_profile(nvmlGpuInstance_t gi, unsigned profile, unsigned eng_profile, ci_answer *out) {
    fake_instance *inst = (fake_instance *)gi;
    if (!inst || inst->magic != MAGIC_GI) return NVML_ERROR_INVALID_ARGUMENT;
    if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    if (eng_profile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED) return NVML_ERROR_INVALID_ARGUMENT;
    const fake_gpu *g = inst->mig->parent;
    const fake_gi_profile *row = gi_row(g, inst->mig->gi_profile);
    if (!row) return NVML_ERROR_NOT_SUPPORTED;
    unsigned cis[8];
    int n = ci_profiles(g, row->slices, cis), offered = 0;
    for (int k = 0; k < n; k++) offered |= cis[k] == profile;
    if (!offered) return NVML_ERROR_NOT_SUPPORTED;
    unsigned c = ci_slices_of(profile);
    out->id = profile;
    out->slices = c;
    out->instances = row->slices / c;
    out->multiprocessors = ci_multiprocessors(g, row, c);
    out->copy_engines = row->copy_engines;
    out->decoders = row->decoders;
    out->encoders = row->encoders;
    out->jpeg_engines = row->jpeg_engines;
    out->ofa_engines = row->ofa_engines;
    if (c == row->slices)
        snprintf(out->name, sizeof out->name, "MIG %s", row->name);
    else
        snprintf(out->name, sizeof out->name, "MIG %uc.%s", c, row->name);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gi, unsigned int profile,
                                                              unsigned int eng_profile,
                                                              nvmlComputeInstanceProfileInfo_t *info) {
    BEGIN();
    ci_answer a;
    if (!info) END(NVML_ERROR_INVALID_ARGUMENT);
    nvmlReturn_t rc = find_ci_profile(gi, profile, eng_profile, &a);
    if (rc != NVML_SUCCESS) END(rc);
    memset(info, 0, sizeof *info);
    info->id = a.id;
    info->sliceCount = a.slices;
    info->instanceCount = a.instances;
    info->multiprocessorCount = a.multiprocessors;
    info->sharedCopyEngineCount = a.copy_engines;
    info->sharedDecoderCount = a.decoders;
    info->sharedEncoderCount = a.encoders;
    info->sharedJpegCount = a.jpeg_engines;
    info->sharedOfaCount = a.ofa_engines;
    END(NVML_SUCCESS);
}

API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gi, unsigned int profile,
                                                               unsigned int eng_profile,
                                                               nvmlComputeInstanceProfileInfo_v2_t *info) {
    BEGIN();
    ci_answer a;
    if (!info) END(NVML_ERROR_INVALID_ARGUMENT);
    unsigned version = info->version;
    if (version != NVML_COMPUTE_INSTANCE_PROFILE_INFO_V2_VERSION &&
        version != NVML_COMPUTE_INSTANCE_PROFILE_INFO_V3_VERSION)
        END(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    nvmlReturn_t rc = find_ci_profile(gi, profile, eng_profile, &a);
    if (rc != NVML_SUCCESS) END(rc);
    /* v3 is v2 plus a trailing capabilities word: the shared prefix is filled once. */
    if (version == NVML_COMPUTE_INSTANCE_PROFILE_INFO_V3_VERSION)
        memset(info, 0, sizeof(nvmlComputeInstanceProfileInfo_v3_t));
    else
        memset(info, 0, sizeof *info);
    info->version = version;
    info->id = a.id;
    info->sliceCount = a.slices;
    info->instanceCount = a.instances;
    info->multiprocessorCount = a.multiprocessors;
    info->sharedCopyEngineCount = a.copy_engines;
    info->sharedDecoderCount = a.decoders;
    info->sharedEncoderCount = a.encoders;
    info->sharedJpegCount = a.jpeg_engines;
    info->sharedOfaCount = a.ofa_engines;
    snprintf(info->name, sizeof info->name, "%s", a.name);
    END(NVML_SUCCESS);
}
