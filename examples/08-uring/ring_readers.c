/* ring_readers.c - stage 08's traced example: readers on the ring, one of
 * them dropped mid-flight.
 *
 *   make trace STAGE=8                        your ring (labs/)
 *   make trace STAGE=8 TARGET=path/to/tree    another tree like labs/
 *
 * Eight tasks each read one message from a socketpair on the ring; a ninth
 * sends to each pair in turn, 3 ms apart, on stage 05's timers. Every
 * reader's wake starts in the ring driver's turn (a CQE dispatched after
 * io_uring_enter returns), and the sender's in the time driver's. Reader 0
 * gives up after 5 ms instead (its read future is dropped while the kernel
 * holds the buffer): an orphan, its cancel submitted with the next park,
 * freed at its last CQE (docs/08-uring.md#dropping-a-future-the-orphan).
 *
 *   ring_readers [readers]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "executor.h"
#include "ring.h"
#include "sleep.h"
#include "time_driver.h"
#include "uring_tcp.h"

#define MS UINT64_C(1000000)

static struct time_driver *td;
static struct ring *ring;

struct reader {
    struct uring_read rd;
    struct sleep give_up;   /* reader 0 only */
    bool impatient, started;
    char buf[32];
};

static enum poll reader_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct reader *r = self;
    r->rd.dst = r->buf;
    if (r->impatient && !r->started) {
        r->give_up = sleep_for(td, 5 * MS);
        r->started = true;
    }
    ssize_t n;
    if (uring_read_poll(&r->rd, cx, &n) == POLL_READY)
        return POLL_READY;
    if (r->impatient && sleep_poll(&r->give_up, cx) == POLL_READY) {
        uring_read_drop(&r->rd); /* the kernel still holds the buffer: an orphan */
        return POLL_READY;
    }
    return POLL_PENDING;
}

static void reader_drop(void *self)
{
    struct reader *r = self;
    uring_read_drop(&r->rd);
    if (r->started)
        sleep_drop(&r->give_up);
}

static const struct future_vtable reader_vt = FUTURE_VTABLE_INIT(struct reader, 0, reader_poll, reader_drop);

struct sender {
    int *fds;
    int n, next;
    struct sleep s;
    bool sleeping;
};

static enum poll sender_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct sender *s = self;
    for (;;) {
        if (!s->sleeping) {
            if (s->next == s->n)
                return POLL_READY;
            s->s = sleep_for(td, 3 * MS);
            s->sleeping = true;
        }
        if (sleep_poll(&s->s, cx) == POLL_PENDING)
            return POLL_PENDING;
        sleep_drop(&s->s);
        s->sleeping = false;
        int i = s->next++;
        if (i > 0 && send(s->fds[i], "hello", 5, MSG_NOSIGNAL) != 5)
            perror("send");
    }
}

static void sender_drop(void *self)
{
    struct sender *s = self;
    if (s->sleeping)
        sleep_drop(&s->s);
}

static const struct future_vtable sender_vt = FUTURE_VTABLE_INIT(struct sender, 0, sender_poll, sender_drop);

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8;
    if (n < 1 || n > 256)
        n = 8;
    int e = ring_new(64, 512, &ring);
    if (e < 0) {
        fprintf(stderr, "ring_new: io_uring is not available here (%d)\n", e);
        return 1;
    }
    td = time_driver_new(ring_driver(ring));
    struct executor *ex = executor_new(time_driver_driver(td));
    int *peer = calloc((size_t)n, sizeof *peer);
    struct uring_stream **st = calloc((size_t)n, sizeof *st);
    for (int i = 0; i < n; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
            return 1;
        st[i] = uring_stream_new(ring, sv[0]);
        peer[i] = sv[1];
        struct reader r = { .rd = uring_read(st[i], NULL, sizeof r.buf), .impatient = i == 0 };
        join_handle_drop(executor_spawn(ex, future_of(&reader_vt, &r), NULL));
    }
    struct sender s = { .fds = peer, .n = n };
    join_handle_drop(executor_spawn(ex, future_of(&sender_vt, &s), NULL));
    enum executor_status status = executor_run(ex);
    executor_free(ex);
    time_driver_free(td);
    for (int i = 0; i < n; i++) {
        uring_stream_close(st[i]);
        close(peer[i]);
    }
    ring_free(ring); /* waits for reader 0's orphan if its last CQE has not come */
    free(peer);
    free(st);
    printf("%d readers, one dropped mid-flight: %s\n", n, executor_status_str(status));
    return status == EXECUTOR_OK ? 0 : 1;
}
