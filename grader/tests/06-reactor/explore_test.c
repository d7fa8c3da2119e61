/* explore_test.c - stage 01's two rules where they come back in the reactor.
 *
 * Check and register under one lock (reactor.h contract 4): the schedule
 * explorer (common/testing/explore.h) runs a first reactor_poll_ready
 * (thread A) against a reactor_dispatch of a forged event for the same
 * registration (thread B), in every order with at most two preemptions at
 * the points where either locks, unlocks or calls the waker. A poll that
 * returned Pending must have been woken: a poll that looks at readiness,
 * then locks and stores its waker without looking again under the lock
 * loses the edge dispatch set in between, every run.
 *
 * Wake outside every lock (reactor.h contract 4, last sentence): the
 * wake-under-lock detector of stages 01 and 04 counts the wrapped locks the
 * dispatching thread holds when it wakes a waker, whichever they are, for a
 * forged event given to reactor_dispatch and for a real byte an I/O driver
 * park dispatches.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "explore.h"
#include "explore_checks.h"
#include "stage06.h"

LAB_SUITE(reactor_explore, 20);

struct scene {
    struct reactor *r;
    int sv[2];
    struct io_reg *reg;
    uint64_t token;
    struct explore_waker *task;
    enum io_direction dir;
    enum poll first;
    struct io_ready ev;
};

static enum io_direction scene_dir; /* the direction of the running test, read by setup */

static void *setup(void)
{
    struct scene *s = calloc(1, sizeof *s);
    cr_assert_not_null(s, "out of memory");
    s->dir = scene_dir;
    s->r = reactor_new();
    cr_assert_not_null(s->r, "reactor_new returned NULL");
    nb_socketpair(s->sv);
    int e = reactor_register(s->r, s->sv[0], &s->reg);
    cr_assert_eq(e, 0, "reactor_register failed: %s", strerror(-e));
    s->token = reactor_test_token(s->reg);
    if (s->dir == IO_WRITE) {
        /* a fresh socket is writable: dispatch that, take the snapshot and
         * clear it, as a writer whose send found EAGAIN would */
        struct epoll_event out = { .events = EPOLLOUT, .data.u64 = s->token };
        reactor_dispatch(s->r, &out, 1);
        struct waker nw = noop_waker();
        struct context cx = context_from_waker(&nw);
        struct io_ready ev;
        cr_assert_eq(reactor_poll_ready(s->reg, IO_WRITE, &cx, &ev), POLL_READY,
                     "a registration dispatched EPOLLOUT was not write-ready (reactor.h contract 3)");
        reactor_clear_ready(s->reg, ev);
    }
    s->task = explore_waker_new(s->dir == IO_READ ? "reader" : "writer");
    return s;
}

static void first_poll(void *arg)
{
    struct scene *s = arg;
    struct waker w = explore_waker_get(s->task);
    struct context cx = context_from_waker(&w);
    s->first = reactor_poll_ready(s->reg, s->dir, &cx, &s->ev);
}

static void dispatch_event(void *arg)
{
    struct scene *s = arg;
    struct epoll_event e = { .events = s->dir == IO_READ ? EPOLLIN : EPOLLOUT, .data.u64 = s->token };
    reactor_dispatch(s->r, &e, 1);
}

static const char *check(void *arg)
{
    static char why[480];
    struct scene *s = arg;
    const char *dir = s->dir == IO_READ ? "read" : "write";
    if (s->first == POLL_READY)
        return NULL; /* the check saw the edge */
    if (explore_waker_woken(s->task) == 0) {
        snprintf(why, sizeof why,
                 "lost wakeup: the first poll_ready(IO_%s) returned Pending, the other thread dispatched an "
                 "event that made the registration %s-ready, and the waker was never woken: the event fell "
                 "between the poll's look at the readiness word and its registration (reactor.h contract "
                 "4: poll_ready checks and registers under the lock dispatch sets readiness under); the "
                 "schedule below shows where. The next hint: make hint STAGE=6 "
                 "ITEM=explored-check-register", s->dir == IO_READ ? "READ" : "WRITE", dir);
        return why;
    }
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);
    struct io_ready ev;
    if (reactor_poll_ready(s->reg, s->dir, &cx, &ev) != POLL_READY) {
        snprintf(why, sizeof why, "the waker was woken by the dispatch, but the next poll_ready(IO_%s) was not "
                 "Ready (reactor.h contract 3)", s->dir == IO_READ ? "READ" : "WRITE");
        return why;
    }
    return NULL;
}

static void teardown(void *arg)
{
    struct scene *s = arg;
    reactor_deregister(s->r, s->reg);
    close(s->sv[0]);
    close(s->sv[1]);
    reactor_free(s->r);
    explore_waker_free_if_balanced(s->task);
    free(s);
}

static void explore_dir(enum io_direction dir, const char *test)
{
    scene_dir = dir;
    struct explore_case c = { .a_name = "poll_ready", .b_name = "dispatch", .setup = setup, .a = first_poll,
                              .b = dispatch_event, .check = check, .teardown = teardown };
    lab_explore_expect(&c, 2, 6, test);
}

LAB_TEST(reactor_explore, poll_ready_vs_dispatch_read, 20)
{
    explore_dir(IO_READ, "reactor_explore/poll_ready_vs_dispatch_read");
}

LAB_TEST(reactor_explore, poll_ready_vs_dispatch_write, 20)
{
    explore_dir(IO_WRITE, "reactor_explore/poll_ready_vs_dispatch_write");
}

/* A reader and a writer pending; dispatch (a forged event, then a real
 * byte and room to write through an I/O driver park) wakes both while the
 * dispatching thread holds no lock at all. */
LAB_TEST(reactor_explore, dispatch_wakes_outside_every_lock, 10)
{
    for (int mode = 0; mode < 2; mode++) {
        struct reactor *r = reactor_new();
        cr_assert_not_null(r, "reactor_new returned NULL");
        struct io_driver *io = mode == 1 ? io_driver_new(r) : NULL;
        cr_assert(mode == 0 || io, "io_driver_new returned NULL");
        int sv[2];
        nb_socketpair(sv);
        struct io_reg *reg = NULL;
        int e = reactor_register(r, sv[0], &reg);
        cr_assert_eq(e, 0, "reactor_register failed: %s", strerror(-e));
        uint64_t token = reactor_test_token(reg);
        struct io_ready ev;
        struct waker nw = noop_waker();
        struct context ncx = context_from_waker(&nw);
        if (mode == 1) {
            /* let the driver see the socket's first EPOLLOUT, then clear it */
            driver_park(io_driver_driver(io), 0);
        } else {
            struct epoll_event out = { .events = EPOLLOUT, .data.u64 = token };
            reactor_dispatch(r, &out, 1);
        }
        if (reactor_poll_ready(reg, IO_WRITE, &ncx, &ev) == POLL_READY)
            reactor_clear_ready(reg, ev);
        struct explore_waker *rd = explore_waker_new("reader"), *wr = explore_waker_new("writer");
        struct waker rw = explore_waker_get(rd), ww = explore_waker_get(wr);
        struct context rcx = context_from_waker(&rw), wcx = context_from_waker(&ww);
        cr_assert_eq(reactor_poll_ready(reg, IO_READ, &rcx, &ev), POLL_PENDING,
                     "a fresh socket with nothing to read was read-ready");
        cr_assert_eq(reactor_poll_ready(reg, IO_WRITE, &wcx, &ev), POLL_PENDING,
                     "a socket whose write readiness was cleared was write-ready with no new event");
        const char *how = mode == 0 ? "reactor_dispatch of a forged EPOLLIN|EPOLLOUT event"
                                    : "an I/O driver park that dispatched a byte and room to write";
        lab_sync_reset();
        lab_sync_track(true);
        if (mode == 0) {
            struct epoll_event both = { .events = EPOLLIN | EPOLLOUT, .data.u64 = token };
            reactor_dispatch(r, &both, 1);
        } else {
            cr_assert(write(sv[1], "x", 1) == 1, "write failed in the test itself");
            /* reading the byte's event needs one park; a second if the
             * kernel reported the byte after the first returned */
            for (int i = 0; i < 5 && (explore_waker_woken(rd) == 0 || explore_waker_woken(wr) == 0); i++)
                driver_park(io_driver_driver(io), (int64_t)(50 * MS_NS));
        }
        lab_sync_track(false);
        const char *v = lab_sync_wake_under_lock();
        cr_assert_eq(explore_waker_woken(rd), 1u, "%s did not wake the pending reader once (woken %u times; "
                     "reactor.h contract 3)", how, explore_waker_woken(rd));
        if (mode == 0)
            cr_assert_eq(explore_waker_woken(wr), 1u, "%s did not wake the pending writer once (woken %u times; "
                         "reactor.h contract 3)", how, explore_waker_woken(wr));
        cr_assert_null(v, "%s: %s (reactor.h contract 4: wakers are woken after the lock is released). The next "
                       "hint: make hint STAGE=6 ITEM=wake-outside-every-lock", how, v);
        reactor_drop_waker(reg, IO_WRITE);
        reactor_deregister(r, reg);
        close(sv[0]);
        close(sv[1]);
        if (io)
            io_driver_free(io);
        reactor_free(r);
        cr_assert_eq(explore_waker_live(rd), 1, "the reactor kept a reference to the reader's waker after "
                     "deregistering (reactor.h contract 5)");
        cr_assert_eq(explore_waker_live(wr), 1, "the reactor kept a reference to the writer's waker after "
                     "deregistering (reactor.h contract 5)");
        explore_waker_free(rd);
        explore_waker_free(wr);
    }
}

/* Every kind of event, and more of them in one turn than a batch of wakers
 * holds: 300 registrations (eventfds), each with a reader and a writer
 * pending, and one reactor_dispatch of 300 forged events, a quarter each
 * readable and writable, a half-close (EPOLLRDHUP), a hang-up (EPOLLHUP)
 * and an error (EPOLLERR). Whatever path a wake takes (a batch that
 * filled up, a hang-up handled at once), the dispatching thread holds no
 * lock when it wakes. */
LAB_TEST(reactor_explore, every_dispatch_wake_outside_every_lock, 10)
{
    enum { REGS = 300 };
    static const struct {
        uint32_t events;
        bool reader, writer; /* woken, by reactor.h contract 3 */
        const char *name;
    } kinds[] = {
        { EPOLLIN | EPOLLOUT, true, true, "readable and writable" },
        { EPOLLRDHUP | EPOLLIN, true, false, "a half-close (EPOLLRDHUP)" },
        { EPOLLHUP, true, true, "a hang-up (EPOLLHUP)" },
        { EPOLLERR, true, true, "an error (EPOLLERR)" },
    };
    enum { KINDS = sizeof kinds / sizeof kinds[0] };
    struct reactor *r = reactor_new();
    cr_assert_not_null(r, "reactor_new returned NULL");
    static int fd[REGS];
    static struct io_reg *reg[REGS];
    static struct explore_waker *rd[REGS], *wr[REGS];
    static struct epoll_event ev[REGS];
    for (int i = 0; i < REGS; i++) {
        fd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        cr_assert(fd[i] >= 0, "eventfd failed in the test itself: %s", strerror(errno));
        int e = reactor_register(r, fd[i], &reg[i]);
        cr_assert_eq(e, 0, "reactor_register failed: %s", strerror(-e));
        rd[i] = explore_waker_new("reader");
        wr[i] = explore_waker_new("writer");
        struct waker rw = explore_waker_get(rd[i]), ww = explore_waker_get(wr[i]);
        struct context rcx = context_from_waker(&rw), wcx = context_from_waker(&ww);
        struct io_ready ready;
        cr_assert_eq(reactor_poll_ready(reg[i], IO_READ, &rcx, &ready), POLL_PENDING,
                     "a registration no event was dispatched for was read-ready");
        cr_assert_eq(reactor_poll_ready(reg[i], IO_WRITE, &wcx, &ready), POLL_PENDING,
                     "a registration no event was dispatched for was write-ready");
        ev[i] = (struct epoll_event){ .events = kinds[i % KINDS].events, .data.u64 = reactor_test_token(reg[i]) };
    }
    lab_sync_reset();
    lab_sync_track(true);
    reactor_dispatch(r, ev, REGS);
    lab_sync_track(false);
    const char *v = lab_sync_wake_under_lock();
    for (int i = 0; i < REGS; i++) {
        int k = i % KINDS;
        cr_assert_eq(explore_waker_woken(rd[i]), kinds[k].reader ? 1u : 0u, "%s for a registration with a reader "
                     "and a writer pending woke the reader %u times (reactor.h contract 3)", kinds[k].name,
                     explore_waker_woken(rd[i]));
        if (kinds[k].writer)
            cr_assert_eq(explore_waker_woken(wr[i]), 1u, "%s for a registration with a reader and a writer "
                         "pending woke the writer %u times (reactor.h contract 3)", kinds[k].name,
                         explore_waker_woken(wr[i]));
    }
    cr_assert_null(v, "one reactor_dispatch of %d events (readable and writable, half-close, hang-up, error), "
                   "%d registrations each with a reader and a writer pending: %s (reactor.h contract 4: wakers "
                   "are woken after the lock is released, whatever the event and however many come in one "
                   "turn). The next hint: make hint STAGE=6 ITEM=wake-outside-every-lock", REGS, REGS, v);
    for (int i = 0; i < REGS; i++) {
        reactor_drop_waker(reg[i], IO_READ);
        reactor_drop_waker(reg[i], IO_WRITE);
        reactor_deregister(r, reg[i]);
        close(fd[i]);
        cr_assert_eq(explore_waker_live(rd[i]), 1, "the reactor kept a reference to a reader's waker after "
                     "deregistering (reactor.h contract 5)");
        cr_assert_eq(explore_waker_live(wr[i]), 1, "the reactor kept a reference to a writer's waker after "
                     "deregistering (reactor.h contract 5)");
        explore_waker_free(rd[i]);
        explore_waker_free(wr[i]);
    }
    reactor_free(r);
}
