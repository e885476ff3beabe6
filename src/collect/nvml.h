/*
 * nvml.h — the few NVML types, constants and entry-point signatures that
 * the NVIDIA collector (coll_gpu.c and its gpu_*.c parts) and the fake
 * library in tests/fakenvml use, written from the
 * documented ABI of libnvidia-ml.so.1 (NVML API reference, "Device Queries",
 * "Error reporting").  scopemeter never links NVML: it dlopen()s it at run
 * time, so a CPU-only build and a CPU worker need no NVIDIA package at all.
 *
 * Layouts and values are part of NVML's stable ABI; the prefix here is sm_nvml
 * so that nothing collides with a real nvml.h a user program might include.
 */
#ifndef SM_NVML_H
#define SM_NVML_H

/* nvmlReturn_t: an int-sized enum. */
typedef int sm_nvml_return;

#define SM_NVML_SUCCESS 0
#define SM_NVML_ERROR_UNINITIALIZED 1
#define SM_NVML_ERROR_INVALID_ARGUMENT 2
#define SM_NVML_ERROR_NOT_SUPPORTED 3
#define SM_NVML_ERROR_NO_PERMISSION 4
#define SM_NVML_ERROR_ALREADY_INITIALIZED 5
#define SM_NVML_ERROR_NOT_FOUND 6
#define SM_NVML_ERROR_INSUFFICIENT_SIZE 7
#define SM_NVML_ERROR_DRIVER_NOT_LOADED 9
#define SM_NVML_ERROR_TIMEOUT 10
#define SM_NVML_ERROR_LIBRARY_NOT_FOUND 12
#define SM_NVML_ERROR_FUNCTION_NOT_FOUND 13
#define SM_NVML_ERROR_GPU_IS_LOST 15
#define SM_NVML_ERROR_LIB_RM_VERSION_MISMATCH 18
#define SM_NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define SM_NVML_ERROR_UNKNOWN 999

/* nvmlDevice_t: an opaque pointer. */
typedef struct sm_nvml_device_st *sm_nvml_device;

/* nvmlMemory_t (v1): used = total - free, which counts driver-reserved memory. */
typedef struct sm_nvml_memory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} sm_nvml_memory;

/* nvmlMemory_v2_t: adds a version word and the reserved amount; used is the
 * allocated memory without the reserve (what nvidia-smi shows as "Used"). */
typedef struct sm_nvml_memory_v2 {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} sm_nvml_memory_v2;

_Static_assert(sizeof(sm_nvml_memory) == 24, "nvmlMemory_t is three 64-bit words");
_Static_assert(sizeof(sm_nvml_memory_v2) == 40 &&
                   __builtin_offsetof(sm_nvml_memory_v2, total) == 8 &&
                   __builtin_offsetof(sm_nvml_memory_v2, used) == 32,
               "nvmlMemory_v2_t: version word, padding, four 64-bit words");

/* NVML_STRUCT_VERSION(Memory, 2): the struct size in the low bits, the
 * version in the top byte.  A wrong tag gets ARGUMENT_VERSION_MISMATCH. */
#define SM_NVML_MEMORY_V2_VERSION ((unsigned int)(sizeof(sm_nvml_memory_v2) | (2u << 24)))

/* nvmlUtilization_t: percent of the last sample period. */
typedef struct sm_nvml_utilization {
    unsigned int gpu;    /* a kernel was running */
    unsigned int memory; /* device memory was read or written */
} sm_nvml_utilization;

/* Buffer sizes the API documents (NVML_*_BUFFER_SIZE). */
#define SM_NVML_DRIVER_VERSION_BUFFER 80 /* NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE */
#define SM_NVML_UUID_BUFFER 96           /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */

/* Entry points, by the exported symbol they are resolved from. */
typedef sm_nvml_return (*sm_nvml_init_fn)(void);                     /* nvmlInit_v2 */
typedef sm_nvml_return (*sm_nvml_shutdown_fn)(void);                 /* nvmlShutdown */
typedef const char *(*sm_nvml_error_string_fn)(sm_nvml_return);      /* nvmlErrorString */
typedef sm_nvml_return (*sm_nvml_count_fn)(unsigned int *);          /* nvmlDeviceGetCount_v2 */
typedef sm_nvml_return (*sm_nvml_handle_fn)(unsigned int, sm_nvml_device *);
                                                            /* nvmlDeviceGetHandleByIndex_v2 */
typedef sm_nvml_return (*sm_nvml_memory_fn)(sm_nvml_device, sm_nvml_memory *);
                                                            /* nvmlDeviceGetMemoryInfo */
typedef sm_nvml_return (*sm_nvml_memory_v2_fn)(sm_nvml_device, sm_nvml_memory_v2 *);
                                                            /* nvmlDeviceGetMemoryInfo_v2 */
typedef sm_nvml_return (*sm_nvml_utilization_fn)(sm_nvml_device, sm_nvml_utilization *);
                                                            /* nvmlDeviceGetUtilizationRates */
typedef sm_nvml_return (*sm_nvml_uint_fn)(sm_nvml_device, unsigned int *);
               /* nvmlDeviceGetPowerUsage, nvmlDeviceGetEnforcedPowerLimit (mW),
                * nvmlDeviceGetMaxMigDeviceCount, and on a MIG device handle
                * nvmlDeviceGetGpuInstanceId, nvmlDeviceGetComputeInstanceId */
typedef sm_nvml_return (*sm_nvml_string_fn)(char *, unsigned int);   /* nvmlSystemGetDriverVersion */
typedef sm_nvml_return (*sm_nvml_dev_string_fn)(sm_nvml_device, char *, unsigned int);
                                                            /* nvmlDeviceGetUUID */
typedef sm_nvml_return (*sm_nvml_mig_handle_fn)(sm_nvml_device, unsigned int, sm_nvml_device *);
                                                  /* nvmlDeviceGetMigDeviceHandleByIndex */
/* A MIG device handle is an sm_nvml_device too: NVML takes it in place of the
 * parent's for the queries it answers per instance (memory info, compute
 * processes); the board-wide ones (utilization, power, clocks, temperature,
 * ECC) answer NOT_SUPPORTED on it and are asked of the parent. */

/* ---- health fields (docs/gpu.md "Series"): enums are int-sized ------------ */

/* nvmlTemperatureSensors_t */
#define SM_NVML_TEMPERATURE_GPU 0
/* nvmlClockType_t */
#define SM_NVML_CLOCK_SM 1
#define SM_NVML_CLOCK_MEM 2
/* nvmlMemoryErrorType_t, nvmlEccCounterType_t */
#define SM_NVML_MEMORY_ERROR_TYPE_CORRECTED 0
#define SM_NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define SM_NVML_VOLATILE_ECC 0
/* nvmlPageRetirementCause_t */
#define SM_NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS 0
#define SM_NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR 1

/* nvmlClocksEventReason* (formerly nvmlClocksThrottleReason*, same bits) */
#define SM_NVML_REASON_GPU_IDLE 0x1ull
#define SM_NVML_REASON_APPLICATIONS_CLOCKS_SETTING 0x2ull
#define SM_NVML_REASON_SW_POWER_CAP 0x4ull
#define SM_NVML_REASON_HW_SLOWDOWN 0x8ull
#define SM_NVML_REASON_SYNC_BOOST 0x10ull
#define SM_NVML_REASON_SW_THERMAL_SLOWDOWN 0x20ull
#define SM_NVML_REASON_HW_THERMAL_SLOWDOWN 0x40ull
#define SM_NVML_REASON_HW_POWER_BRAKE_SLOWDOWN 0x80ull

/* nvmlFieldValue_t and the two field ids of the PCIe byte counters
 * (NVML_FI_DEV_PCIE_COUNT_TX_BYTES / _RX_BYTES; the counters may wrap). */
#define SM_NVML_FI_DEV_PCIE_COUNT_TX_BYTES 197
#define SM_NVML_FI_DEV_PCIE_COUNT_RX_BYTES 198
#define SM_NVML_VALUE_TYPE_UNSIGNED_INT 1
#define SM_NVML_VALUE_TYPE_UNSIGNED_LONG 2
#define SM_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3
typedef union sm_nvml_value {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} sm_nvml_value;
typedef struct sm_nvml_field_value {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;   /* µs since 1970 */
    long long latencyUsec;
    int valueType;         /* nvmlValueType_t */
    sm_nvml_return nvmlReturn;
    sm_nvml_value value;
} sm_nvml_field_value;
_Static_assert(sizeof(sm_nvml_field_value) == 40 &&
                   __builtin_offsetof(sm_nvml_field_value, value) == 32,
               "nvmlFieldValue_t: two words, two 64-bit words, two words, the union");

/* nvmlProcessInfo_v2_t (= nvmlProcessInfo_t of nvmlDeviceGetComputeRunningProcesses_v3):
 * the pid is the host's (NVML reads the driver). */
typedef struct sm_nvml_process_info {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* bytes; NVML_VALUE_NOT_AVAILABLE (~0) when unknown */
    unsigned int gpuInstanceId;       /* 0xFFFFFFFF without MIG */
    unsigned int computeInstanceId;
} sm_nvml_process_info;
_Static_assert(sizeof(sm_nvml_process_info) == 24 &&
                   __builtin_offsetof(sm_nvml_process_info, usedGpuMemory) == 8 &&
                   __builtin_offsetof(sm_nvml_process_info, computeInstanceId) == 20,
               "nvmlProcessInfo_v2_t: pid, padding, 64-bit memory, two instance ids");

/* Events: nvmlEventSet_t is an opaque pointer; nvmlEventData_t as
 * nvmlEventSetWait_v2 fills it (eventData is the Xid for an Xid event). */
typedef struct sm_nvml_event_set_st *sm_nvml_event_set;
#define SM_NVML_EVENT_TYPE_XID_CRITICAL_ERROR 0x8ull /* nvmlEventTypeXidCriticalError */
typedef struct sm_nvml_event_data {
    sm_nvml_device device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} sm_nvml_event_data;
_Static_assert(sizeof(sm_nvml_event_data) == 32 &&
                   __builtin_offsetof(sm_nvml_event_data, eventData) == 16,
               "nvmlEventData_t: the device pointer, two 64-bit words, two words");

/* nvmlTemperature_v1_t (= nvmlTemperature_t of nvmlDeviceGetTemperatureV):
 * the version tag and the sensor in, the degrees out (signed). */
typedef struct sm_nvml_temperature {
    unsigned int version;
    int sensorType;  /* nvmlTemperatureSensors_t */
    int temperature; /* °C */
} sm_nvml_temperature;
_Static_assert(sizeof(sm_nvml_temperature) == 12, "nvmlTemperature_v1_t is three words");
/* NVML_STRUCT_VERSION(Temperature, 1) */
#define SM_NVML_TEMPERATURE_V1_VERSION \
    ((unsigned int)(sizeof(sm_nvml_temperature) | (1u << 24)))

typedef sm_nvml_return (*sm_nvml_temperature_v_fn)(sm_nvml_device, sm_nvml_temperature *);
                                                            /* nvmlDeviceGetTemperatureV */
typedef sm_nvml_return (*sm_nvml_temperature_fn)(sm_nvml_device, int, unsigned int *);
                              /* nvmlDeviceGetTemperature (deprecated in NVML 13: the fallback) */
typedef sm_nvml_return (*sm_nvml_clock_fn)(sm_nvml_device, int, unsigned int *);
                                                            /* nvmlDeviceGetClockInfo */
typedef sm_nvml_return (*sm_nvml_reasons_fn)(sm_nvml_device, unsigned long long *);
        /* nvmlDeviceGetCurrentClocksEventReasons, nvmlDeviceGetCurrentClocksThrottleReasons */
typedef sm_nvml_return (*sm_nvml_fields_fn)(sm_nvml_device, int, sm_nvml_field_value *);
                                                            /* nvmlDeviceGetFieldValues */
typedef sm_nvml_return (*sm_nvml_ecc_fn)(sm_nvml_device, int, int, unsigned long long *);
                                                            /* nvmlDeviceGetTotalEccErrors */
typedef sm_nvml_return (*sm_nvml_remapped_fn)(sm_nvml_device, unsigned int *, unsigned int *,
                                              unsigned int *, unsigned int *);
                                                            /* nvmlDeviceGetRemappedRows */
typedef sm_nvml_return (*sm_nvml_retired_fn)(sm_nvml_device, int, unsigned int *,
                                             unsigned long long *);
                                                            /* nvmlDeviceGetRetiredPages */
typedef sm_nvml_return (*sm_nvml_processes_fn)(sm_nvml_device, unsigned int *,
                                               sm_nvml_process_info *);
                                              /* nvmlDeviceGetComputeRunningProcesses_v3 */
typedef sm_nvml_return (*sm_nvml_event_set_create_fn)(sm_nvml_event_set *);
                                                            /* nvmlEventSetCreate */
typedef sm_nvml_return (*sm_nvml_register_events_fn)(sm_nvml_device, unsigned long long,
                                                     sm_nvml_event_set);
                                                            /* nvmlDeviceRegisterEvents */
typedef sm_nvml_return (*sm_nvml_event_wait_fn)(sm_nvml_event_set, sm_nvml_event_data *,
                                                unsigned int);  /* nvmlEventSetWait_v2 */
typedef sm_nvml_return (*sm_nvml_event_set_free_fn)(sm_nvml_event_set); /* nvmlEventSetFree */

/* ---- the GPU's real work (docs/gpu.md "Detail series") ----------------------- */

/* NVLink throughput counters (nvmlDeviceGetFieldValues): cumulative KiB of
 * data (without protocol overhead), per link in scopeId, or summed over every
 * link for a scopeId of UINT_MAX (nvml.h). */
#define SM_NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138
#define SM_NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139
#define SM_NVML_NVLINK_ALL_LINKS 0xFFFFFFFFu

/* GPM (Hopper and newer): an opaque sample buffer; two samples >= 100 ms
 * apart give the metrics of the interval between them (nvmlGpmMetricsGet). */
typedef struct sm_nvml_gpm_sample_st *sm_nvml_gpm_sample;
/* nvmlGpmMetricId_t values used (percent 0.0-100.0, NVLink MiB/s) */
#define SM_NVML_GPM_METRIC_SM_UTIL 2
#define SM_NVML_GPM_METRIC_SM_OCCUPANCY 3
#define SM_NVML_GPM_METRIC_ANY_TENSOR_UTIL 5
#define SM_NVML_GPM_METRIC_DRAM_BW_UTIL 10
#define SM_NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC 60
#define SM_NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC 61
/* NVML_GPM_METRIC_MAX of nvml.h 13.5.37: the metrics[] array's length.  The
 * library reads numMetrics entries only, so a header with a smaller maximum
 * (older drivers: 98, 210) is served by this larger struct as well. */
#define SM_NVML_GPM_METRIC_MAX 477

typedef struct sm_nvml_gpm_metric {
    unsigned int metricId;     /* in */
    sm_nvml_return nvmlReturn; /* out: value valid only when SUCCESS */
    double value;              /* out */
    struct {
        char *shortName;
        char *longName;
        char *unit;
    } metricInfo;              /* out, may be NULL */
} sm_nvml_gpm_metric;
_Static_assert(sizeof(sm_nvml_gpm_metric) == 40 &&
                   __builtin_offsetof(sm_nvml_gpm_metric, value) == 8,
               "nvmlGpmMetric_t: id, rc, a double, three pointers");

typedef struct sm_nvml_gpm_metrics_get {
    unsigned int version;      /* SM_NVML_GPM_METRICS_GET_VERSION */
    unsigned int numMetrics;
    sm_nvml_gpm_sample sample1;
    sm_nvml_gpm_sample sample2;
    sm_nvml_gpm_metric metrics[SM_NVML_GPM_METRIC_MAX];
} sm_nvml_gpm_metrics_get;
#define SM_NVML_GPM_METRICS_GET_VERSION 1 /* a plain 1, not NVML_STRUCT_VERSION */

typedef struct sm_nvml_gpm_support {
    unsigned int version;           /* SM_NVML_GPM_SUPPORT_VERSION */
    unsigned int isSupportedDevice; /* out */
} sm_nvml_gpm_support;
#define SM_NVML_GPM_SUPPORT_VERSION 1

typedef sm_nvml_return (*sm_nvml_gpm_support_fn)(sm_nvml_device, sm_nvml_gpm_support *);
                                                            /* nvmlGpmQueryDeviceSupport */
typedef sm_nvml_return (*sm_nvml_gpm_alloc_fn)(sm_nvml_gpm_sample *); /* nvmlGpmSampleAlloc */
typedef sm_nvml_return (*sm_nvml_gpm_free_fn)(sm_nvml_gpm_sample);    /* nvmlGpmSampleFree */
typedef sm_nvml_return (*sm_nvml_gpm_get_fn)(sm_nvml_device, sm_nvml_gpm_sample);
                                                            /* nvmlGpmSampleGet */
typedef sm_nvml_return (*sm_nvml_gpm_mig_get_fn)(sm_nvml_device, unsigned int,
                                                 sm_nvml_gpm_sample); /* nvmlGpmMigSampleGet */
typedef sm_nvml_return (*sm_nvml_gpm_metrics_fn)(sm_nvml_gpm_metrics_get *);
                                                            /* nvmlGpmMetricsGet */
typedef sm_nvml_return (*sm_nvml_energy_fn)(sm_nvml_device, unsigned long long *);
                     /* nvmlDeviceGetTotalEnergyConsumption: mJ since the driver loaded */

#endif /* SM_NVML_H */
