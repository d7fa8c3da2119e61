/* queues_test.c - stage 08: a full submission queue and an overflowing
 * completion queue lose nothing (ring.h contract 3).
 *
 * A ring of 8 SQEs (so 16 CQEs) carries 64 receives: starting them fills
 * the SQ eight times over; then the test's thread sends a byte to each
 * peer, and the kernel completes all 64 in task work as each send returns:
 * 16 CQEs fit in the ring, 48 wait on the kernel's overflow list. One park
 * must dispatch all 64. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "stage08.h"

LAB_SUITE(queues, 10);

#define N 64

struct reads {
    int sv[N][2];
    struct uring_stream *s[N];
    struct uring_read rd[N];
    char dst[N][4];
    struct counting_waker *cw[N];
    struct waker w[N];
};

static void start(struct ring *r, struct reads *x)
{
    for (int i = 0; i < N; i++) {
        nb_socketpair(x->sv[i]);
        x->s[i] = uring_stream_new(r, x->sv[i][0]);
        x->cw[i] = counting_waker_new("reader");
        x->w[i] = counting_waker_get(x->cw[i]);
        struct context cx = context_from_waker(&x->w[i]);
        x->rd[i] = uring_read(x->s[i], x->dst[i], sizeof x->dst[i]);
        ssize_t n = 0;
        cr_assert_eq(uring_read_poll(&x->rd[i], &cx, &n), POLL_PENDING,
                     "read %d on an empty socket was Ready (%zd): with a full submission queue, the queued SQEs "
                     "are submitted to make room, never refused (ring.h contract 3)", i, n);
    }
}

static void finish(struct ring *r, struct reads *x, bool one_park)
{
    for (int i = 0; i < N; i++) {
        char c = (char)('A' + i % 26);
        cr_assert(raw_send_all(x->sv[i][1], &c, 1), "the test's peer could not send");
    }
    if (one_park) {
        driver_park(ring_driver(r), 0);
        unsigned missing = 0;
        for (int i = 0; i < N; i++)
            missing += counting_waker_woken(x->cw[i]) == 0;
        cr_assert_eq(missing, 0, "after one park, %u of %d completed receives had woken nobody: %d completions "
                     "on a completion queue of 16 entries overflow, and the kernel keeps the rest aside until "
                     "asked; a park dispatches every CQE there is, the overflowed ones included, and gives "
                     "back exactly the entries it copied (ring.h contract 3)", missing, N, N);
    } else {
        for (int k = 0; k < 200; k++)
            driver_park(ring_driver(r), 0);
    }
    for (int i = 0; i < N; i++) {
        struct context cx = context_from_waker(&x->w[i]);
        ssize_t n = 0;
        enum poll p = uring_read_poll(&x->rd[i], &cx, &n);
        cr_assert(p == POLL_READY && n == 1 && x->dst[i][0] == (char)('A' + i % 26),
                  "read %d of %d: %s with %zd; expected Ready with its 1 byte: a completion or a submission "
                  "was lost (ring.h contract 3)", i, N, p == POLL_READY ? "Ready" : "Pending", n);
        uring_read_drop(&x->rd[i]);
        cr_assert_eq(counting_waker_counts(x->cw[i]).live, 1, "a reader's waker is still held after its completion (ring.h contract 5)");
        counting_waker_free(x->cw[i]);
        uring_stream_close(x->s[i]);
        close(x->sv[i][1]);
    }
}

/* Drops the first total reads, closes their streams and frees the ring
 * (which waits for no operation: each was dropped), then the wakers. */
static void reads_free(struct ring *r, struct reads *x, int total)
{
    for (int i = 0; i < total; i++) {
        uring_read_drop(&x->rd[i]);
        uring_stream_close(x->s[i]);
        close(x->sv[i][1]);
    }
    ring_free_checked(r);
    for (int i = 0; i < total; i++)
        counting_waker_free(x->cw[i]);
}

LAB_TEST(queues, more_ops_than_sq_entries, 10)
{
    struct ring *r = ring_or_skip(8, N + 4);
    static struct reads x;
    start(r, &x);
    finish(r, &x, false);
    ring_free_checked(r);
}

LAB_TEST(queues, cq_overflow_loses_nothing, 10)
{
    struct ring *r = ring_or_skip(8, N + 4);
    static struct reads x;
    start(r, &x);
    driver_park(ring_driver(r), 0); /* all 64 submitted */
    finish(r, &x, true);
    ring_free_checked(r);
}

/* -EBUSY: the kernel refuses a submit while completions wait that it cannot
 * post, and the submitter must take CQEs first (ring.h contract 3). Eight
 * receives are submitted and completed (a byte to each peer), their CQEs
 * left in the ring; then, with uring_guard.c's wrapper armed (a submit with
 * CQEs ready answers -EBUSY until one is taken), nine more receives are
 * started: the ninth finds the submission queue full and must submit. A
 * get_sqe that takes the waiting CQEs on -EBUSY (dispatching them: the
 * first eight readers are woken) gets its submit through; one that only
 * submits again would spin for ever (the wrapper lets it through after
 * 10,000 answers, and the test says so). */
#define BUSY_FIRST 8

LAB_TEST(queues, ebusy_takes_completions_first, 10)
{
    struct ring *r = ring_or_skip(8, 2 * BUSY_FIRST + 4);
    static struct reads x;
    const int total = 2 * BUSY_FIRST + 1;
    for (int i = 0; i < total; i++) {
        nb_socketpair(x.sv[i]);
        x.s[i] = uring_stream_new(r, x.sv[i][0]);
        x.cw[i] = counting_waker_new("reader");
        x.w[i] = counting_waker_get(x.cw[i]);
    }
    for (int i = 0; i < total; i++) {
        if (i == BUSY_FIRST) {
            driver_park(ring_driver(r), 0); /* the first eight submitted */
            for (int j = 0; j < BUSY_FIRST; j++)
                cr_assert(raw_send_all(x.sv[j][1], "b", 1), "the test's peer could not send");
            lab_sleep_ms(20); /* their completions posted (task work, at this thread's system calls) */
            uring_busy_arm(true);
        }
        struct context cx = context_from_waker(&x.w[i]);
        x.rd[i] = uring_read(x.s[i], x.dst[i], sizeof x.dst[i]);
        ssize_t n = 0;
        (void)uring_read_poll(&x.rd[i], &cx, &n);
    }
    uring_busy_arm(false);
    unsigned answers = uring_busy_answers();
    bool spun = uring_busy_spun();
    unsigned woken = 0;
    for (int i = 0; i < BUSY_FIRST; i++)
        woken += counting_waker_woken(x.cw[i]) > 0;
    reads_free(r, &x, total);
    lab_note("-EBUSY answered %u time%s; %u of the %d completed readers woken by then", answers,
             answers == 1 ? "" : "s", woken, BUSY_FIRST);
    cr_assert_not(spun, "eight receives had completed and their CQEs waited in the ring; a ninth read then found "
                  "the submission queue full, and its submit was answered -EBUSY (the kernel's answer while "
                  "completions wait that it cannot post). The code submitted again, 10,000 times, without "
                  "taking a single CQE: against a real kernel that spins for ever. What is the kernel waiting "
                  "for when it says -EBUSY (ring.h contract 3)?");
    if (answers == 0)
        lab_cannot_judge("the eight completions were not in the ring when the queue filled: the kernel had not "
                         "posted them yet, so no submit was answered -EBUSY");
    cr_assert_eq(woken, BUSY_FIRST, "a submit was answered -EBUSY with eight completions in the ring, and the "
                 "code went on without dispatching them: %u of the 8 readers were woken (ring.h contract 3)",
                 woken);
}

/* A CQE is read before its slot goes back to the kernel (ring.h contract
 * 3). The completion queue (16 entries) is full when the park reaps: 16
 * receives have completed. The waker of the first one dispatched sends a
 * byte to eight more waiting receives, from inside the dispatch: their
 * completions are posted at once (task work, at this thread's send), into
 * whatever slots the reap has given back by then. A reap that copied its
 * batch before moving the head dispatches what it copied; one that moved
 * the head first and reads the slots as it dispatches finds them written
 * over by the eight new completions: some of the 16 are never dispatched,
 * some of the 8 twice. Every one of the 24 readers must be woken, and read
 * its own byte. */
#define SLOT_FULL 16
#define SLOT_MORE 8

struct sender_waker {
    int *peers;          /* the eight more receives' peers */
    bool sent;
    unsigned woken;
};

static const struct waker_vtable sender_vt;
static struct waker sender_clone(const void *data) { return (struct waker){ .data = data, .vtable = &sender_vt }; }
static void sender_wake_by_ref(const void *data)
{
    struct sender_waker *sw = (struct sender_waker *)data;
    sw->woken++;
    if (sw->sent)
        return;
    sw->sent = true;
    for (int i = 0; i < SLOT_MORE; i++)
        (void)send(sw->peers[i], "m", 1, MSG_NOSIGNAL);
}
static void sender_wake(const void *data) { sender_wake_by_ref(data); }
static void sender_drop(const void *data) { (void)data; }
static const struct waker_vtable sender_vt = { sender_clone, sender_wake, sender_wake_by_ref, sender_drop };

LAB_TEST(queues, cqe_read_before_its_slot_goes_back, 10)
{
    struct ring *r = ring_or_skip(8, SLOT_FULL + SLOT_MORE + 4);
    static struct reads x;
    const int total = SLOT_FULL + SLOT_MORE;
    int more_peers[SLOT_MORE];
    struct sender_waker sw = { .peers = more_peers };
    struct waker first = { .data = &sw, .vtable = &sender_vt };
    for (int i = 0; i < total; i++) {
        nb_socketpair(x.sv[i]);
        x.s[i] = uring_stream_new(r, x.sv[i][0]);
        x.cw[i] = counting_waker_new("reader");
        x.w[i] = counting_waker_get(x.cw[i]);
        if (i >= SLOT_FULL)
            more_peers[i - SLOT_FULL] = x.sv[i][1];
        struct context cx = context_from_waker(i == 0 ? &first : &x.w[i]);
        x.rd[i] = uring_read(x.s[i], x.dst[i], sizeof x.dst[i]);
        ssize_t n = 0;
        cr_assert_eq(uring_read_poll(&x.rd[i], &cx, &n), POLL_PENDING, "read %d on an empty socket was Ready", i);
    }
    driver_park(ring_driver(r), 0); /* all 24 submitted, none complete */
    for (int i = 0; i < SLOT_FULL; i++)
        cr_assert(raw_send_all(x.sv[i][1], (char[]){ (char)('a' + i) }, 1), "the test's peer could not send");
    lab_sleep_ms(20); /* the 16 completions posted: the completion queue is full */
    for (int k = 0; k < 3; k++)
        driver_park(ring_driver(r), 0);
    unsigned missing = 0, twice = 0, wrong = 0;
    int first_missing = -1;
    for (int i = 0; i < total; i++) {
        unsigned woken = i == 0 ? sw.woken : counting_waker_woken(x.cw[i]);
        missing += woken == 0;
        twice += woken > 1;
        if (woken == 0 && first_missing < 0)
            first_missing = i;
        struct context cx = context_from_waker(i == 0 ? &first : &x.w[i]);
        ssize_t n = 0;
        enum poll p = uring_read_poll(&x.rd[i], &cx, &n);
        char want = i < SLOT_FULL ? (char)('a' + i) : 'm';
        wrong += !(p == POLL_READY && n == 1 && x.dst[i][0] == want);
    }
    lab_note("the first dispatch's waker %s; %u of %d readers never woken, %u woken more than once, %u without "
             "their own byte", sw.sent ? "sent to the eight more" : "never ran", missing, total, twice, wrong);
    if (!sw.sent)
        lab_cannot_judge("no completion was dispatched in three parks: the receives never completed here");
    cr_assert(missing == 0 && twice == 0 && wrong == 0,
              "16 receives had completed and filled the completion queue; the first one dispatched sent, from its "
              "waker, a byte to 8 more waiting receives, whose completions the kernel posted at once into the "
              "slots the reap had given back. After three parks, %u of the %d readers had never been woken "
              "(the first: read %d), %u had been woken more than once, and %u did not read their own byte. "
              "When may the kernel write a slot again, and what had the reap still to read from it then "
              "(ring.h contract 3)?", missing, total, first_missing, twice, wrong);
    /* judged first: a completion lost leaves an operation that ring_free would wait for */
    reads_free(r, &x, total);
}
