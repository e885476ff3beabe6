/*
 * rest_auth.c — the credentials of the REST client (mlflow_rest.h) and the
 * Authorization header made from them, read the way MLflow's Python client
 * reads them (mlflow/utils/credentials.py, mlflow/utils/rest_utils.py):
 * Basic when both a username and a password are known
 * (MLFLOW_TRACKING_USERNAME / _PASSWORD, each falling back to
 * ~/.mlflow/credentials), else Bearer MLFLOW_TRACKING_TOKEN.
 *
 * Why apart: the credentials are read, and the Authorization value made,
 * here and nowhere else; from here the value goes only into the handle's
 * header list (rest_http.c), which is wiped when freed
 * (sm__rest_free_headers).  This file must never format a secret into a
 * message or a log line, never leave a copy unwiped (every intermediate
 * string goes through sm__rest_free_secret), and read nothing but the
 * environment and the credentials file.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rest_private.h"

/* Zeroes a secret so that the store is kept: explicit_bzero() is glibc
 * 2.25, and the wheels link against 2.17's symbols (docs/design.md
 * § Shipping).  The empty asm says it reads the memory, so the compiler
 * cannot drop the memset as a dead store before free(). */
static void wipe(void *p, size_t n)
{
    memset(p, 0, n);
    __asm__ __volatile__("" : : "r"(p) : "memory");
}

/* ~/.mlflow/credentials: an INI file whose [mlflow] section may hold
 * mlflow_tracking_username and mlflow_tracking_password (MLflow reads it
 * with configparser; keys are case-insensitive there). */
static void read_credentials_file(char **user, char **pass)
{
    const char *home = getenv("HOME");
    char path[SM_PATH_MAX], line[1024];
    FILE *f;
    int in_section = 0;

    if (!home || !*home)
        return;
    snprintf(path, sizeof path, "%s/.mlflow/credentials", home);
    f = fopen(path, "re");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char *s = line, *e, *eq, *k, *v;

        while (isspace((unsigned char)*s))
            s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char)e[-1]))
            *--e = '\0';
        if (*s == '#' || *s == ';' || !*s)
            continue;
        if (*s == '[') {
            in_section = strcmp(s, "[mlflow]") == 0;
            continue;
        }
        if (!in_section)
            continue;
        eq = strpbrk(s, "=:");
        if (!eq)
            continue;
        *eq = '\0';
        k = s;
        v = eq + 1;
        for (e = eq; e > k && isspace((unsigned char)e[-1]);)
            *--e = '\0';
        while (isspace((unsigned char)*v))
            v++;
        if (strcasecmp(k, "mlflow_tracking_username") == 0 && !*user)
            *user = strdup(v);
        else if (strcasecmp(k, "mlflow_tracking_password") == 0 && !*pass)
            *pass = strdup(v);
    }
    wipe(line, sizeof line);
    fclose(f);
}

void sm__rest_free_secret(char *s)
{
    if (s) {
        wipe(s, strlen(s));
        free(s);
    }
}

static int b64(const unsigned char *in, size_t n, char *out, size_t outlen)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;

    if (outlen < 4 * ((n + 2) / 3) + 1)
        return -ENOSPC;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = t[(v >> 18) & 63];
        out[o++] = t[(v >> 12) & 63];
        out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
    return 0;
}

/* The Authorization header line, or NULL when no credentials are set.
 * Returns -ENOMEM on allocation failure. */
int sm__rest_auth_header(char **out)
{
    char *user = NULL, *pass = NULL, *plain = NULL, *hdr = NULL, *enc = NULL;
    const char *token = sm__rest_env("MLFLOW_TRACKING_TOKEN");
    int rc = 0;

    *out = NULL;
    if (sm__rest_env("MLFLOW_TRACKING_USERNAME"))
        user = strdup(getenv("MLFLOW_TRACKING_USERNAME"));
    if (sm__rest_env("MLFLOW_TRACKING_PASSWORD"))
        pass = strdup(getenv("MLFLOW_TRACKING_PASSWORD"));
    if (!user || !pass)
        read_credentials_file(&user, &pass);
    if (user && *user && pass && *pass) {
        size_t n = strlen(user) + 1 + strlen(pass);
        size_t elen = 4 * ((n + 2) / 3) + 1;
        plain = malloc(n + 1);
        enc = malloc(elen);
        hdr = malloc(elen + 32);
        if (!plain || !enc || !hdr) {
            rc = -ENOMEM;
            goto out;
        }
        snprintf(plain, n + 1, "%s:%s", user, pass);
        b64((const unsigned char *)plain, n, enc, elen);
        snprintf(hdr, elen + 32, "Authorization: Basic %s", enc);
    } else if (token) {
        size_t n = strlen(token) + 32;
        hdr = malloc(n);
        if (!hdr) {
            rc = -ENOMEM;
            goto out;
        }
        snprintf(hdr, n, "Authorization: Bearer %s", token);
    }
    *out = hdr;
    hdr = NULL;
out:
    sm__rest_free_secret(user);
    sm__rest_free_secret(pass);
    sm__rest_free_secret(plain);
    sm__rest_free_secret(enc);
    sm__rest_free_secret(hdr);
    return rc;
}

/* Frees a header list made by c; it holds the Authorization value, so it
 * is wiped first. */
void sm__rest_free_headers(const sm_curl_api *c, struct curl_slist *headers)
{
    for (struct curl_slist *l = headers; l; l = l->next)
        if (l->data)
            wipe(l->data, strlen(l->data));
    if (headers)
        c->slist_free_all(headers);
}
