/*
 * body.c — the runs/log-batch body written straight from the ring's
 * entries into one buffer: no JSON tree, no per-value printf (body.h says
 * why).  It writes JSON and never reads it; jansson stays the reader of
 * MLflow's replies and the JSONL sink's writer.
 *
 * What it must never do: write something the jansson build would not have
 * meant.  Texts are sanitised exactly as the jansson build's json_text did
 * (jansson's own UTF-8 rule, src/utf.c of jansson 2.14), escaped as
 * jansson's dump_string escapes them, and every number reads back as the
 * very double or integer (tests/c/test_body.c compares both builds parsed,
 * on random batches).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "mlflow_rest.h"

#define TEXT_MAX 1023 /* bytes of a key or text kept (the jansson build's buffer) */

/* Length of the UTF-8 sequence at s[0..n) as jansson accepts it
 * (utf8_check_first + utf8_check_full: no overlong forms, no surrogates,
 * nothing above U+10FFFF), 0 when it does not. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    uint32_t v;
    size_t len;

    if (c < 0x80)
        return 1;
    if (c < 0xC2)
        return 0; /* a continuation byte, or an overlong form of ASCII */
    if (c < 0xE0) {
        len = 2;
        v = c & 0x1F;
    } else if (c < 0xF0) {
        len = 3;
        v = c & 0x0F;
    } else if (c < 0xF5) {
        len = 4;
        v = c & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (len == 2 && v < 0x80) ||
        (len == 3 && v < 0x800) || (len == 4 && v < 0x10000))
        return 0;
    return len;
}

static int utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, l;

    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        if (!(l = utf8_len(u + i, n - i)))
            return 0;
        i += l;
    }
    return 1;
}

size_t sm__body_text(char *out, const char *s)
{
    size_t n = strnlen(s, TEXT_MAX), o = 0, i = 0;

    if (utf8_valid(s, n)) {
        memcpy(out, s, n);
        return n;
    }
    /* keep ASCII and sequences well formed in shape (lead byte and its
     * continuation bytes), '?' for every other byte */
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4 : 0;
        int ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        if (!ok) {
            out[o++] = '?';
            i++;
            continue;
        }
        memcpy(out + o, s + i, len);
        o += len;
        i += len;
    }
    /* overlong forms or surrogates survived the shape check: ASCII only */
    if (!utf8_valid(out, o))
        for (i = 0; i < o; i++)
            if ((unsigned char)out[i] >= 0x80)
                out[i] = '?';
    return o;
}

/* s[0..n) as a JSON string, escaped as jansson's dump_string escapes it
 * (", \, and control characters; nothing else). */
static char *put_escaped(char *p, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";

    *p++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *p++ = (char)c;
            continue;
        }
        *p++ = '\\';
        switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\b': *p++ = 'b'; break;
        case '\f': *p++ = 'f'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        default:
            *p++ = 'u';
            *p++ = '0';
            *p++ = '0';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
    }
    *p++ = '"';
    return p;
}

/* A key or tag text: valid UTF-8 (every key scopemeter makes) is escaped
 * straight from the ring; anything else is sanitised first. */
static char *put_text(char *p, const char *s)
{
    char tmp[TEXT_MAX + 1];
    size_t n = strnlen(s, TEXT_MAX);

    if (utf8_valid(s, n))
        return put_escaped(p, s, n);
    return put_escaped(p, tmp, sm__body_text(tmp, s));
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return put_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(p, (uint64_t)v);
}

size_t sm__body_real(char *out, double v)
{
    double a = fabs(v);
    char *p = out, tmp[40];
    int len, point = 0;

    if (signbit(v))
        *p++ = '-';
    /* Every logged value is round(x, 1) (sm__round1): the double nearest to
     * k/10 for an integer k.  Below 2^49, k < 2^53 is exact and the k found
     * is checked: k / 10.0 is the correctly rounded quotient, the double
     * nearest to the decimal k/10, which is also what any correct reader
     * makes of the text "k/10" — so the text reads back as exactly a. */
    if (a < 0x1p49) {
        uint64_t k = (uint64_t)(a * 10.0 + 0.5);
        if ((double)k / 10.0 == a) {
            p = put_u64(p, k / 10);
            *p++ = '.';
            *p++ = (char)('0' + k % 10);
            return (size_t)(p - out);
        }
    }
    /* anything else: 17 significant digits read back exactly (jansson's
     * own format), the locale's decimal point made '.' */
    len = snprintf(tmp, sizeof tmp, "%.17g", a);
    for (int i = 0; i < len; i++) {
        char c = tmp[i];
        if ((c >= '0' && c <= '9') || c == 'e' || c == '-' || c == '+') {
            *p++ = c;
        } else if (!point) {
            *p++ = '.';
            point = 1;
        }
        if (c == 'e')
            point = 1;
    }
    if (!point) {
        *p++ = '.';
        *p++ = '0';
    }
    return (size_t)(p - out);
}

/* room for n more bytes and the NUL */
static int reserve(sm_body *b, size_t n)
{
    size_t need = b->len + n + 1, cap = b->cap ? b->cap : 4096;
    char *buf;

    if (need <= b->cap)
        return 0;
    while (cap < need)
        cap *= 2;
    buf = realloc(b->buf, cap);
    if (!buf)
        return -ENOMEM;
    b->buf = buf;
    b->cap = cap;
    return 0;
}

#define PUT_LIT(p, s) (memcpy((p), (s), sizeof(s) - 1), (p) + sizeof(s) - 1)

/* records [0, used) of one try: metrics, then tags (kind 0 / 1) */
static int put_records(sm_body *b, const sm_ring *ring, const sm_entry *recs, size_t used,
                       int tags, int64_t step_base)
{
    int first = 1;

    for (size_t i = 0; i < used; i++) {
        const sm_entry *r = &recs[i];
        char *p;

        const char *key, *text = NULL;
        size_t room;

        if ((r->text != 0) != tags || (!tags && !isfinite(r->value)))
            continue;
        /* escaped, a byte takes at most 6 (\u00XX); numbers and names 128 */
        key = sm__ring_str(ring, r->key);
        room = 6 * strnlen(key, TEXT_MAX) + 128;
        if (tags) {
            text = sm__ring_str(ring, r->text);
            room += 6 * strnlen(text, TEXT_MAX) + 2;
        }
        if (reserve(b, room) < 0)
            return -ENOMEM;
        p = b->buf + b->len;
        if (!first)
            *p++ = ',';
        first = 0;
        p = PUT_LIT(p, "{\"key\":");
        p = put_text(p, key);
        p = PUT_LIT(p, ",\"value\":");
        if (tags) {
            p = put_text(p, text);
        } else {
            p += sm__body_real(p, r->value);
            p = PUT_LIT(p, ",\"timestamp\":");
            p = put_i64(p, r->timestamp_ms);
            p = PUT_LIT(p, ",\"step\":");
            p = put_i64(p, step_base + r->step);
        }
        *p++ = '}';
        b->len = (size_t)(p - b->buf);
    }
    return 0;
}

int sm__body_admit(const sm_entry *r, size_t *nm, size_t *nt)
{
    if (*nm + *nt >= SM_MLFLOW_MAX_ENTITIES)
        return -1;
    if (r->text != 0) {
        if (*nt >= SM_MLFLOW_MAX_TAGS)
            return -1;
        ++*nt;
        return 1;
    }
    if (*nm >= SM_MLFLOW_MAX_METRICS)
        return -1;
    if (!isfinite(r->value))
        return 0;
    ++*nm;
    return 1;
}

int sm__body_log_batch(sm_body *b, const char *run_id, const sm_ring *ring,
                      const sm_entry *recs, size_t n, int64_t step_base)
{
    size_t nm, nt, i;
    char *p;

    for (;;) {
        /* which records go: MLflow's limits, in the order the ring holds them */
        b->nonfinite = 0;
        b->nonfinite_key = NULL;
        nm = nt = 0;
        for (i = 0; i < n; i++) {
            int admit = sm__body_admit(&recs[i], &nm, &nt);
            if (admit < 0)
                break;
            if (admit == 0 && b->nonfinite++ == 0)
                b->nonfinite_key = sm__ring_str(ring, recs[i].key);
        }
        b->used = i;
        b->shipped = nm + nt;
        b->len = 0;
        if (reserve(b, 6 * strnlen(run_id, TEXT_MAX) + 64) < 0)
            return -ENOMEM;
        p = PUT_LIT(b->buf, "{\"run_id\":");
        p = put_text(p, run_id);
        p = PUT_LIT(p, ",\"metrics\":[");
        b->len = (size_t)(p - b->buf);
        if (put_records(b, ring, recs, i, 0, step_base) < 0 || reserve(b, 64) < 0)
            return -ENOMEM;
        p = PUT_LIT(b->buf + b->len, "],\"params\":[],\"tags\":[");
        b->len = (size_t)(p - b->buf);
        if (put_records(b, ring, recs, i, 1, step_base) < 0 || reserve(b, 8) < 0)
            return -ENOMEM;
        p = PUT_LIT(b->buf + b->len, "]}");
        *p = '\0';
        b->len = (size_t)(p - b->buf);
        /* MLflow refuses a request over 1 MB: take half as many records */
        if (b->len <= SM_MLFLOW_MAX_BODY || i <= 1)
            return 0;
        n = i / 2;
    }
}

void sm__body_free(sm_body *b)
{
    free(b->buf);
    b->buf = NULL;
    b->len = b->cap = 0;
}
