/*
 * zalloc.c — zeroed memory whose pages cost nothing until written.
 *
 * Why not calloc: the library runs inside training processes, and there
 * glibc has usually raised its mmap threshold (a freed large block raises
 * it, mallopt(3) M_MMAP_THRESHOLD), so a large calloc comes from the heap
 * and is cleared byte by byte: every page resident, and still resident after
 * free().  The structs that go through here are sparse: a collector's state
 * or the cgroup resolver's work area holds 4 KiB path buffers of which a few
 * dozen bytes are used, read buffers sized for the largest file, the ring
 * sized for an outage.  An anonymous mapping is the kernel's zero page until
 * written (mmap(2)) and is returned whole by munmap.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

/* Under AddressSanitizer the heap, whose every block it guards; mmap'd
 * memory would hide an overflow of a collector's state from it. */
#if defined(__SANITIZE_ADDRESS__)
#define SM_ZALLOC_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SM_ZALLOC_HEAP 1
#endif
#endif

#ifdef SM_ZALLOC_HEAP
void *sm__zalloc(size_t n)
{
    return calloc(1, n ? n : 1);
}

void sm__zfree(void *p)
{
    free(p);
}
#else

/* The length, before the block: sm__zfree needs it for munmap. */
#define HDR 16u

void *sm__zalloc(size_t n)
{
    unsigned char *p;

    if (n > SIZE_MAX - HDR)
        return NULL;
    p = mmap(NULL, n + HDR, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memcpy(p, &n, sizeof n);
    return p + HDR;
}

void sm__zfree(void *ptr)
{
    unsigned char *p = ptr;
    size_t n;

    if (!p)
        return;
    p -= HDR;
    memcpy(&n, p, sizeof n);
    munmap(p, n + HDR);
}
#endif
