/*
 * nvml_abi.c — src/collect/nvml.h (the project's own NVML declarations) against
 * NVIDIA's nvml.h, at compile time.  scopemeter never includes NVIDIA's
 * header (the engine dlopens NVML and declares only what it calls), so a
 * wrong layout, constant or prototype there would reach a user's GPU
 * unnoticed: this file is the check, and it must never be linked into
 * anything shipped.  tests/meson.build compiles it with NVIDIA_NVML_H set to
 * the header find_header.py found; without one the test is skipped.
 *
 * What is checked, for every entry point gpu_nvml.c resolves:
 *   - NVIDIA's prototype is the one written in the FN row (in NVIDIA's
 *     types: __builtin_types_compatible_p on the declared function);
 *   - our function-pointer type is the same row in our types;
 *   - each pair of the row has the same size and alignment (enums are
 *     int-sized, nvmlDevice_t is a pointer);
 * and every struct's size and field offsets, every constant's value.
 */
#include <stddef.h>

#include NVIDIA_NVML_H
#include "../../../src/collect/nvml.h"

#define SAME(a, b) _Static_assert((a) == (b), #a " == " #b)
#define SAME_TYPE(a, b)                                                                      \
    _Static_assert(sizeof(a) == sizeof(b) && _Alignof(a) == _Alignof(b),                       \
                   #a " is laid out as " #b)
#define COMPAT(a, b) _Static_assert(__builtin_types_compatible_p(a, b), #a " is " #b)

/* A parameter: (our type, NVIDIA's type). */
#define OURS_(a, b) a
#define THEIRS_(a, b) b
#define OURS(p) OURS_ p
#define THEIRS(p) THEIRS_ p
#define PAIR_(a, b) SAME_TYPE(a, b);
#define PAIR(p) PAIR_ p

#define FN1(sym, our_fn, p1)                                                                 \
    COMPAT(__typeof__(&sym), nvmlReturn_t (*)(THEIRS(p1)));                                 \
    COMPAT(our_fn, sm_nvml_return (*)(OURS(p1)));                                           \
    PAIR(p1)
#define FN2(sym, our_fn, p1, p2)                                                             \
    COMPAT(__typeof__(&sym), nvmlReturn_t (*)(THEIRS(p1), THEIRS(p2)));                     \
    COMPAT(our_fn, sm_nvml_return (*)(OURS(p1), OURS(p2)));                                 \
    PAIR(p1) PAIR(p2)
#define FN3(sym, our_fn, p1, p2, p3)                                                         \
    COMPAT(__typeof__(&sym), nvmlReturn_t (*)(THEIRS(p1), THEIRS(p2), THEIRS(p3)));         \
    COMPAT(our_fn, sm_nvml_return (*)(OURS(p1), OURS(p2), OURS(p3)));                       \
    PAIR(p1) PAIR(p2) PAIR(p3)
#define FN4(sym, our_fn, p1, p2, p3, p4)                                                     \
    COMPAT(__typeof__(&sym),                                                                 \
           nvmlReturn_t (*)(THEIRS(p1), THEIRS(p2), THEIRS(p3), THEIRS(p4)));                \
    COMPAT(our_fn, sm_nvml_return (*)(OURS(p1), OURS(p2), OURS(p3), OURS(p4)));             \
    PAIR(p1) PAIR(p2) PAIR(p3) PAIR(p4)
#define FN5(sym, our_fn, p1, p2, p3, p4, p5)                                                 \
    COMPAT(__typeof__(&sym), nvmlReturn_t (*)(THEIRS(p1), THEIRS(p2), THEIRS(p3),          \
                                               THEIRS(p4), THEIRS(p5)));                     \
    COMPAT(our_fn, sm_nvml_return (*)(OURS(p1), OURS(p2), OURS(p3), OURS(p4), OURS(p5)));   \
    PAIR(p1) PAIR(p2) PAIR(p3) PAIR(p4) PAIR(p5)

#define DEV (sm_nvml_device, nvmlDevice_t)
#define UINTP (unsigned int *, unsigned int *)

SAME_TYPE(sm_nvml_return, nvmlReturn_t);

/* ---- entry points ----------------------------------------------------------- */
COMPAT(__typeof__(&nvmlInit_v2), nvmlReturn_t (*)(void));
COMPAT(sm_nvml_init_fn, sm_nvml_return (*)(void));
COMPAT(__typeof__(&nvmlShutdown), nvmlReturn_t (*)(void));
COMPAT(sm_nvml_shutdown_fn, sm_nvml_return (*)(void));
COMPAT(__typeof__(&nvmlErrorString), const char *(*)(nvmlReturn_t));
COMPAT(sm_nvml_error_string_fn, const char *(*)(sm_nvml_return));
FN1(nvmlDeviceGetCount_v2, sm_nvml_count_fn, UINTP)
FN2(nvmlDeviceGetHandleByIndex_v2, sm_nvml_handle_fn, (unsigned int, unsigned int),
    (sm_nvml_device *, nvmlDevice_t *))
FN2(nvmlDeviceGetMemoryInfo, sm_nvml_memory_fn, DEV, (sm_nvml_memory *, nvmlMemory_t *))
FN2(nvmlDeviceGetMemoryInfo_v2, sm_nvml_memory_v2_fn, DEV,
    (sm_nvml_memory_v2 *, nvmlMemory_v2_t *))
FN2(nvmlDeviceGetUtilizationRates, sm_nvml_utilization_fn, DEV,
    (sm_nvml_utilization *, nvmlUtilization_t *))
FN2(nvmlDeviceGetPowerUsage, sm_nvml_uint_fn, DEV, UINTP)
FN2(nvmlDeviceGetEnforcedPowerLimit, sm_nvml_uint_fn, DEV, UINTP)
FN2(nvmlDeviceGetMaxMigDeviceCount, sm_nvml_uint_fn, DEV, UINTP)
FN2(nvmlSystemGetDriverVersion, sm_nvml_string_fn, (char *, char *),
    (unsigned int, unsigned int))
FN3(nvmlDeviceGetUUID, sm_nvml_dev_string_fn, DEV, (char *, char *),
    (unsigned int, unsigned int))
FN3(nvmlDeviceGetMigDeviceHandleByIndex, sm_nvml_mig_handle_fn, DEV,
    (unsigned int, unsigned int), (sm_nvml_device *, nvmlDevice_t *))
/* a MIG device handle's instance ids (the pre-470 MIG-GPU-<uuid>/<gi>/<ci> entry) */
FN2(nvmlDeviceGetGpuInstanceId, sm_nvml_uint_fn, DEV, UINTP)
FN2(nvmlDeviceGetComputeInstanceId, sm_nvml_uint_fn, DEV, UINTP)
/* the health fields */
FN2(nvmlDeviceGetTemperatureV, sm_nvml_temperature_v_fn, DEV,
    (sm_nvml_temperature *, nvmlTemperature_t *))
FN3(nvmlDeviceGetTemperature, sm_nvml_temperature_fn, DEV, (int, nvmlTemperatureSensors_t),
    UINTP)
FN3(nvmlDeviceGetClockInfo, sm_nvml_clock_fn, DEV, (int, nvmlClockType_t), UINTP)
FN2(nvmlDeviceGetCurrentClocksEventReasons, sm_nvml_reasons_fn, DEV,
    (unsigned long long *, unsigned long long *))
FN2(nvmlDeviceGetCurrentClocksThrottleReasons, sm_nvml_reasons_fn, DEV,
    (unsigned long long *, unsigned long long *))
FN3(nvmlDeviceGetFieldValues, sm_nvml_fields_fn, DEV, (int, int),
    (sm_nvml_field_value *, nvmlFieldValue_t *))
FN4(nvmlDeviceGetTotalEccErrors, sm_nvml_ecc_fn, DEV, (int, nvmlMemoryErrorType_t),
    (int, nvmlEccCounterType_t), (unsigned long long *, unsigned long long *))
FN5(nvmlDeviceGetRemappedRows, sm_nvml_remapped_fn, DEV, UINTP, UINTP, UINTP, UINTP)
FN4(nvmlDeviceGetRetiredPages, sm_nvml_retired_fn, DEV, (int, nvmlPageRetirementCause_t),
    UINTP, (unsigned long long *, unsigned long long *))
FN3(nvmlDeviceGetComputeRunningProcesses_v3, sm_nvml_processes_fn, DEV, UINTP,
    (sm_nvml_process_info *, nvmlProcessInfo_t *))
FN1(nvmlEventSetCreate, sm_nvml_event_set_create_fn, (sm_nvml_event_set *, nvmlEventSet_t *))
FN3(nvmlDeviceRegisterEvents, sm_nvml_register_events_fn, DEV,
    (unsigned long long, unsigned long long), (sm_nvml_event_set, nvmlEventSet_t))
FN3(nvmlEventSetWait_v2, sm_nvml_event_wait_fn, (sm_nvml_event_set, nvmlEventSet_t),
    (sm_nvml_event_data *, nvmlEventData_t *), (unsigned int, unsigned int))
FN1(nvmlEventSetFree, sm_nvml_event_set_free_fn, (sm_nvml_event_set, nvmlEventSet_t))
/* the GPU's real work and its energy */
#define GPMS (sm_nvml_gpm_sample, nvmlGpmSample_t)
FN2(nvmlGpmQueryDeviceSupport, sm_nvml_gpm_support_fn, DEV,
    (sm_nvml_gpm_support *, nvmlGpmSupport_t *))
FN1(nvmlGpmSampleAlloc, sm_nvml_gpm_alloc_fn, (sm_nvml_gpm_sample *, nvmlGpmSample_t *))
FN1(nvmlGpmSampleFree, sm_nvml_gpm_free_fn, GPMS)
FN2(nvmlGpmSampleGet, sm_nvml_gpm_get_fn, DEV, GPMS)
FN3(nvmlGpmMigSampleGet, sm_nvml_gpm_mig_get_fn, DEV, (unsigned int, unsigned int), GPMS)
FN1(nvmlGpmMetricsGet, sm_nvml_gpm_metrics_fn, (sm_nvml_gpm_metrics_get *, nvmlGpmMetricsGet_t *))
FN2(nvmlDeviceGetTotalEnergyConsumption, sm_nvml_energy_fn, DEV,
    (unsigned long long *, unsigned long long *))

/* ---- structs ------------------------------------------------------------------ */
#define FIELD(ours, theirs, f)                                                               \
    _Static_assert(offsetof(ours, f) == offsetof(theirs, f) &&                               \
                       sizeof(((ours *)0)->f) == sizeof(((theirs *)0)->f),                   \
                   #ours "." #f " is where " #theirs " has it")
SAME_TYPE(sm_nvml_memory, nvmlMemory_t);
FIELD(sm_nvml_memory, nvmlMemory_t, total);
FIELD(sm_nvml_memory, nvmlMemory_t, free);
FIELD(sm_nvml_memory, nvmlMemory_t, used);
SAME_TYPE(sm_nvml_memory_v2, nvmlMemory_v2_t);
FIELD(sm_nvml_memory_v2, nvmlMemory_v2_t, version);
FIELD(sm_nvml_memory_v2, nvmlMemory_v2_t, total);
FIELD(sm_nvml_memory_v2, nvmlMemory_v2_t, reserved);
FIELD(sm_nvml_memory_v2, nvmlMemory_v2_t, free);
FIELD(sm_nvml_memory_v2, nvmlMemory_v2_t, used);
SAME(SM_NVML_MEMORY_V2_VERSION, nvmlMemory_v2);
/* nvmlDeviceGetTemperatureV takes nvmlTemperature_t, which is v1 */
COMPAT(nvmlTemperature_t, nvmlTemperature_v1_t);
SAME_TYPE(sm_nvml_temperature, nvmlTemperature_v1_t);
FIELD(sm_nvml_temperature, nvmlTemperature_v1_t, version);
FIELD(sm_nvml_temperature, nvmlTemperature_v1_t, sensorType);
FIELD(sm_nvml_temperature, nvmlTemperature_v1_t, temperature);
COMPAT(__typeof__(((sm_nvml_temperature *)0)->temperature),
       __typeof__(((nvmlTemperature_v1_t *)0)->temperature)); /* signed, as NVIDIA's */
SAME(SM_NVML_TEMPERATURE_V1_VERSION, nvmlTemperature_v1);
SAME_TYPE(sm_nvml_utilization, nvmlUtilization_t);
FIELD(sm_nvml_utilization, nvmlUtilization_t, gpu);
FIELD(sm_nvml_utilization, nvmlUtilization_t, memory);
SAME_TYPE(sm_nvml_value, nvmlValue_t);
SAME_TYPE(sm_nvml_field_value, nvmlFieldValue_t);
FIELD(sm_nvml_field_value, nvmlFieldValue_t, fieldId);
FIELD(sm_nvml_field_value, nvmlFieldValue_t, scopeId);
FIELD(sm_nvml_field_value, nvmlFieldValue_t, timestamp);
FIELD(sm_nvml_field_value, nvmlFieldValue_t, latencyUsec);
FIELD(sm_nvml_field_value, nvmlFieldValue_t, valueType);
FIELD(sm_nvml_field_value, nvmlFieldValue_t, nvmlReturn);
FIELD(sm_nvml_field_value, nvmlFieldValue_t, value);
/* the versioned process info: _v3 takes nvmlProcessInfo_t, which is v2,
 * and not v1 (whose size differs: a v1 buffer would be overrun) */
COMPAT(nvmlProcessInfo_t, nvmlProcessInfo_v2_t);
SAME_TYPE(sm_nvml_process_info, nvmlProcessInfo_v2_t);
_Static_assert(sizeof(sm_nvml_process_info) != sizeof(nvmlProcessInfo_v1_t),
               "v1 and v2 process infos differ in size");
FIELD(sm_nvml_process_info, nvmlProcessInfo_v2_t, pid);
FIELD(sm_nvml_process_info, nvmlProcessInfo_v2_t, usedGpuMemory);
FIELD(sm_nvml_process_info, nvmlProcessInfo_v2_t, gpuInstanceId);
FIELD(sm_nvml_process_info, nvmlProcessInfo_v2_t, computeInstanceId);
SAME_TYPE(sm_nvml_gpm_metric, nvmlGpmMetric_t);
FIELD(sm_nvml_gpm_metric, nvmlGpmMetric_t, metricId);
FIELD(sm_nvml_gpm_metric, nvmlGpmMetric_t, nvmlReturn);
FIELD(sm_nvml_gpm_metric, nvmlGpmMetric_t, value);
FIELD(sm_nvml_gpm_metric, nvmlGpmMetric_t, metricInfo);
SAME_TYPE(sm_nvml_gpm_metrics_get, nvmlGpmMetricsGet_t);
FIELD(sm_nvml_gpm_metrics_get, nvmlGpmMetricsGet_t, version);
FIELD(sm_nvml_gpm_metrics_get, nvmlGpmMetricsGet_t, numMetrics);
FIELD(sm_nvml_gpm_metrics_get, nvmlGpmMetricsGet_t, sample1);
FIELD(sm_nvml_gpm_metrics_get, nvmlGpmMetricsGet_t, sample2);
FIELD(sm_nvml_gpm_metrics_get, nvmlGpmMetricsGet_t, metrics);
SAME_TYPE(sm_nvml_gpm_support, nvmlGpmSupport_t);
FIELD(sm_nvml_gpm_support, nvmlGpmSupport_t, version);
FIELD(sm_nvml_gpm_support, nvmlGpmSupport_t, isSupportedDevice);
SAME_TYPE(sm_nvml_event_data, nvmlEventData_t);
FIELD(sm_nvml_event_data, nvmlEventData_t, device);
FIELD(sm_nvml_event_data, nvmlEventData_t, eventType);
FIELD(sm_nvml_event_data, nvmlEventData_t, eventData);
FIELD(sm_nvml_event_data, nvmlEventData_t, gpuInstanceId);
FIELD(sm_nvml_event_data, nvmlEventData_t, computeInstanceId);

/* ---- constants ------------------------------------------------------------- */
SAME(SM_NVML_SUCCESS, NVML_SUCCESS);
SAME(SM_NVML_ERROR_UNINITIALIZED, NVML_ERROR_UNINITIALIZED);
SAME(SM_NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_INVALID_ARGUMENT);
SAME(SM_NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_SUPPORTED);
SAME(SM_NVML_ERROR_NO_PERMISSION, NVML_ERROR_NO_PERMISSION);
SAME(SM_NVML_ERROR_ALREADY_INITIALIZED, NVML_ERROR_ALREADY_INITIALIZED);
SAME(SM_NVML_ERROR_NOT_FOUND, NVML_ERROR_NOT_FOUND);
SAME(SM_NVML_ERROR_INSUFFICIENT_SIZE, NVML_ERROR_INSUFFICIENT_SIZE);
SAME(SM_NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_DRIVER_NOT_LOADED);
SAME(SM_NVML_ERROR_TIMEOUT, NVML_ERROR_TIMEOUT);
SAME(SM_NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_LIBRARY_NOT_FOUND);
SAME(SM_NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_FUNCTION_NOT_FOUND);
SAME(SM_NVML_ERROR_GPU_IS_LOST, NVML_ERROR_GPU_IS_LOST);
SAME(SM_NVML_ERROR_LIB_RM_VERSION_MISMATCH, NVML_ERROR_LIB_RM_VERSION_MISMATCH);
SAME(SM_NVML_ERROR_ARGUMENT_VERSION_MISMATCH, NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
SAME(SM_NVML_ERROR_UNKNOWN, NVML_ERROR_UNKNOWN);
SAME(SM_NVML_DRIVER_VERSION_BUFFER, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
SAME(SM_NVML_UUID_BUFFER, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
SAME(SM_NVML_TEMPERATURE_GPU, NVML_TEMPERATURE_GPU);
SAME(SM_NVML_CLOCK_SM, NVML_CLOCK_SM);
SAME(SM_NVML_CLOCK_MEM, NVML_CLOCK_MEM);
SAME(SM_NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_CORRECTED);
SAME(SM_NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED);
SAME(SM_NVML_VOLATILE_ECC, NVML_VOLATILE_ECC);
SAME(SM_NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
     NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS);
SAME(SM_NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
     NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR);
SAME(SM_NVML_REASON_GPU_IDLE, (unsigned long long)nvmlClocksEventReasonGpuIdle);
SAME(SM_NVML_REASON_APPLICATIONS_CLOCKS_SETTING,
     (unsigned long long)nvmlClocksEventReasonApplicationsClocksSetting);
SAME(SM_NVML_REASON_SW_POWER_CAP, (unsigned long long)nvmlClocksEventReasonSwPowerCap);
SAME(SM_NVML_REASON_HW_SLOWDOWN, (unsigned long long)nvmlClocksThrottleReasonHwSlowdown);
SAME(SM_NVML_REASON_SYNC_BOOST, (unsigned long long)nvmlClocksEventReasonSyncBoost);
SAME(SM_NVML_REASON_SW_THERMAL_SLOWDOWN,
     (unsigned long long)nvmlClocksEventReasonSwThermalSlowdown);
SAME(SM_NVML_REASON_HW_THERMAL_SLOWDOWN,
     (unsigned long long)nvmlClocksThrottleReasonHwThermalSlowdown);
SAME(SM_NVML_REASON_HW_POWER_BRAKE_SLOWDOWN,
     (unsigned long long)nvmlClocksThrottleReasonHwPowerBrakeSlowdown);
SAME(SM_NVML_FI_DEV_PCIE_COUNT_TX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES);
SAME(SM_NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_RX_BYTES);
SAME(SM_NVML_VALUE_TYPE_UNSIGNED_INT, NVML_VALUE_TYPE_UNSIGNED_INT);
SAME(SM_NVML_VALUE_TYPE_UNSIGNED_LONG, NVML_VALUE_TYPE_UNSIGNED_LONG);
SAME(SM_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
SAME(SM_NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX);
SAME(SM_NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX);
SAME(SM_NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_SM_UTIL);
SAME(SM_NVML_GPM_METRIC_SM_OCCUPANCY, NVML_GPM_METRIC_SM_OCCUPANCY);
SAME(SM_NVML_GPM_METRIC_ANY_TENSOR_UTIL, NVML_GPM_METRIC_ANY_TENSOR_UTIL);
SAME(SM_NVML_GPM_METRIC_DRAM_BW_UTIL, NVML_GPM_METRIC_DRAM_BW_UTIL);
SAME(SM_NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC);
SAME(SM_NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC);
SAME(SM_NVML_GPM_METRIC_MAX, NVML_GPM_METRIC_MAX);
SAME(SM_NVML_GPM_METRICS_GET_VERSION, NVML_GPM_METRICS_GET_VERSION);
SAME(SM_NVML_GPM_SUPPORT_VERSION, NVML_GPM_SUPPORT_VERSION);
SAME(SM_NVML_EVENT_TYPE_XID_CRITICAL_ERROR, (unsigned long long)nvmlEventTypeXidCriticalError);

int main(void)
{
    return 0; /* everything above is checked by the compiler */
}
