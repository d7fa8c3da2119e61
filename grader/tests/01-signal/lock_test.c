/* lock_test.c - contract clause 4: the waker is woken after the lock is released.
 *
 * How it is detected: a hook runs inside the waker's wake, on the thread
 * that is completing (or dropping) the producer. The hook starts a probe
 * thread that polls the future, which needs the signal's lock, and waits up
 * to 200 ms (from the moment the probe runs) for it. If the wake runs after unlocking, the probe gets the lock
 * at once and finds the outcome. If the wake runs under the lock, the probe
 * is stuck until the wake returns: that is the bug, and the test says so.
 *
 * The probe cannot spoil a correct run: the future handle is idle while the
 * producer is completing, the probe's poll is the one that takes the outcome
 * (the test checks what it got and never polls for it again), and the probe
 * is joined before either handle is dropped.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "stage01.h"

static int the_value;

struct probe {
    struct signal_future *fut;
    struct counting_waker *probe_waker;
    pthread_t thread;
    bool started;          /* hook thread only, read after signal_complete returns */
    bool blocked;          /* same */
    atomic_bool entered;   /* probe -> hook: the probe runs and is about to poll */
    atomic_bool done;      /* probe -> hook: the poll returned */
    enum poll result;      /* written by the probe, read after the join */
    struct signal_output out;
};

static void *probe_main(void *arg)
{
    struct probe *pr = arg;
    struct waker w = counting_waker_get(pr->probe_waker);
    struct context cx = context_from_waker(&w);
    atomic_store_explicit(&pr->entered, true, memory_order_release); /* pairs with the hook's acquire */
    pr->result = signal_future_poll(pr->fut, &cx, &pr->out);
    atomic_store_explicit(&pr->done, true, memory_order_release); /* pairs with the hook's acquire */
    return NULL;
}

static void wake_hook(struct counting_waker *cw, enum waker_event ev, unsigned nth, void *arg)
{
    (void)cw;
    (void)nth;
    struct probe *pr = arg;
    if ((ev != WAKER_EV_WAKE && ev != WAKER_EV_WAKE_BY_REF) || pr->started)
        return;
    pr->started = true;
    if (pthread_create(&pr->thread, NULL, probe_main, pr) != 0)
        cr_assert(false, "could not start the probe thread");
    /* The 200 ms start when the probe is running, so a slow scheduler on a
     * loaded machine is not mistaken for a held lock. */
    for (unsigned waited = 0; !atomic_load_explicit(&pr->entered, memory_order_acquire) &&
                              waited < SCALED_MS(5000); waited++)
        lab_sleep_ms(1);
    for (unsigned waited = 0; !atomic_load_explicit(&pr->done, memory_order_acquire) &&
                              waited < SCALED_MS(200); waited++)
        lab_sleep_ms(1);
    pr->blocked = !atomic_load_explicit(&pr->done, memory_order_acquire);
}

/* mode 0: complete the signal; mode 1: drop the producer without completing */
static void run_probe_test(int mode)
{
    struct counting_waker *task = counting_waker_new("task");
    struct counting_waker *probe_w = counting_waker_new("probe");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(NULL, &p, &f);

    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before the producer did anything");

    struct probe pr = { .fut = f, .probe_waker = probe_w };
    atomic_init(&pr.entered, false);
    atomic_init(&pr.done, false);
    counting_waker_set_hook(task, wake_hook, &pr);

    const char *action = mode == 0 ? "signal_complete" : "signal_drop";
    if (mode == 0) {
        enum signal_status st = signal_complete(p, &the_value);
        cr_assert_eq(st, SIGNAL_OK, "signal_complete returned %s; expected SIGNAL_OK", status_name(st));
    } else {
        signal_drop(p);
    }
    if (pr.started)
        pthread_join(pr.thread, NULL);
    counting_waker_set_hook(task, NULL, NULL);

    cr_assert(pr.started, "%s did not wake the waker the pending poll registered%s", action,
              mode == 0 ? " (contract 1: Pending means someone will wake you)" : " (contract 9: a producer that leaves must wake the future)");
    cr_assert_not(pr.blocked,
                  "%s woke the waker while the signal's lock was still held: inside the wake, a poll "
                  "from another thread could not take the lock for 200 ms (contract 4: woken after "
                  "unlocking). The next hint: make hint STAGE=1 ITEM=wake-outside-lock", action);
    if (mode == 0)
        expect_ready(pr.result, &pr.out, SIGNAL_VALUE, &the_value, "a poll made from inside the wake");
    else
        expect_ready(pr.result, &pr.out, SIGNAL_CLOSED, NULL, "a poll made from inside the wake");

    if (mode == 0)
        signal_drop(p);
    signal_future_drop(f);
    expect_books_balanced(task);
    expect_books_balanced(probe_w);
}

LAB_SUITE(signal_lock, 5);

LAB_TEST(signal_lock, wake_outside_lock_complete, 5)
{
    run_probe_test(0);
}

LAB_TEST(signal_lock, wake_outside_lock_close, 5)
{
    run_probe_test(1);
}
