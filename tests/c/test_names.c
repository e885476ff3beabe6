/* test_names.c — the naming rule of docs/design.md §2. */
#include <errno.h>

#include <string.h>
#include "check.h"
#include "internal.h"

static const char *name(const char *key, int rank, const char *node)
{
    static char buf[512];
    int rc = sm_series_name(key, rank, node, buf, sizeof buf);
    return rc == 0 ? buf : (rc == -EINVAL ? "EINVAL" : "ERR");
}

int main(void)
{
    /* every upstream MLflow key, one rank, no node */
    CHECK_EQ_STR(name("cpu_utilization_percentage", 0, NULL),
                 "system/node_cpu_utilization_percentage/rank0");
    CHECK_EQ_STR(name("system_memory_usage_megabytes", 3, ""),
                 "system/node_memory_usage_megabytes/rank3");
    CHECK_EQ_STR(name("system_memory_usage_percentage", 0, NULL),
                 "system/node_memory_usage_percentage/rank0");
    CHECK_EQ_STR(name("disk_usage_megabytes", 0, NULL), "system/rootfs_usage_megabytes/rank0");
    CHECK_EQ_STR(name("disk_usage_percentage", 0, NULL), "system/rootfs_usage_percentage/rank0");
    CHECK_EQ_STR(name("disk_available_megabytes", 0, NULL),
                 "system/rootfs_available_megabytes/rank0");
    CHECK_EQ_STR(name("network_receive_megabytes", 1, NULL),
                 "system/network_receive_megabytes/rank1");
    CHECK_EQ_STR(name("gpu_0_utilization_percentage", 2, NULL),
                 "system/gpu_0_utilization_percentage/rank2");
    CHECK_EQ_STR(name("container_memory_usage_megabytes", 0, NULL),
                 "system/container_memory_usage_megabytes/rank0");
    /* process_: the tree of a rank, per rank, never a node tier (docs/design.md §9) */
    CHECK_EQ_STR(name("process_count", 0, NULL), "system/process_count/rank0");
    CHECK_EQ_STR(name("process_memory_megabytes", 7, "gpu-node-1"),
                 "system/process_memory_megabytes/rank7");
    CHECK_EQ_STR(name("process_cpu_utilization_percentage", 2, "gpu-node-1"),
                 "system/process_cpu_utilization_percentage/rank2");
    CHECK_EQ_STR(sm_series_scope("process_count"), "process");
    CHECK_EQ_STR(sm_series_scope("system/process_count/rank0"), "process");
    CHECK_EQ_STR(name("process_", 0, NULL), "EINVAL");

    /* node tier: node_* and rootfs_* only */
    CHECK_EQ_STR(name("system_memory_usage_percentage", 5, "gpu-node-1"),
                 "system/node_memory_usage_percentage/gpu-node-1/rank5");
    CHECK_EQ_STR(name("disk_available_megabytes", 5, "gpu-node-1"),
                 "system/rootfs_available_megabytes/gpu-node-1/rank5");
    CHECK_EQ_STR(name("network_transmit_megabytes", 5, "gpu-node-1"),
                 "system/network_transmit_megabytes/rank5");
    CHECK_EQ_STR(name("gpu_1_power_usage_watts", 5, "gpu-node-1"),
                 "system/gpu_1_power_usage_watts/rank5");
    CHECK_EQ_STR(name("container_cpu_utilization_percentage", 5, "gpu-node-1"),
                 "system/container_cpu_utilization_percentage/rank5");
    /* a future key of a known family follows the rule by itself */
    CHECK_EQ_STR(name("cpu_steal_percentage", 0, "n1"), "system/node_cpu_steal_percentage/n1/rank0");
    /* a node name cannot open a new UI section; what it lost to '_' is kept
     * distinct by its hash (FNV-1a of the full name) */
    {
        char k1[256], k2[256];
        const char *seg1, *seg2;
        CHECK_EQ_INT(sm_series_name("cpu_utilization_percentage", 0, "a/b c", k1, sizeof k1), 0);
        CHECK(strncmp(k1, "system/node_cpu_utilization_percentage/a_b_c-", 45) == 0);
        CHECK_EQ_INT((int)strlen(k1), 45 + 8 + 6);
        CHECK_EQ_INT(sm_series_name("cpu_utilization_percentage", 0,
                                    "\xe6\x9d\xb1\xe4\xba\xac\xe3\x83\x8e\xe3\x83\xbc"
                                    "\xe3\x83\x89" "1", k1, sizeof k1), 0); /* 東京ノード1 */
        CHECK_EQ_INT(sm_series_name("cpu_utilization_percentage", 0,
                                    "\xe5\xa4\xa7\xe9\x98\xaa\xe3\x83\x8e\xe3\x83\xbc"
                                    "\xe3\x83\x89" "1", k2, sizeof k2), 0); /* 大阪ノード1 */
        seg1 = k1 + strlen("system/node_cpu_utilization_percentage/");
        seg2 = k2 + strlen("system/node_cpu_utilization_percentage/");
        CHECK(strncmp(seg1, "_______________1-", 17) == 0);
        CHECK(strcmp(seg1, seg2) != 0); /* two nodes, two sections */
        /* a clean name is kept as it is, without a suffix */
        CHECK_EQ_STR(name("cpu_utilization_percentage", 0, "gpu-node_1.a"),
                     "system/node_cpu_utilization_percentage/gpu-node_1.a/rank0");
        /* a lossy name of 175 characters still fits the 180 of the tier */
        {
            char node[176], k3[512];
            memset(node, 'x', 175);
            node[0] = ' ';
            node[175] = '\0';
            CHECK_EQ_INT(sm_series_name("disk_usage_megabytes", 0, node, k3, sizeof k3), 0);
            CHECK_EQ_INT((int)strlen(k3), (int)strlen("system/rootfs_usage_megabytes//rank0") + 180);
        }
    }

    /* families no rule covers are errors, never silent passes */
    CHECK_EQ_STR(name("memory_usage_megabytes", 0, NULL), "EINVAL");
    CHECK_EQ_STR(name("node_cpu_utilization_percentage", 0, NULL), "EINVAL");
    CHECK_EQ_STR(name("cpu_", 0, NULL), "EINVAL");
    CHECK_EQ_STR(name("", 0, NULL), "EINVAL");
    CHECK_EQ_STR(name("CPU_utilization", 0, NULL), "EINVAL");
    CHECK_EQ_STR(name("cpu_utilization_percentage", -1, NULL), "EINVAL");

    /* a node name of any legal length (Kubernetes: 253) keeps every key
     * within MLflow's 250 characters (docs/design.md §2) */
    {
        char node[254], node2[254], k1[512], k2[512], k3[512];
        memset(node, 'n', 253);
        node[253] = '\0';
        memcpy(node2, node, sizeof node);
        node2[252] = 'm'; /* differs only at its end */
        CHECK_EQ_INT(sm_series_name("cpu_utilization_percentage", 2147483647, node, k1,
                                    sizeof k1), 0);
        CHECK(strlen(k1) <= 250);
        CHECK_EQ_INT(sm_series_name("system_memory_usage_percentage", 0, node, k2, sizeof k2), 0);
        CHECK_EQ_INT(sm_series_name("system_memory_usage_percentage", 0, node2, k3, sizeof k3), 0);
        CHECK(strcmp(k2, k3) != 0);
        /* the same node segment in every series and rank */
        CHECK(strncmp(k1 + strlen("system/node_cpu_utilization_percentage/"),
                      k2 + strlen("system/node_memory_usage_percentage/"), 180) == 0);
        CHECK_EQ_INT((int)(strchr(k2 + strlen("system/node_memory_usage_percentage/"), '/') -
                           (k2 + strlen("system/node_memory_usage_percentage/"))), 180);
        /* up to 180 characters the name is kept as it is */
        node[180] = '\0';
        CHECK_EQ_INT(sm_series_name("disk_usage_megabytes", 7, node, k1, sizeof k1), 0);
        CHECK(strstr(k1, node) != NULL && strlen(k1) == strlen("system/rootfs_usage_megabytes//rank7") + 180);
    }

    /* a buffer too small is -ENOSPC, and nothing past it is written */
    {
        char small[20];
        CHECK_EQ_INT(sm_series_name("cpu_utilization_percentage", 0, NULL, small, sizeof small),
                     -ENOSPC);
    }

    CHECK_EQ_STR(sm_series_scope("cpu_utilization_percentage"), "node");
    CHECK_EQ_STR(sm_series_scope("system/rootfs_usage_megabytes/rank0"), "rootfs");
    CHECK_EQ_STR(sm_series_scope("network_receive_megabytes"), "pod");
    CHECK_EQ_STR(sm_series_scope("gpu_0_memory_usage_megabytes"), "gpu");
    CHECK_EQ_STR(sm_series_scope("container_memory_usage_percentage"), "container");
    CHECK(sm_series_scope("memory_usage") == NULL);
    return CHECK_DONE();
}
