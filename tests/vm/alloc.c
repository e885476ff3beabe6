/*
 * alloc.c — a real allocation inside a cgroup, for the guest cases
 * (tests/py/test_vm_cgroup2.py): `alloc MIB [READY [GO]]` touches MIB MiB of
 * anonymous memory one page at a time (the kernel charges a page when it is
 * first written, not when it is mapped), then creates READY and waits until
 * GO exists; with no READY it exits at once.  C, not Python: it starts in
 * milliseconds under TCG and its footprint is the allocation, nothing else.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    size_t len, page = (size_t)sysconf(_SC_PAGESIZE);
    struct timespec nap = {0, 20 * 1000 * 1000};
    char *p;
    int fd;

    if (argc < 2) {
        fprintf(stderr, "usage: alloc MIB [READY [GO]]\n");
        return 2;
    }
    len = (size_t)strtoul(argv[1], NULL, 10) << 20;
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (size_t i = 0; i < len; i += page)
        p[i] = (char)(i / page + 1); /* not zero: never a shared zero page */
    if (argc < 3)
        return 0;
    fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(argv[2]);
        return 1;
    }
    close(fd);
    while (argc > 3 && access(argv[3], F_OK) != 0)
        nanosleep(&nap, NULL);
    return p[0] != 1; /* 0: the pages stay live to the end */
}
