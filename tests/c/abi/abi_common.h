/*
 * abi_common.h — what both ABI programs do before and around the API: the
 * environment they run in and the guard that shows the library wrote
 * nothing past a caller's struct.  It includes no scopemeter header: one
 * program is built against 0.1's (tests/c/abi/0.1/, verbatim), the other
 * against today's (include/), and compare.py checks that they print the
 * same against the same library (docs/design.md §8).
 */
#ifndef ABI_COMMON_H
#define ABI_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GUARD_BYTE 0xa5
#define GUARD_LEN 256

static int abi_fail;

#define ABI_CHECK(cond)                                                                      \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            abi_fail = 1;                                                                    \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);         \
        }                                                                                    \
    } while (0)

static int guard_intact(const unsigned char *g)
{
    for (int i = 0; i < GUARD_LEN; i++)
        if (g[i] != GUARD_BYTE)
            return 0;
    return 1;
}

/* A rank that collects with all_workers (a pod's local rank 0), a node
 * name, the fixture machine (argv[1]). */
static void abi_env(const char *sysroot)
{
    static const char *const unset[] = {"SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                        "NODE_NAME", "SLURMD_NODENAME", "SCOPEMETER_INTERVAL",
                                        "SCOPEMETER_SAMPLES", "CUDA_VISIBLE_DEVICES",
                                        "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL",
                                        "MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING",
                                        "SCOPEMETER_NVML_LIBRARY", "MLFLOW_RUN_ID", NULL};

    for (int i = 0; unset[i]; i++)
        unsetenv(unset[i]);
    setenv("SCOPEMETER_SYSROOT", sysroot, 1);
    setenv("RANK", "4", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("WORLD_SIZE", "8", 1);
    setenv("LOCAL_WORLD_SIZE", "4", 1);
    setenv("SCOPEMETER_NODE_NAME", "node-7", 1);
}

static void abi_sleep(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The lines both programs print, as macros: the two headers name the
 * fields alike, the types differ. */
#define ABI_PRINT_PLAN(rc, p)                                                                 \
    printf("plan rc=%d collectors=%d interval=%g samples=%d period=%g gpus=%d series/c=%d "   \
           "node=%d gpu=%d container=%d series=%d charts=%d sections=%d rows/h=%g "           \
           "bytes/row=%g bytes/day=%g ranks=%d process=%d\n",                                 \
           rc, (p)->collectors, (p)->interval_s, (p)->samples, (p)->period_s,                  \
           (p)->gpus_per_collector, (p)->series_per_collector, (p)->node_series_per_collector, \
           (p)->gpu_series_per_collector, (p)->container_series_per_collector, (p)->series,    \
           (p)->charts, (p)->sections, (p)->rows_per_hour, (p)->bytes_per_row,                 \
           (p)->bytes_per_day, (p)->ranks_recorded, (p)->process_series)

/* values of the fixture's files only (statvfs reads the real "/") */
#define ABI_PRINT_SERIES(s)                                                                   \
    printf("series %s upstream=%s logged=%.1f scope=%s unit=%s source=%s\n", (s)->key,       \
           (s)->upstream, (s)->source[0] == '/' ? (s)->logged : -1.0, (s)->scope, (s)->unit,  \
           (s)->source)

#define ABI_PRINT_CGROUP(c)                                                                   \
    printf("cgroup found=%d version=%d dir=%s limiting=%s mem=%.0f cpu=%g cpu_limiting=%s "   \
           "why=%s tag=%s\n", (c)->found, (c)->version, (c)->dir ? (c)->dir : "-",            \
           (c)->limiting_dir ? (c)->limiting_dir : "-", (c)->mem_limit_bytes,                 \
           (c)->cpu_limit_cores, (c)->cpu_limiting_dir ? (c)->cpu_limiting_dir : "-",         \
           (c)->why ? (c)->why : "-", (c)->tag ? (c)->tag : "-")

/* Distinct keys seen in a drain, printed sorted: the same set through 0.1's
 * drain and today's. */
#define ABI_KEYS_MAX 512
static char *abi_keys[ABI_KEYS_MAX];
static int abi_nkeys;

static void abi_key_seen(const char *kind, const char *key)
{
    char buf[600];

    snprintf(buf, sizeof buf, "%s %s", kind, key);
    for (int i = 0; i < abi_nkeys; i++)
        if (strcmp(abi_keys[i], buf) == 0)
            return;
    if (abi_nkeys < ABI_KEYS_MAX)
        abi_keys[abi_nkeys++] = strdup(buf);
}

static int abi_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void abi_print_keys(void)
{
    qsort(abi_keys, (size_t)abi_nkeys, sizeof abi_keys[0], abi_cmp);
    for (int i = 0; i < abi_nkeys; i++) {
        printf("drained %s\n", abi_keys[i]);
        free(abi_keys[i]);
    }
}

#endif
