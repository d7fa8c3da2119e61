/* starvation_test.c - stage 06: ready I/O is read beside tasks that never
 * stop being ready (io_driver.h contract 4, executor.h contract 6).
 *
 * The executor reads epoll only when it parks, unless its driver tick polls
 * the driver with a zero timeout every 61 task polls; and a zero-timeout
 * park of the I/O driver must call epoll_wait even when an unpark left a
 * token. A reader waits on an accepted TCP stream beside a task that wakes
 * itself on every poll; at the spinner's 10th poll the test's peer sends a
 * byte and waits (poll(2) on the stream's descriptor) until the kernel has
 * it queued, so from then on the event is ready and the test counts the
 * spinner's polls until the reader has its byte: no milliseconds. */
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stage06.h"

LAB_SUITE(starvation, 10);

#define TICK_POLLS 61u   /* executor.h contract 6 */
#define SEND_AT 10u      /* the spinner's poll at which the byte is sent */
#define GIVE_UP 5000u    /* the spinner stops here, read or not */

struct book {
    struct iostack *s;
    int peer, fd;         /* the raw peer; the stream's descriptor */
    bool unpark_each;     /* the spinner also unparks the driver on every poll */
    unsigned spins;
    unsigned sent_at;     /* spins when the byte was queued (0: not yet) */
    unsigned read_at;     /* spins when the reader had it (0: not yet) */
    ssize_t got;
    bool queue_failed;    /* the byte never became readable in the kernel */
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
        if (send(b->peer, "x", 1, MSG_NOSIGNAL) != 1) {
            b->queue_failed = true;
        } else {
            struct pollfd p = { .fd = b->fd, .events = POLLIN };
            if (poll(&p, 1, (int)SCALED_MS(2000)) != 1)
                b->queue_failed = true;
        }
        b->sent_at = b->spins;
    }
    if (b->unpark_each) /* as if other threads kept waking tasks of this executor */
        driver_unpark(io_driver_driver(b->s->io));
    if (b->spins >= GIVE_UP || b->read_at != 0)
        return POLL_READY;
    waker_wake_by_ref(cx->waker);
    return POLL_PENDING;
}

static const struct future_vtable spinner_vt = FUTURE_VTABLE_INIT(struct spinner, 0, spinner_poll, NULL);

struct noted_read {
    struct tcp_read rd;
    struct book *b;
    char buf[8];
};

static enum poll noted_read_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct noted_read *nr = self;
    ssize_t n;
    nr->rd.buf = nr->buf; /* the task's copy of the future: read into its own buffer */
    if (tcp_read_poll(&nr->rd, cx, &n) == POLL_PENDING)
        return POLL_PENDING;
    nr->b->got = n;
    nr->b->read_at = nr->b->spins;
    return POLL_READY;
}

static void noted_read_drop(void *self)
{
    struct noted_read *nr = self;
    tcp_read_drop(&nr->rd);
}

static const struct future_vtable noted_read_vt =
    FUTURE_VTABLE_INIT(struct noted_read, 0, noted_read_poll, noted_read_drop);

static void read_beside_spinner(bool unpark_each)
{
    struct iostack s;
    iostack_new(&s);
    struct conn c;
    conn_new(&s, &c);
    struct book b = { .s = &s, .peer = c.peer, .fd = tcp_stream_fd(c.st), .unpark_each = unpark_each };
    /* the reader first: its first poll finds nothing and waits */
    struct noted_read nr = { .b = &b };
    nr.rd = tcp_read(c.st, nr.buf, sizeof nr.buf);
    iostack_spawn(&s, future_of(&noted_read_vt, &nr));
    struct spinner sp = { .b = &b };
    iostack_spawn(&s, future_of(&spinner_vt, &sp));
    iostack_run(&s);
    cr_assert_not(b.queue_failed, "the test's peer could not send its byte (the test's own failure)");
    cr_assert_eq(b.got, 1, "the reader got %zd bytes; expected the 1 byte sent", b.got);
    unsigned bound = b.sent_at + TICK_POLLS + 2;
    cr_assert(b.read_at != 0 && b.read_at <= bound,
              "a reader waited beside a task that wakes itself on every poll%s: its byte was readable from "
              "the spinner's poll %u, and it was read at poll %u (0: only after the spinner stopped, at %u); "
              "at most %u expected. The socket's event waited in epoll while the spinner ran: no "
              "zero-timeout turn of the driver stack in that time read it (executor.h contract 6: a turn every "
              "EXECUTOR_DRIVER_INTERVAL task polls; io_driver.h contract 4: park(0) is a poll of the kernel); "
              "the next hint: make hint STAGE=6 ITEM=io-beside-spinner",
              unpark_each ? " and unparks the driver on every poll (as wakes from other threads do)" : "",
              b.sent_at, b.read_at, GIVE_UP, bound);
    conn_free(&c);
    iostack_free(&s);
}

LAB_TEST(starvation, read_beside_a_spinner, 10) { read_beside_spinner(false); }

LAB_TEST(starvation, read_beside_a_spinner_and_unparks, 10) { read_beside_spinner(true); }
