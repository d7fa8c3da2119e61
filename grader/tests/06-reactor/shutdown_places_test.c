/* shutdown_places_test.c - stage 06: executor_free with tasks that own
 * their sockets and wait in the reactor (a pending read, a pending accept),
 * and with a task the reactor has woken but that has not run yet; then the
 * drivers and the reactor are freed. A connection task dropped at shutdown
 * closes its stream without dropping its read first: the close (deregister)
 * must give back the waker the registration holds.
 *
 * The test checks the books itself; the rubric runs it under Valgrind. */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "join_checks.h"
#include "stage06.h"

LAB_SUITE(shutdown_at, 10);

static unsigned owner_drops;

/* A task that owns a stream and reads from it for ever; its drop closes the
 * stream (as a connection handler's would), nothing else. */
struct reader {
    struct tcp_stream *st;
    char buf[64];
};
static enum poll reader_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct reader *r = self;
    ssize_t n;
    while (tcp_stream_poll_read(r->st, cx, r->buf, sizeof r->buf, &n) == POLL_READY)
        if (n <= 0)
            return POLL_READY;
    return POLL_PENDING;
}
static void reader_drop(void *self)
{
    tcp_stream_close(((struct reader *)self)->st);
    owner_drops++;
}
static const struct future_vtable reader_vt = FUTURE_VTABLE_INIT(struct reader, 0, reader_poll, reader_drop);

/* A task that owns a listener and accepts for ever; its drop drops the
 * pending accept, then closes the listener. */
struct acceptor {
    struct tcp_listener *l;
    struct tcp_accept acc;
};
static enum poll acceptor_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct acceptor *a = self;
    struct tcp_stream_result res;
    while (tcp_accept_poll(&a->acc, cx, &res) == POLL_READY) {
        if (res.err == 0)
            tcp_stream_close(res.stream);
        a->acc = tcp_accept(a->l);
    }
    return POLL_PENDING;
}
static void acceptor_drop(void *self)
{
    struct acceptor *a = self;
    tcp_accept_drop(&a->acc);
    tcp_listener_close(a->l);
    owner_drops++;
}
static const struct future_vtable acceptor_vt = FUTURE_VTABLE_INIT(struct acceptor, 0, acceptor_poll, acceptor_drop);

static struct join_handle *spawn_reader(struct iostack *s, struct conn *c)
{
    struct reader r = { .st = c->st };
    c->st = NULL; /* the task owns it now */
    struct join_handle *jh = executor_spawn(s->ex, future_of(&reader_vt, &r), NULL);
    cr_assert_not_null(jh, "executor_spawn returned NULL");
    return jh;
}

LAB_TEST(shutdown_at, tasks_waiting_in_the_reactor, 10)
{
    owner_drops = 0;
    alloc_count_start();
    struct iostack s;
    iostack_new(&s);
    struct conn quiet, loud;
    conn_new(&s, &quiet);
    conn_new(&s, &loud);
    struct join_handle *jh[3];
    jh[0] = spawn_reader(&s, &quiet); /* waits for bytes that never come */
    jh[1] = spawn_reader(&s, &loud);  /* will be woken, and not run */
    struct acceptor a = { .l = iostack_listen(&s) };
    a.acc = tcp_accept(a.l);
    jh[2] = executor_spawn(s.ex, future_of(&acceptor_vt, &a), NULL);
    cr_assert_not_null(jh[2], "executor_spawn returned NULL");
    cr_assert_eq(executor_run_until_idle(s.ex), EXECUTOR_IDLE, "run_until_idle with two readers and an acceptor "
                 "waiting did not say EXECUTOR_IDLE");
    /* bytes for the loud reader; zero-timeout parks dispatch the edge and
     * wake its task, which stays queued (this thread is not running it) */
    cr_assert(raw_send_all(loud.peer, "hello", 5), "send to the loud reader failed");
    struct driver d = time_driver_driver(s.td);
    uint64_t end = monotonic_ns() + (uint64_t)SCALED_MS(2000) * MS_NS;
    while (executor_test_queue_len(s.ex) == 0 && monotonic_ns() < end) {
        driver_park(d, 0);
        if (executor_test_queue_len(s.ex) == 0)
            lab_sleep_ms(1);
    }
    cr_assert_eq(executor_test_queue_len(s.ex), 1, "bytes sent to a reading task's socket queued %zu tasks after "
                 "zero-timeout parks of the driver stack, not 1", executor_test_queue_len(s.ex));
    executor_free(s.ex);
    cr_assert_eq(owner_drops, 3, "executor_free dropped %u of the 3 tasks' futures (two readers, one "
                 "acceptor); it must drop every task it still owns (executor.h contract 5)",
                 owner_drops);
    conn_free(&quiet); /* the listeners and the raw peers; the streams went with their tasks */
    conn_free(&loud);
    struct reactor_stats st = reactor_test_stats(s.r);
    cr_assert_eq(st.registrations, 0, "%zu registrations left in the reactor after executor_free dropped every "
                 "task that owned a socket: closing a stream or a listener deregisters it (reactor.h contract 5)",
                 st.registrations);
    static const char *const what[] = { "a task waiting to read", "a task woken by the reactor, not yet run",
                                        "a task waiting to accept" };
    for (int i = 0; i < 3; i++)
        expect_join_cancelled_per(jh[i], what[i], "executor_free cancels every task it drops (executor.h contract 5)");
    time_driver_free(s.td);
    io_driver_free(s.io);
    reactor_free(s.r);
    struct alloc_counts ac = alloc_count_stop();
    cr_assert_eq(ac.frees, ac.allocs, "%llu allocations, %llu frees after executor_free with tasks waiting in the "
                 "reactor: the wakers the registrations held when their streams and listeners were closed kept "
                 "their tasks alive (reactor.h contract 5); the next hint: make hint STAGE=6 "
                 "ITEM=shutdown-every-place", (unsigned long long)ac.allocs,
                 (unsigned long long)ac.frees);
}
