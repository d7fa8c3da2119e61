/* wake_probe_test.c - reactor.h contract 4's "wakers are woken after the
 * lock is released", for a lock of any kind.
 *
 * explore_test.c's wake tests name a pthread lock held across a dispatch's
 * wakes; a lock made of something else (a spinlock on an atomic, a flag
 * guarded by a condition variable) is out of their sight. Here the wake
 * itself asks whether the reactor is still usable
 * (common/testing/wake_probe.h): inside the reader's wake, from a forged
 * dispatch or from an I/O driver's park, one helper thread polls the same
 * registration's readiness, registers and deregisters another socket on the
 * same reactor (and, after a park, unparks the same driver), and another
 * uses a fresh reactor (register, a forged event, poll, deregister, free).
 * Each must finish while the wake is still running: a worker that runs the
 * woken task at once polls the same readiness. reactor_usable_inside_the_drop
 * asks the same inside the drop of a waker the reactor gives back
 * (reactor_deregister, contract 5; reactor_drop_waker, tcp.h contract 2):
 * a drop runs the executor's code as a wake does (contract 4).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stage06.h"
#include "wake_probe.h"

struct same_reactor {
    struct reactor *r;
    struct io_reg *reg;
    struct io_driver *io;   /* NULL: a forged dispatch */
    enum poll read_ready;   /* poll_ready(IO_READ) of the woken registration: Ready expected */
    int registered;         /* reactor_register of another socket: 0 expected */
};

/* reactor_register's result for a fresh socket on r, deregistered at once;
 * -1 when the test could not make the socket. */
static int register_another(struct reactor *r)
{
    int sv[2], registered = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0) {
        struct io_reg *other;
        registered = reactor_register(r, sv[0], &other);
        if (registered == 0)
            reactor_deregister(r, other);
        close(sv[0]);
        close(sv[1]);
    }
    return registered;
}

static void use_same(void *arg)
{
    struct same_reactor *sr = arg;
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);
    struct io_ready ev;
    sr->read_ready = reactor_poll_ready(sr->reg, IO_READ, &cx, &ev);
    sr->registered = register_another(sr->r);
    if (sr->io)
        driver_unpark(io_driver_driver(sr->io));
}

struct fresh_reactor {
    int registered;
    enum poll ready;
};

static void use_fresh(void *arg)
{
    struct fresh_reactor *fr = arg;
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);
    fr->registered = -1;
    struct reactor *r = reactor_new();
    if (!r)
        return;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0) {
        struct io_reg *reg;
        fr->registered = reactor_register(r, sv[0], &reg);
        if (fr->registered == 0) {
            struct epoll_event in = { .events = EPOLLIN, .data.u64 = reactor_test_token(reg) };
            reactor_dispatch(r, &in, 1);
            struct io_ready ev;
            fr->ready = reactor_poll_ready(reg, IO_READ, &cx, &ev);
            reactor_deregister(r, reg);
        }
        close(sv[0]);
        close(sv[1]);
    }
    reactor_free(r);
}

LAB_TEST(reactor_explore, reactor_usable_inside_the_wake, 10)
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
        struct counting_waker *rd = counting_waker_new("reader");
        struct waker rw = counting_waker_get(rd);
        struct context rcx = context_from_waker(&rw);
        struct io_ready ev;
        cr_assert_eq(reactor_poll_ready(reg, IO_READ, &rcx, &ev), POLL_PENDING,
                     "a fresh socket with nothing to read was read-ready");
        const char *how = mode == 0 ? "reactor_dispatch of a forged EPOLLIN event"
                                    : "an I/O driver park that dispatched a byte";
        struct same_reactor sr = { .r = r, .reg = reg, .io = io };
        struct fresh_reactor fr = { .registered = -1 };
        struct lab_wake_probe *probe = lab_wake_probe_new(SCALED_MS(1000));
        lab_wake_probe_add(probe, mode == 0 ? "reactor_poll_ready of the registration woken for, and a register "
                                              "and deregister of another socket on the same reactor"
                                            : "reactor_poll_ready of the registration woken for, a register and "
                                              "deregister of another socket on the same reactor, and an unpark "
                                              "of the same driver", use_same, &sr);
        lab_wake_probe_add(probe, "a fresh reactor's register, dispatch, poll_ready, deregister and free", use_fresh, &fr);
        counting_waker_set_hook(rd, lab_wake_probe_hook, probe);
        if (mode == 0) {
            struct epoll_event in = { .events = EPOLLIN, .data.u64 = token };
            reactor_dispatch(r, &in, 1);
        } else {
            cr_assert(write(sv[1], "x", 1) == 1, "write failed in the test itself");
            /* reading the byte's event needs one park; a second if the
             * kernel reported the byte after the first returned */
            for (int i = 0; i < 5 && counting_waker_woken(rd) == 0; i++)
                driver_park(io_driver_driver(io), (int64_t)(50 * MS_NS));
        }
        enum lab_probe_verdict v = lab_wake_probe_finish(probe);
        counting_waker_set_hook(rd, NULL, NULL);
        const char *seen = lab_wake_probe_evidence(probe);
        cr_assert_neq(v, LAB_PROBE_NOT_RUN, "%s did not wake the pending reader (reactor.h contract 3)", how);
        if (v == LAB_PROBE_STARVED)
            lab_cannot_judge("inside the reader's wake (%s): %s", how, seen);
        cr_assert_eq(v, LAB_PROBE_USABLE, "%s: a lock the reactor needs was still held while the reader's waker was "
                     "woken (reactor.h contract 4: wakers are woken after every lock, of any kind, is released): %s",
                     how, seen);
        cr_assert_eq(sr.read_ready, POLL_READY, "%s: inside the reader's wake, reactor_poll_ready(IO_READ) of the "
                     "registration was Pending (reactor.h contract 3: readiness is set before the wake)", how);
        cr_assert(sr.registered == 0 && fr.registered == 0 && fr.ready == POLL_READY,
                  "from inside the reader's wake: reactor_register on the same reactor gave %d, on a fresh one %d, "
                  "and the fresh registration's poll after a forged EPOLLIN was %s (expected 0, 0, Ready)",
                  sr.registered, fr.registered, fr.ready == POLL_READY ? "Ready" : "Pending");
        lab_wake_probe_free(probe);
        reactor_deregister(r, reg);
        close(sv[0]);
        close(sv[1]);
        if (io)
            io_driver_free(io);
        reactor_free(r);
        struct waker_counts n = counting_waker_counts(rd);
        cr_assert_eq(n.live, 1, "the reactor kept a reference to the reader's waker after deregistering "
                     "(reactor.h contract 5)");
        counting_waker_free(rd);
    }
}

struct other_socket {
    struct reactor *r;
    int registered;         /* reactor_register of another socket: 0 expected */
};

static void use_other(void *arg)
{
    struct other_socket *os = arg;
    os->registered = register_another(os->r);
}

LAB_TEST(reactor_explore, reactor_usable_inside_the_drop, 10)
{
    static const char *const how[] = { "reactor_deregister", "reactor_drop_waker(IO_READ)" };
    for (int mode = 0; mode < 2; mode++) {
        struct reactor *r = reactor_new();
        cr_assert_not_null(r, "reactor_new returned NULL");
        int sv[2];
        nb_socketpair(sv);
        struct io_reg *reg = NULL;
        int e = reactor_register(r, sv[0], &reg);
        cr_assert_eq(e, 0, "reactor_register failed: %s", strerror(-e));
        struct counting_waker *rd = counting_waker_new("reader");
        struct waker rw = counting_waker_get(rd);
        struct context rcx = context_from_waker(&rw);
        struct io_ready ev;
        cr_assert_eq(reactor_poll_ready(reg, IO_READ, &rcx, &ev), POLL_PENDING,
                     "a fresh socket with nothing to read was read-ready");
        struct other_socket os = { .r = r };
        struct fresh_reactor fr = { .registered = -1 };
        struct lab_wake_probe *probe = lab_wake_probe_new(SCALED_MS(1000));
        lab_wake_probe_add(probe, "a register and deregister of another socket on the same reactor", use_other, &os);
        lab_wake_probe_add(probe, "a fresh reactor's register, dispatch, poll_ready, deregister and free", use_fresh, &fr);
        counting_waker_set_hook(rd, lab_wake_probe_drop_hook, probe);
        if (mode == 0)
            reactor_deregister(r, reg);
        else
            reactor_drop_waker(reg, IO_READ);
        enum lab_probe_verdict v = lab_wake_probe_finish(probe);
        counting_waker_set_hook(rd, NULL, NULL);
        const char *seen = lab_wake_probe_evidence(probe);
        cr_assert_neq(v, LAB_PROBE_NOT_RUN, "%s did not give back the pending reader's waker (%s)", how[mode],
                      mode == 0 ? "reactor.h contract 5: deregister drops both wakers at once"
                                : "tcp.h contract 2: the reactor drops a dropped future's waker at once");
        if (v == LAB_PROBE_STARVED)
            lab_cannot_judge("inside the reader's waker drop (%s): %s", how[mode], seen);
        cr_assert_eq(v, LAB_PROBE_USABLE, "%s: a lock the reactor needs was still held while the reader's waker was "
                     "dropped (reactor.h contract 4: a waker's drop runs the executor's code as its wake does, so "
                     "it comes after every lock, of any kind, is released): %s", how[mode], seen);
        cr_assert(os.registered == 0 && fr.registered == 0 && fr.ready == POLL_READY,
                  "from inside the reader's waker drop: reactor_register on the same reactor gave %d, on a fresh one "
                  "%d, and the fresh registration's poll after a forged EPOLLIN was %s (expected 0, 0, Ready)",
                  os.registered, fr.registered, fr.ready == POLL_READY ? "Ready" : "Pending");
        lab_wake_probe_free(probe);
        if (mode == 1)
            reactor_deregister(r, reg);
        close(sv[0]);
        close(sv[1]);
        reactor_free(r);
        cr_assert_eq(counting_waker_counts(rd).live, 1, "the reactor kept a reference to the reader's waker after %s",
                     how[mode]);
        counting_waker_free(rd);
    }
}
