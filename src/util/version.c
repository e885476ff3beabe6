/* version.c — the library's version and its error messages. */
#include <string.h>

#include "internal.h"

const char *sm_version(void)
{
    return SM_VERSION;
}

/* The API's codes are negative errno values (scopemeter.h), so strerror
 * says them; SM_NOT_COLLECTING is the one positive code. */
const char *sm_strerror(int code)
{
    if (code == 0)
        return "success";
    if (code == SM_NOT_COLLECTING)
        return "this process does not collect (docs/design.md §4)";
    return strerror(code < 0 ? -code : code);
}
