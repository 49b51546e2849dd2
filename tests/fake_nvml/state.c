/* Loading the machine and folding the control journal into the fake NVML state (see fake.h).
 *
 * The machine comes from KUBEGPU_FAKE_NVML_PROFILE: a path to the canonical JSON that
 * `kubegpu machines export NAME` prints, or a shipped profile name, in which case this
 * library runs `$KUBEGPU_FAKE_NVML_PYTHON -m kubegpu machines export NAME` (default python3)
 * once per nvmlInit. Injected events and errors come from the append-only journal
 * `$KUBEGPU_FAKE_NVML_CONTROL/events`; an NVML code in `$KUBEGPU_FAKE_NVML_CONTROL/init-error`
 * (or in $KUBEGPU_FAKE_NVML_INIT_ERROR) makes nvmlInit fail with that code.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fake.h"
#include "json.h"

pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
int fake_init_count = 0;
fake_machine *fake_m = NULL;
fake_record *fake_records = NULL;
size_t fake_n_records = 0;
double fake_boot = 0.0;

static char journal_path[4096];
static long journal_offset = 0;
static char partial[512];

double fake_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void complain(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "fake libnvidia-ml: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
}

static char *slurp(FILE *f) {
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
        if (n + 1 >= cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
        }
    }
    buf[n] = '\0';
    return buf;
}

static int is_profile_name(const char *s) {
    if (!*s) return 0;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') return 0;
    return strstr(s, ".json") == NULL;
}

static char *read_profile_text(const char *profile) {
    if (is_profile_name(profile)) {
        const char *python = getenv("KUBEGPU_FAKE_NVML_PYTHON");
        char cmd[4352];
        snprintf(cmd, sizeof cmd, "'%s' -m kubegpu machines export '%s'", python && *python ? python : "python3",
                 profile);
        FILE *p = popen(cmd, "r");
        if (!p) {
            complain("cannot run %s%s", cmd, "");
            return NULL;
        }
        char *text = slurp(p);
        int status = pclose(p);
        if (status != 0) {
            complain("'%s' failed; is %s a shipped profile?", cmd, profile);
            free(text);
            return NULL;
        }
        return text;
    }
    FILE *f = fopen(profile, "r");
    if (!f) {
        complain("cannot open KUBEGPU_FAKE_NVML_PROFILE=%s%s", profile, "");
        return NULL;
    }
    char *text = slurp(f);
    fclose(f);
    return text;
}

typedef struct {
    const char *source;
    int ok;
} loader;

static const jval *need(loader *l, const jval *obj, const char *key, jtype type) {
    const jval *v = json_get(obj, key);
    if (!v || v->type != type) {
        if (l->ok) complain("%s: missing or mistyped key '%s'", l->source, key);
        l->ok = 0;
        return NULL;
    }
    return v;
}

static double num(loader *l, const jval *obj, const char *key) {
    const jval *v = need(l, obj, key, J_NUM);
    return v ? v->number : 0.0;
}

static void str(loader *l, const jval *obj, const char *key, char *out, size_t n) {
    const jval *v = need(l, obj, key, J_STR);
    snprintf(out, n, "%s", v ? v->string : "");
}

static int pcie_level(const char *s) {
    static const struct {
        const char *name;
        int level;
    } table[] = {
        {"same-board", NVML_TOPOLOGY_INTERNAL},    {"single-switch", NVML_TOPOLOGY_SINGLE},
        {"multi-switch", NVML_TOPOLOGY_MULTIPLE},  {"host-bridge", NVML_TOPOLOGY_HOSTBRIDGE},
        {"same-cpu", NVML_TOPOLOGY_NODE},          {"cross-cpu", NVML_TOPOLOGY_SYSTEM},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(s, table[i].name) == 0) return table[i].level;
    return -1;
}

/* NVML's GPU-instance profile enum for a profile spelled the go-nvlib way, e.g. 1g.10gb+me. */
static int gi_profile_id(const char *profile, unsigned gi_slices, unsigned long long mig_mib,
                         unsigned long long gpu_mib) {
    const char *attr = strpbrk(profile, "+-");
    if (attr && strcmp(attr, "+me") == 0) {
        if (gi_slices == 1) return NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1;
        if (gi_slices == 2) return NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1;
    } else if (attr && strcmp(attr, "+me.all") == 0) {
        if (gi_slices == 1) return NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME;
        if (gi_slices == 2) return NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME;
    } else if (attr && strcmp(attr, "+gfx") == 0) {
        if (gi_slices == 1) return NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX;
        if (gi_slices == 2) return NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX;
        if (gi_slices == 4) return NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX;
    } else if (attr && strcmp(attr, "-me") == 0) {
        if (gi_slices == 1) return NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME;
        if (gi_slices == 2) return NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME;
    } else if (!attr) {
        switch (gi_slices) {
            /* a one-slice instance with more than an eighth of the memory is the double-memory revision */
            case 1: return mig_mib * 8 > gpu_mib ? NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 : NVML_GPU_INSTANCE_PROFILE_1_SLICE;
            case 2: return NVML_GPU_INSTANCE_PROFILE_2_SLICE;
            case 3: return NVML_GPU_INSTANCE_PROFILE_3_SLICE;
            case 4: return NVML_GPU_INSTANCE_PROFILE_4_SLICE;
            case 6: return NVML_GPU_INSTANCE_PROFILE_6_SLICE;
            case 7: return NVML_GPU_INSTANCE_PROFILE_7_SLICE;
            case 8: return NVML_GPU_INSTANCE_PROFILE_8_SLICE;
        }
    }
    return -1;
}

/* The profile enum of a MIG device of a product mig.c has no table for. */
static int layout_profile(const fake_mig *m) {
    const char *gi = strchr(m->profile, '.');
    gi = gi && gi > m->profile && gi[-1] == 'c' ? gi + 1 : m->profile; /* 1c.2g.20gb -> 2g.20gb */
    return gi_profile_id(gi, m->gi_slices, m->memory_mib, m->parent->memory_mib);
}

/* A GPU's "fabric" ({cluster_uuid: "8-4-4-4-12 hex", clique_id: n}, or null: not fabric-attached). */
static void load_fabric(loader *l, fake_gpu *g, const jval *fabric) {
    if (!fabric || fabric->type == J_NULL) return;
    char text[64];
    str(l, fabric, "cluster_uuid", text, sizeof text);
    int n = 0;
    for (const char *c = text; *c && n < 32; c++) {
        unsigned v;
        if (*c == '-') continue;
        if (sscanf(c, "%1x", &v) != 1) break;
        if (n % 2 == 0) g->cluster_uuid[n / 2] = (unsigned char)(v << 4);
        else g->cluster_uuid[n / 2] |= (unsigned char)v;
        n++;
    }
    if (n != 32) {
        complain("%s: fabric.cluster_uuid of GPU %s is not a UUID", l->source, g->uuid);
        l->ok = 0;
        return;
    }
    g->clique_id = (unsigned)num(l, fabric, "clique_id");
    g->fabric_attached = 1;
}

static void load_mig(loader *l, fake_gpu *g, const jval *list) {
    for (size_t j = 0; j < list->count; j++) {
        const jval *d = list->items[j];
        if (g->n_mig == FAKE_MAX_MIG) {
            complain("%s: more than 8 MIG devices on GPU %s", l->source, g->uuid);
            l->ok = 0;
            return;
        }
        fake_mig *m = &g->mig[g->n_mig++];
        m->magic = MAGIC_MIG;
        m->parent = g;
        m->index = (int)num(l, d, "index");
        str(l, d, "uuid", m->uuid, sizeof m->uuid);
        str(l, d, "profile", m->profile, sizeof m->profile);
        m->gi_id = (unsigned)num(l, d, "gi_id");
        m->ci_id = (unsigned)num(l, d, "ci_id");
        m->memory_mib = (unsigned long long)num(l, d, "memory_mib");
        m->multiprocessors = (unsigned)num(l, d, "multiprocessors");
        m->gi_slices = (unsigned)num(l, d, "gi_slices");
        m->ci_slices = (unsigned)num(l, d, "ci_slices");
        m->copy_engines = (unsigned)num(l, d, "copy_engines");
        m->decoders = (unsigned)num(l, d, "decoders");
        m->encoders = (unsigned)num(l, d, "encoders");
        m->jpeg_engines = (unsigned)num(l, d, "jpeg_engines");
        m->ofa_engines = (unsigned)num(l, d, "ofa_engines");
        m->gi = (fake_instance){MAGIC_GI, m};
        m->ci = (fake_instance){MAGIC_CI, m};
    }
    char err[512];
    if (l->ok && !fake_mig_resolve(g, layout_profile, err, sizeof err)) {
        complain("%s: %s", l->source, err);
        l->ok = 0;
    }
}

static void add_link(fake_gpu *g, int type, const char *bus) {
    if (g->n_links == FAKE_MAX_LINKS) return;
    fake_link *k = &g->links[g->n_links++];
    k->type = type;
    snprintf(k->remote_bus_id, sizeof k->remote_bus_id, "%s", bus);
}

static fake_machine *build_machine(loader *l, const jval *root) {
    fake_machine *m = calloc(1, sizeof *m);
    const jval *gpus = need(l, root, "gpus", J_ARR);
    const jval *topo = need(l, root, "topology", J_OBJ);
    if (!m || !gpus || !topo) {
        free(m);
        return NULL;
    }
    str(l, root, "driver_version", m->driver_version, sizeof m->driver_version);
    char cuda[32];
    str(l, root, "cuda_driver_version", cuda, sizeof cuda);
    int major = 0, minor = 0;
    sscanf(cuda, "%d.%d", &major, &minor);
    m->cuda_version = major * 1000 + minor * 10;
    if (gpus->count > FAKE_MAX_GPUS) {
        complain("%s: more than 64 GPUs%s", l->source, "");
        l->ok = 0;
        return m;
    }
    m->n_gpus = (int)gpus->count;
    m->gpus = calloc(gpus->count ? gpus->count : 1, sizeof *m->gpus);
    m->pcie = calloc(gpus->count ? gpus->count * gpus->count : 1, sizeof *m->pcie);
    for (int i = 0; i < m->n_gpus; i++) {
        const jval *src = gpus->items[i];
        fake_gpu *g = &m->gpus[i];
        g->magic = MAGIC_GPU;
        g->index = (int)num(l, src, "index");
        g->minor = (int)num(l, src, "minor");
        str(l, src, "uuid", g->uuid, sizeof g->uuid);
        str(l, src, "product_name", g->name, sizeof g->name);
        str(l, src, "pci_bus_id", g->bus_id, sizeof g->bus_id);
        str(l, src, "serial", g->serial, sizeof g->serial);
        str(l, src, "vbios_version", g->vbios, sizeof g->vbios);
        g->memory_mib = (unsigned long long)num(l, src, "memory_mib");
        char cc[16];
        str(l, src, "compute_capability", cc, sizeof cc);
        sscanf(cc, "%d.%d", &g->cc_major, &g->cc_minor);
        const jval *capable = need(l, src, "mig_capable", J_BOOL);
        const jval *enabled = need(l, src, "mig_enabled", J_BOOL);
        g->mig_capable = capable && capable->boolean;
        g->mig_enabled = enabled && enabled->boolean;
        g->power_limit_w = num(l, src, "power_limit_w");
        g->max_sm_clock = (unsigned)num(l, src, "max_sm_clock_mhz");
        g->max_mem_clock = (unsigned)num(l, src, "max_mem_clock_mhz");
        g->multiprocessors = (unsigned)num(l, src, "multiprocessors");
        g->pci_device_id = 0x20B010DEu + ((unsigned)g->cc_major << 20);
        const jval *migs = json_get(src, "mig_devices");
        if (migs && migs->type == J_ARR) load_mig(l, g, migs);
        load_fabric(l, g, json_get(src, "fabric"));
    }
    const jval *pcie = need(l, topo, "pcie", J_ARR);
    const jval *nvlink = need(l, topo, "nvlink", J_ARR);
    const jval *fabric = json_get(topo, "nvswitch");
    const jval *fabric_links = json_get(topo, "nvswitch_links");
    const char *fabrics[FAKE_MAX_GPUS];
    int n_fabrics = 0;
    for (int i = 0; l->ok && i < m->n_gpus; i++) {
        fake_gpu *g = &m->gpus[i];
        for (int j = 0; j < m->n_gpus; j++) {
            const jval *cell = json_at(json_at(pcie, (size_t)i), (size_t)j);
            int level = i == j ? NVML_TOPOLOGY_INTERNAL : (cell && cell->type == J_STR ? pcie_level(cell->string) : -1);
            if (level < 0) {
                complain("%s: topology.pcie has a bad cell for GPU %s", l->source, g->uuid);
                l->ok = 0;
            }
            m->pcie[i * m->n_gpus + j] = level;
            const jval *count = json_at(json_at(nvlink, (size_t)i), (size_t)j);
            for (int k = 0; i != j && count && k < (int)count->number; k++)
                add_link(g, NVML_NVLINK_DEVICE_TYPE_GPU, m->gpus[j].bus_id);
        }
        const jval *name = json_at(fabric, (size_t)i);
        const jval *links = json_at(fabric_links, (size_t)i);
        if (name && name->type == J_STR && links) {
            int f = 0;
            while (f < n_fabrics && strcmp(fabrics[f], name->string) != 0) f++;
            if (f == n_fabrics) fabrics[n_fabrics++] = name->string;
            /* Six switches per fabric, links dealt round-robin, like a DGX A100's NVSwitch trays. */
            for (int k = 0; k < (int)links->number; k++) {
                char bus[32];
                snprintf(bus, sizeof bus, "%08X:%02X:00.0", 0x100u + (unsigned)f, 0x10u + (unsigned)(k % 6));
                add_link(g, NVML_NVLINK_DEVICE_TYPE_SWITCH, bus);
            }
        }
        g->link_capacity = g->n_links ? ((g->n_links + 5) / 6) * 6 : 0;
    }
    return m;
}

static nvmlReturn_t injected_init_error(void) {
    const char *env = getenv("KUBEGPU_FAKE_NVML_INIT_ERROR");
    if (env && *env) return (nvmlReturn_t)atoi(env);
    const char *dir = getenv("KUBEGPU_FAKE_NVML_CONTROL");
    if (!dir || !*dir) return NVML_SUCCESS;
    char path[4096];
    snprintf(path, sizeof path, "%s/init-error", dir);
    FILE *f = fopen(path, "r");
    if (!f) return NVML_SUCCESS;
    int code = 0;
    if (fscanf(f, "%d", &code) != 1) code = NVML_ERROR_UNKNOWN;
    fclose(f);
    return (nvmlReturn_t)code;
}

nvmlReturn_t fake_load(void) {
    nvmlReturn_t injected = injected_init_error();
    if (injected != NVML_SUCCESS) return injected;
    const char *profile = getenv("KUBEGPU_FAKE_NVML_PROFILE");
    if (!profile || !*profile) {
        complain("KUBEGPU_FAKE_NVML_PROFILE is not set: no machine to pretend to be%s%s", "", "");
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    char *text = read_profile_text(profile);
    if (!text) return NVML_ERROR_UNKNOWN;
    char err[256];
    jval *root = json_parse(text, err, sizeof err);
    free(text);
    if (!root) {
        complain("%s: %s", profile, err);
        return NVML_ERROR_UNKNOWN;
    }
    loader l = {profile, 1};
    fake_machine *m = build_machine(&l, root);
    json_free(root);
    if (!l.ok || !m) return NVML_ERROR_UNKNOWN;
    /* The previous machine is leaked on purpose: a thread of the last session may still hold its handles. */
    fake_m = m;
    fake_boot = fake_now() - 86400.0; /* "booted a day ago": energy and NVLink counters start non-zero */

    const char *dir = getenv("KUBEGPU_FAKE_NVML_CONTROL");
    journal_path[0] = '\0';
    if (dir && *dir) snprintf(journal_path, sizeof journal_path, "%s/events", dir);
    journal_offset = 0;
    partial[0] = '\0';
    free(fake_records);
    fake_records = NULL;
    fake_n_records = 0;
    fake_sync_control();
    return NVML_SUCCESS;
}

static void fold(const fake_record *r) {
    if (r->gpu < 0 || r->gpu >= fake_m->n_gpus) return;
    fake_gpu *g = &fake_m->gpus[r->gpu];
    switch (r->kind) {
        case REC_SBE: g->ecc_sbe++; break;
        case REC_DBE: g->ecc_dbe++; break;
        case REC_LOST: g->lost = 1; break;
        case REC_RECOVER: g->lost = 0; break;
        case REC_REGISTER_ERROR: g->register_error = r->code; break;
        default: break;
    }
}

static void ingest_line(const char *line) {
    char word[32];
    fake_record r = {0, -1, 0, 0xFFFFFFFFu, 0xFFFFFFFFu, 0};
    int n = 0;
    if (sscanf(line, "%31s %n", word, &n) != 1 || word[0] == '#') return;
    const char *rest = line + n;
    int ok;
    if (strcmp(word, "xid") == 0) {
        r.kind = REC_XID;
        ok = sscanf(rest, "%d %llu %u %u", &r.gpu, &r.data, &r.gi, &r.ci) >= 2;
    } else if (strcmp(word, "ecc-sbe") == 0 || strcmp(word, "ecc-dbe") == 0) {
        r.kind = word[4] == 's' ? REC_SBE : REC_DBE;
        ok = sscanf(rest, "%d", &r.gpu) == 1;
    } else if (strcmp(word, "lost") == 0 || strcmp(word, "recover") == 0) {
        r.kind = word[0] == 'l' ? REC_LOST : REC_RECOVER;
        ok = sscanf(rest, "%d", &r.gpu) == 1;
    } else if (strcmp(word, "wait-error") == 0) {
        r.kind = REC_WAIT_ERROR;
        ok = sscanf(rest, "%d", &r.code) == 1;
    } else if (strcmp(word, "register-error") == 0) {
        r.kind = REC_REGISTER_ERROR;
        ok = sscanf(rest, "%d %d", &r.gpu, &r.code) == 2;
    } else {
        ok = 0;
    }
    if (!ok) {
        complain("ignoring control line '%s' in %s", line, journal_path);
        return;
    }
    fake_record *grown = realloc(fake_records, (fake_n_records + 1) * sizeof *grown);
    if (!grown) return;
    fake_records = grown;
    fake_records[fake_n_records++] = r;
    fold(&r);
}

void fake_sync_control(void) {
    if (!journal_path[0] || !fake_m) return;
    struct stat st;
    if (stat(journal_path, &st) != 0 || st.st_size <= journal_offset) return;
    FILE *f = fopen(journal_path, "r");
    if (!f) return;
    if (fseek(f, journal_offset, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    char buf[512];
    while (fgets(buf, sizeof buf, f)) {
        size_t len = strlen(buf);
        if (len == 0 || buf[len - 1] != '\n') {
            /* A line still being written: keep it until its newline arrives. */
            strncat(partial, buf, sizeof partial - strlen(partial) - 1);
            journal_offset += (long)len;
            continue;
        }
        buf[len - 1] = '\0';
        journal_offset += (long)len;
        if (partial[0]) {
            strncat(partial, buf, sizeof partial - strlen(partial) - 1);
            ingest_line(partial);
            partial[0] = '\0';
        } else {
            ingest_line(buf);
        }
    }
    fclose(f);
}
