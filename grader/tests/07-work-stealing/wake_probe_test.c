/* wake_probe_test.c - channel.h contract 3's "woken after every lock is
 * released", for a lock of any kind.
 *
 * rules_test.c's chan_rules/wakes_outside_every_lock names a pthread lock
 * held across the wake; a lock made of something else (a spinlock on an
 * atomic flag, a ticket lock) is out of its sight. Here the wake itself
 * asks whether the channel is still usable (common/testing/wake_probe.h):
 * inside the wake that a send gives a waiting receive (or a receive gives a
 * waiting send), one helper thread polls the same operation on the same
 * channel (it finds the channel full, or empty, waits and is dropped:
 * nothing moves) and another uses a fresh channel (a send, a receive, a
 * receive that waits, dropped). Each must finish while the wake is still
 * running: a worker that runs the woken task at once needs the same locks.
 */
#include "stage07.h"
#include "channel.h"
#include "wake_probe.h"

struct same_chan {
    struct chan *c;
    int side;          /* 0: a send woke a receive, so a send waits; 1: the reverse */
    enum poll result;  /* the helper's poll: Pending expected */
};

static void poll_same(void *arg)
{
    struct same_chan *sc = arg;
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);
    enum chan_status st;
    if (sc->side == 0) {
        struct chan_send s;
        chan_send_init(&s, sc->c, 7);
        sc->result = chan_send_poll(&s, &cx, &st);
        chan_send_drop(&s);
    } else {
        struct chan_recv r;
        uint64_t v;
        chan_recv_init(&r, sc->c);
        sc->result = chan_recv_poll(&r, &cx, &v, &st);
        chan_recv_drop(&r);
    }
}

struct fresh_chan {
    bool made;
    enum poll sent, taken, waited;
    uint64_t got;
};

static void use_fresh(void *arg)
{
    struct fresh_chan *fc = arg;
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);
    enum chan_status st;
    struct chan *c = chan_new(1);
    fc->made = c != NULL;
    if (!c)
        return;
    struct chan_send s;
    struct chan_recv r, r2;
    chan_send_init(&s, c, 9);
    fc->sent = chan_send_poll(&s, &cx, &st);
    chan_send_drop(&s);
    chan_recv_init(&r, c);
    fc->taken = chan_recv_poll(&r, &cx, &fc->got, &st);
    chan_recv_drop(&r);
    chan_recv_init(&r2, c);
    uint64_t v;
    fc->waited = chan_recv_poll(&r2, &cx, &v, &st);
    chan_recv_drop(&r2);
    chan_free(c);
}

static const char *poll_name(enum poll p) { return p == POLL_READY ? "Ready" : "Pending"; }

LAB_TEST(chan_rules, channel_usable_inside_the_wake, 10)
{
    for (int side = 0; side < 2; side++) { /* 0: a send wakes a receiver; 1: a receive wakes a sender */
        const char *what = side == 0 ? "a send into an empty bounded channel woke the waiting receive"
                                     : "a receive from a full bounded channel woke the waiting send";
        struct chan *c = chan_new(1);
        cr_assert_not_null(c, "chan_new(1) returned NULL");
        struct counting_waker *cw = counting_waker_new(side == 0 ? "receiver" : "sender");
        struct waker w = counting_waker_get(cw);
        struct context cx = context_from_waker(&w);
        struct waker nw = noop_waker();
        struct context ncx = context_from_waker(&nw);
        enum chan_status st;
        uint64_t v = 0;
        struct chan_recv r, taker;
        struct chan_send s, giver;
        struct same_chan sc = { .c = c, .side = side };
        struct fresh_chan fc = { .made = false };
        struct lab_wake_probe *probe = lab_wake_probe_new(SCALED_MS(1000));
        lab_wake_probe_add(probe, side == 0 ? "a send polled on the same channel (full: it waits), then dropped"
                                            : "a receive polled on the same channel (empty: it waits), then dropped",
                           poll_same, &sc);
        lab_wake_probe_add(probe, "a fresh channel's send, receive, waiting receive and free", use_fresh, &fc);
        enum poll p;
        if (side == 0) {
            chan_recv_init(&r, c);
            cr_assert_eq(chan_recv_poll(&r, &cx, &v, &st), POLL_PENDING, "a receive on an empty channel was Ready");
            counting_waker_set_hook(cw, lab_wake_probe_hook, probe);
            chan_send_init(&giver, c, 5);
            p = chan_send_poll(&giver, &ncx, &st);
        } else {
            cr_assert(chan_try_send(c, 1), "chan_try_send on an empty channel of capacity 1 failed");
            chan_send_init(&s, c, 2);
            cr_assert_eq(chan_send_poll(&s, &cx, &st), POLL_PENDING, "a send on a full channel was Ready");
            counting_waker_set_hook(cw, lab_wake_probe_hook, probe);
            chan_recv_init(&taker, c);
            p = chan_recv_poll(&taker, &ncx, &v, &st);
        }
        enum lab_probe_verdict verdict = lab_wake_probe_finish(probe);
        counting_waker_set_hook(cw, NULL, NULL);
        const char *seen = lab_wake_probe_evidence(probe);
        cr_assert_eq(p, POLL_READY, "%s", side == 0 ? "a send into an empty channel of capacity 1 waited"
                                                    : "a receive on a full channel waited");
        cr_assert_neq(verdict, LAB_PROBE_NOT_RUN, "%s: the waiter was not woken (channel.h contract 3)", what);
        if (verdict == LAB_PROBE_STARVED)
            lab_cannot_judge("inside the wake (%s): %s", what, seen);
        cr_assert_eq(verdict, LAB_PROBE_USABLE, "%s: a lock the channel needs was still held while the waker was "
                     "woken (channel.h contract 3: the waiter is woken after every lock, of any kind, is released): %s",
                     what, seen);
        cr_assert(fc.made && fc.sent == POLL_READY && fc.taken == POLL_READY && fc.got == 9 && fc.waited == POLL_PENDING,
                  "a fresh channel used from inside a wake did not behave: send %s, receive %s (got %llu), receive of "
                  "an empty channel %s (expected Ready, Ready with 9, Pending)", poll_name(fc.sent),
                  poll_name(fc.taken), (unsigned long long)fc.got, poll_name(fc.waited));
        cr_assert_eq(sc.result, POLL_PENDING, "%s: the %s from inside the wake was Ready on a channel that was %s",
                     what, side == 0 ? "send" : "receive", side == 0 ? "full" : "empty");
        lab_wake_probe_free(probe);
        if (side == 0) {
            chan_send_drop(&giver);
            cr_assert_eq(chan_recv_poll(&r, &cx, &v, &st), POLL_READY, "the woken receive was not Ready");
            chan_recv_drop(&r);
        } else {
            chan_recv_drop(&taker);
            cr_assert_eq(chan_send_poll(&s, &cx, &st), POLL_READY, "the woken send was not Ready");
            chan_send_drop(&s);
        }
        chan_free(c);
        struct waker_counts n = counting_waker_counts(cw);
        cr_assert_eq(n.live, 1, "the channel kept a reference to the waker (%ld alive, 1 expected)", n.live);
        counting_waker_free(cw);
    }
}
