/*
 * parse_spool.c — the spool file's bytes (parse.h has the layout; the file
 * is docs/design.md §6, "The spool").  Pure: it reads and writes buffers,
 * never a file, so the writer (src/mlflow/spool.c), `scopemeter sync` and the
 * fuzzer (tests/fuzz/fuzz_spool.c) share one definition of every byte.
 * Every field a reader takes is bounded by len first: a truncated, corrupt
 * or foreign file is a code, never a read past the end.
 */
#include <errno.h>
#include <string.h>

#include "parse.h"

static const char MAGIC[8] = {'S', 'M', 'S', 'P', 'O', 'O', 'L', '\0'};

/* CRC-32 (IEEE 802.3, reflected 0xEDB88320, as zlib's crc32), four bits a
 * step: a 16-entry table, no initialisation. */
uint32_t sm__crc32(uint32_t crc, const void *buf, size_t len)
{
    static const uint32_t t[16] = {
        0x00000000, 0x1db71064, 0x3b6e20c8, 0x26d930ac, 0x76dc4190, 0x6b6b51f4,
        0x4db26158, 0x5005713c, 0xedb88320, 0xf00f9344, 0xd6d6a3e8, 0xcb61b38c,
        0x9b64c2b0, 0x86d3d2d4, 0xa00ae278, 0xbdbdf21c};
    const unsigned char *p = buf;

    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        crc = (crc >> 4) ^ t[crc & 15];
        crc = (crc >> 4) ^ t[crc & 15];
    }
    return ~crc;
}

static uint64_t get_le(const char *p, int n)
{
    uint64_t v = 0;

    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | (unsigned char)p[i];
    return v;
}

static void put_le(char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++, v >>= 8)
        p[i] = (char)(v & 0xff);
}

static uint32_t header_crc(const char *buf, size_t hlen)
{
    return sm__crc32(sm__crc32(0, buf, 16), buf + 36, hlen - 36);
}

int sm__spool_header_parse(const char *buf, size_t len, sm_spool_header *h)
{
    size_t n;

    memset(h, 0, sizeof *h);
    if (memcmp(buf, MAGIC, len < sizeof MAGIC ? len : sizeof MAGIC) != 0)
        return -EBADMSG;
    if (len < 12)
        return -ENODATA;
    h->version = (uint32_t)get_le(buf + 8, 4);
    if (h->version != SM_SPOOL_VERSION)
        return -EPROTO;
    if (len < SM_SPOOL_HEADER_FIXED)
        return -ENODATA;
    h->len = (uint32_t)get_le(buf + 12, 4);
    n = (size_t)get_le(buf + 52, 2);
    if (n == 0 || n > SM_SPOOL_RUN_MAX || h->len != SM_SPOOL_HEADER_FIXED + n)
        return -EBADMSG;
    if (len < h->len)
        return -ENODATA;
    if ((uint32_t)get_le(buf + 32, 4) != header_crc(buf, h->len))
        return -EILSEQ;
    h->rank = (int32_t)(uint32_t)get_le(buf + 36, 4);
    h->pid = (uint32_t)get_le(buf + 40, 4);
    h->step_base = (int64_t)get_le(buf + 44, 8);
    memcpy(h->run, buf + 54, n);
    h->run[n] = '\0';
    if (memchr(h->run, '\0', n))
        return -EBADMSG;
    /* a commit whose CRC fails (a torn rewrite): start at the first frame,
     * which re-sends what was delivered, a no-op in MLflow's store */
    h->commit_ok = (uint32_t)get_le(buf + 28, 4) == sm__crc32(0, buf + 16, 12);
    if (h->commit_ok) {
        h->commit_off = get_le(buf + 16, 8);
        h->commit_idx = (uint32_t)get_le(buf + 24, 4);
    }
    if (!h->commit_ok || h->commit_off < h->len) {
        h->commit_off = h->len;
        h->commit_idx = 0;
    }
    return 0;
}

int sm__spool_frame_parse(const char *buf, size_t len, size_t off, sm_spool_frame *f)
{
    size_t plen;

    memset(f, 0, sizeof *f);
    if (off == len)
        return 0;
    if (off > len || len - off < 5)
        return -ENODATA;
    plen = (size_t)get_le(buf + off, 4);
    f->type = (unsigned char)buf[off + 4];
    if (plen > SM_SPOOL_PAYLOAD_MAX || (f->type != 'S' && f->type != 'R'))
        return -EBADMSG;
    if (len - off - 5 < plen + 4)
        return -ENODATA;
    if ((uint32_t)get_le(buf + off + 5 + plen, 4) != sm__crc32(0, buf + off + 4, plen + 1)) {
        /* where the frame would end, for a reader that skips it: the length
         * itself may be the damage, so the caller checks what follows */
        f->len = plen;
        f->next = off + SM_SPOOL_FRAME_OVERHEAD + plen;
        return -EILSEQ;
    }
    if ((f->type == 'S' && plen < 2) || (f->type == 'R' && plen % SM_SPOOL_REC_SIZE != 0))
        return -EBADMSG;
    f->payload = buf + off + 5;
    f->len = plen;
    f->next = off + SM_SPOOL_FRAME_OVERHEAD + plen;
    return 1;
}

void sm__spool_rec_get(const char *payload, size_t i, sm_spool_rec *r)
{
    const char *p = payload + i * SM_SPOOL_REC_SIZE;
    uint64_t bits = get_le(p, 8);

    memcpy(&r->value, &bits, sizeof bits);
    r->timestamp_ms = (int64_t)get_le(p + 8, 8);
    r->step = (int32_t)(uint32_t)get_le(p + 16, 4);
    r->key = (uint16_t)get_le(p + 20, 2);
    r->text = (uint16_t)get_le(p + 22, 2);
}

void sm__spool_rec_put(char *out, const sm_spool_rec *r)
{
    uint64_t bits;

    memcpy(&bits, &r->value, sizeof bits);
    put_le(out, bits, 8);
    put_le(out + 8, (uint64_t)r->timestamp_ms, 8);
    put_le(out + 16, (uint32_t)r->step, 4);
    put_le(out + 20, r->key, 2);
    put_le(out + 22, r->text, 2);
}

void sm__spool_commit_put(char *out, uint64_t off, uint32_t idx)
{
    put_le(out, off, 8);
    put_le(out + 8, idx, 4);
    put_le(out + 12, sm__crc32(0, out, 12), 4);
}

size_t sm__spool_header_put(char *out, const sm_spool_header *h)
{
    size_t n = strnlen(h->run, SM_SPOOL_RUN_MAX), hlen = SM_SPOOL_HEADER_FIXED + n;

    memcpy(out, MAGIC, sizeof MAGIC);
    put_le(out + 8, SM_SPOOL_VERSION, 4);
    put_le(out + 12, hlen, 4);
    sm__spool_commit_put(out + 16, hlen, 0);
    put_le(out + 36, (uint32_t)h->rank, 4);
    put_le(out + 40, h->pid, 4);
    put_le(out + 44, (uint64_t)h->step_base, 8);
    put_le(out + 52, n, 2);
    memcpy(out + 54, h->run, n);
    put_le(out + 32, header_crc(out, hlen), 4);
    return hlen;
}

void sm__spool_frame_head(char *out, int type, size_t payload_len)
{
    put_le(out, payload_len, 4);
    out[4] = (char)type;
}

void sm__spool_frame_tail(char *out, int type, const char *payload, size_t len)
{
    char t = (char)type;

    put_le(out, sm__crc32(sm__crc32(0, &t, 1), payload, len), 4);
}
