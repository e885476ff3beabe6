/* version.c — the library's version string. */
#include "internal.h"

const char *sm_version(void)
{
    return SM_VERSION;
}
