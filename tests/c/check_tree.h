/*
 * check_tree.h — the collector tests' fake machines: a temporary tree under
 * /tmp that a test writes kernel files into (the collector reads it through
 * its sysroot, sm_ctx.sysroot), and one collector opened, sampled and closed
 * on it or on a fixture machine (tests/fixtures).  Beside check.h, which the
 * tests of pure functions include alone: this one needs the engine's
 * internal types.  A tree must never outlive its test: each ends with
 * rm_tree().
 */
#ifndef SM_CHECK_TREE_H
#define SM_CHECK_TREE_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

static char fixtures[2048]; /* $SM_FIXTURES: the fixture machines */
static char tmp[256];       /* the temporary tree of the test running */

/* A machine whose files lie under root, with the fixtures' MemTotal. */
static inline void ctx_for(sm_ctx *ctx, const char *root)
{
    memset(ctx, 0, sizeof *ctx);
    snprintf(ctx->sysroot, sizeof ctx->sysroot, "%s", root);
    ctx->mem_total = 503ull << 30; /* the fixtures' MemTotal */
}

/* The fixture machine tests/fixtures/NAME. */
static inline void ctx_fixture(sm_ctx *ctx, const char *name)
{
    char root[3000];
    snprintf(root, sizeof root, "%s/%s", fixtures, name);
    ctx_for(ctx, root);
}

/* A fresh empty tree /tmp/NAME-XXXXXX in tmp; exits when none can be made. */
static inline void tree_new(const char *name)
{
    snprintf(tmp, sizeof tmp, "/tmp/%s-XXXXXX", name);
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        exit(2);
    }
}

/* Writes the file tmp/relpath (its folders made as needed) from fmt. */
static inline void put(const char *relpath, const char *fmt, ...)
{
    char path[1024], *slash;
    va_list ap;
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", tmp, relpath);
    for (slash = strchr(path + strlen(tmp) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(path, 0755);
        *slash = '/';
    }
    /* rewrite in place (same inode): a kept descriptor sees the new text */
    f = fopen(path, "r+");
    if (!f)
        f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    if (ftruncate(fileno(f), 0) < 0)
        exit(2);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

static inline void rm(const char *relpath)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", tmp, relpath);
    unlink(path);
}

static inline void rm_tree(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", tmp);
}

static inline int contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle)) {
        fprintf(stderr, "  \"%s\"\n  does not contain \"%s\"\n", hay, needle);
        return 0;
    }
    return 1;
}

/* ---- one collector on a machine ------------------------------------------- */

/* What a collector said: open's result, the last sample, the last tags. */
struct run {
    int rc;
    sm_opened res;
    sm_points pts;
    char msg[300];
    sm_tags tags;
};

/* Opens collector c on ctx's machine; NULL (r->rc saying why) when it does
 * not open. */
static inline void *coll_open(const sm_collector_ops *c, const sm_ctx *ctx, struct run *r)
{
    void *state = calloc(1, c->state_size);
    memset(r, 0, sizeof *r);
    r->rc = c->open(state, ctx, &r->res);
    if (r->rc != 0) {
        free(state);
        return NULL;
    }
    return state;
}

static inline int coll_sample(const sm_collector_ops *c, void *state, struct run *r)
{
    r->pts.n = 0;
    r->msg[0] = '\0';
    return c->sample(state, &r->pts, r->msg, sizeof r->msg);
}

static inline void coll_close(const sm_collector_ops *c, void *state)
{
    if (state) {
        c->close(state);
        free(state);
    }
}

/* the last sample's point key, or NULL */
static inline const sm_point *point(const struct run *r, const char *key)
{
    for (size_t i = 0; i < r->pts.n; i++)
        if (strcmp(r->pts.v[i].key, key) == 0)
            return &r->pts.v[i];
    return NULL;
}

/* the last sample's value of key, or -1 when it has none */
static inline double value(const struct run *r, const char *key)
{
    const sm_point *p = point(r, key);
    return p ? p->value : -1;
}

#endif
