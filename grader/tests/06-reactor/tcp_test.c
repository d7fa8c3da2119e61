/* tcp_test.c - async TCP on the whole stack (executor, time driver, I/O
 * driver, reactor), over 127.0.0.1 only. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "coop.h"
#include "stage06.h"

LAB_SUITE(tcp, 10);
LAB_SUITE(tcp_stress, 15);

/* ---- round trips ---------------------------------------------------------------- */

/* A server task and two client tasks on one executor: 1 byte and 300 KB
 * (more than a socket buffer holds: writes are partial and meet EAGAIN). */
LAB_TEST(tcp, round_trip, 10)
{
    struct iostack s;
    iostack_new(&s);
    struct tcp_listener *l = iostack_listen(&s);
    struct echo_tally tally = { 0 };
    struct echo_server es = { .s = &s, .l = l, .conns = 2, .tally = &tally };
    iostack_spawn(&s, echo_server_future(&es));
    unsigned done = 0;
    int failed = 0;
    struct echo_client a, b;
    echo_client_init(&a, s.r, tcp_listener_port(l), 3, 1, 7, &done, &failed);
    echo_client_init(&b, s.r, tcp_listener_port(l), 3, 300000, 11, &done, &failed);
    iostack_spawn(&s, echo_client_future(&a));
    iostack_spawn(&s, echo_client_future(&b));
    iostack_run(&s);
    cr_assert_eq(failed, 0, "an echo client failed (support.c line %d): a connect, write or read gave an error, "
                 "end of stream too early, or bytes that differ", failed);
    cr_assert_eq(done, 2, "%u of 2 echo clients finished", done);
    cr_assert_eq(tally.err, 0, "accept failed: %s", strerror(-tally.err));
    tcp_listener_close(l);
    iostack_free(&s);
}

/* A write of 4 MB, each byte distinct from its neighbours, to a peer that
 * a thread of the test drains as fast as it can, 1,000 bytes at a time, on
 * small socket buffers: thousands of partial sends, and between them the
 * buffer empties at any moment. Every byte must arrive once and in its
 * place: a write that goes on after a partial send resumes at what was
 * not sent yet. */
enum { DRAIN_TOTAL = 4 << 20 };
#define DRAIN_SEED 23

/* the reading end: drain_peer (raw_sockets.h) */

LAB_TEST(tcp, write_all_to_a_draining_peer_sends_each_byte_once, 10)
{
    struct iostack s;
    iostack_new(&s);
    struct conn c;
    int small = 4096;
    conn_new_rcvbuf(&s, &c, small);
    setsockopt(tcp_stream_fd(c.st), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    unsigned char *out = malloc(DRAIN_TOTAL);
    cr_assert_not_null(out, "out of memory in the test itself");
    for (size_t i = 0; i < DRAIN_TOTAL; i++)
        out[i] = pattern_byte(DRAIN_SEED, i);
    struct drain_peer d = { .fd = c.peer, .total = DRAIN_TOTAL, .seed = DRAIN_SEED };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, drain_peer_run, &d), 0, "pthread_create failed");
    struct tcp_write wr = tcp_write_all(c.st, out, DRAIN_TOTAL);
    ssize_t n = 0;
    enum executor_status st = executor_block_on(s.ex, tcp_write_future(&wr), &n);
    shutdown(tcp_stream_fd(c.st), SHUT_WR); /* the peer's reader ends, whatever came */
    pthread_join(th, NULL);
    free(out);
    lab_note("4 MB written: %zd; the peer read %zu bytes", n, d.got);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(write_all of 4 MB) ended with %s", executor_status_str(st));
    cr_assert_eq(n, (ssize_t)DRAIN_TOTAL, "write_all of %d bytes gave %zd", DRAIN_TOTAL, n);
    cr_assert(d.bad_at == DRAIN_TOTAL,
              "4 MB written with write_all to a peer draining them on another thread (small socket buffers: "
              "thousands of partial sends): byte %zu arrived as %#x where byte %zu of the buffer is %#x. The "
              "write sent some bytes twice, or out of order. After a partial send, where in buf does the next send "
              "start, and what does the count a write returns say went out? (tcp.h)", d.bad_at, d.bad, d.bad_at, d.want);
    cr_assert_eq(d.got, (size_t)DRAIN_TOTAL, "the peer read %zu of %d bytes (tcp.h)", d.got, DRAIN_TOTAL);
    conn_free(&c);
    iostack_free(&s);
}

/* ---- the budget -------------------------------------------------------------------------
 *
 * A poll with the budget spent is Pending having done nothing: accept, read
 * and write each check the budget before their syscall (docs/06-reactor.md
 * #the-budget). A check after it is too late: the syscall already took the
 * bytes, sent them or accepted the connection, and the Pending that follows
 * loses them (a read), repeats them (a write: the caller sends again) or
 * leaks them (an accept). Each is polled once with the budget spent, after
 * its readiness is known (the I/O driver has dispatched the socket's edge),
 * and then with the budget back. */
static void dispatch_edges(struct iostack *s)
{
    for (int i = 0; i < 5; i++)
        (void)driver_park(io_driver_driver(s->io), (int64_t)MS_NS);
}

LAB_TEST(tcp, spent_budget_reads_writes_and_accepts_nothing, 10)
{
    struct iostack s;
    iostack_new(&s);
    struct conn c;
    conn_new(&s, &c);
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);

    /* read: 6 bytes waiting, readable known */
    cr_assert_eq(send(c.peer, "budget", 6, MSG_NOSIGNAL), 6, "send failed in the test itself");
    dispatch_edges(&s);
    char buf[16];
    ssize_t n = 0;
    coop_reset(0);
    enum poll spent = tcp_stream_poll_read(c.st, &cx, buf, sizeof buf, &n);
    coop_unlimit();
    enum poll later = POLL_PENDING;
    for (int i = 0; i < 200 && later == POLL_PENDING; i++) {
        n = 0;
        later = tcp_stream_poll_read(c.st, &cx, buf, sizeof buf, &n);
        if (later == POLL_PENDING)
            dispatch_edges(&s);
    }
    cr_assert_eq(spent, POLL_PENDING, "a read polled with the budget spent (coop_reset(0)) was Ready: a leaf "
                 "future with no budget left answers Pending (coop.h; docs/06-reactor.md#the-budget)");
    cr_assert(later == POLL_READY && n == 6 && memcmp(buf, "budget", 6) == 0, "6 bytes were waiting in the socket "
              "and the stream was known readable; a read polled with the budget spent answered Pending, and the "
              "reads after it, with the budget back, %s. Those bytes were taken by the poll that answered "
              "Pending. Where in the read does the budget have to be checked so that a Pending leaves the socket "
              "as it was (coop.h; docs/06-reactor.md#the-budget)?",
              later == POLL_READY ? "got something else" : "found nothing in 1 s");

    /* write: writable known, the peer's side empty */
    coop_reset(0);
    spent = tcp_stream_poll_write(c.st, &cx, "xyz", 3, &n);
    coop_unlimit();
    char peer_buf[16];
    ssize_t early = recv(c.peer, peer_buf, sizeof peer_buf, MSG_DONTWAIT);
    cr_assert_eq(spent, POLL_PENDING, "a write polled with the budget spent was Ready: a leaf future with no "
                 "budget left answers Pending (coop.h; docs/06-reactor.md#the-budget)");
    cr_assert(early < 0, "a write of \"xyz\" polled with the budget spent answered Pending, and the peer had "
              "already received %zd bytes of it: the caller, told Pending, will send them again. Where in the "
              "write does the budget have to be checked (coop.h; docs/06-reactor.md#the-budget)?", early);
    later = POLL_PENDING;
    for (int i = 0; i < 200 && later == POLL_PENDING; i++) {
        later = tcp_stream_poll_write(c.st, &cx, "xyz", 3, &n);
        if (later == POLL_PENDING)
            dispatch_edges(&s);
    }
    cr_assert(later == POLL_READY && n == 3, "with the budget back, a write of 3 bytes to an idle peer was not "
              "Ready with 3 in 1 s");

    /* accept: a client waiting in the backlog, readable known */
    int client = raw_connect(tcp_listener_port(c.l));
    cr_assert_geq(client, 0, "the test's client could not connect");
    dispatch_edges(&s);
    struct tcp_accept acc = tcp_accept(c.l);
    struct tcp_stream_result res = { .err = 1 };
    coop_reset(0);
    spent = tcp_accept_poll(&acc, &cx, &res);
    coop_unlimit();
    later = POLL_PENDING;
    for (int i = 0; i < 200 && later == POLL_PENDING && spent == POLL_PENDING; i++) {
        later = tcp_accept_poll(&acc, &cx, &res);
        if (later == POLL_PENDING)
            dispatch_edges(&s);
    }
    tcp_accept_drop(&acc);
    if (later == POLL_READY && res.err == 0 && res.stream)
        tcp_stream_close(res.stream);
    close(client);
    cr_assert_eq(spent, POLL_PENDING, "an accept polled with the budget spent was Ready: a leaf future with no "
                 "budget left answers Pending (coop.h; docs/06-reactor.md#the-budget)");
    cr_assert(later == POLL_READY && res.err == 0, "a client was waiting to be accepted and the listener was known "
              "readable; an accept polled with the budget spent answered Pending, and the accepts after it, with "
              "the budget back, %s: the Pending one had accepted the client and lost it. Where in the accept "
              "does the budget have to be checked (coop.h; docs/06-reactor.md#the-budget)?",
              later == POLL_READY ? "failed" : "found nobody in 1 s");
    conn_free(&c);
    iostack_free(&s);
}

LAB_TEST(tcp, connect_refused_is_an_error, 5)
{
    struct iostack s;
    iostack_new(&s);
    struct tcp_connect c = tcp_connect(s.r, "127.0.0.1", free_port());
    struct tcp_stream_result res = { .err = 0 };
    enum executor_status st = executor_block_on(s.ex, tcp_connect_future(&c), &res);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(connect) ended with %s", executor_status_str(st));
    cr_assert_eq(res.err, -ECONNREFUSED, "connect to a port where nothing listens gave %d (%s); expected "
                 "-ECONNREFUSED: the refused connect was reported as something else (tcp.h: connect's result is "
                 "-errno); the next hint: make hint STAGE=6 ITEM=round-trip", res.err,
                 strerror(-res.err));
    iostack_free(&s);
}

/* ---- drain to EAGAIN -------------------------------------------------------------- */

struct trickle {
    int fd;
    unsigned n, gap_ms;
};

static void *trickler(void *arg)
{
    struct trickle *t = arg;
    for (unsigned i = 0; i < t->n; i++) {
        if (send(t->fd, "t", 1, MSG_NOSIGNAL) != 1)
            return (void *)1;
        lab_sleep_ms(t->gap_ms);
    }
    shutdown(t->fd, SHUT_WR);
    return NULL;
}

/* Reads to end of stream. Its results live outside the state, which the
 * executor copies into the task (future.h). */
struct drained {
    size_t got;
    bool eof;
    ssize_t err;
    unsigned long polls;
};
struct drain_reader {
    struct tcp_stream *st;
    struct drained *d;
};

static enum poll drain_reader_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct drained *d = ((struct drain_reader *)self)->d;
    struct tcp_stream *st = ((struct drain_reader *)self)->st;
    char buf[64];
    d->polls++;
    for (;;) {
        ssize_t n;
        if (tcp_stream_poll_read(st, cx, buf, sizeof buf, &n) == POLL_PENDING)
            return POLL_PENDING;
        if (n < 0) {
            d->err = n;
            return POLL_READY;
        }
        if (n == 0) {
            d->eof = true;
            return POLL_READY;
        }
        d->got += (size_t)n;
    }
}
static const struct future_vtable drain_reader_vt = FUTURE_VTABLE_INIT(struct drain_reader, 0, drain_reader_poll, NULL);

/* A peer sends one byte every 2 ms. The reader drains each to EAGAIN and
 * sleeps: at most about one poll per byte (edges may merge), never a hot
 * loop, and every byte arrives. Short reads on, then off. */
static void trickle_run(bool short_read)
{
    struct iostack s;
    iostack_new(&s);
    struct conn c;
    conn_new(&s, &c);
    tcp_stream_set_short_read(c.st, short_read);
    struct trickle t = { .fd = c.peer, .n = lab_scale(100, 20), .gap_ms = 2 };
    struct drained d = { 0 };
    struct drain_reader dr = { .st = c.st, .d = &d };
    pthread_t th;
    pthread_create(&th, NULL, trickler, &t);
    struct rusage u0, u1;
    bool counted = getrusage(RUSAGE_THREAD, &u0) == 0;
    uint64_t c0 = thread_cpu_ns();
    enum executor_status st = executor_block_on(s.ex, future_of(&drain_reader_vt, &dr), NULL);
    uint64_t cpu = thread_cpu_ns() - c0;
    /* times the reading thread went to sleep: a reader that waits for each edge sleeps about once a
     * byte, whatever share of a CPU it gets; one that loops on EAGAIN inside a poll never does, and on
     * a busy machine its CPU time alone can stay under the bound */
    long sleeps = counted && getrusage(RUSAGE_THREAD, &u1) == 0 ? u1.ru_nvcsw - u0.ru_nvcsw : -1;
    void *r;
    pthread_join(th, &r);
    unsigned long polls = d.polls;
    lab_note("short reads %s: %u bytes, %lu polls, %.2f ms CPU, the reader slept %ld times", short_read ? "on" : "off",
             t.n, polls, cpu / 1e6, sleeps);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(read to end of stream) ended with %s", executor_status_str(st));
    cr_assert_null(r, "the trickling peer could not send");
    cr_assert_eq(d.err, 0, "a read failed: %s", strerror((int)-d.err));
    cr_assert_eq(d.got, t.n, "%zu of %u trickled bytes arrived", d.got, t.n);
    cr_assert(d.eof, "no end of stream after the peer shut down");
    cr_assert_leq(polls, 2ul * t.n + 5, "%lu polls for %u bytes sent one at a time: a reader that drains to EAGAIN "
                  "and then waits is polled about once per edge", polls, t.n);
    cr_assert(sleeps < 0 || sleeps >= (long)t.n / 4, "reading %u bytes trickled over %u ms, the reading thread "
              "went to sleep %ld times: it kept running between edges instead of waiting for the next one "
              "(reactor.h contract 2; tcp.h contract 1); the next hint: make hint STAGE=6 ITEM=drain-to-eagain",
              t.n, t.n * t.gap_ms, sleeps);
    cr_assert_lt(cpu, (50 + 2 * t.n / 10) * MS_NS * LAB_TIMEOUT_SCALE, "reading %u bytes trickled over %u ms cost "
                 "%.1f ms of CPU: the reader kept running between edges instead of waiting for the next one "
                 "(reactor.h contract 2; tcp.h contract 1); the next hint: make hint STAGE=6 ITEM=drain-to-eagain",
                 t.n,
                 t.n * t.gap_ms, cpu / 1e6);
    conn_free(&c);
    iostack_free(&s);
}


/* Reads until it has `want` bytes. */
struct fill_reader {
    struct tcp_stream *st;
    size_t want;
    struct drained *d;
    atomic_bool *done;
};

static enum poll fill_reader_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct fill_reader *f = self;
    char buf[64];
    f->d->polls++;
    while (f->d->got < f->want) {
        ssize_t n;
        if (tcp_stream_poll_read(f->st, cx, buf, sizeof buf, &n) == POLL_PENDING)
            return POLL_PENDING;
        if (n <= 0) {
            f->d->err = n;
            f->d->eof = n == 0;
            break;
        }
        f->d->got += (size_t)n;
    }
    atomic_store_explicit(f->done, true, memory_order_release); /* pairs with the rescuer's acquire load */
    return POLL_READY;
}
static const struct future_vtable fill_reader_vt = FUTURE_VTABLE_INIT(struct fill_reader, 0, fill_reader_poll, NULL);

struct rescuer {
    int fd;
    atomic_bool *done;
    bool rescued;
};

/* Two seconds for the reader; then the peer shuts its write half, whose
 * edge lets a reader that waits for an edge out. */
static void *rescue_later(void *arg)
{
    struct rescuer *r = arg;
    for (int i = 0; i < 2000 * LAB_TIMEOUT_SCALE; i++) {
        /* acquire: pairs with the reader's release store */
        if (atomic_load_explicit(r->done, memory_order_acquire))
            return NULL;
        lab_sleep_ms(1);
    }
    r->rescued = true;
    shutdown(r->fd, SHUT_WR);
    return NULL;
}

/* Short reads on (the default): 200 bytes sent at once, read 64 at a time.
 * A read that fills the buffer says nothing about what is left: the bytes
 * after it are already there and no new edge will come for them. */
LAB_TEST(tcp, full_read_keeps_readable, 5)
{
    struct iostack s;
    iostack_new(&s);
    struct conn c;
    conn_new(&s, &c);
    static char msg[200];
    memset(msg, 'f', sizeof msg);
    cr_assert_eq(send(c.peer, msg, sizeof msg, MSG_NOSIGNAL), (ssize_t)sizeof msg, "send failed in the test itself");
    atomic_bool done;
    atomic_init(&done, false);
    struct drained d = { 0 };
    struct fill_reader fr = { .st = c.st, .want = sizeof msg, .d = &d, .done = &done };
    struct rescuer rs = { .fd = c.peer, .done = &done };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, rescue_later, &rs), 0, "pthread_create failed");
    enum executor_status st = executor_block_on(s.ex, future_of(&fill_reader_vt, &fr), NULL);
    pthread_join(th, NULL);
    lab_note("%zu bytes in %lu polls%s", d.got, d.polls, rs.rescued ? ", after the peer's rescue" : "");
    cr_assert_eq(st, EXECUTOR_OK, "block_on(read 200 bytes) ended with %s", executor_status_str(st));
    cr_assert_not(rs.rescued, "200 bytes were sent at once and read 64 at a time, short reads on: after %zu bytes "
                  "the reader waited for an edge with the rest already in the socket, and got them only when the "
                  "peer shut down its half 2 s later. A read that filled the buffer was taken for a short read "
                  "(tcp.h contract 5: only a read that fills less than the buffer clears readable)", d.got);
    cr_assert_eq(d.got, sizeof msg, "%zu of 200 bytes arrived (err %zd)", d.got, d.err);
    conn_free(&c);
    iostack_free(&s);
}

LAB_TEST(tcp, trickle_drains_to_eagain, 5) { trickle_run(false); }
LAB_TEST(tcp, trickle_with_short_reads, 5) { trickle_run(true); }

/* ---- end of stream, resets, SIGPIPE --------------------------------------------------- */

/* The reader is already waiting when the peer sends 5 bytes and hangs up:
 * 5 bytes, then end of stream (a read of 0), and again 0. */
LAB_TEST(tcp, peer_hangup_is_end_of_stream, 5)
{
    struct iostack s;
    iostack_new(&s);
    struct conn c;
    conn_new(&s, &c);
    struct drained d = { 0 };
    struct drain_reader dr = { .st = c.st, .d = &d };
    struct delayed dl = { .fd = c.peer, .ms = 20, .msg = "hello", .end = PEER_SHUTDOWN };
    pthread_t th;
    pthread_create(&th, NULL, delayed_peer, &dl);
    enum executor_status st = executor_block_on(s.ex, future_of(&drain_reader_vt, &dr), NULL);
    pthread_join(th, NULL);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(read to end) ended with %s", executor_status_str(st));
    cr_assert_eq(d.err, 0, "a read failed: %s", strerror((int)-d.err));
    cr_assert_eq(d.got, 5, "%zu bytes before end of stream; expected 5", d.got);
    cr_assert(d.eof, "the peer's hang-up was not an end of stream");
    /* a waiting reader, and a hang-up with no data at all */
    struct drained d2 = { 0 };
    dr = (struct drain_reader){ .st = c.st, .d = &d2 };
    st = executor_block_on(s.ex, future_of(&drain_reader_vt, &dr), NULL);
    cr_assert(st == EXECUTOR_OK && d2.eof && d2.got == 0, "a read after end of stream did not say end of stream again");
    conn_free(&c);

    conn_new(&s, &c);
    struct drained d3 = { 0 };
    dr = (struct drain_reader){ .st = c.st, .d = &d3 };
    dl = (struct delayed){ .fd = c.peer, .ms = 20, .msg = NULL, .end = PEER_SHUTDOWN };
    pthread_create(&th, NULL, delayed_peer, &dl);
    st = executor_block_on(s.ex, future_of(&drain_reader_vt, &dr), NULL);
    pthread_join(th, NULL);
    cr_assert(st == EXECUTOR_OK && d3.eof && d3.got == 0 && d3.err == 0, "a waiting reader was not told end of "
              "stream when the peer hung up without sending (got %zu, err %zd)", d3.got, d3.err);
    conn_free(&c);
    iostack_free(&s);
}

/* A reset is an error, not an end of stream, and not a hang. */
LAB_TEST(tcp, reset_is_an_error, 5)
{
    struct iostack s;
    iostack_new(&s);
    struct conn c;
    conn_new(&s, &c);
    struct drained d = { 0 };
    struct drain_reader dr = { .st = c.st, .d = &d };
    struct delayed dl = { .fd = c.peer, .ms = 20, .msg = NULL, .end = PEER_RESET };
    pthread_t th;
    pthread_create(&th, NULL, delayed_peer, &dl);
    enum executor_status st = executor_block_on(s.ex, future_of(&drain_reader_vt, &dr), NULL);
    pthread_join(th, NULL);
    c.peer = -1; /* closed by the thread */
    cr_assert_eq(st, EXECUTOR_OK, "block_on(read) ended with %s", executor_status_str(st));
    cr_assert_eq(d.err, -ECONNRESET, "a reset peer gave err %zd (eof %d); expected -ECONNRESET", d.err, d.eof);
    conn_free(&c);
    iostack_free(&s);
}

static volatile sig_atomic_t sigpipes;
static void on_sigpipe(int sig)
{
    (void)sig;
    sigpipes++;
}

/* Writing to a peer that reset the connection is an error (EPIPE or
 * ECONNRESET) the writer sees, never a SIGPIPE (which kills a program that
 * has not ignored it; the test counts them instead of dying). */
LAB_TEST(tcp, write_to_closed_peer_is_an_error_not_sigpipe, 5)
{
    struct sigaction sa = { .sa_handler = on_sigpipe };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
    struct iostack s;
    iostack_new(&s);
    struct conn c;
    conn_new(&s, &c);
    raw_close_reset(c.peer);
    c.peer = -1;
    lab_sleep_ms(20);
    static char buf[65536];
    ssize_t res = 0;
    bool epipe = false;
    for (int i = 0; i < 8 && !epipe; i++) {
        struct tcp_write wr = tcp_write_all(c.st, buf, sizeof buf);
        enum executor_status st = executor_block_on(s.ex, tcp_write_future(&wr), &res);
        cr_assert_eq(sigpipes, 0, "writing to a reset connection raised SIGPIPE, which kills any program that "
                     "has not ignored it; the writer was to get -EPIPE or -ECONNRESET instead (tcp.h contract 3); "
                     "the next hint: make hint STAGE=6 ITEM=sigpipe");
        cr_assert_eq(st, EXECUTOR_OK, "block_on(write) ended with %s", executor_status_str(st));
        cr_assert(res < 0, "write %d to a reset connection succeeded (%zd)", i, res);
        cr_assert(res == -EPIPE || res == -ECONNRESET, "write to a reset connection gave %zd (%s); expected "
                  "-EPIPE or -ECONNRESET", res, strerror((int)-res));
        epipe = res == -EPIPE;
    }
    cr_assert(epipe, "no write saw EPIPE");
    conn_free(&c);
    iostack_free(&s);
}

/* ---- accept and EMFILE ---------------------------------------------------------------- */

/* Lowers RLIMIT_NOFILE to the descriptors in use: every new descriptor from
 * here fails with EMFILE. Returns the limit fds_back puts back. */
static rlim_t fds_run_out(void)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t saved = rl.rlim_cur;
    int probe = dup(0);
    cr_assert_geq(probe, 0, "dup failed in the test itself");
    close(probe);
    rl.rlim_cur = (rlim_t)probe;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0, "setrlimit failed in the test itself");
    return saved;
}

static void fds_back(rlim_t saved)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = saved;
    setrlimit(RLIMIT_NOFILE, &rl);
}

struct restore {
    rlim_t limit;
    unsigned ms;
};

static void *restore_limit(void *arg)
{
    struct restore *r = arg;
    lab_sleep_ms(r->ms);
    fds_back(r->limit);
    return NULL;
}

/* A client waits in the backlog while the process has no descriptor left:
 * accept fails with EMFILE. The accept future backs off on a timer (a few
 * accept calls, almost no CPU) and accepts once a descriptor is free. */
LAB_TEST(tcp, accept_emfile_backs_off, 10)
{
    struct iostack s;
    iostack_new(&s);
    struct tcp_listener *l = iostack_listen(&s);
    int client = raw_connect(tcp_listener_port(l));
    struct restore rs = { .limit = fds_run_out(), .ms = 250 };
    pthread_t th;
    pthread_create(&th, NULL, restore_limit, &rs);

    struct tcp_accept acc = tcp_accept(l);
    struct tcp_stream_result res = { .err = 1 };
    struct timeout to = timeout_new(tcp_accept_future(&acc), &res, s.td, 3000 * MS_NS);
    enum timeout_result tr = TIMEOUT_ELAPSED;
    uint64_t c0 = thread_cpu_ns(), t0 = monotonic_ns();
    enum executor_status st = executor_block_on(s.ex, timeout_future(&to), &tr);
    uint64_t cpu = thread_cpu_ns() - c0, took = monotonic_ns() - t0;
    pthread_join(th, NULL);
    uint64_t calls = tcp_listener_test_accept_calls(l);
    lab_note("EMFILE for 250 ms: %llu accept calls, accepted after %.1f ms, %.2f ms CPU", (unsigned long long)calls,
             took / 1e6, cpu / 1e6);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(timeout(accept)) ended with %s", executor_status_str(st));
    cr_assert_eq(tr, TIMEOUT_OK, "accept never succeeded within 3 s, though a descriptor was free again after "
                 "250 ms: after the first EMFILE the accept never tried again (tcp.h contract 4); the next hint: "
                 "make hint STAGE=6 ITEM=emfile-backoff");
    cr_assert_eq(res.err, 0, "accept gave an error (%s) instead of backing off and retrying (tcp.h contract 4)",
                 strerror(-res.err));
    cr_assert_leq(calls, 20, "%llu accept calls while out of descriptors for 250 ms: accept retried at once, again and "
                  "again, while the listener stayed readable (tcp.h contract 4); the next hint: make hint "
                  "STAGE=6 ITEM=emfile-backoff",
                  (unsigned long long)calls);
    cr_assert_lt(cpu, 60 * MS_NS * LAB_TIMEOUT_SCALE, "waiting out 250 ms of EMFILE cost %.1f ms of CPU: a hot loop "
                 "(tcp.h contract 4)",
                 cpu / 1e6);
    tcp_stream_close(res.stream);
    close(client);
    tcp_listener_close(l);
    iostack_free(&s);
}

/* Without a time driver there is nothing to back off on: EMFILE is the
 * accept's answer, at once, not a wait for an edge that will not come
 * (the client stays in the backlog, the listener stays readable). */
LAB_TEST(tcp, accept_emfile_without_timer_is_the_error, 10)
{
    struct iostack s;
    iostack_new(&s);
    struct tcp_listener *l = NULL;
    int e = tcp_listener_bind(s.r, NULL, "127.0.0.1", 0, &l);
    cr_assert_eq(e, 0, "tcp_listener_bind on 127.0.0.1:0 without a time driver failed: %s", strerror(-e));
    int client = raw_connect(tcp_listener_port(l));
    rlim_t saved = fds_run_out();
    struct tcp_accept acc = tcp_accept(l);
    struct tcp_stream_result res = { .err = 1 };
    struct timeout to = timeout_new(tcp_accept_future(&acc), &res, s.td, 2000 * MS_NS);
    enum timeout_result tr = TIMEOUT_ELAPSED;
    enum executor_status st = executor_block_on(s.ex, timeout_future(&to), &tr);
    fds_back(saved);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(timeout(accept)) ended with %s", executor_status_str(st));
    cr_assert_eq(tr, TIMEOUT_OK, "an accept on a listener without a time driver, a client waiting and no "
                 "descriptor free, was still Pending after 2 s: EMFILE was taken for \"nothing to accept\", and "
                 "no new edge comes for a client already in the backlog (tcp.h contract 4: without a time driver "
                 "the error is the future's output)");
    cr_assert_eq(res.err, -EMFILE, "the accept's output was %d (%s); expected -EMFILE (tcp.h contract 4: without a "
                 "time driver the error is the future's output)", res.err, res.err < 0 ? strerror(-res.err) : "");
    close(client);
    tcp_listener_close(l);
    iostack_free(&s);
}

/* Polls a new accept by hand, out of descriptors, until it backs off, and
 * puts the limit back. Returns the back-off's length: from just before the
 * poll to the deadline of the accept's `backoff` sleep (tcp.h: armed while
 * backing_off). */
static uint64_t back_off_once(struct iostack *s, struct tcp_listener *l, struct tcp_accept *acc, struct context *cx)
{
    *acc = tcp_accept(l);
    uint64_t t0 = 0;
    for (int i = 0; i < 50 && !acc->backing_off; i++) {
        struct tcp_stream_result res = { .err = 1 };
        rlim_t saved = fds_run_out();
        t0 = time_driver_now(s->td);
        enum poll p = tcp_accept_poll(acc, cx, &res);
        fds_back(saved);
        cr_assert_eq(p, POLL_PENDING, "an accept with a client waiting and no descriptor free was Ready (err %d): "
                     "it was to back off on a timer and try again (tcp.h contract 4)", res.err);
        if (!acc->backing_off)
            driver_park(io_driver_driver(s->io), 20 * MS_NS); /* the listener's readable edge */
    }
    cr_assert(acc->backing_off, "an accept with a client waiting and no descriptor free did not back off (tcp.h "
              "contract 4)");
    return acc->backoff.deadline_ns - t0;
}

/* tcp.h contract 4: "10 ms, doubling up to 1 s, reset by a success": after
 * two back-offs in a row (10 ms, 20 ms) and an accept that succeeds, the
 * next back-off is 10 ms again. */
LAB_TEST(tcp, accept_backoff_reset_by_a_success, 10)
{
    struct iostack s;
    iostack_new(&s);
    struct tcp_listener *l = iostack_listen(&s);
    struct counting_waker *cw = counting_waker_new("task");
    int client = raw_connect(tcp_listener_port(l));
    struct waker wk = counting_waker_get(cw);
    struct context cx = context_from_waker(&wk);
    struct tcp_accept acc;
    uint64_t first = back_off_once(&s, l, &acc, &cx);
    tcp_accept_drop(&acc);
    uint64_t second = back_off_once(&s, l, &acc, &cx);
    tcp_accept_drop(&acc);
    cr_assert_geq(second, 20 * MS_NS, "two accepts out of descriptors in a row backed off %.1f ms, then %.1f ms; "
                  "expected 10 ms, then 20 ms (tcp.h contract 4: doubling)", first / 1e6, second / 1e6);

    struct tcp_stream_result res = { .err = 1 };
    acc = tcp_accept(l);
    enum poll p = POLL_PENDING;
    for (int i = 0; i < 50 && (p = tcp_accept_poll(&acc, &cx, &res)) == POLL_PENDING; i++)
        driver_park(io_driver_driver(s.io), 20 * MS_NS);
    cr_assert_eq(p, POLL_READY, "with a descriptor free again, the waiting client was not accepted");
    cr_assert_eq(res.err, 0, "with a descriptor free again, accept failed: %s", strerror(-res.err));
    tcp_accept_drop(&acc);
    tcp_stream_close(res.stream);

    int client2 = raw_connect(tcp_listener_port(l));
    uint64_t third = back_off_once(&s, l, &acc, &cx);
    tcp_accept_drop(&acc);
    lab_note("back-offs: %.1f ms, %.1f ms, an accept, %.1f ms", first / 1e6, second / 1e6, third / 1e6);
    cr_assert_lt(third, 20 * MS_NS, "back-offs of %.1f ms and %.1f ms, then an accept that succeeded, then a "
                 "back-off of %.1f ms; expected 10 ms: a success resets the back-off (tcp.h contract 4)",
                 first / 1e6, second / 1e6, third / 1e6);
    close(client);
    close(client2);
    tcp_listener_close(l);
    counting_waker_free(cw);
    iostack_free(&s);
}

/* ---- dropping deregisters at once -------------------------------------------------------- */

LAB_TEST(tcp, drop_pending_read_and_write, 5)
{
    struct iostack s;
    iostack_new(&s);
    struct conn c;
    conn_new(&s, &c);
    struct counting_waker *cw = counting_waker_new("task");
    struct waker wk = counting_waker_get(cw);
    struct context cx = context_from_waker(&wk);
    char buf[16];
    struct tcp_read rd = tcp_read(c.st, buf, sizeof buf);
    ssize_t n;
    cr_assert_eq(tcp_read_poll(&rd, &cx, &n), POLL_PENDING, "a read with nothing sent was Ready (%zd)", n);
    cr_assert_eq(counting_waker_counts(cw).live, 2, "a Pending read holds %ld waker references; expected 2 (the "
                 "test's and the reactor's)", counting_waker_counts(cw).live);
    tcp_read_drop(&rd);
    cr_assert_eq(counting_waker_counts(cw).live, 1, "dropping a pending read kept its waker in the reactor (%ld "
                 "live): dropping a future must deregister its interest at once (tcp.h contract 2)",
                 counting_waker_counts(cw).live);

    size_t big = 16u << 20;
    char *data = calloc(1, big);
    cr_assert_not_null(data, "out of memory in the test itself");
    struct tcp_write wr = tcp_write_all(c.st, data, big);
    cr_assert_eq(tcp_write_poll(&wr, &cx, &n), POLL_PENDING, "16 MB to a peer that never reads were all written");
    cr_assert_eq(counting_waker_counts(cw).live, 2, "a Pending write holds %ld waker references; expected 2",
                 counting_waker_counts(cw).live);
    tcp_write_drop(&wr);
    cr_assert_eq(counting_waker_counts(cw).live, 1, "dropping a pending write kept its waker in the reactor (%ld "
                 "live): dropping a future must deregister its interest at once (tcp.h contract 2)",
                 counting_waker_counts(cw).live);
    free(data);
    conn_free(&c);
    counting_waker_free(cw);
    iostack_free(&s);
}

LAB_TEST(tcp, drop_pending_connect_and_accept, 5)
{
    struct iostack s;
    iostack_new(&s);
    struct tcp_listener *l = iostack_listen(&s);
    struct counting_waker *cw = counting_waker_new("task");
    struct waker wk = counting_waker_get(cw);
    struct context cx = context_from_waker(&wk);
    size_t before = reactor_test_stats(s.r).registrations;
    struct tcp_connect c = tcp_connect(s.r, "127.0.0.1", tcp_listener_port(l));
    struct tcp_stream_result res = { .err = 1 };
    cr_assert_eq(tcp_connect_poll(&c, &cx, &res), POLL_PENDING, "a connect was Ready before the reactor dispatched "
                 "anything (err %d)", res.err);
    cr_assert_eq(reactor_test_stats(s.r).registrations, before + 1, "a pending connect is not registered");
    tcp_connect_drop(&c);
    cr_assert_eq(reactor_test_stats(s.r).registrations, before, "dropping a pending connect left its registration "
                 "in the reactor, one more than before the connect (tcp.h contract 2)");
    cr_assert_eq(counting_waker_counts(cw).live, 1, "dropping a pending connect kept its waker (%ld live; tcp.h "
                 "contract 2)",
                 counting_waker_counts(cw).live);

    struct tcp_accept acc = tcp_accept(l);
    driver_park(io_driver_driver(s.io), 20 * MS_NS); /* the dropped connection's events, if any */
    int drained;
    do { /* the dropped client's half-open connection may sit in the backlog: accept it away */
        drained = 0;
        if (tcp_accept_poll(&acc, &cx, &res) == POLL_READY) {
            cr_assert_eq(res.err, 0, "accept failed: %s", strerror(-res.err));
            tcp_stream_close(res.stream);
            drained = 1;
        }
    } while (drained);
    cr_assert_eq(counting_waker_counts(cw).live, 2, "a Pending accept holds %ld waker references; expected 2",
                 counting_waker_counts(cw).live);
    tcp_accept_drop(&acc);
    cr_assert_eq(counting_waker_counts(cw).live, 1, "dropping a pending accept kept its waker (%ld live; tcp.h "
                 "contract 2)",
                 counting_waker_counts(cw).live);
    tcp_listener_close(l);
    counting_waker_free(cw);
    iostack_free(&s);
}

/* tcp.h contract 2: an accept dropped while it backs off (out of
 * descriptors) takes its timer out of the wheel and gives its waker back at
 * once: left there, the timer would fire into a future that is gone. */
LAB_TEST(tcp, accept_dropped_while_backing_off, 5)
{
    struct iostack s;
    iostack_new(&s);
    struct tcp_listener *l = iostack_listen(&s);
    size_t timers = time_driver_test_timers(s.td);
    int client = raw_connect(tcp_listener_port(l));
    struct counting_waker *cw = counting_waker_new("task");
    struct waker wk = counting_waker_get(cw);
    struct context cx = context_from_waker(&wk);
    struct tcp_accept acc;
    back_off_once(&s, l, &acc, &cx);
    cr_assert_eq(time_driver_test_timers(s.td), timers + 1, "an accept backing off has no timer in the wheel");
    tcp_accept_drop(&acc);
    cr_assert_eq(time_driver_test_timers(s.td), timers, "an accept dropped while it backed off (EMFILE) left its "
                 "back-off timer in the wheel, to fire into a future that is gone (tcp.h contract 2: dropping a "
                 "pending future deregisters its interest at once)");
    cr_assert_eq(counting_waker_counts(cw).live, 1, "an accept dropped while it backed off kept its waker (%ld "
                 "live; tcp.h contract 2)",
                 counting_waker_counts(cw).live);
    close(client);
    tcp_listener_close(l);
    counting_waker_free(cw);
    iostack_free(&s);
}

/* A dup() of a registered descriptor keeps the open file alive after close:
 * if the registration was not removed from epoll before the close, the
 * dup's events still arrive with the old token. */
LAB_TEST(tcp, dup_after_close_delivers_nothing, 5)
{
    struct iostack s;
    iostack_new(&s);
    struct conn c;
    conn_new(&s, &c);
    int dupfd = dup(tcp_stream_fd(c.st));
    cr_assert_geq(dupfd, 0, "dup failed in the test itself");
    tcp_stream_close(c.st);
    c.st = NULL;
    struct driver d = io_driver_driver(s.io);
    driver_park(d, 0);
    struct reactor_stats before = reactor_test_stats(s.r);
    cr_assert(raw_send_all(c.peer, "data", 4), "send failed in the test itself");
    for (int i = 0; i < 3; i++)
        driver_park(d, 20 * MS_NS);
    struct reactor_stats after = reactor_test_stats(s.r);
    cr_assert_eq(after.stale - before.stale, 0, "%llu events arrived for a closed stream's token after data was sent "
                 "to a dup() of its descriptor: the closed stream's registration was still in the epoll set, kept "
                 "alive by the dup (reactor.h contract 5); the next hint: make hint STAGE=6 ITEM=dup-after-close",
                 (unsigned long long)(after.stale - before.stale));
    cr_assert_eq(after.events - before.events, 0, "an event was applied to some registration after the only "
                 "registered stream was closed: its registration outlived the close (reactor.h contract 5); the "
                 "next hint: make hint STAGE=6 ITEM=dup-after-close");
    close(dupfd);
    conn_free(&c);
    iostack_free(&s);
}

/* ---- many connections --------------------------------------------------------------------- */

LAB_TEST(tcp, thousand_connections, 5) /* the reference: 0.35 s */
{
    unsigned long limit = raise_nofile();
    unsigned n = lab_scale(1000, 50);
    cr_assert_geq(limit, 2ul * n + 64, "the open-files limit (%lu) is too low for %u connections on both ends",
                  limit, n);
    struct iostack s;
    iostack_new(&s);
    struct tcp_listener *l = iostack_listen(&s);
    struct echo_tally tally = { 0 };
    struct echo_server es = { .s = &s, .l = l, .conns = n, .tally = &tally };
    iostack_spawn(&s, echo_server_future(&es));
    unsigned done = 0;
    int failed = 0;
    for (unsigned i = 0; i < n; i++) {
        struct echo_client c;
        echo_client_init(&c, s.r, tcp_listener_port(l), 5, 64, i, &done, &failed);
        iostack_spawn(&s, echo_client_future(&c));
    }
    uint64_t t0 = monotonic_ns();
    iostack_run(&s);
    lab_note("%u connections x 5 round trips of 64 B: %.1f ms", n, (monotonic_ns() - t0) / 1e6);
    cr_assert_eq(failed, 0, "an echo client failed (support.c line %d)", failed);
    cr_assert_eq(done, n, "%u of %u echo clients finished", done, n);
    cr_assert_eq(tally.accepted, n, "the server accepted %u of %u connections (a registration failed? reactor.h: "
                 "reactor_register says ENOMEM only when the slab is full)", tally.accepted, n);
    tcp_listener_close(l);
    iostack_free(&s);
}

/* ---- randomized stress: separate reader and writer tasks per connection ------------------ */

struct duplex {
    struct tcp_stream *st;
    const unsigned char *data;
    size_t total, written, read;
    uint64_t rng;
    int users;        /* tasks still using st: the last closes it */
    int *failed;
    unsigned *done;
    bool shut;
};

static void duplex_release(struct duplex *x)
{
    if (--x->users == 0) {
        tcp_stream_close(x->st);
        x->st = NULL;
    }
}

struct duplex_task {
    struct duplex *x;
};

static enum poll duplex_writer_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct duplex *x = ((struct duplex_task *)self)->x;
    while (x->written < x->total) {
        size_t chunk = 1 + lab_rand(&x->rng) % 65536;
        if (chunk > x->total - x->written)
            chunk = x->total - x->written;
        ssize_t n;
        if (tcp_stream_poll_write(x->st, cx, x->data + x->written, chunk, &n) == POLL_PENDING)
            return POLL_PENDING;
        if (n <= 0) {
            *x->failed = __LINE__;
            return POLL_READY;
        }
        x->written += (size_t)n;
    }
    tcp_stream_shutdown(x->st);
    return POLL_READY;
}

static enum poll duplex_reader_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct duplex *x = ((struct duplex_task *)self)->x;
    unsigned char buf[8192];
    for (;;) {
        size_t want = 1 + lab_rand(&x->rng) % sizeof buf;
        ssize_t n;
        if (tcp_stream_poll_read(x->st, cx, buf, want, &n) == POLL_PENDING)
            return POLL_PENDING;
        if (n < 0) {
            *x->failed = __LINE__;
            return POLL_READY;
        }
        if (n == 0)
            break;
        if (x->read + (size_t)n > x->total || memcmp(buf, x->data + x->read, (size_t)n) != 0) {
            *x->failed = __LINE__;
            return POLL_READY;
        }
        x->read += (size_t)n;
    }
    if (x->read != x->total)
        *x->failed = __LINE__;
    else
        (*x->done)++;
    return POLL_READY;
}

static void duplex_drop(void *self) { duplex_release(((struct duplex_task *)self)->x); }

static const struct future_vtable duplex_writer_vt = FUTURE_VTABLE_INIT(struct duplex_task, 0, duplex_writer_poll, duplex_drop);
static const struct future_vtable duplex_reader_vt = FUTURE_VTABLE_INIT(struct duplex_task, 0, duplex_reader_poll, duplex_drop);

/* The client side runs on a thread of its own with a stack of its own. */
struct stress_client {
    uint16_t port;
    unsigned conns;
    size_t total;
    uint64_t seed;
    unsigned done;
    int failed;
    atomic_bool finished;
};

struct connector {
    struct tcp_connect c;
    struct duplex *x;
    struct iostack *s;
};

static enum poll connector_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct connector *k = self;
    struct tcp_stream_result res;
    if (tcp_connect_poll(&k->c, cx, &res) == POLL_PENDING)
        return POLL_PENDING;
    if (res.err) {
        *k->x->failed = __LINE__;
        return POLL_READY;
    }
    k->x->st = res.stream;
    k->x->users = 2;
    struct duplex_task t = { .x = k->x };
    iostack_spawn(k->s, future_of(&duplex_writer_vt, &t));
    iostack_spawn(k->s, future_of(&duplex_reader_vt, &t));
    return POLL_READY;
}
static void connector_drop(void *self) { tcp_connect_drop(&((struct connector *)self)->c); }
static const struct future_vtable connector_vt = FUTURE_VTABLE_INIT(struct connector, 0, connector_poll, connector_drop);

static void *stress_client_thread(void *arg)
{
    struct stress_client *sc = arg;
    struct iostack s;
    iostack_new(&s);
    unsigned char *data = malloc(sc->total);
    struct duplex *xs = calloc(sc->conns, sizeof *xs);
    cr_assert(data && xs, "out of memory in the test itself");
    for (size_t i = 0; i < sc->total; i++)
        data[i] = pattern_byte(sc->seed, i);
    for (unsigned i = 0; i < sc->conns; i++) {
        xs[i] = (struct duplex){ .data = data, .total = sc->total, .rng = sc->seed + i, .failed = &sc->failed,
                                 .done = &sc->done };
        struct connector k = { .c = tcp_connect(s.r, "127.0.0.1", sc->port), .x = &xs[i], .s = &s };
        iostack_spawn(&s, future_of(&connector_vt, &k));
    }
    iostack_run(&s);
    iostack_free(&s);
    free(xs);
    free(data);
    atomic_store_explicit(&sc->finished, true, memory_order_release); /* pairs with the unparker's acquire load */
    return NULL;
}

struct unparker {
    struct driver d;
    struct stress_client *sc;
};

/* Spurious unparks from a third thread, all along: the driver's state word
 * and eventfd under fire. */
static void *unparker_thread(void *arg)
{
    struct unparker *u = arg;
    while (!atomic_load_explicit(&u->sc->finished, memory_order_acquire)) { /* pairs with the client's release */
        driver_unpark(u->d);
        lab_sleep_ms(1);
    }
    return NULL;
}

LAB_TEST(tcp_stress, duplex_echo, 2) /* the reference: 0.06 s */
{
    struct iostack s;
    iostack_new(&s);
    struct tcp_listener *l = iostack_listen(&s);
    struct stress_client sc = { .port = tcp_listener_port(l), .conns = 8, .total = lab_scale(200000, 20000),
                                .seed = lab_seed() };
    atomic_init(&sc.finished, false);
    struct echo_tally tally = { 0 };
    struct echo_server es = { .s = &s, .l = l, .conns = sc.conns, .tally = &tally };
    iostack_spawn(&s, echo_server_future(&es));
    struct unparker u = { .d = time_driver_driver(s.td), .sc = &sc };
    pthread_t client, unp;
    pthread_create(&client, NULL, stress_client_thread, &sc);
    pthread_create(&unp, NULL, unparker_thread, &u);
    iostack_run(&s);
    pthread_join(client, NULL);
    pthread_join(unp, NULL);
    cr_assert_eq(sc.failed, 0, "a stress connection failed (tcp_test.c line %d): an error, a short stream or "
                 "bytes out of order", sc.failed);
    cr_assert_eq(sc.done, sc.conns, "%u of %u connections echoed everything", sc.done, sc.conns);
    tcp_listener_close(l);
    iostack_free(&s);
}
