/* test_names.c — the naming rule of docs/design.md §2. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "internal.h"

static const char *name(const char *key, int rank, const char *node)
{
    static char buf[512];
    int rc = sm_series_name(key, rank, node, buf, sizeof buf);
    return rc == 0 ? buf : (rc == -EINVAL ? "EINVAL" : "ERR");
}

/* The tier sm_series_name must write for a node name, computed here from
 * docs/design.md §2 independently of names.c: [A-Za-z0-9._-] kept, the rest
 * '_'; a lossy or longer-than-180 name keeps 171 characters (all of a lossy
 * one up to 171) and ends in "-" + FNV-1a (32 bit) of the full name. */
static void expected_tier(const char *node, char *out, size_t cap)
{
    size_t nl = strlen(node), keep = nl, lossy = 0, i;
    uint32_t h = 2166136261u;

    for (i = 0; i < nl; i++) {
        char c = node[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '.' || c == '_';
        lossy += !ok;
        h = (h ^ (unsigned char)c) * 16777619u;
    }
    if ((nl > 180 || lossy) && nl > 171)
        keep = 171;
    for (i = 0; i < keep && i + 1 < cap; i++) {
        char c = node[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '.' || c == '_';
        out[i] = ok ? c : '_';
    }
    out[i] = '\0';
    if (keep < nl || lossy)
        snprintf(out + i, cap - i, "-%08x", h);
}

/* name -> parse over every family, with and without a node, ranks 0..40 and
 * the largest: parse gives back the upstream key, the scoped key, the tier
 * as written, the rank and the scope (sm_series_parse inverts exactly). */
static void round_trips(void)
{
    static const char *const keys[] = {
        "cpu_utilization_percentage", "system_memory_usage_megabytes",
        "disk_available_megabytes", "network_receive_megabytes", "gpu_0_utilization_percentage",
        "gpu_12_power_usage_watts", "container_memory_usage_megabytes", "process_count",
        "cpu_x", "disk_a.b-c d", /* a future key of a known family, odd characters */
    };
    static const char *const scopes[] = {"node", "node", "rootfs", "pod", "gpu",
                                         "gpu", "container", "process", "node", "rootfs"};
    static const char *const scoped_want[] = {
        "node_cpu_utilization_percentage", "node_memory_usage_megabytes",
        "rootfs_available_megabytes", "network_receive_megabytes",
        "gpu_0_utilization_percentage", "gpu_12_power_usage_watts",
        "container_memory_usage_megabytes", "process_count", "node_cpu_x", "rootfs_a.b-c d",
    };
    char longname[254], lossy_long[254];
    const char *nodes[] = {
        NULL, "", "gpu-node-1", "gpu-node_1.a", "a/b c", "x", "0",
        "\xe6\x9d\xb1\xe4\xba\xac\xe3\x83\x8e\xe3\x83\xbc\xe3\x83\x89" "1", /* 東京ノード1 */
        longname, lossy_long, "rank0", "node/rank5",
    };
    int ranks[44];

    memset(longname, 'n', 253);
    longname[253] = '\0';
    memset(lossy_long, 'q', 175);
    lossy_long[3] = ' ';
    lossy_long[175] = '\0';
    for (int i = 0; i <= 40; i++)
        ranks[i] = i;
    ranks[41] = 99999, ranks[42] = 1000000, ranks[43] = 2147483647;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        for (size_t n = 0; n < sizeof nodes / sizeof nodes[0]; n++)
            for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++) {
                char key[512], up[256], sc[256], node[256], want[256] = "";
                const char *scope = NULL;
                int rank = -1;
                int tier = strcmp(scopes[k], "node") == 0 || strcmp(scopes[k], "rootfs") == 0;

                CHECK_EQ_INT(sm_series_name(keys[k], ranks[r], nodes[n], key, sizeof key), 0);
                CHECK_EQ_INT(sm_series_parse(key, up, sizeof up, sc, sizeof sc, node,
                                             sizeof node, &rank, &scope), 0);
                CHECK_EQ_STR(up, keys[k]);
                CHECK_EQ_STR(sc, scoped_want[k]);
                CHECK_EQ_INT(rank, ranks[r]);
                CHECK_EQ_STR(scope, scopes[k]);
                if (tier && nodes[n] && nodes[n][0])
                    expected_tier(nodes[n], want, sizeof want);
                CHECK_EQ_STR(node, want);
            }
}

/* sm__shown: the one escaping of names (docs/design.md §2) */
static void test_shown(void)
{
    char out[64], small[6];

    CHECK_EQ_STR(sm__shown(out, sizeof out, "../../ evil/node\nx"), "../../ evil/node\\nx");
    CHECK_EQ_STR(sm__shown(out, sizeof out, "a\tb\rc\\d\x01\x1b\x7f"),
                 "a\\tb\\rc\\\\d\\x01\\x1b\\x7f");
    CHECK_EQ_STR(sm__shown(out, sizeof out, "\xe6\x9d\xb1\xe4\xba\xac-1"), "\xe6\x9d\xb1\xe4\xba\xac-1");
    CHECK_EQ_STR(sm__shown(out, sizeof out, NULL), "");
    /* cut before an escape that does not fit, never inside it */
    CHECK_EQ_STR(sm__shown(small, sizeof small, "abc\x01"), "abc");
    CHECK_EQ_STR(sm__shown(small, sizeof small, "abcdefg"), "abcde");
}

int main(void)
{
    test_shown();
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
    /* the RDMA ports given to the pod: its scope, never the node tier */
    CHECK_EQ_STR(sm_series_scope("rdma_receive_megabytes"), "pod");
    CHECK_EQ_STR(name("rdma_transmit_megabytes", 417, "gpu-node-1"),
                 "system/rdma_transmit_megabytes/rank417");
    CHECK_EQ_STR(sm_series_scope("gpu_0_memory_usage_megabytes"), "gpu");
    CHECK_EQ_STR(sm_series_scope("container_memory_usage_percentage"), "container");
    CHECK(sm_series_scope("memory_usage") == NULL);
    round_trips();
    /* keys sm_series_name never writes are -EINVAL, never a guess */
    {
        static const char *const bad[] = {
            "", "system/", "system/node_cpu_x", "system/node_cpu_x/rank", "system/node_cpu_x/rank-1",
            "system/node_cpu_x/rank01", "system/node_cpu_x/rank+1", "system/node_cpu_x/rank1x",
            "system/node_cpu_x/rank2147483648", "system/node_cpu_x/rank 1",
            "system/node_cpu_/rank0",              /* a family's prefix alone */
            "system/cpu_utilization_percentage/rank0", /* an upstream key, not a logged one */
            "system/memory_usage/rank0",           /* no family */
            "system/gpu_0_utilization_percentage/n1/rank0", /* a tier where the family has none */
            "system/network_receive_megabytes/n1/rank0",
            "system/container_memory_usage_megabytes/n1/rank0",
            "system/process_count/n1/rank0",
            "system/node_cpu_x//rank0",            /* an empty tier */
            "system/node_cpu_x/a b/rank0",         /* a character the tier never holds */
            "system/node_cpu_x/a/b/rank0",         /* two tiers */
            "node_cpu_x/rank0", "System/node_cpu_x/rank0", "system/node_cpu_x/Rank0",
            "system/node_cpu_x/rank0/", "cpu_utilization_percentage",
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            int rc = sm_series_parse(bad[i], NULL, 0, NULL, 0, NULL, 0, NULL, NULL);
            if (rc != -EINVAL)
                fprintf(stderr, "parse(\"%s\") = %d\n", bad[i], rc);
            CHECK_EQ_INT(rc, -EINVAL);
        }
        CHECK_EQ_INT(sm_series_parse(NULL, NULL, 0, NULL, 0, NULL, 0, NULL, NULL), -EINVAL);
    }
    /* a '/' in an upstream key would make the name ambiguous: refused */
    CHECK_EQ_STR(name("cpu_a/b", 0, "n1"), "EINVAL");
    CHECK_EQ_STR(name("gpu_0/x", 0, NULL), "EINVAL");
    /* longer than MLflow's 250: no engine wrote it */
    {
        char key[300];
        memset(key, 0, sizeof key);
        strcpy(key, "system/node_cpu_x/");
        memset(key + strlen(key), 'n', 230);
        strcat(key, "/rank0");
        CHECK_EQ_INT(sm_series_parse(key, NULL, 0, NULL, 0, NULL, 0, NULL, NULL), -EINVAL);
        /* a tier of 200 characters (engines before the 180 rule) still parses */
        memset(key, 0, sizeof key);
        strcpy(key, "system/node_cpu_x/");
        memset(key + strlen(key), 'n', 200);
        strcat(key, "/rank3");
        {
            char node[256];
            int rank = -1;
            CHECK_EQ_INT(sm_series_parse(key, NULL, 0, NULL, 0, node, sizeof node, &rank, NULL),
                         0);
            CHECK_EQ_INT((int)strlen(node), 200);
            CHECK_EQ_INT(rank, 3);
        }
    }
    /* outputs that do not fit: -ENOSPC, any of them may be NULL */
    {
        char up[8], node[4];
        int rank = -1;
        CHECK_EQ_INT(sm_series_parse("system/node_cpu_utilization_percentage/n1/rank0", up,
                                     sizeof up, NULL, 0, NULL, 0, NULL, NULL), -ENOSPC);
        CHECK_EQ_INT(sm_series_parse("system/node_cpu_x/node1/rank0", NULL, 0, NULL, 0, node,
                                     sizeof node, NULL, NULL), -ENOSPC);
        CHECK_EQ_INT(sm_series_parse("system/node_cpu_x/n1/rank7", NULL, 0, NULL, 0, NULL, 0,
                                     &rank, NULL), 0);
        CHECK_EQ_INT(rank, 7);
    }
    return CHECK_DONE();
}
