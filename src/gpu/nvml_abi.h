/*
 * The subset of NVIDIA's NVML ABI that vramguard uses, declared here so the project builds
 * without nvml.h and loads libnvidia-ml.so.1 with dlopen at run time. The fake driver in
 * tests/fake-nvml/ includes this same header, so client and fake cannot drift apart.
 *
 * Every struct is checked with _Static_assert against the sizes and offsets of the real ABI
 * (x86-64 and aarch64 Linux, LP64). Function prototypes are given as typedefs only: the client
 * never links against NVML, it resolves each symbol by name.
 *
 * Versioned symbols (_v2, _v3) are separate functions in the library with separate struct
 * layouts; a driver may export any subset of them.
 */
#ifndef VG_GPU_NVML_ABI_H
#define VG_GPU_NVML_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_UNKNOWN = 999,
};

/* usedGpuMemory when the driver cannot tell (e.g. on Windows WDDM or without permission). */
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

/* Buffer sizes the NVML documentation recommends for string getters. */
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

#define NVML_DEVICE_MIG_DISABLE 0
#define NVML_DEVICE_MIG_ENABLE 1

/* Compute modes (nvmlComputeMode_t). */
#define NVML_COMPUTEMODE_DEFAULT 0
#define NVML_COMPUTEMODE_EXCLUSIVE_THREAD 1
#define NVML_COMPUTEMODE_PROHIBITED 2
#define NVML_COMPUTEMODE_EXCLUSIVE_PROCESS 3

/* nvmlTemperatureSensors_t: the GPU die, the only sensor NVML defines. */
#define NVML_TEMPERATURE_GPU 0

/* nvmlEnableState_t */
#define NVML_FEATURE_DISABLED 0
#define NVML_FEATURE_ENABLED 1

/* nvmlMemoryErrorType_t and nvmlEccCounterType_t, for nvmlDeviceGetTotalEccErrors. */
#define NVML_MEMORY_ERROR_TYPE_CORRECTED 0
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_AGGREGATE_ECC 1

/* nvmlPageRetirementCause_t, for nvmlDeviceGetRetiredPages. */
#define NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS 0
#define NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR 1

/* The field id of the driver's recovery action (nvmlDeviceGetFieldValues), and its values
 * (nvmlDeviceGpuRecoveryAction_t). */
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230
#define NVML_GPU_RECOVERY_ACTION_NONE 0
#define NVML_GPU_RECOVERY_ACTION_GPU_RESET 1
#define NVML_GPU_RECOVERY_ACTION_NODE_REBOOT 2
#define NVML_GPU_RECOVERY_ACTION_DRAIN_P2P 3
#define NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET 4

/* nvmlValueType_t: which member of nvmlValue_t a field value fills. */
#define NVML_VALUE_TYPE_DOUBLE 0
#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_VALUE_TYPE_UNSIGNED_LONG 2
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3
#define NVML_VALUE_TYPE_SIGNED_LONG_LONG 4
#define NVML_VALUE_TYPE_SIGNED_INT 5
#define NVML_VALUE_TYPE_UNSIGNED_SHORT 6

/* Clock event (formerly throttle) reasons: nvmlClocksEventReason* bits. */
#define NVML_CLOCKS_EVENT_REASON_GPU_IDLE 0x1ULL
#define NVML_CLOCKS_EVENT_REASON_APPLICATIONS_CLOCKS_SETTING 0x2ULL
#define NVML_CLOCKS_EVENT_REASON_SW_POWER_CAP 0x4ULL
#define NVML_CLOCKS_EVENT_REASON_HW_SLOWDOWN 0x8ULL
#define NVML_CLOCKS_EVENT_REASON_SYNC_BOOST 0x10ULL
#define NVML_CLOCKS_EVENT_REASON_SW_THERMAL_SLOWDOWN 0x20ULL
#define NVML_CLOCKS_EVENT_REASON_HW_THERMAL_SLOWDOWN 0x40ULL
#define NVML_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN 0x80ULL
#define NVML_CLOCKS_EVENT_REASON_DISPLAY_CLOCK_SETTING 0x100ULL

/* nvmlProcessInfo_v1_t: what the unversioned process-list functions fill. */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* nvmlProcessInfo_v2_t: filled by the _v2 and (from driver 535.104 on) _v3 functions. */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

/* Drivers 535.43.02 through 535.98 briefly wrote this 32-byte layout from the _v3 functions
 * before NVIDIA reverted it; reading those entries with a 24-byte stride garbles every entry
 * after the first. */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
    unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessInfo_535_t;

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

/* NVML_STRUCT_VERSION(Memory, 2): the struct size in the low 24 bits, the version above. */
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

/* nvmlValue_t and nvmlFieldValue_t: one request and answer of nvmlDeviceGetFieldValues. */
typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    signed int siVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    int valueType; /* nvmlValueType_t */
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t is 16 bytes");
_Static_assert(offsetof(nvmlProcessInfo_v1_t, usedGpuMemory) == 8, "v1 usedGpuMemory at 8");
_Static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "nvmlProcessInfo_v2_t is 24 bytes");
_Static_assert(offsetof(nvmlProcessInfo_v2_t, usedGpuMemory) == 8, "v2 usedGpuMemory at 8");
_Static_assert(offsetof(nvmlProcessInfo_v2_t, gpuInstanceId) == 16, "v2 gpuInstanceId at 16");
_Static_assert(offsetof(nvmlProcessInfo_v2_t, computeInstanceId) == 20, "v2 CI id at 20");
_Static_assert(sizeof(nvmlProcessInfo_535_t) == 32, "535.43 process entries are 32 bytes");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t is 24 bytes");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t is 40 bytes");
_Static_assert(offsetof(nvmlMemory_v2_t, total) == 8, "v2 total at 8");
_Static_assert(offsetof(nvmlMemory_v2_t, reserved) == 16, "v2 reserved at 16");
_Static_assert(offsetof(nvmlMemory_v2_t, used) == 32, "v2 used at 32");
_Static_assert(nvmlMemory_v2 == 0x02000028u, "nvmlMemory_v2 version tag");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t is 68 bytes");
_Static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t busId at 36");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t is 8 bytes");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "process util sample is 32 bytes");
_Static_assert(sizeof(nvmlValue_t) == 8, "nvmlValue_t is 8 bytes");
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t is 40 bytes");
_Static_assert(offsetof(nvmlFieldValue_t, valueType) == 24, "nvmlFieldValue_t valueType at 24");
_Static_assert(offsetof(nvmlFieldValue_t, nvmlReturn) == 28, "nvmlFieldValue_t nvmlReturn at 28");
_Static_assert(offsetof(nvmlFieldValue_t, value) == 32, "nvmlFieldValue_t value at 32");

/* Function types, one per symbol shape. Versioned symbols sharing a shape share a type. */
typedef nvmlReturn_t (*nvml_void_fn)(void);
typedef const char *(*nvml_error_string_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvml_sys_string_fn)(char *buf, unsigned int len);
typedef nvmlReturn_t (*nvml_sys_int_fn)(int *value);
typedef nvmlReturn_t (*nvml_count_fn)(unsigned int *count);
typedef nvmlReturn_t (*nvml_handle_by_index_fn)(unsigned int index, nvmlDevice_t *dev);
typedef nvmlReturn_t (*nvml_dev_string_fn)(nvmlDevice_t dev, char *buf, unsigned int len);
typedef nvmlReturn_t (*nvml_dev_uint_fn)(nvmlDevice_t dev, unsigned int *value);
typedef nvmlReturn_t (*nvml_dev_int_fn)(nvmlDevice_t dev, int *value);
typedef nvmlReturn_t (*nvml_dev_2int_fn)(nvmlDevice_t dev, int *a, int *b);
typedef nvmlReturn_t (*nvml_dev_2uint_fn)(nvmlDevice_t dev, unsigned int *a, unsigned int *b);
typedef nvmlReturn_t (*nvml_pci_fn)(nvmlDevice_t dev, nvmlPciInfo_t *pci);
typedef nvmlReturn_t (*nvml_mem_fn)(nvmlDevice_t dev, nvmlMemory_t *mem);
typedef nvmlReturn_t (*nvml_mem_v2_fn)(nvmlDevice_t dev, nvmlMemory_v2_t *mem);
typedef nvmlReturn_t (*nvml_util_fn)(nvmlDevice_t dev, nvmlUtilization_t *util);
/* Process lists: infos points at an array of the version's entry type. */
typedef nvmlReturn_t (*nvml_procs_fn)(nvmlDevice_t dev, unsigned int *count, void *infos);
typedef nvmlReturn_t (*nvml_mig_handle_fn)(nvmlDevice_t dev, unsigned int index, nvmlDevice_t *mig);
typedef nvmlReturn_t (*nvml_dev_from_mig_fn)(nvmlDevice_t mig, nvmlDevice_t *dev);
/* nvmlDeviceGetTemperature(device, nvmlTemperatureSensors_t sensorType, unsigned int *temp) */
typedef nvmlReturn_t (*nvml_temp_fn)(nvmlDevice_t dev, int sensor, unsigned int *temp);
/* nvmlDeviceGetTotalEccErrors(device, errorType, counterType, unsigned long long *count) */
typedef nvmlReturn_t (*nvml_ecc_total_fn)(nvmlDevice_t dev, int error_type, int counter_type,
                                          unsigned long long *count);
/* nvmlDeviceGetRetiredPages(device, cause, unsigned int *pageCount, unsigned long long *addrs) */
typedef nvmlReturn_t (*nvml_retired_fn)(nvmlDevice_t dev, int cause, unsigned int *count,
                                        unsigned long long *addresses);
/* nvmlDeviceGetRemappedRows(device, *corrRows, *uncRows, *isPending, *failureOccurred) */
typedef nvmlReturn_t (*nvml_remap_fn)(nvmlDevice_t dev, unsigned int *corr, unsigned int *unc,
                                      unsigned int *pending, unsigned int *failure);
typedef nvmlReturn_t (*nvml_fields_fn)(nvmlDevice_t dev, int count, nvmlFieldValue_t *values);
typedef nvmlReturn_t (*nvml_dev_u64_fn)(nvmlDevice_t dev, unsigned long long *value);
typedef nvmlReturn_t (*nvml_proc_util_fn)(nvmlDevice_t dev, nvmlProcessUtilizationSample_t *samples,
                                          unsigned int *count,
                                          unsigned long long lastSeenTimeStamp);

/*
 * Symbols and their shapes (the fake exports exactly these):
 *   nvmlInit_v2, nvmlInit, nvmlShutdown                         nvml_void_fn
 *   nvmlErrorString                                            nvml_error_string_fn
 *   nvmlSystemGetDriverVersion, nvmlSystemGetNVMLVersion       nvml_sys_string_fn
 *   nvmlSystemGetCudaDriverVersion_v2, ..._Version             nvml_sys_int_fn
 *   nvmlDeviceGetCount_v2, nvmlDeviceGetCount                  nvml_count_fn
 *   nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetHandleByIndex  nvml_handle_by_index_fn
 *   nvmlDeviceGetName, nvmlDeviceGetUUID                       nvml_dev_string_fn
 *   nvmlDeviceGetMinorNumber                                   nvml_dev_uint_fn
 *   nvmlDeviceGetPciInfo_v3, _v2, nvmlDeviceGetPciInfo         nvml_pci_fn
 *   nvmlDeviceGetMemoryInfo_v2                                 nvml_mem_v2_fn
 *   nvmlDeviceGetMemoryInfo                                    nvml_mem_fn
 *   nvmlDeviceGetUtilizationRates                              nvml_util_fn
 *   nvmlDeviceGetCudaComputeCapability                         nvml_dev_2int_fn
 *   nvmlDeviceGetPersistenceMode, nvmlDeviceGetComputeMode     nvml_dev_uint_fn (enum values)
 *   nvmlDeviceGetMigMode (current, pending)                    nvml_dev_2uint_fn
 *   nvmlDeviceGetMaxMigDeviceCount                             nvml_dev_uint_fn
 *   nvmlDeviceGetMigDeviceHandleByIndex                        nvml_mig_handle_fn
 *   nvmlDeviceIsMigDeviceHandle                                nvml_dev_uint_fn
 *   nvmlDeviceGetGpuInstanceId, nvmlDeviceGetComputeInstanceId nvml_dev_uint_fn
 *   nvmlDeviceGetDeviceHandleFromMigDeviceHandle               nvml_dev_from_mig_fn
 *   nvmlDeviceGet{Compute,Graphics}RunningProcesses{_v3,_v2,}  nvml_procs_fn
 *   nvmlDeviceGetMPSComputeRunningProcesses{_v3,_v2,}          nvml_procs_fn
 *   nvmlDeviceGetProcessUtilization                            nvml_proc_util_fn
 *   nvmlDeviceGetTemperature (sensor NVML_TEMPERATURE_GPU; C)  nvml_temp_fn
 *   nvmlDeviceGetPowerUsage (mW), nvmlDeviceGetEnforcedPowerLimit (mW),
 *   nvmlDeviceGetPowerManagementLimit (mW), nvmlDeviceGetFanSpeed (%)  nvml_dev_uint_fn
 *   nvmlDeviceGetEccMode (current, pending)                    nvml_dev_2uint_fn (enum values)
 *   nvmlDeviceGetTotalEccErrors                                nvml_ecc_total_fn
 *   nvmlDeviceGetRetiredPages                                  nvml_retired_fn
 *   nvmlDeviceGetRetiredPagesPendingStatus                     nvml_dev_uint_fn (enum value)
 *   nvmlDeviceGetRemappedRows                                  nvml_remap_fn
 *   nvmlDeviceGetFieldValues                                   nvml_fields_fn
 *   nvmlDeviceGetCurrentClocksEventReasons, ...ThrottleReasons nvml_dev_u64_fn
 *   nvmlDeviceGetConfComputeMemSizeInfo                        (presence only: 535 window)
 *   nvmlDeviceGetRunningProcessDetailList                      (presence only: 535 window)
 */

#endif
