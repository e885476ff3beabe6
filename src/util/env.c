/*
 * env.c — numbers from the environment (SCOPEMETER_INTERVAL, MLflow's
 * MLFLOW_HTTP_REQUEST_TIMEOUT, torchelastic's TORCHELASTIC_RESTART_COUNT):
 * the one number parser's grammar and line (number.h) plus what a bad value
 * does, said once: the variable, its value, and what is used instead
 * (docs/design.md §8, "Numbers").  A bad setting never stops recording and is
 * never dropped without a word.  The launcher's rank variables are not read
 * here: a bad one means the process records nothing (identity.c).
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

int sm__env_number(const char *name, const sm_num_spec *spec, double *out, const char *instead,
                  atomic_flag *once)
{
    const char *s = getenv(name);
    char err[256];

    if (!s || !*s)
        return 0;
    if (sm__num_parse(s, spec, out, err, sizeof err) == 0)
        return 1;
    if (!once || !atomic_flag_test_and_set(once))
        sm__log(SM_WARN, "%s; %s", err, instead);
    return -1;
}
