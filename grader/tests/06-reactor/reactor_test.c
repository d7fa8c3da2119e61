/* reactor_test.c - the reactor and the I/O driver, below TCP: tokens,
 * readiness and its tick, the two wakers, deregistration, the eventfd. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stage06.h"
#include "store_buffer.h"

LAB_SUITE(reactor, 10);
LAB_SUITE(io_driver, 10);
LAB_SUITE(io_driver_race, 15);
LAB_SUITE(reactor_race, 10);

/* A reactor and an I/O driver, no executor: the test parks by hand. */
struct bare {
    struct reactor *r;
    struct io_driver *io;
    struct driver d;
};

static void bare_new(struct bare *b)
{
    b->r = reactor_new();
    cr_assert_not_null(b->r, "reactor_new returned NULL");
    b->io = io_driver_new(b->r);
    cr_assert_not_null(b->io, "io_driver_new returned NULL");
    b->d = io_driver_driver(b->io);
}

static void bare_free(struct bare *b)
{
    struct reactor_stats st = reactor_test_stats(b->r);
    cr_assert_eq(st.registrations, 0, "%zu registrations left after every one was deregistered", st.registrations);
    io_driver_free(b->io);
    reactor_free(b->r);
}

static struct io_reg *reg_of(struct reactor *r, int fd)
{
    struct io_reg *reg = NULL;
    int e = reactor_register(r, fd, &reg);
    cr_assert_eq(e, 0, "reactor_register failed: %s", strerror(-e));
    cr_assert_not_null(reg, "reactor_register returned 0 without a registration");
    return reg;
}

/* Parks (50 ms at most) until the waker was woken `n` times; up to 5 parks. */
static void park_until_woken(struct bare *b, struct counting_waker *cw, unsigned n)
{
    for (int i = 0; i < 5 && counting_waker_woken(cw) < n; i++)
        driver_park(b->d, (int64_t)(50 * MS_NS));
}

/* ---- the token ------------------------------------------------------------------ */

/* Close a registered descriptor, open another that gets the same number and
 * (LIFO slab) the same slot, then deliver an event carrying the old token,
 * as an epoll_wait queued before the close would: nothing is woken. */
LAB_TEST(reactor, stale_token_after_fd_reuse, 5)
{
    struct bare b;
    bare_new(&b);
    int a[2];
    nb_socketpair(a);
    struct io_reg *old = reg_of(b.r, a[0]);
    uint64_t stale = reactor_test_token(old);
    int oldfd = a[0];
    reactor_deregister(b.r, old);
    close(a[0]);
    close(a[1]);

    int c[2];
    nb_socketpair(c);
    struct io_reg *reg = reg_of(b.r, c[0]);
    uint64_t fresh = reactor_test_token(reg);
    lab_note("old fd %d token %#llx, new fd %d token %#llx", oldfd, (unsigned long long)stale, c[0],
             (unsigned long long)fresh);
    cr_assert_neq(fresh, stale, "a new registration got the very token of a deregistered one (%#llx): a queued "
                  "event for the old descriptor would wake the new one (reactor.h contract 1); the next hint: "
                  "make hint STAGE=6 ITEM=stale-token",
                  (unsigned long long)fresh);

    struct counting_waker *cw = counting_waker_new("reader");
    struct waker wk = counting_waker_get(cw);
    struct context cx = context_from_waker(&wk);
    struct io_ready ev;
    cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &ev), POLL_PENDING, "a fresh socket with nothing to read "
                 "was read-ready");
    struct epoll_event old_event = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = stale };
    reactor_dispatch(b.r, &old_event, 1);
    cr_assert_eq(counting_waker_woken(cw), 0, "an event carrying the token of a closed descriptor woke the reader "
                 "of the descriptor that reused its number and slot");
    cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &ev), POLL_PENDING, "an event with a stale token made the "
                 "new registration read-ready");
    cr_assert_eq(reactor_test_stats(b.r).stale, 1, "the stale event was not counted as stale (stats.stale %llu)",
                 (unsigned long long)reactor_test_stats(b.r).stale);

    /* the new registration still works: real data wakes it */
    cr_assert(write(c[1], "x", 1) == 1, "write failed in the test itself");
    park_until_woken(&b, cw, 1);
    cr_assert_eq(counting_waker_woken(cw), 1, "data on the new descriptor did not wake its reader");
    reactor_deregister(b.r, reg);
    close(c[0]);
    close(c[1]);
    cr_assert_eq(counting_waker_counts(cw).live, 1, "a waker reference leaked: %ld live",
                 counting_waker_counts(cw).live);
    counting_waker_free(cw);
    bare_free(&b);
}

/* Many registrations: every live token is distinct; reusing slots never
 * reissues a token. */
LAB_TEST(reactor, tokens_never_repeat, 5)
{
    struct bare b;
    bare_new(&b);
    enum { N = 64, ROUNDS = 20 };
    uint64_t seen[N * ROUNDS];
    size_t k = 0;
    int fds[N][2];
    struct io_reg *regs[N];
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < N; i++) {
            nb_socketpair(fds[i]);
            regs[i] = reg_of(b.r, fds[i][0]);
            seen[k++] = reactor_test_token(regs[i]);
            cr_assert_neq(seen[k - 1], REACTOR_TOKEN_WAKE, "a registration got the eventfd's token");
        }
        for (int i = 0; i < N; i++) {
            reactor_deregister(b.r, regs[i]);
            close(fds[i][0]);
            close(fds[i][1]);
        }
    }
    for (size_t i = 0; i < k; i++)
        for (size_t j = i + 1; j < k; j++)
            cr_assert_neq(seen[i], seen[j], "token %#llx was handed out twice (registrations %zu and %zu): a stale "
                          "event could wake a later owner", (unsigned long long)seen[i], i, j);
    bare_free(&b);
}

/* ---- readiness and its tick --------------------------------------------------------- */

/* An edge that is dispatched while the reader is in its syscall (after it
 * saw readiness, before it clears it on EAGAIN) must survive the clear. */
LAB_TEST(reactor, edge_during_syscall_is_kept, 5)
{
    struct bare b;
    bare_new(&b);
    int sv[2];
    nb_socketpair(sv);
    struct io_reg *reg = reg_of(b.r, sv[0]);
    struct counting_waker *cw = counting_waker_new("reader");
    struct waker wk = counting_waker_get(cw);
    struct context cx = context_from_waker(&wk);
    struct io_ready ev, ev2;
    cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &ev), POLL_PENDING, "read-ready with nothing sent");
    cr_assert(write(sv[1], "a", 1) == 1, "write failed in the test itself");
    park_until_woken(&b, cw, 1);
    cr_assert_eq(counting_waker_woken(cw), 1, "a byte sent did not wake the registered reader");
    cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &ev), POLL_READY, "woken for a byte, but not read-ready");
    cr_assert(ev.bits & IO_READABLE, "read-ready without IO_READABLE (bits %#x)", ev.bits);

    /* the reader's syscall: it drains the byte ... */
    char buf[8];
    cr_assert_eq(read(sv[0], buf, sizeof buf), 1, "the byte was not there");
    /* ... and while it is in there, a new byte and a new edge arrive and are dispatched */
    cr_assert(write(sv[1], "b", 1) == 1, "write failed in the test itself");
    for (int i = 0; i < 5; i++) {
        driver_park(b.d, (int64_t)(20 * MS_NS));
        if (reactor_test_stats(b.r).events >= 2)
            break;
    }
    cr_assert_geq(reactor_test_stats(b.r).events, 2, "the second byte's edge was never dispatched");
    /* the syscall "returned EAGAIN" (in the reader's view of the past): it clears what it saw */
    reactor_clear_ready(reg, ev);
    cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &ev2), POLL_READY, "an edge dispatched during the syscall "
                 "was lost: after clear_ready with the snapshot taken before that edge, the registration said "
                 "not readable (reactor.h contract 2; the reader now waits forever with a byte in the socket); "
                 "the next hint: make hint STAGE=6 ITEM=readiness-tick");
    cr_assert_eq(read(sv[0], buf, sizeof buf), 1, "the second byte was not there");
    cr_assert(read(sv[0], buf, sizeof buf) < 0 && errno == EAGAIN, "the socket was not drained");
    reactor_clear_ready(reg, ev2);
    cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &ev2), POLL_PENDING, "readiness with the snapshot's "
                 "own tick survived its clear_ready after EAGAIN (reactor.h contract 2)");
    reactor_deregister(b.r, reg);
    close(sv[0]);
    close(sv[1]);
    cr_assert_eq(counting_waker_counts(cw).live, 1, "a waker reference leaked");
    counting_waker_free(cw);
    bare_free(&b);
}

/* The same rule, inside clear_ready: a clear that reads the word, checks
 * the tick, and then writes the cleared word in a second step erases an
 * edge dispatched between the two. Forced on every run
 * (lab_sb_unpark_race, common/testing): clear_ready is single-stepped and
 * stopped at its first plain access to the registration (its page of its
 * own), another thread dispatches a new readable edge (a new tick), and
 * clear_ready goes on. A clear whose first access is a read-modify-write
 * is never stopped. */
struct clear_race {
    struct bare b;
    struct io_reg *reg;
    uint64_t token;
    struct io_ready ev;
};

static void clear_race_clear(void *arg)
{
    struct clear_race *c = arg;
    reactor_clear_ready(c->reg, c->ev);
}

static void clear_race_dispatch(void *arg)
{
    struct clear_race *c = arg;
    struct epoll_event e = { .events = EPOLLIN, .data.u64 = c->token };
    reactor_dispatch(c->b.r, &e, 1);
}

LAB_TEST(reactor_race, edge_dispatched_inside_clear_ready_is_kept, 10)
{
#if !defined(__x86_64__)
    lab_cannot_judge("clear_ready is stopped by single-stepping with x86-64's trap flag; this machine is not "
                     "x86-64");
#else
    struct clear_race c;
    alloc_own_pages(true);
    bare_new(&c.b);
    int sv[2];
    nb_socketpair(sv);
    c.reg = reg_of(c.b.r, sv[0]);
    alloc_own_pages(false);
    c.token = reactor_test_token(c.reg);
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);
    clear_race_dispatch(&c);
    cr_assert_eq(reactor_poll_ready(c.reg, IO_READ, &cx, &c.ev), POLL_READY,
                 "a registration dispatched EPOLLIN was not read-ready (reactor.h contract 3)");
    /* the unpark race's two roles, for another pair: the stepped side (here
     * the clear) and the side let go at its stop (the dispatch); no park,
     * so its time bound (wake_ms) is not read here */
    struct lab_sb_park sp = { .page = (void *)((uintptr_t)c.reg & ~(uintptr_t)4095), .unpark = clear_race_clear,
                              .park = clear_race_dispatch, .arg = &c, .wake_ms = 60000 };
    struct lab_sb_park_result r;
    cr_assert(lab_sb_unpark_race(&sp, &r), "could not start a thread (test machine out of resources)");
    lab_note("clear_ready ran %ld instructions, %ld of them locked; %s", r.steps, r.drains,
             r.watched ? "it was stopped at its first plain access to the registration, and the edge was "
                         "dispatched there" : "its first access to the registration was locked: not stopped");
    if (r.ran && r.foreign)
        lab_cannot_judge("another thread touched the registration's page while clear_ready was stopped: the timing "
                         "could not be forced");
    struct io_ready after;
    cr_assert_eq(reactor_poll_ready(c.reg, IO_READ, &cx, &after), POLL_READY,
                 "reactor_clear_ready was single-stepped and stopped right after its first plain access to the "
                 "registration (a read, before any read-modify-write); there another thread dispatched a new "
                 "readable edge, and clear_ready then went on with its snapshot of the old tick. Afterwards the "
                 "registration said not readable: the new edge was erased by a clear that had decided on the old "
                 "word (reactor.h contract 2: only while the word carries the snapshot's tick). What can a clear "
                 "know of the word between its read and its write? The next hint: make hint STAGE=6 "
                 "ITEM=readiness-tick");
    reactor_deregister(c.b.r, c.reg);
    close(sv[0]);
    close(sv[1]);
    bare_free(&c.b);
#endif
}

/* Clearing the read direction leaves writable alone, and hang-up stays. */
LAB_TEST(reactor, clear_only_what_was_seen, 5)
{
    struct bare b;
    bare_new(&b);
    int sv[2];
    nb_socketpair(sv);
    struct io_reg *reg = reg_of(b.r, sv[0]);
    struct counting_waker *cw = counting_waker_new("task");
    struct waker wk = counting_waker_get(cw);
    struct context cx = context_from_waker(&wk);
    cr_assert(write(sv[1], "a", 1) == 1, "write failed in the test itself");
    driver_park(b.d, (int64_t)(50 * MS_NS));
    struct io_ready rd, wr;
    cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &rd), POLL_READY, "not read-ready with a byte waiting");
    cr_assert_eq(reactor_poll_ready(reg, IO_WRITE, &cx, &wr), POLL_READY, "a fresh socket was not write-ready");
    char c;
    cr_assert_eq(read(sv[0], &c, 1), 1, "the byte was not there");
    reactor_clear_ready(reg, rd);
    cr_assert_eq(reactor_poll_ready(reg, IO_WRITE, &cx, &wr), POLL_READY, "clearing the read direction cleared "
                 "writable too");
    cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &rd), POLL_PENDING, "read readiness survived its clear");
    /* the peer hangs up: read-ready for good, even after a clear */
    close(sv[1]);
    park_until_woken(&b, cw, 1);
    cr_assert_eq(counting_waker_woken(cw), 1, "the peer's hang-up did not wake the reader");
    cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &rd), POLL_READY, "a hung-up socket was not read-ready");
    cr_assert(rd.bits & IO_HUP, "a hang-up without IO_HUP (bits %#x)", rd.bits);
    reactor_clear_ready(reg, rd);
    cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &rd), POLL_READY, "after clear_ready a hung-up socket was "
                 "no longer read-ready: the hang-up was cleared (reactor.h contract 2)");
    reactor_deregister(b.r, reg);
    close(sv[0]);
    cr_assert_eq(counting_waker_counts(cw).live, 1, "a waker reference leaked");
    counting_waker_free(cw);
    bare_free(&b);
}

/* ---- one waker per direction -------------------------------------------------------- */

/* Fills the socket until send says EAGAIN, clearing write readiness. */
static void fill(struct io_reg *reg, int fd, struct context *cx)
{
    static char junk[65536];
    struct io_ready ev;
    for (int i = 0; i < 100000; i++) {
        if (reactor_poll_ready(reg, IO_WRITE, cx, &ev) == POLL_PENDING)
            return;
        if (send(fd, junk, sizeof junk, MSG_NOSIGNAL) < 0) {
            cr_assert(errno == EAGAIN, "send failed in the test itself: %s", strerror(errno));
            reactor_clear_ready(reg, ev);
        }
    }
    cr_assert_fail("the socket never filled: write readiness is never cleared on EAGAIN");
}

/* One socket, its registration, a reader's and a writer's counting waker. */
struct duo {
    struct bare b;
    int sv[2];
    struct io_reg *reg;
    struct counting_waker *rw, *ww;
    struct waker rk, wk;
    struct context rcx, wcx;
};

static void duo_new(struct duo *d)
{
    bare_new(&d->b);
    nb_socketpair(d->sv);
    d->reg = reg_of(d->b.r, d->sv[0]);
    d->rw = counting_waker_new("reader");
    d->ww = counting_waker_new("writer");
    d->rk = counting_waker_get(d->rw);
    d->wk = counting_waker_get(d->ww);
    d->rcx = context_from_waker(&d->rk);
    d->wcx = context_from_waker(&d->wk);
    driver_park(d->b.d, 0); /* the initial writable edge */
}

static void duo_free(struct duo *d)
{
    reactor_deregister(d->b.r, d->reg);
    close(d->sv[0]);
    close(d->sv[1]);
    cr_assert_eq(counting_waker_counts(d->rw).live, 1, "a reader waker reference leaked");
    cr_assert_eq(counting_waker_counts(d->ww).live, 1, "a writer waker reference leaked");
    counting_waker_free(d->rw);
    counting_waker_free(d->ww);
    bare_free(&d->b);
}

/* One direction polled twice, by two tasks (a task moved to another
 * worker polls with a new waker): the event wakes the waker of the latest
 * poll, once, and the replaced one is given back at that poll. */
LAB_TEST(reactor, latest_waker_per_direction, 5)
{
    struct bare b;
    bare_new(&b);
    int sv[2];
    nb_socketpair(sv);
    struct io_reg *reg = reg_of(b.r, sv[0]);
    for (int dir = 0; dir < 2; dir++) {
        enum io_direction d = dir == 0 ? IO_READ : IO_WRITE;
        const char *name = dir == 0 ? "read" : "write";
        struct counting_waker *first = counting_waker_new("first"), *latest = counting_waker_new("latest");
        struct waker w1 = counting_waker_get(first), w2 = counting_waker_get(latest);
        struct context cx1 = context_from_waker(&w1), cx2 = context_from_waker(&w2);
        struct io_ready ev;
        cr_assert_eq(reactor_poll_ready(reg, d, &cx1, &ev), POLL_PENDING, "%s-ready before any event", name);
        cr_assert_eq(reactor_poll_ready(reg, d, &cx2, &ev), POLL_PENDING, "%s-ready before any event", name);
        long kept = counting_waker_counts(first).live - 1;
        struct epoll_event e = { .events = dir == 0 ? EPOLLIN : EPOLLOUT, .data.u64 = reactor_test_token(reg) };
        reactor_dispatch(b.r, &e, 1);
        unsigned by_first = counting_waker_woken(first), by_latest = counting_waker_woken(latest);
        cr_assert(by_first == 0 && by_latest == 1, "a %s poll_ready with waker \"first\", then again with waker "
                  "\"latest\", then an event making it %s-ready: \"first\" was woken %u times and \"latest\" %u "
                  "times. The direction's waker is the latest poll's, woken once (reactor.h contract 3; "
                  "poll_ready: the latest waker wins)", name, name, by_first, by_latest);
        cr_assert_eq(kept, 0, "after a second %s poll_ready with another waker the reactor still held %ld "
                     "reference(s) to the replaced one: it is given back at the poll that replaces it (reactor.h "
                     "contract 3; poll_ready)", name, kept);
        cr_assert_eq(reactor_poll_ready(reg, d, &cx2, &ev), POLL_READY, "not %s-ready after the event", name);
        reactor_clear_ready(reg, ev);
        reactor_drop_waker(reg, d);
        cr_assert_eq(counting_waker_counts(first).live, 1, "the replaced waker is still held");
        cr_assert_eq(counting_waker_counts(latest).live, 1, "the woken waker is still held");
        counting_waker_free(first);
        counting_waker_free(latest);
    }
    reactor_deregister(b.r, reg);
    close(sv[0]);
    close(sv[1]);
    bare_free(&b);
}

/* A reader and a writer wait on one socket: data wakes the reader only,
 * room to write wakes the writer only. */
LAB_TEST(reactor, read_and_write_wake_independently, 5)
{
    struct duo d;
    duo_new(&d);
    fill(d.reg, d.sv[0], &d.wcx);
    struct io_ready ev;
    cr_assert_eq(reactor_poll_ready(d.reg, IO_WRITE, &d.wcx, &ev), POLL_PENDING, "a full socket was write-ready");
    cr_assert_eq(reactor_poll_ready(d.reg, IO_READ, &d.rcx, &ev), POLL_PENDING, "read-ready with nothing sent");

    cr_assert(write(d.sv[1], "x", 1) == 1, "write failed in the test itself");
    park_until_woken(&d.b, d.rw, 1);
    cr_assert_eq(counting_waker_woken(d.rw), 1, "a byte arrived, the reader was woken %u times; expected 1",
                 counting_waker_woken(d.rw));
    cr_assert_eq(counting_waker_woken(d.ww), 0, "a byte arrived and the writer was woken: only readable came "
                 "(reactor.h contract 3)");

    /* the peer drains everything: room to write */
    static char sink[65536];
    while (read(d.sv[1], sink, sizeof sink) > 0)
        ;
    park_until_woken(&d.b, d.ww, 1);
    cr_assert_eq(counting_waker_woken(d.ww), 1, "the peer made room and the writer was woken %u times; expected 1: "
                 "one waker per direction (reactor.h contract 3); with one slot shared by both directions, "
                 "the reader's registration replaced the writer's waker",
                 counting_waker_woken(d.ww));
    cr_assert_eq(counting_waker_woken(d.rw), 1, "room to write woke the reader again");
    duo_free(&d);
}

/* A hang-up (EPOLLHUP) or an error (EPOLLERR) that comes alone, without
 * EPOLLIN or EPOLLOUT beside it, is for both directions (reactor.h contract
 * 3: "hang-up: the reader, and the writer too when both directions are gone;
 * error: both"). Real sockets mostly report EPOLLOUT with them, so the
 * events are forged and given to reactor_dispatch: a reader and a writer
 * pending, one event; each waker is woken once, and a poll of each direction
 * afterwards finds it ready (a woken writer that polls and finds Pending
 * waits for an edge that never comes). */
LAB_TEST(reactor, hangup_and_error_alone_wake_both, 5)
{
    static const struct {
        uint32_t events;
        const char *name;
    } kinds[] = {
        { EPOLLHUP, "a hang-up alone (EPOLLHUP)" },
        { EPOLLERR, "an error alone (EPOLLERR)" },
        { EPOLLHUP | EPOLLERR, "a hang-up with an error (EPOLLHUP | EPOLLERR)" },
    };
    struct bare b;
    bare_new(&b);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        int sv[2];
        nb_socketpair(sv);
        struct io_reg *reg = reg_of(b.r, sv[0]);
        struct counting_waker *rw = counting_waker_new("reader"), *ww = counting_waker_new("writer");
        struct waker rwk = counting_waker_get(rw), wwk = counting_waker_get(ww);
        struct context rcx = context_from_waker(&rwk), wcx = context_from_waker(&wwk);
        struct io_ready ev;
        cr_assert_eq(reactor_poll_ready(reg, IO_READ, &rcx, &ev), POLL_PENDING, "read-ready before any event");
        cr_assert_eq(reactor_poll_ready(reg, IO_WRITE, &wcx, &ev), POLL_PENDING, "write-ready before any event");
        struct epoll_event e = { .events = kinds[k].events, .data.u64 = reactor_test_token(reg) };
        reactor_dispatch(b.r, &e, 1);
        unsigned by_reader = counting_waker_woken(rw), by_writer = counting_waker_woken(ww);
        cr_assert(by_reader == 1 && by_writer == 1, "a reader and a writer pending on one registration, then "
                  "reactor_dispatch of %s for it: the reader was woken %u times and the writer %u times, "
                  "expected once each (reactor.h contract 3: hang-up wakes the reader, and the writer too when "
                  "both directions are gone; error wakes both)", kinds[k].name, by_reader, by_writer);
        enum poll rp = reactor_poll_ready(reg, IO_READ, &rcx, &ev);
        enum poll wp = reactor_poll_ready(reg, IO_WRITE, &wcx, &ev);
        cr_assert(rp == POLL_READY && wp == POLL_READY, "after reactor_dispatch of %s, reactor_poll_ready "
                  "found the read direction %s and the write direction %s: a woken task that polls again finds "
                  "Pending and waits for an event that never comes (reactor.h contract 3: %s is for both "
                  "directions)", kinds[k].name, rp == POLL_READY ? "ready" : "Pending",
                  wp == POLL_READY ? "ready" : "Pending", kinds[k].name);
        reactor_drop_waker(reg, IO_READ);
        reactor_drop_waker(reg, IO_WRITE);
        reactor_deregister(b.r, reg);
        close(sv[0]);
        close(sv[1]);
        counting_waker_free(rw);
        counting_waker_free(ww);
    }
    bare_free(&b);
}

/* The same, the other way round: the writer registers last. */
LAB_TEST(reactor, writer_registered_last, 5)
{
    struct duo d;
    duo_new(&d);
    struct io_ready ev;
    cr_assert_eq(reactor_poll_ready(d.reg, IO_READ, &d.rcx, &ev), POLL_PENDING, "read-ready with nothing sent");
    fill(d.reg, d.sv[0], &d.wcx);
    cr_assert(write(d.sv[1], "x", 1) == 1, "write failed in the test itself");
    park_until_woken(&d.b, d.rw, 1);
    cr_assert_eq(counting_waker_woken(d.rw), 1, "a byte arrived, the reader (registered first) was woken %u times; "
                 "expected 1: the writer's later registration took the reader's place (reactor.h contract 3); "
                 "the next hint: make hint STAGE=6 ITEM=two-wakers",
                 counting_waker_woken(d.rw));
    cr_assert_eq(counting_waker_woken(d.ww), 0, "a byte arrived and the writer was woken (reactor.h contract 3)");
    duo_free(&d);
}

/* ---- deregistration -------------------------------------------------------------------- */

/* Deregistering drops both wakers at once, and later events for the
 * descriptor wake nobody. */
LAB_TEST(reactor, deregister_drops_wakers, 5)
{
    struct bare b;
    bare_new(&b);
    int sv[2];
    nb_socketpair(sv);
    struct io_reg *reg = reg_of(b.r, sv[0]);
    struct counting_waker *cw = counting_waker_new("reader");
    struct waker wk = counting_waker_get(cw);
    struct context cx = context_from_waker(&wk);
    struct io_ready ev;
    cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &ev), POLL_PENDING, "read-ready with nothing sent");
    cr_assert_eq(counting_waker_counts(cw).live, 2, "a Pending poll_ready did not keep a clone of the waker");
    reactor_deregister(b.r, reg);
    cr_assert_eq(counting_waker_counts(cw).live, 1, "deregister kept the reader's waker (%ld live): it must drop it "
                 "at once (reactor.h contract 5)", counting_waker_counts(cw).live);
    cr_assert_eq(reactor_test_stats(b.r).registrations, 0, "deregister left the registration counted");
    close(sv[0]);
    close(sv[1]);
    counting_waker_free(cw);
    bare_free(&b);
}

/* ---- the I/O driver ---------------------------------------------------------------------- */

struct parked {
    struct bare *b;
    atomic_bool returned;
    atomic_uint_fast64_t at;
};

static void *park_forever(void *arg)
{
    struct parked *p = arg;
    driver_park(p->b->d, DRIVER_PARK_FOREVER);
    atomic_store_explicit(&p->at, monotonic_ns(), memory_order_relaxed); /* published by the release below */
    atomic_store_explicit(&p->returned, true, memory_order_release);  /* pairs with the test's acquire loads */
    return NULL;
}

/* An unpark that reads the state word with a load and then writes the
 * token, against an owner that parks in between, forced on every run
 * (lab_sb_unpark_race, common/testing): the unpark is single-stepped and
 * stopped at its first plain access to the driver (alone on its page), the
 * owner parks meanwhile (epoll_wait, 4 s), and the unpark goes on. An
 * unpark whose first access is a read-modify-write is never stopped. */
static void race_unpark(void *arg) { driver_unpark(((struct bare *)arg)->d); }
static void race_park(void *arg)
{
    (void)driver_park(((struct bare *)arg)->d, (int64_t)(4000 * MS_NS * (uint64_t)LAB_TIMEOUT_SCALE));
}

LAB_TEST(io_driver_race, owner_parks_while_unpark_reads_the_state, 15)
{
#if !defined(__x86_64__)
    lab_cannot_judge("the unpark is stopped by single-stepping with x86-64's trap flag; this machine is not "
                     "x86-64");
#else
    struct bare b;
    b.r = reactor_new();
    cr_assert_not_null(b.r, "reactor_new returned NULL");
    alloc_own_pages(true);
    b.io = io_driver_new(b.r);
    alloc_own_pages(false);
    cr_assert_not_null(b.io, "io_driver_new returned NULL");
    b.d = io_driver_driver(b.io);
    unsigned wake_ms = 1000u * (unsigned)LAB_TIMEOUT_SCALE;
    struct lab_sb_park sp = { .page = (void *)((uintptr_t)b.io & ~(uintptr_t)4095), .unpark = race_unpark,
                              .park = race_park, .arg = &b, .wake_ms = wake_ms };
    struct lab_sb_park_result r;
    cr_assert(lab_sb_unpark_race(&sp, &r), "could not start a thread (test machine out of resources)");
    char note[256];
    const char *unjudged = lab_sb_unpark_unjudged(&r, "the I/O driver", note, sizeof note);
    lab_note("%s", note);
    if (unjudged)
        lab_cannot_judge("%s", unjudged);
    cr_assert(r.returned || !r.watched,
              "the I/O driver's unpark read the driver's state with a plain access (no read-modify-write) and was "
              "stopped right after it; meanwhile the owner called park, found no token, and went to sleep in "
              "epoll_wait. The unpark then went on and ended, and the owner was still in epoll_wait %u ms later: "
              "what the unpark read was stale by the time it wrote the token, so it wrote no eventfd. The unpark was lost (io_driver.h contract 1): what does a read of the state tell an unpark about a state the owner may change before the unpark writes? The next "
              "hint: make hint STAGE=6 ITEM=cross-thread-unpark",
              wake_ms);
    cr_assert(r.returned,
              "the I/O driver's unpark ended before the owner called park, and park (4 s) then did not return "
              "within %u ms: an unpark made before park was lost (io_driver.h contract 1)",
              wake_ms);
    bare_free(&b);
#endif
}

/* The other half: a park that looks at the state and then announces its
 * sleep in two steps (a load, then a store of PARKED), against an unpark
 * made in between. Every place is tried (store_buffer.h,
 * lab_sb_park_explore): park (4 s) is single-stepped on a fresh driver and
 * stopped right after its first access to the driver, then its second, and
 * so on, until it reaches epoll_wait; at each stop another thread unparks,
 * then park goes on. The park began before that unpark: it returns within a
 * second every time. */
static void park_race_fresh(void *ctx, struct lab_sb_park *sp)
{
    struct bare *b = ctx;
    b->r = reactor_new();
    cr_assert_not_null(b->r, "reactor_new returned NULL");
    alloc_own_pages(true);
    b->io = io_driver_new(b->r);
    alloc_own_pages(false);
    cr_assert_not_null(b->io, "io_driver_new returned NULL");
    b->d = io_driver_driver(b->io);
    sp->arg = b;
    sp->page = (void *)((uintptr_t)b->io & ~(uintptr_t)4095);
}

static void park_race_done(void *ctx, struct lab_sb_park *sp)
{
    (void)sp;
    bare_free(ctx);
}

LAB_TEST(io_driver_race, unpark_after_every_access_of_park, 30)
{
#if !defined(__x86_64__)
    lab_cannot_judge("park is stopped by single-stepping with x86-64's trap flag; this machine is not x86-64");
#else
    struct bare b;
    unsigned wake_ms = 1000u * (unsigned)LAB_TIMEOUT_SCALE;
    struct lab_sb_park sp = { .unpark = race_unpark, .park = race_park, .wake_ms = wake_ms };
    struct lab_sb_park_result r;
    long k;
    char note[256];
    const char *unjudged = lab_sb_park_explore(&sp, park_race_fresh, park_race_done, &b, 200, &k, &r,
                                               "the I/O driver", note, sizeof note);
    lab_note("%s", note);
    if (unjudged)
        lab_cannot_judge("%s", unjudged);
    cr_assert(r.returned,
              "the I/O driver's park (4 s) was single-stepped and stopped right after its access number %ld to the "
              "driver; there another thread unparked the driver, and that unpark ended; park then went on and was "
              "still in epoll_wait %u ms later. The park began before the unpark, so the unpark's token had to end "
              "it: it was written between what park read of the state and what park wrote, and park wrote over it "
              "(io_driver.h contract 1). What does park's look at the state tell it about an unpark made before "
              "its announcement lands? The next hint: make hint STAGE=6 ITEM=cross-thread-unpark",
              k + 1, wake_ms);
#endif
}

/* A thread parked in epoll_wait with no timeout; another thread unparks it:
 * it returns within a few ms (the eventfd). If it has not returned after
 * 2 s, the test makes a socket readable so that it does, and fails. */
LAB_TEST(io_driver, unpark_interrupts_untimed_wait, 10)
{
    struct bare b;
    bare_new(&b);
    int sv[2];
    nb_socketpair(sv);
    struct io_reg *reg = reg_of(b.r, sv[0]);
    driver_park(b.d, 0); /* the socket's initial edge, out of the way */
    uint64_t worst = 0;
    for (int round = 0; round < 3; round++) {
        struct parked p = { .b = &b };
        atomic_init(&p.returned, false);
        atomic_init(&p.at, 0);
        pthread_t th;
        pthread_create(&th, NULL, park_forever, &p);
        lab_sleep_ms(30); /* the thread is in epoll_wait by now (or about to be: the state word) */
        uint64_t t0 = monotonic_ns();
        driver_unpark(b.d);
        uint64_t deadline = t0 + 2000 * MS_NS;
        while (!atomic_load_explicit(&p.returned, memory_order_acquire) && monotonic_ns() < deadline)
            lab_sleep_ms(1);
        bool in_time = atomic_load_explicit(&p.returned, memory_order_acquire);
        if (!in_time)
            cr_assert(write(sv[1], "x", 1) == 1, "write failed in the test itself"); /* let it out */
        pthread_join(th, NULL);
        cr_assert(in_time, "a thread parked in epoll_wait with no timeout was still parked 2 s after another thread "
                  "unparked it (it returned only when a socket became readable): nothing the unpark did reached "
                  "the epoll set the thread waited on (io_driver.h contract 1); the next hint: make hint STAGE=6 "
                  "ITEM=cross-thread-unpark");
        uint64_t lat = atomic_load_explicit(&p.at, memory_order_relaxed) - t0;
        if (lat > worst)
            worst = lat;
    }
    lab_note("unpark to return, worst of 3: %.3f ms", worst / 1e6);
    cr_assert_lt(worst, 500 * MS_NS * LAB_TIMEOUT_SCALE, "the parked thread returned %.1f ms after the unpark; "
                 "expected a few ms (io_driver.h contract 1)", worst / 1e6);
    cr_assert_geq(io_driver_test_eventfd_writes(b.io), 1, "no eventfd write was counted for an unpark of a "
                  "parked driver (io_driver.h contract 1); the next hint: make hint STAGE=6 "
                  "ITEM=cross-thread-unpark");
    reactor_deregister(b.r, reg);
    close(sv[0]);
    close(sv[1]);
    bare_free(&b);
}

/* An unpark before the park is the token: the next park returns at once. */
/* park(0) with a token and without: both read epoll and dispatch the byte
 * that is already there; the token goes with the first, so the second
 * park(0) of each round finds none. */
LAB_TEST(io_driver, zero_park_polls_the_kernel, 5)
{
    struct bare b;
    bare_new(&b);
    int sv[2];
    nb_socketpair(sv);
    struct io_reg *reg = reg_of(b.r, sv[0]);
    driver_park(b.d, 0); /* the socket's initial edge, out of the way */
    struct counting_waker *cw = counting_waker_new("reader");
    struct waker w = counting_waker_get(cw);
    struct context cx = context_from_waker(&w);
    struct io_ready ev;
    for (int token = 0; token < 2; token++) {
        const char *how = token ? "with a token (an unpark made before it)" : "without a token";
        cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &ev), POLL_PENDING, "read-ready with nothing sent");
        unsigned woken = counting_waker_woken(cw);
        if (token)
            driver_unpark(b.d);
        cr_assert(write(sv[1], "z", 1) == 1, "write failed in the test itself");
        bool got = driver_park(b.d, 0);
        cr_assert_eq(counting_waker_woken(cw), woken + 1, "park(0) %s returned, and the reader of a socket with a "
                     "byte already in it was not woken: that park did not read epoll and dispatch what it "
                     "returned (io_driver.h contract 4)", how);
        cr_assert_eq(got, (bool)token, "park(0) %s returned %s (io_driver.h contract 4: a zero park takes the "
                     "token if there is one)", how, got ? "true" : "false");
        cr_assert_not(driver_park(b.d, 0), "a second park(0) after one %s returned true: the first did not take "
                      "the token (io_driver.h contract 4)", how);
        cr_assert_eq(reactor_poll_ready(reg, IO_READ, &cx, &ev), POLL_READY, "the woken reader was not read-ready");
        char c;
        cr_assert(read(sv[0], &c, 1) == 1, "the byte was not there to read");
        cr_assert(read(sv[0], &c, 1) < 0 && errno == EAGAIN, "a second byte was there to read");
        reactor_clear_ready(reg, ev);
    }
    reactor_drop_waker(reg, IO_READ);
    reactor_deregister(b.r, reg);
    close(sv[0]);
    close(sv[1]);
    cr_assert_eq(counting_waker_counts(cw).live, 1, "the reactor kept a reference to the reader's waker");
    counting_waker_free(cw);
    bare_free(&b);
}

LAB_TEST(io_driver, unpark_before_park_is_kept, 5)
{
    struct bare b;
    bare_new(&b);
    driver_unpark(b.d);
    driver_unpark(b.d);
    uint64_t t0 = monotonic_ns();
    bool token = driver_park(b.d, (int64_t)(2000 * MS_NS));
    uint64_t took = monotonic_ns() - t0;
    cr_assert(token, "park after an unpark did not report the token (io_driver.h contract 1)");
    cr_assert_lt(took, 500 * MS_NS, "park after an unpark waited %.1f ms: the token must make it return at once "
                 "(io_driver.h contract 1)",
                 took / 1e6);
    /* two unparks are one token: the next park waits its timeout */
    t0 = monotonic_ns();
    token = driver_park(b.d, (int64_t)(30 * MS_NS));
    took = monotonic_ns() - t0;
    cr_assert_not(token, "two unparks gave two tokens: an unpark before park leaves one token "
                  "(io_driver.h contract 1)");
    cr_assert_geq(took, 29 * MS_NS, "park(30 ms) with no token returned after %.1f ms", took / 1e6);
    bare_free(&b);
}

/* A thread with nothing to do costs nothing: a 200 ms park is one
 * epoll_wait and almost no CPU; a sub-ms timeout is not a 0 ms spin. */
LAB_TEST(io_driver, park_sleeps_in_epoll_wait, 5)
{
    struct bare b;
    bare_new(&b);
    uint64_t c0 = thread_cpu_ns(), t0 = monotonic_ns();
    driver_park(b.d, (int64_t)(200 * MS_NS));
    uint64_t cpu = thread_cpu_ns() - c0, took = monotonic_ns() - t0;
    cr_assert_geq(took, 199 * MS_NS, "park(200 ms) returned after %.1f ms", took / 1e6);
    cr_assert_lt(cpu, 20 * MS_NS * LAB_TIMEOUT_SCALE, "park(200 ms) cost %.1f ms of CPU: it ran for much of "
                 "the wait (io_driver.h contract 2)", cpu / 1e6);
    uint64_t w0 = io_driver_test_waits(b.io);
    t0 = monotonic_ns();
    driver_park(b.d, 300000); /* 0.3 ms */
    took = monotonic_ns() - t0;
    cr_assert_eq(io_driver_test_waits(b.io) - w0, 1, "one park made %llu epoll_wait calls",
                 (unsigned long long)(io_driver_test_waits(b.io) - w0));
    cr_assert_geq(took, 300000, "park(0.3 ms) returned after %llu ns: a sub-ms timeout was rounded down to a "
                  "0 ms wait (a spin for its caller); io_driver.h contract 2 rounds it up to whole ms",
                  (unsigned long long)took);
    bare_free(&b);
}

/* The time driver on top: a sleep and a socket share one park. The reader is
 * woken by its data at ~20 ms, the sleep fires at 150 ms, and the thread
 * parks in between. Both times grow with LAB_TIMEOUT_SCALE (10 under
 * Valgrind, where a thread can be held for a few hundred ms: the order of
 * the two events is the check, and it needs the gap to outlast such a hold). */
struct sleeper {
    struct sleep sl;
    uint64_t *at;
};

static enum poll sleeper_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct sleeper *s = self;
    if (sleep_poll(&s->sl, cx) == POLL_PENDING)
        return POLL_PENDING;
    *s->at = monotonic_ns();
    return POLL_READY;
}
static void sleeper_drop(void *self) { sleep_drop(&((struct sleeper *)self)->sl); }
static const struct future_vtable sleeper_vt = FUTURE_VTABLE_INIT(struct sleeper, 0, sleeper_poll, sleeper_drop);

struct byte_reader {
    struct tcp_stream *st;
    uint64_t *at;
    ssize_t *got;
};

static enum poll byte_reader_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct byte_reader *br = self;
    char c;
    if (tcp_stream_poll_read(br->st, cx, &c, 1, br->got) == POLL_PENDING)
        return POLL_PENDING;
    *br->at = monotonic_ns();
    return POLL_READY;
}
static const struct future_vtable byte_reader_vt = FUTURE_VTABLE_INIT(struct byte_reader, 0, byte_reader_poll, NULL);

LAB_TEST(io_driver, timers_and_io_share_one_park, 10)
{
    struct iostack s;
    iostack_new(&s);
    struct conn c;
    conn_new(&s, &c);

    const unsigned byte_ms = SCALED_MS(20), sleep_ms = SCALED_MS(150);
    uint64_t start = monotonic_ns(), slept_at = 0, read_at = 0;
    struct sleeper sl = { .sl = sleep_for(s.td, sleep_ms * MS_NS), .at = &slept_at };
    ssize_t got = 0;
    struct byte_reader br = { .st = c.st, .at = &read_at, .got = &got };
    uint64_t w0 = io_driver_test_waits(s.io), c0 = thread_cpu_ns();
    iostack_spawn(&s, future_of(&sleeper_vt, &sl));
    iostack_spawn(&s, future_of(&byte_reader_vt, &br));
    struct delayed ds = { .fd = c.peer, .ms = byte_ms, .msg = "z", .end = PEER_KEEP };
    pthread_t th;
    pthread_create(&th, NULL, delayed_peer, &ds);
    iostack_run(&s);
    pthread_join(th, NULL);
    uint64_t cpu = thread_cpu_ns() - c0, waits = io_driver_test_waits(s.io) - w0;
    lab_note("byte at +%.1f ms, sleep at +%.1f ms, %llu epoll_waits, %.2f ms CPU", (read_at - start) / 1e6,
             (slept_at - start) / 1e6, (unsigned long long)waits, cpu / 1e6);
    cr_assert_eq(got, 1, "the reader got %zd instead of one byte", got);
    if (read_at >= slept_at && (ds.sent_ns + SCALED_MS(10) * MS_NS >= slept_at ||
                                slept_at - start >= SCALED_MS(350) * MS_NS))
        lab_cannot_judge("the byte due at %u ms was sent at %.1f ms and the %u ms sleep fired at %.1f ms: the "
                         "machine held the peer or the executor too long to tell which came first",
                         byte_ms, (ds.sent_ns - start) / 1e6, sleep_ms, (slept_at - start) / 1e6);
    cr_assert_lt(read_at, slept_at, "the byte sent at %u ms was read only after the %u ms sleep fired: the park "
                 "that should have returned on the byte waited for the timer (io_driver.h contract 2); the next "
                 "hint: make hint STAGE=6 ITEM=one-park", byte_ms, sleep_ms);
    cr_assert_geq(slept_at - start, sleep_ms * MS_NS, "a %u ms sleep finished early, at %.1f ms", sleep_ms,
                  (slept_at - start) / 1e6);
    cr_assert_leq(waits, 12, "%llu epoll_wait calls for one byte and one %u ms sleep: the parks returned long "
                  "before either was due (io_driver.h contract 2: one epoll_wait for at most t); the next hint: "
                  "make hint STAGE=6 ITEM=one-park", (unsigned long long)waits, sleep_ms);
    cr_assert_lt(cpu, 30 * MS_NS * LAB_TIMEOUT_SCALE, "waiting %u ms cost %.1f ms of CPU", sleep_ms, cpu / 1e6);
    conn_free(&c);
    iostack_free(&s);
}

/* ---- a registration polled on one thread, dispatched on another ---------------------- */

struct owner {
    struct driver d;
    atomic_bool stop;
};

static void *owner_loop(void *arg)
{
    struct owner *o = arg;
    while (!atomic_load_explicit(&o->stop, memory_order_acquire)) /* pairs with the test's release store */
        driver_park(o->d, (int64_t)(5 * MS_NS));
    return NULL;
}

/* One thread parks and dispatches; the test thread polls, reads, clears and
 * drops wakers on the same registration, while bytes arrive before or after
 * its registration at random, and unparks the parked thread now and then
 * (as a wake of a task from another thread would). Every byte must wake the
 * reader (a lost wake fails after 2 s), and no access may race (TSan). */
LAB_TEST(reactor, poll_on_another_thread, 20)
{
    struct bare b;
    bare_new(&b);
    int sv[2];
    nb_socketpair(sv);
    struct io_reg *reg = reg_of(b.r, sv[0]);
    struct owner o = { .d = b.d };
    atomic_init(&o.stop, false);
    pthread_t th;
    pthread_create(&th, NULL, owner_loop, &o);
    struct notify_waker *nw = notify_waker_new();
    struct waker wk = notify_waker_get(nw);
    struct context cx = context_from_waker(&wk);
    uint64_t rng = lab_seed();
    unsigned n = lab_scale(300, 30);
    for (unsigned i = 0; i < n; i++) {
        bool sent = false;
        if (lab_rand(&rng) % 2) {
            cr_assert(write(sv[1], "x", 1) == 1, "write failed in the test itself");
            sent = true;
            if (lab_rand(&rng) % 2)
                driver_unpark(b.d); /* a wake from here too, as a remote task wake would */
        }
        unsigned got = 0;
        while (got == 0) {
            struct io_ready ev;
            if (reactor_poll_ready(reg, IO_READ, &cx, &ev) == POLL_PENDING) {
                if (!sent) {
                    cr_assert(write(sv[1], "x", 1) == 1, "write failed in the test itself");
                    sent = true;
                    if (lab_rand(&rng) % 2)
                        driver_unpark(b.d);
                }
                cr_assert(notify_waker_wait(nw, 2000), "byte %u: the reader registered and was never woken, "
                          "though a byte arrived and another thread was dispatching: either the readiness was set "
                          "between the poll's look and its registration (reactor.h contract 4), or the park that "
                          "got the byte's event did not dispatch it (io_driver.h contract 2); the next hint: make "
                          "hint STAGE=6 ITEM=poll-cross-thread", i);
                continue;
            }
            char buf[4];
            ssize_t k = read(sv[0], buf, sizeof buf);
            if (k > 0)
                got += (unsigned)k;
            else if (k < 0 && errno == EAGAIN)
                reactor_clear_ready(reg, ev);
            else
                cr_assert_fail("read failed in the test itself");
        }
        if (lab_rand(&rng) % 4 == 0)
            reactor_drop_waker(reg, IO_READ);
        notify_waker_wait(nw, 0); /* a wake left over from a byte read at once */
    }
    atomic_store_explicit(&o.stop, true, memory_order_release); /* pairs with the owner's acquire load */
    driver_unpark(b.d);
    pthread_join(th, NULL);
    reactor_deregister(b.r, reg);
    close(sv[0]);
    close(sv[1]);
    waker_drop(&wk);
    notify_waker_release(nw);
    bare_free(&b);
}

/* Descriptors epoll refuses: a regular file (EPERM) and a number no
 * descriptor has (EBADF). reactor_register answers the -errno, and a
 * thousand refusals leave no registration behind. */
LAB_TEST(reactor, refused_registration_takes_no_slot, 5)
{
    struct bare b;
    bare_new(&b);
    int sv[2];
    nb_socketpair(sv);
    int file = open("/proc/self/exe", O_RDONLY | O_CLOEXEC); /* this test's own binary: a regular file */
    cr_assert_geq(file, 0, "opening the test's own binary failed in the test itself: %s", strerror(errno));
    int gone = dup(file);
    cr_assert_geq(gone, 0, "dup failed in the test itself: %s", strerror(errno));
    close(gone); /* a number no descriptor has now: the test opens nothing after this */
    struct io_reg *first = reg_of(b.r, sv[0]);
    uint32_t slot = (uint32_t)reactor_test_token(first); /* slab index + 1 (reactor.h) */
    reactor_deregister(b.r, first); /* its slot: the first to be reused */
    for (int i = 0; i < 1000; i++) {
        struct io_reg *reg = NULL;
        int fd = i % 2 ? gone : file, want = i % 2 ? -EBADF : -EPERM;
        int e = reactor_register(b.r, fd, &reg);
        cr_assert_eq(e, want, "reactor_register of %s answered %d (%s); epoll_ctl refuses it with %s, and "
                     "reactor_register answers -errno (reactor.h: reactor_register)",
                     i % 2 ? "a closed descriptor number" : "a regular file", e, e < 0 ? strerror(-e) : "no error",
                     i % 2 ? "EBADF" : "EPERM");
    }
    size_t live = reactor_test_stats(b.r).registrations;
    cr_assert_eq(live, 0, "after 1000 registrations that epoll_ctl refused, the reactor counts %zu live "
                 "registrations: what became of the slot each one took before epoll answered (reactor.h, "
                 "contract 1: the slab; reactor_register)?", live);
    struct io_reg *again = reg_of(b.r, sv[0]);
    uint32_t slot_again = (uint32_t)reactor_test_token(again);
    cr_assert_eq(slot_again, slot, "a socket registered, deregistered (its slot freed: the first to be reused), then "
                 "1000 registrations epoll_ctl refused, then the socket registered again: it got slab index %u, not "
                 "the freed %u. Where did the refused registrations' slots go (reactor.h, contract 1: the slab; "
                 "reactor_register)?", slot_again - 1, slot - 1);
    reactor_deregister(b.r, again);
    close(sv[0]);
    close(sv[1]);
    close(file);
    bare_free(&b);
}
