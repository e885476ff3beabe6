/*
 * test_ring.c — the bounded ring between the sampling thread and a sink:
 * overflow drops the oldest and counts it, peek/consume never removes a
 * record that was not peeked (even when the producer overwrote some while
 * the consumer shipped), close ends the stream with -EPIPE once drained, and
 * a timed wait returns on timeout and wakes on a push from another thread.
 * The queue sink on top of it is checked at the end.
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "sink.h"

static sm_record rec(int64_t step)
{
    sm_record r;

    memset(&r, 0, sizeof r);
    r.kind = SM_RECORD_METRIC;
    r.key = "system/k/rank0";
    r.value = (double)step;
    r.step = step;
    return r;
}

static void push_range(sm_ring *r, int64_t from, int64_t to)
{
    for (int64_t i = from; i < to; i++) {
        sm_record x = rec(i);
        sm__ring_push(r, &x, 1);
    }
}

static void test_fifo_and_overflow(void)
{
    sm_ring r;
    sm_record out[16];
    sm_record batch[6];
    int n;

    CHECK_EQ_INT(sm__ring_init(&r, 4), 0);
    push_range(&r, 0, 3);
    CHECK_EQ_INT(sm__ring_len(&r), 3);
    CHECK_EQ_INT(sm__ring_dropped(&r), 0);
    push_range(&r, 3, 7); /* 7 pushed into 4 slots: 0,1,2 dropped */
    CHECK_EQ_INT(sm__ring_len(&r), 4);
    CHECK_EQ_INT(sm__ring_dropped(&r), 3);
    n = sm__ring_pop(&r, out, 16, 0);
    CHECK_EQ_INT(n, 4);
    for (int i = 0; i < n; i++)
        CHECK_EQ_INT(out[i].step, 3 + i); /* the newest four, oldest first */
    CHECK_EQ_INT(sm__ring_pop(&r, out, 16, 0), 0); /* empty, no wait */

    /* one push larger than the ring keeps its last cap records */
    for (int i = 0; i < 6; i++)
        batch[i] = rec(100 + i);
    sm__ring_push(&r, batch, 6);
    CHECK_EQ_INT(sm__ring_dropped(&r), 5);
    n = sm__ring_pop(&r, out, 2, 0); /* cap smaller than what is there */
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(out[0].step, 102);
    CHECK_EQ_INT(out[1].step, 103);
    CHECK_EQ_INT(sm__ring_len(&r), 2);
    sm__ring_destroy(&r);
}

static void test_peek_consume(void)
{
    sm_ring r;
    sm_entry out[8];
    int n;

    CHECK_EQ_INT(sm__ring_init(&r, 4), 0);
    push_range(&r, 0, 3);
    n = sm__ring_peek(&r, out, 8, 0);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(sm__ring_len(&r), 3); /* peek removes nothing */
    n = sm__ring_peek(&r, out, 2, 0);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(out[0].step, 0);
    CHECK_EQ_INT(sm__ring_consume(&r, 2), 2);
    CHECK_EQ_INT(sm__ring_len(&r), 1);
    n = sm__ring_peek(&r, out, 8, 0);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(out[0].step, 2);

    /* the producer overflows while the consumer ships what it peeked:
     * peeked {2}, then 3..6 pushed into 4 slots drops 2 (peeked) -> consume(1)
     * must not remove 3, which was never shipped */
    push_range(&r, 3, 7);
    CHECK_EQ_INT(sm__ring_dropped(&r), 1);
    CHECK_EQ_INT(sm__ring_consume(&r, 1), 0); /* the sink counts 2 as shipped, not lost */
    CHECK_EQ_INT(sm__ring_len(&r), 4);
    n = sm__ring_peek(&r, out, 8, 0);
    CHECK_EQ_INT(n, 4);
    CHECK_EQ_INT(out[0].step, 3);

    /* peeked 3..6, then two more pushed drop 3 and 4: consume(4) removes only
     * 5 and 6, leaving the two new ones */
    push_range(&r, 7, 9);
    CHECK_EQ_INT(sm__ring_consume(&r, 4), 2);
    CHECK_EQ_INT(sm__ring_len(&r), 2);
    n = sm__ring_peek(&r, out, 8, 0);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(out[0].step, 7);
    CHECK_EQ_INT(out[1].step, 8);
    sm__ring_destroy(&r);
}

static void test_close(void)
{
    sm_ring r;
    sm_record out[8];
    sm_entry ent[8];
    sm_record x = rec(42);

    CHECK_EQ_INT(sm__ring_init(&r, 8), 0);
    push_range(&r, 0, 2);
    sm__ring_close(&r);
    CHECK_EQ_INT(sm__ring_pop(&r, out, 8, 1.0), 2); /* what was queued is still drained */
    CHECK_EQ_INT(sm__ring_pop(&r, out, 8, 1.0), -EPIPE); /* then the stream is over */
    CHECK_EQ_INT(sm__ring_peek(&r, ent, 8, 0), -EPIPE);
    sm__ring_push(&r, &x, 1); /* after close: dropped, not queued */
    CHECK_EQ_INT(sm__ring_len(&r), 0);
    CHECK_EQ_INT(sm__ring_dropped(&r), 1);
    CHECK_EQ_INT(sm__ring_pop(&r, out, 0, 0), -EINVAL);
    sm__ring_destroy(&r);
    CHECK_EQ_INT(sm__ring_init(&r, 0), -EINVAL);
}

struct later {
    sm_ring *r;
    int close;
};

static void *push_later(void *arg)
{
    struct later *l = arg;
    struct timespec ts = {0, 50 * 1000 * 1000};
    sm_record x = rec(7);

    nanosleep(&ts, NULL);
    if (l->close)
        sm__ring_close(l->r);
    else
        sm__ring_push(l->r, &x, 1);
    return NULL;
}

static void test_timed_wait(void)
{
    sm_ring r;
    sm_record out[4];
    sm_entry ent[4];
    pthread_t t;
    struct later l;
    double t0, dt;
    int n;

    CHECK_EQ_INT(sm__ring_init(&r, 4), 0);
    /* nothing comes: returns 0 after about the timeout (lower bound only) */
    t0 = sm__now_mono();
    CHECK_EQ_INT(sm__ring_peek(&r, ent, 4, 0.1), 0);
    dt = sm__now_mono() - t0;
    CHECK(dt >= 0.09);

    /* a push from another thread wakes the waiter; the long timeout is a
     * bound, not a wait */
    l.r = &r;
    l.close = 0;
    CHECK_EQ_INT(pthread_create(&t, NULL, push_later, &l), 0);
    n = sm__ring_pop(&r, out, 4, 60.0);
    pthread_join(t, NULL);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(out[0].step, 7);

    /* close from another thread wakes the waiter with -EPIPE */
    l.close = 1;
    CHECK_EQ_INT(pthread_create(&t, NULL, push_later, &l), 0);
    n = sm__ring_pop(&r, out, 4, 60.0);
    pthread_join(t, NULL);
    CHECK_EQ_INT(n, -EPIPE);
    sm__ring_destroy(&r);
}

static void test_queue_sink(void)
{
    sm_sink *s = NULL;
    sm_record in[3], out[8];

    CHECK_EQ_INT(sm__sink_queue_new(2, &s), 0);
    if (!s)
        return;
    CHECK_EQ_STR(s->ops->name, "queue");
    for (int i = 0; i < 3; i++)
        in[i] = rec(i);
    s->ops->push(s, in, 3);
    CHECK_EQ_INT(s->ops->dropped(s), 1);
    CHECK_EQ_INT(sm__sink_queue_drain(s, out, 8, sizeof out[0], 0), 2);
    CHECK_EQ_INT(out[0].step, 1);
    s->ops->push(s, in, 1);
    CHECK_EQ_INT(s->ops->flush(s, sm__now_mono() + 1), 0); /* closes, does not wait */
    CHECK_EQ_INT(sm__sink_queue_drain(s, out, 8, sizeof out[0], 0), 1);
    CHECK_EQ_INT(sm__sink_queue_drain(s, out, 8, sizeof out[0], 5.0), -EPIPE);
    CHECK_EQ_INT(sm__sink_queue_drain(s, out, 0, sizeof out[0], 0), -EINVAL);
    s->ops->close(s);
}

/* A tag value longer than 0.1's 511 bytes goes through the queue whole, and
 * a binding built against another sm_record gets its own stride: the fields
 * it knows, zeros past this library's (scopemeter.h, "Growth"). */
static void test_queue_long_tag_and_stride(void)
{
    enum { LONG = 6000 };
    static char value[LONG + 1];
    struct bigger { sm_record r; uint64_t later_field[3]; } big[2];
    sm_sink *s = NULL;
    sm_record in[2], out[2];

    memset(value, 'v', LONG);
    value[LONG - 1] = 'z'; /* the end is there, not only the start */
    CHECK_EQ_INT(sm__sink_queue_new(16, &s), 0);
    if (!s)
        return;
    memset(in, 0, sizeof in);
    in[0].kind = SM_RECORD_TAG;
    in[0].key = "scopemeter.rank0.long";
    in[0].text = value;
    in[0].text_len = LONG;
    in[0].timestamp_ms = 77;
    in[1] = rec(9);
    s->ops->push(s, in, 2);
    CHECK_EQ_INT(sm__sink_queue_drain(s, out, 2, sizeof out[0], 0), 2);
    CHECK_EQ_INT(out[0].kind, SM_RECORD_TAG);
    CHECK_EQ_STR(out[0].key, "scopemeter.rank0.long");
    CHECK_EQ_INT(out[0].text_len, LONG);
    CHECK(out[0].text && strcmp(out[0].text, value) == 0);
    CHECK_EQ_INT(out[0].timestamp_ms, 77);
    CHECK(out[1].kind == SM_RECORD_METRIC && out[1].text == NULL && out[1].text_len == 0);

    /* a newer header's larger record: same fields, the unknown tail zeroed */
    memset(big, 0xa5, sizeof big);
    s->ops->push(s, in, 2);
    CHECK_EQ_INT(sm__sink_queue_drain(s, &big[0].r, 2, sizeof big[0], 0), 2);
    CHECK_EQ_INT(big[0].r.text_len, LONG);
    CHECK_EQ_STR(big[0].r.key, "scopemeter.rank0.long");
    CHECK_EQ_INT(big[1].r.step, 9);
    CHECK(big[0].later_field[0] == 0 && big[1].later_field[2] == 0);
    /* a record_size below the first sized sm_record is refused */
    CHECK_EQ_INT(sm__sink_queue_drain(s, out, 2, offsetof(sm_record, text), 0), -EINVAL);
    s->ops->close(s);
}

/* The ring keeps 24-byte entries and each distinct string once; records come
 * back whole (a key of 255 bytes, tag text of 4000 bytes, empty text). */
static void test_compact_storage(void)
{
    static char key[256], text[4001];
    char kbuf[64];
    sm_ring r;
    sm_record in[3], out[3];
    sm_entry ent[3];

    CHECK_EQ_INT(sizeof(sm_entry), 24);
    CHECK_EQ_INT(sm__ring_init(&r, 1000), 0);
    memset(in, 0, sizeof in);
    in[0] = rec(5);
    memset(key, 'k', sizeof key - 1);
    in[0].key = key;
    in[1].kind = SM_RECORD_TAG;
    in[1].key = "scopemeter.rank0.cgroup";
    memset(text, 't', sizeof text - 1);
    in[1].text = text;
    in[1].text_len = sizeof text - 1;
    in[1].timestamp_ms = 1234;
    in[2].kind = SM_RECORD_TAG; /* an empty value is a tag still */
    in[2].key = "scopemeter.rank0.empty";
    in[2].text = "";
    for (int w = 0; w < 300; w++) /* the same strings every window: stored once */
        sm__ring_push(&r, in, 3);
    CHECK_EQ_INT(r.nstr, 1 + 5); /* 3 keys, 2 texts ("" too) */
    CHECK_EQ_INT(sm__ring_peek(&r, ent, 3, 0), 3);
    CHECK_EQ_STR(sm__ring_str(&r, ent[0].key), in[0].key);
    CHECK_EQ_INT(ent[0].text, 0);
    CHECK(ent[2].text != 0);
    CHECK_EQ_INT(sm__ring_pop(&r, out, 3, 0), 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(out[i].kind, in[i].kind);
        CHECK_EQ_STR(out[i].key, in[i].key);
        CHECK(out[i].value == in[i].value);
        CHECK_EQ_INT(out[i].timestamp_ms, in[i].timestamp_ms);
        CHECK_EQ_INT(out[i].step, in[i].step);
        CHECK_EQ_INT(out[i].text_len, in[i].text_len);
    }
    CHECK(out[0].text == NULL);
    CHECK_EQ_STR(out[1].text, text);
    CHECK_EQ_STR(out[2].text, "");
    sm__ring_destroy(&r);

    /* the table full: a record with a new string is dropped and counted,
     * the known ones still go through */
    CHECK_EQ_INT(sm__ring_init(&r, 4), 0);
    for (int i = 0; i < SM_RING_STRINGS + 10; i++) {
        sm_record x = rec(i);
        snprintf(kbuf, sizeof kbuf, "system/k%d/rank0", i);
        x.key = kbuf;
        sm__ring_push(&r, &x, 1);
    }
    CHECK_EQ_INT(r.nstr, SM_RING_STRINGS);
    CHECK_EQ_INT(sm__ring_dropped(&r), (SM_RING_STRINGS + 10) - 4);
    {
        sm_record x = rec(1);
        x.key = "system/k1/rank0";
        sm__ring_push(&r, &x, 1);
        CHECK_EQ_INT(sm__ring_pop(&r, out, 3, 0), 3);
        CHECK_EQ_INT(sm__ring_pop(&r, out, 3, 0), 1);
        CHECK_EQ_STR(out[0].key, "system/k1/rank0");
    }
    sm__ring_destroy(&r);
}

static void test_clock(void)
{
    struct timespec ts;
    int64_t ms = sm__now_ms();

    CHECK(ms > 1600000000000LL); /* after 2020: wall clock in ms, not s */
    sm__mono_timespec(12.5, &ts);
    CHECK_EQ_INT(ts.tv_sec, 12);
    CHECK_EQ_INT(ts.tv_nsec, 500000000);
    sm__mono_timespec(-1, &ts);
    CHECK_EQ_INT(ts.tv_sec, 0);
    CHECK(sm__now_mono() > 0);
}

int main(void)
{
    test_fifo_and_overflow();
    test_peek_consume();
    test_close();
    test_timed_wait();
    test_queue_sink();
    test_queue_long_tag_and_stride();
    test_compact_storage();
    test_clock();
    return CHECK_DONE();
}
