/*
 * nvml.h — the few NVML types, constants and entry-point signatures that
 * coll_gpu.c (and the fake library in tests/fakenvml) use, written from the
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
                * nvmlDeviceGetMaxMigDeviceCount */
typedef sm_nvml_return (*sm_nvml_string_fn)(char *, unsigned int);   /* nvmlSystemGetDriverVersion */
typedef sm_nvml_return (*sm_nvml_dev_string_fn)(sm_nvml_device, char *, unsigned int);
                                                            /* nvmlDeviceGetUUID */
typedef sm_nvml_return (*sm_nvml_mig_handle_fn)(sm_nvml_device, unsigned int, sm_nvml_device *);
                                                  /* nvmlDeviceGetMigDeviceHandleByIndex */

#endif /* SM_NVML_H */
