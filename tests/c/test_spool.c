/*
 * test_spool.c — the spool file (src/parse/parse_spool.c, src/mlflow/spool.c):
 * a header and frames read back as written; every prefix of a file is
 * truncated (-ENODATA) or a whole frame, never a read past the end; a flipped
 * byte is a CRC mismatch; another version and another magic are their own
 * codes; the writer's records come back through the replay in order, the
 * commit moves, the bound drops the oldest segment whole and counts it, and
 * a file with nothing left is removed at the end.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "parse.h"
#include "sink.h"
#include "spool.h"

static size_t build_file(char *buf)
{
    sm_spool_header h = {0};
    size_t len;
    const char key[] = "\x01\x00system/k/rank0";
    char rec[3 * SM_SPOOL_REC_SIZE];

    snprintf(h.run, sizeof h.run, "0123456789abcdef0123456789abcdef");
    h.rank = 3;
    h.pid = 77;
    h.step_base = 5;
    len = sm__spool_header_put(buf, &h);
    sm__spool_frame_head(buf + len, 'S', sizeof key - 1);
    memcpy(buf + len + 5, key, sizeof key - 1);
    sm__spool_frame_tail(buf + len + 5 + sizeof key - 1, 'S', key, sizeof key - 1);
    len += SM_SPOOL_FRAME_OVERHEAD + sizeof key - 1;
    for (int i = 0; i < 3; i++) {
        sm_spool_rec r = {0.5 + i, 1700000000000 + i, i, 1, 0};
        sm__spool_rec_put(rec + i * SM_SPOOL_REC_SIZE, &r);
    }
    sm__spool_frame_head(buf + len, 'R', sizeof rec);
    memcpy(buf + len + 5, rec, sizeof rec);
    sm__spool_frame_tail(buf + len + 5 + sizeof rec, 'R', rec, sizeof rec);
    return len + SM_SPOOL_FRAME_OVERHEAD + sizeof rec;
}

/* Every frame of buf[0, len): the count, or the first code. */
static int walk(const char *buf, size_t len, int *frames)
{
    sm_spool_header h;
    sm_spool_frame f;
    size_t off;
    int rc = sm__spool_header_parse(buf, len, &h);

    *frames = 0;
    if (rc < 0)
        return rc;
    for (off = h.commit_off; (rc = sm__spool_frame_parse(buf, len, off, &f)) == 1; off = f.next)
        (*frames)++;
    return rc;
}

static void test_format(void)
{
    char buf[1024], copy[1024];
    size_t len = build_file(buf);
    sm_spool_header h;
    sm_spool_frame f;
    sm_spool_rec r;
    int frames;

    CHECK_EQ_INT(sm__spool_header_parse(buf, len, &h), 0);
    CHECK_EQ_STR(h.run, "0123456789abcdef0123456789abcdef");
    CHECK_EQ_INT(h.rank, 3);
    CHECK_EQ_INT(h.step_base, 5);
    CHECK(h.commit_ok && h.commit_off == h.len && h.commit_idx == 0);
    CHECK_EQ_INT(walk(buf, len, &frames), 0);
    CHECK_EQ_INT(frames, 2);
    CHECK_EQ_INT(sm__spool_frame_parse(buf, len, h.len, &f), 1);
    CHECK_EQ_INT(sm__spool_frame_parse(buf, len, f.next, &f), 1);
    CHECK(f.type == 'R' && f.len == 3 * SM_SPOOL_REC_SIZE);
    sm__spool_rec_get(f.payload, 2, &r);
    CHECK(r.value == 2.5 && r.timestamp_ms == 1700000000002 && r.step == 2 && r.key == 1);
    /* every prefix: truncated, or the frames before the cut */
    for (size_t n = 0; n < len; n++) {
        int rc = walk(buf, n, &frames);
        CHECK(rc == -ENODATA || (rc == 0 && frames < 2));
    }
    /* every flipped byte: a code, never a silent change of the payload */
    for (size_t i = 0; i < len; i++) {
        memcpy(copy, buf, len);
        copy[i] ^= 0x5a;
        int rc = walk(copy, len, &frames);
        CHECK(rc < 0 || (i >= 16 && i < 32)); /* the commit: its own CRC, falls back */
    }
    /* a flipped payload byte of the 'R' frame: -EILSEQ, and where it ends
     * (the frame's length field), for sync to skip it (issue 46 item 8) */
    {
        sm_spool_frame s1, bad;
        CHECK_EQ_INT(sm__spool_frame_parse(buf, len, h.len, &s1), 1);
        memcpy(copy, buf, len);
        copy[s1.next + 5 + 30] ^= 0x5a;
        CHECK_EQ_INT(sm__spool_frame_parse(copy, len, s1.next, &bad), -EILSEQ);
        CHECK(bad.type == 'R' && bad.payload == NULL && bad.len == 3 * SM_SPOOL_REC_SIZE);
        CHECK(bad.next == s1.next + SM_SPOOL_FRAME_OVERHEAD + 3 * SM_SPOOL_REC_SIZE &&
              bad.next == len);
    }
    memcpy(copy, buf, len);
    copy[8] = 2;
    CHECK_EQ_INT(sm__spool_header_parse(copy, len, &h), -EPROTO);
    memcpy(copy, buf, len);
    copy[0] = 'X';
    CHECK_EQ_INT(sm__spool_header_parse(copy, len, &h), -EBADMSG);
    /* a torn commit: from the first frame (a re-send is a no-op in the store) */
    memcpy(copy, buf, len);
    sm__spool_commit_put(copy + 16, 999, 1);
    copy[20] ^= 1;
    CHECK_EQ_INT(sm__spool_header_parse(copy, len, &h), 0);
    CHECK(!h.commit_ok && h.commit_off == h.len);
    CHECK_EQ_INT(sm__crc32(0, "123456789", 9), 0xCBF43926u); /* the check value */
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".spool") != NULL;
    if (d)
        closedir(d);
    return n;
}

static void test_writer(void)
{
    char dir[] = "/tmp/sm-test-spool-XXXXXX";
    sm_ring ring;
    sm_entry e[600], out[1000];
    sm_spool *s = NULL;
    sm_spool_counts c;
    int64_t next = 0;

    CHECK(mkdtemp(dir) != NULL);
    setenv("SCOPEMETER_SPOOL_DIR", dir, 1);
    setenv("SCOPEMETER_SPOOL_MAX_MB", "1", 1);
    CHECK_EQ_INT(sm__ring_init(&ring, 1024), 0);
    for (int i = 0; i < 600; i++) {
        sm_record r = {.kind = SM_RECORD_METRIC, .key = "system/k/rank0", .step = i,
                       .value = i, .timestamp_ms = 1000 + i};
        sm__ring_push(&ring, &r, 1);
    }
    CHECK_EQ_INT(sm__ring_peek(&ring, e, 600, 0), 600);
    CHECK_EQ_INT(sm__spool_new("0123456789abcdef0123456789abcdef", 0, &s), 0);
    CHECK(s != NULL);
    CHECK_EQ_INT(sm__spool_put(s, &ring, e, 600, 0), 0);
    CHECK_EQ_INT(sm__spool_pending(s), 600);
    CHECK_EQ_INT(count_files(dir), 1);
    /* replay: in order, committed in parts */
    while (sm__spool_pending(s)) {
        size_t n = sm__spool_read(s, out, 250);
        CHECK(n > 0);
        for (size_t i = 0; i < n; i++)
            if (out[i].step != next++)
                CHECK(0);
        sm__spool_commit(s, n);
    }
    CHECK_EQ_INT(next, 600);
    CHECK_EQ_INT(count_files(dir), 0); /* emptied: removed */
    /* the bound (1 MB: segments of 250 kB): ~40000 records of 24 bytes are
     * more than it holds; the oldest segments go, counted */
    for (int k = 0; k < 80; k++)
        CHECK_EQ_INT(sm__spool_put(s, &ring, e, 600, 0), 0);
    sm__spool_counts(s, &c);
    CHECK(c.dropped > 0 && c.left + c.dropped + c.replayed == c.spooled);
    CHECK(c.left * SM_SPOOL_REC_SIZE <= 1000000);
    CHECK(count_files(dir) <= SM_SPOOL_SEGMENTS + 1);
    sm__spool_free(s); /* what is left stays, for sync */
    CHECK(count_files(dir) >= 1);
    /* off */
    setenv("SCOPEMETER_SPOOL_MAX_MB", "0", 1);
    CHECK_EQ_INT(sm__spool_new("0123456789abcdef0123456789abcdef", 0, &s), 0);
    CHECK(s == NULL);
    sm__ring_destroy(&ring);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

int main(void)
{
    test_format();
    test_writer();
    return CHECK_DONE();
}
