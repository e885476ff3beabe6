/*
 * fuzz_spool.c — libFuzzer target for the spool file's reader
 * (src/parse/parse_spool.c): sm__spool_header_parse, then every frame with
 * sm__spool_frame_parse from the commit on, every record of an 'R' frame
 * with sm__spool_rec_get — what `scopemeter sync` does with a file a dead
 * recorder (or anything else) left.
 *
 * Oracle: codes are the documented ones; a frame lies inside the input and
 * its next offset moves forward; a header or frame accepted is re-encoded by
 * the writers byte for byte (sm__spool_header_put, sm__spool_frame_tail), so
 * reader and writer agree on every byte they both touch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static int known(int rc)
{
    return rc == -EBADMSG || rc == -EPROTO || rc == -ENODATA || rc == -EILSEQ;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *buf = (const char *)data;
    char again[SM_SPOOL_HEADER_FIXED + SM_SPOOL_RUN_MAX], tail[4];
    sm_spool_header h;
    sm_spool_frame f;
    size_t off;
    int rc = sm__spool_header_parse(buf, size, &h);

    if (rc < 0) {
        if (!known(rc))
            abort();
        return 0;
    }
    if (h.len > size || h.commit_off < h.len || strlen(h.run) == 0)
        abort();
    /* the header re-encoded: the same bytes but the commit (rewritten) */
    if (sm__spool_header_put(again, &h) != h.len || memcmp(again, buf, 16) != 0 ||
        memcmp(again + 32, buf + 32, h.len - 32) != 0)
        abort();
    off = h.commit_off > size ? size : (size_t)h.commit_off;
    while ((rc = sm__spool_frame_parse(buf, size, off, &f)) == 1) {
        if (f.next <= off || f.next > size || f.payload != buf + off + 5 ||
            f.next != off + SM_SPOOL_FRAME_OVERHEAD + f.len)
            abort();
        sm__spool_frame_tail(tail, f.type, f.payload, f.len);
        if (memcmp(tail, f.payload + f.len, 4) != 0)
            abort();
        if (f.type == 'R') {
            for (size_t i = 0; i < f.len / SM_SPOOL_REC_SIZE; i++) {
                sm_spool_rec r;
                char enc[SM_SPOOL_REC_SIZE];
                sm__spool_rec_get(f.payload, i, &r);
                sm__spool_rec_put(enc, &r);
                if (memcmp(enc, f.payload + i * SM_SPOOL_REC_SIZE, sizeof enc) != 0)
                    abort();
            }
        }
        off = f.next;
    }
    if (rc < 0 && !known(rc))
        abort();
    /* a CRC mismatch still says where the frame ends, inside the input */
    if (rc == -EILSEQ && (f.payload || f.next <= off || f.next > size ||
                          f.next != off + SM_SPOOL_FRAME_OVERHEAD + f.len))
        abort();
    return 0;
}
