/* The slice of the NVML C ABI that the fake library implements.
 *
 * Owns the return codes, enum values and struct layouts, written from the
 * definitions in nvidia-ml-py's pynvml.py (the binding our backend uses), so a
 * mismatch here is a mismatch with what pynvml passes in. It must not declare
 * anything the fake does not implement.
 */
#ifndef KUBEGPU_FAKE_NVML_ABI_H
#define KUBEGPU_FAKE_NVML_ABI_H

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;

/* nvmlEventType* bit masks */
#define NVML_EVENT_SINGLE_BIT_ECC 0x1ULL
#define NVML_EVENT_DOUBLE_BIT_ECC 0x2ULL
#define NVML_EVENT_PSTATE 0x4ULL
#define NVML_EVENT_XID_CRITICAL 0x8ULL
#define NVML_EVENT_CLOCK 0x10ULL

/* nvmlGpuTopologyLevel_t */
#define NVML_TOPOLOGY_INTERNAL 0
#define NVML_TOPOLOGY_SINGLE 10
#define NVML_TOPOLOGY_MULTIPLE 20
#define NVML_TOPOLOGY_HOSTBRIDGE 30
#define NVML_TOPOLOGY_NODE 40
#define NVML_TOPOLOGY_SYSTEM 50

/* nvmlIntNvLinkDeviceType_t */
#define NVML_NVLINK_DEVICE_TYPE_GPU 0x00
#define NVML_NVLINK_DEVICE_TYPE_SWITCH 0x02

/* nvmlClockType_t */
#define NVML_CLOCK_GRAPHICS 0
#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2
#define NVML_CLOCK_VIDEO 3

/* nvmlMemoryErrorType_t / nvmlEccCounterType_t */
#define NVML_MEMORY_ERROR_TYPE_CORRECTED 0
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_AGGREGATE_ECC 1

/* nvmlPageRetirementCause_t */
#define NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS 0
#define NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR 1

/* nvmlPerfPolicyType_t */
#define NVML_PERF_POLICY_POWER 0
#define NVML_PERF_POLICY_THERMAL 1

/* nvmlPcieUtilCounter_t */
#define NVML_PCIE_UTIL_TX_BYTES 0
#define NVML_PCIE_UTIL_RX_BYTES 1

/* nvmlTemperatureSensors_t */
#define NVML_TEMPERATURE_GPU 0

/* nvmlValueType_t */
#define NVML_VALUE_TYPE_DOUBLE 0
#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3

/* field ids */
#define NVML_FI_DEV_MEMORY_TEMP 82
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139

/* nvmlGpuInstanceProfile / nvmlComputeInstanceProfile ids */
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_GPU_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_GPU_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 0x8
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 0x9
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX 0xA
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX 0xB
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX 0xC
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME 0xD
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME 0xE
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME 0xF
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME 0x10
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX 0x11
#define NVML_GPU_INSTANCE_PROFILE_COUNT 0x12
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL 0x8
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT 0x9
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0

#define NVML_DEVICE_MIG_DISABLE 0
#define NVML_DEVICE_MIG_ENABLE 1

/* Versioned structs carry (version << 24) | sizeof(struct) in their first word (NVML_STRUCT_VERSION). */
#define NVML_MEMORY_V2_VERSION 0x02000028u
#define NVML_GPU_INSTANCE_PROFILE_INFO_V2_VERSION 0x02000098u
#define NVML_GPU_INSTANCE_PROFILE_INFO_V3_VERSION 0x03000098u
#define NVML_COMPUTE_INSTANCE_PROFILE_INFO_V2_VERSION 0x02000088u
#define NVML_COMPUTE_INSTANCE_PROFILE_INFO_V3_VERSION 0x0300008Cu
#define NVML_UUID_V1_VERSION 0x01000034u

#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_ASCII_LEN 41
#define NVML_DEVICE_UUID_BINARY_LEN 16
#define NVML_UUID_TYPE_ASCII 1
#define NVML_UUID_TYPE_BINARY 2

typedef struct {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

/* nvmlDeviceGetGpuFabricInfo: the multi-node NVLink fabric a GPU is registered with. */
#define NVML_GPU_FABRIC_UUID_LEN 16
#define NVML_GPU_FABRIC_STATE_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_STATE_COMPLETED 3
typedef unsigned char nvmlGpuFabricState_t;
typedef struct {
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
} nvmlGpuFabricInfo_t;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

typedef struct {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef struct {
    unsigned int start;
    unsigned int size;
} nvmlPlacement_t;

typedef struct {
    nvmlDevice_t device;
    unsigned int id;
    unsigned int profileId;
    nvmlPlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct {
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct {
    unsigned int version;
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlGpuInstanceProfileInfo_v2_t;

/* v3 (driver 545+) is not a superset of v2: isP2pSupported is gone, capabilities is appended. */
typedef struct {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned int capabilities;
} nvmlGpuInstanceProfileInfo_v3_t;

typedef struct {
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlComputeInstanceProfileInfo_v2_t;

typedef struct {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned int capabilities;
} nvmlComputeInstanceProfileInfo_v3_t;

typedef struct {
    unsigned int version;
    unsigned int type; /* NVML_UUID_TYPE_* */
    union {
        char str[NVML_DEVICE_UUID_ASCII_LEN];
        unsigned char bytes[NVML_DEVICE_UUID_BINARY_LEN];
    } value;
} nvmlUUID_t;

typedef struct {
    nvmlDevice_t device;
    nvmlGpuInstance_t gpuInstance;
    unsigned int id;
    unsigned int profileId;
    nvmlPlacement_t placement;
} nvmlComputeInstanceInfo_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct {
    unsigned long long referenceTime;
    unsigned long long violationTime;
} nvmlViolationTime_t;

typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

#endif
