/* test_identity.c — rank and node from the launchers' environments (§4). */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "internal.h"

static const char *vars[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_LOCALID",
    "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE",
    "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SCOPEMETER_NODE_NAME", "NODE_NAME", "SLURMD_NODENAME",
};

static void clear(void)
{
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

int main(void)
{
    sm_identity id;

    clear();
    CHECK_EQ_INT(sm_identity_from_env(&id), 0);
    CHECK_EQ_INT(id.rank, 0);
    CHECK_EQ_INT(id.world_size, 1);
    CHECK_EQ_INT(id.local_world_size, 1);
    CHECK_EQ_STR(id.launcher, "none");
    CHECK_EQ_STR(id.node, "");

    /* torchrun */
    setenv("RANK", "3", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("WORLD_SIZE", "8", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("SLURM_PROCID", "7", 1); /* torchrun wins over Slurm */
    sm_identity_from_env(&id);
    CHECK_EQ_INT(id.rank, 3);
    CHECK_EQ_INT(id.local_rank, 1);
    CHECK_EQ_INT(id.world_size, 8);
    CHECK_EQ_INT(id.local_world_size, 2);
    CHECK_EQ_STR(id.launcher, "torchrun");

    /* missing LOCAL_RANK counts as 0 */
    unsetenv("LOCAL_RANK");
    sm_identity_from_env(&id);
    CHECK_EQ_INT(id.local_rank, 0);

    /* a malformed launcher variable is never rank 0 of 1 in disguise
     * (docs/design.md §4): -EINVAL, a line naming it, and no collecting */
    {
        static const char *const bad[][2] = {
            {"RANK", "abc"}, {"RANK", "-1"}, {"RANK", "0x1"}, {"RANK", " 1"}, {"RANK", "\t1"}, {"RANK", "\n1"},
            {"WORLD_SIZE", "0"}, {"WORLD_SIZE", "two"}, {"LOCAL_RANK", "abc"},
            {"LOCAL_WORLD_SIZE", "0"},
            /* the one number parser's grammar (src/util/number.h) */
            {"RANK", "-0"}, {"RANK", "+1"}, {"RANK", "1 "}, {"RANK", "1.0"}, {"RANK", "1e0"},
            {"RANK", "2147483648"}, {"LOCAL_WORLD_SIZE", "2x"},
        };
        char shown[64];
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            clear();
            setenv("RANK", "1", 1);
            setenv("WORLD_SIZE", "2", 1);
            setenv(bad[i][0], bad[i][1], 1);
            CHECK_EQ_INT(sm_identity_from_env(&id), -EINVAL);
            CHECK(strstr(id.invalid, bad[i][0]) != NULL);
            /* the value as it was given, escaped ("\\n1"): the line stays one line */
            CHECK(strstr(id.invalid, sm__shown(shown, sizeof shown, bad[i][1])) != NULL);
            CHECK(!strchr(id.invalid, '\n') && !strchr(id.invalid, '\t'));
            CHECK_EQ_INT(id.rank, 0);
            CHECK_EQ_INT(sm_collects(&id, 0, NULL, 0), 0);
            CHECK_EQ_INT(sm_collects(&id, 1, NULL, 0), 0);
        }
        /* one rule whatever else is set (issue 46 item 9): the same values
         * with the rank variable unset, alone or beside another launcher's
         * rank, are refused too; the old code passed them as rank 0 of 1 */
        static const char *const alone[][2] = {
            {"WORLD_SIZE", "0"}, {"WORLD_SIZE", "abc"}, {"LOCAL_RANK", "abc"},
            {"LOCAL_RANK", "-1"}, {"LOCAL_WORLD_SIZE", "0"}, {"SLURM_NTASKS", "0"},
            {"SLURM_LOCALID", "x"}, {"OMPI_COMM_WORLD_SIZE", "-2"}, {"PMI_SIZE", "0"},
        };
        for (int with = 0; with < 2; with++) {
            for (size_t i = 0; i < sizeof alone / sizeof alone[0]; i++) {
                clear();
                if (with) /* another launcher's valid rank: still refused */
                    setenv(strcmp(alone[i][0], "SLURM_NTASKS") && strcmp(alone[i][0],
                           "SLURM_LOCALID") ? "SLURM_PROCID" : "OMPI_COMM_WORLD_RANK", "0", 1);
                setenv(alone[i][0], alone[i][1], 1);
                CHECK_EQ_INT(sm_identity_from_env(&id), -EINVAL);
                CHECK(strstr(id.invalid, alone[i][0]) != NULL);
                CHECK_EQ_INT(sm_collects(&id, 0, NULL, 0), 0);
            }
        }
        /* well-formed values without a rank stay unread, as before */
        clear();
        setenv("WORLD_SIZE", "4", 1);
        setenv("LOCAL_RANK", "1", 1);
        CHECK_EQ_INT(sm_identity_from_env(&id), 0);
        CHECK_EQ_STR(id.invalid, "");
        CHECK_EQ_INT(id.rank, 0);
        CHECK_EQ_INT(id.world_size, 1);
        /* RANK=5 WORLD_SIZE=2 is no world size 6 */
        clear();
        setenv("RANK", "5", 1);
        setenv("WORLD_SIZE", "2", 1);
        CHECK_EQ_INT(sm_identity_from_env(&id), -EINVAL);
        CHECK(strstr(id.invalid, "RANK=5") != NULL);
        /* LOCAL_RANK beyond an explicit LOCAL_WORLD_SIZE */
        clear();
        setenv("RANK", "3", 1);
        setenv("WORLD_SIZE", "4", 1);
        setenv("LOCAL_RANK", "2", 1);
        setenv("LOCAL_WORLD_SIZE", "2", 1);
        CHECK_EQ_INT(sm_identity_from_env(&id), -EINVAL);
        /* a valid one says nothing */
        setenv("LOCAL_RANK", "1", 1);
        CHECK_EQ_INT(sm_identity_from_env(&id), 0);
        CHECK_EQ_STR(id.invalid, "");
        CHECK_EQ_INT(sm_collects(&id, 1, NULL, 0), 0); /* local rank 1 */
        CHECK_EQ_INT(sm_collects(&id, 0, NULL, 0), 0); /* rank 3 */
        setenv("LOCAL_RANK", "0", 1);
        sm_identity_from_env(&id);
        CHECK_EQ_INT(sm_collects(&id, 1, NULL, 0), 1);
    }

    /* Slurm when no torchrun variable is set */
    clear();
    setenv("SLURM_PROCID", "7", 1);
    setenv("SLURM_LOCALID", "2", 1);
    setenv("SLURM_NTASKS", "16", 1);
    setenv("SLURM_NTASKS_PER_NODE", "4(x4)", 1);
    sm_identity_from_env(&id);
    CHECK_EQ_STR(id.launcher, "slurm");
    CHECK_EQ_INT(id.rank, 7);
    CHECK_EQ_INT(id.local_rank, 2);
    CHECK_EQ_INT(id.world_size, 16);
    CHECK_EQ_INT(id.local_world_size, 4);
    /* sbatch -N4 -n32 sets only SLURM_TASKS_PER_NODE */
    unsetenv("SLURM_NTASKS_PER_NODE");
    setenv("SLURM_TASKS_PER_NODE", "8(x4)", 1);
    sm_identity_from_env(&id);
    CHECK_EQ_INT(id.local_world_size, 8);
    setenv("SLURM_TASKS_PER_NODE", "3,2", 1);
    sm_identity_from_env(&id);
    CHECK_EQ_INT(id.local_world_size, 3);
    /* the explicit per-node count wins */
    setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_NTASKS_PER_NODE", "2", 1);
    sm_identity_from_env(&id);
    CHECK_EQ_INT(id.local_world_size, 2);

    clear();
    setenv("OMPI_COMM_WORLD_RANK", "5", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "6", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
    sm_identity_from_env(&id);
    CHECK_EQ_STR(id.launcher, "openmpi");
    CHECK_EQ_INT(id.rank, 5);
    CHECK_EQ_INT(id.local_world_size, 3);

    clear();
    setenv("PMI_RANK", "2", 1);
    setenv("PMI_SIZE", "4", 1);
    sm_identity_from_env(&id);
    CHECK_EQ_STR(id.launcher, "pmi");
    CHECK_EQ_INT(id.rank, 2);
    CHECK_EQ_INT(id.world_size, 4);

    /* no world size given: at least rank + 1, never a divide by zero later */
    clear();
    setenv("RANK", "4", 1);
    CHECK_EQ_INT(sm_identity_from_env(&id), 0);
    CHECK_EQ_INT(id.world_size, 5);
    /* Slurm's uneven "2,3": local rank 2 on the second node is valid */
    clear();
    setenv("SLURM_PROCID", "4", 1);
    setenv("SLURM_NTASKS", "5", 1);
    setenv("SLURM_LOCALID", "2", 1);
    setenv("SLURM_TASKS_PER_NODE", "2,3", 1);
    CHECK_EQ_INT(sm_identity_from_env(&id), 0);

    /* node name preference */
    clear();
    setenv("SLURMD_NODENAME", "slurm-n1", 1);
    sm_identity_from_env(&id);
    CHECK_EQ_STR(id.node, "slurm-n1");
    setenv("NODE_NAME", "gpu-node-1", 1);
    sm_identity_from_env(&id);
    CHECK_EQ_STR(id.node, "gpu-node-1");
    CHECK_EQ_STR(id.node_source, "NODE_NAME");
    setenv("SCOPEMETER_NODE_NAME", "override", 1);
    sm_identity_from_env(&id);
    CHECK_EQ_STR(id.node, "override");

    /* the opaque handle of scopemeter.h reads the same as the fill */
    {
        sm_identity *h = NULL;
        setenv("RANK", "5", 1);
        setenv("LOCAL_RANK", "1", 1);
        setenv("WORLD_SIZE", "8", 1);
        setenv("LOCAL_WORLD_SIZE", "4", 1);
        CHECK_EQ_INT(sm_identity_read_env(&h), 0);
        CHECK_EQ_INT(sm_identity_rank(h), 5);
        CHECK_EQ_INT(sm_identity_local_rank(h), 1);
        CHECK_EQ_INT(sm_identity_world_size(h), 8);
        CHECK_EQ_INT(sm_identity_local_world_size(h), 4);
        CHECK_EQ_STR(sm_identity_node(h), "override");
        CHECK_EQ_STR(sm_identity_node_source(h), "SCOPEMETER_NODE_NAME");
        CHECK_EQ_STR(sm_identity_launcher(h), "torchrun");
        CHECK_EQ_STR(sm_identity_invalid(h), "");
        sm_identity_free(h);
        /* malformed: -EINVAL, and the handle says why */
        setenv("RANK", "abc", 1);
        CHECK_EQ_INT(sm_identity_read_env(&h), -EINVAL);
        CHECK(h != NULL && strstr(sm_identity_invalid(h), "RANK='abc'") != NULL);
        CHECK_EQ_INT(sm_identity_rank(h), 0);
        sm_identity_free(h);
        CHECK_EQ_INT(sm_identity_read_env(NULL), -EINVAL);
    }
    return CHECK_DONE();
}
