/* starvation_test.c - stage 08: a completion waits at most the driver tick
 * behind tasks that never stop being ready (ring.h contract 4, executor.h
 * contract 6).
 *
 * A reader waits on one end of a socketpair beside a task that wakes itself
 * on every poll. At the spinner's 10th poll it sends a byte to the other
 * end: the kernel completes the receive in task work as that send returns,
 * so from then on a CQE waits in the ring, and the test counts the
 * spinner's polls until the reader has its byte: no milliseconds. */
#include <sys/socket.h>
#include <unistd.h>

#include "stage08.h"

LAB_SUITE(starvation, 10);

#define TICK_POLLS 61u   /* executor.h contract 6 */
#define SEND_AT 10u
#define GIVE_UP 5000u

struct book {
    struct iostack *s;
    int peer;
    bool unpark_each;
    unsigned spins, sent_at, read_at;
    ssize_t got;
    bool send_failed;
};

struct spinner {
    struct book *b;
};

static enum poll spinner_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct book *b = ((struct spinner *)self)->b;
    b->spins++;
    if (b->spins == SEND_AT) {
        b->send_failed = send(b->peer, "x", 1, MSG_NOSIGNAL) != 1;
        b->sent_at = b->spins;
    }
    if (b->unpark_each)
        driver_unpark(ring_driver(b->s->r));
    if (b->spins >= GIVE_UP || b->read_at != 0)
        return POLL_READY;
    waker_wake_by_ref(cx->waker);
    return POLL_PENDING;
}
static const struct future_vtable spinner_vt = FUTURE_VTABLE_INIT(struct spinner, 0, spinner_poll, NULL);

struct noted_read {
    struct uring_read rd;
    struct book *b;
    char buf[8];
};
static enum poll noted_read_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct noted_read *nr = self;
    nr->rd.dst = nr->buf;
    ssize_t n;
    if (uring_read_poll(&nr->rd, cx, &n) == POLL_PENDING)
        return POLL_PENDING;
    nr->b->got = n;
    nr->b->read_at = nr->b->spins;
    return POLL_READY;
}
static void noted_read_drop(void *self) { uring_read_drop(&((struct noted_read *)self)->rd); }
static const struct future_vtable noted_read_vt =
    FUTURE_VTABLE_INIT(struct noted_read, 0, noted_read_poll, noted_read_drop);

static void read_beside_spinner(bool unpark_each)
{
    struct iostack s;
    iostack_new(&s);
    int sv[2];
    nb_socketpair(sv);
    struct uring_stream *st = uring_stream_new(s.r, sv[0]);
    struct book b = { .s = &s, .peer = sv[1], .unpark_each = unpark_each };
    struct noted_read nr = { .b = &b };
    nr.rd = uring_read(st, nr.buf, sizeof nr.buf);
    iostack_spawn(&s, future_of(&noted_read_vt, &nr));
    struct spinner sp = { .b = &b };
    iostack_spawn(&s, future_of(&spinner_vt, &sp));
    iostack_run(&s);
    cr_assert_not(b.send_failed, "the test's peer could not send its byte (the test's own failure)");
    cr_assert_eq(b.got, 1, "the reader got %zd bytes; expected the 1 byte sent (ring.h contract 4)", b.got);
    unsigned bound = b.sent_at + TICK_POLLS + 2;
    cr_assert(b.read_at != 0 && b.read_at <= bound,
              "a reader waited beside a task that wakes itself on every poll%s: its completion was in the ring "
              "from the spinner's poll %u, and it was read at poll %u (0: only after the spinner stopped, at "
              "%u); at most %u expected. The CQE waited in the ring while the spinner ran: no zero-timeout turn "
              "of the driver stack in that time reaped it (executor.h contract 6: a turn every "
              "EXECUTOR_DRIVER_INTERVAL task polls; ring.h contract 4: park(0) enters the kernel and "
              "dispatches, a token there or not)",
              unpark_each ? " and unparks the driver on every poll (as wakes from other threads do)" : "",
              b.sent_at, b.read_at, GIVE_UP, bound);
    uring_stream_close(st);
    close(sv[1]);
    iostack_free(&s);
}

LAB_TEST(starvation, read_beside_a_spinner, 10) { read_beside_spinner(false); }

LAB_TEST(starvation, read_beside_a_spinner_and_unparks, 10) { read_beside_spinner(true); }
