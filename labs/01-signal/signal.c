/* signal.c - stage 01: a one-shot Signal future, written by hand.
 *
 * Read docs/01-signal.md first; signal.h has the contract, numbered. This
 * file is the C form of the smallest useful future: nothing in it runs by
 * itself. A task polls the future; a producer, on some other thread, completes
 * it; the only thing that travels back to the task is a wake.
 *
 * Layout: ONE allocation per signal.
 *
 *     +------------------------- struct signal_shared --------------------+
 *     | lock | phase | value | stored waker | who is listening | refs ... |
 *     | struct signal producer        { shared ---> back to this block }  |
 *     | struct signal_future future   { shared ---> back to this block }  |
 *     +--------------------------------------------------------------------+
 *
 * signal_new() hands out pointers to the two embedded handles. Each handle
 * owns one reference to the block (the C spelling of two Arc clones), gives
 * it back in its own drop function, and the drop that gives back the last one
 * frees the block. A handle is nothing but its `shared` pointer, so it never
 * needs to know where it lives: a runtime may copy the future's handle into a
 * task before the first poll (future.h) and drop the copy; that is why no
 * drop function here ever frees "its own" handle, only the shared block.
 *
 * Locking: one pthread mutex per signal, and the rules that make a mutex
 * enough (each is one clause of the contract):
 *   - poll checks the outcome and registers its waker in ONE hold of the
 *     lock, so a completion cannot fall between the two (clause 3);
 *   - a completion (or the producer's drop) takes the stored waker out under
 *     the lock and wakes it after unlocking (clause 4): a wake runs the
 *     executor's code, which must never run under our lock;
 *   - drop_value() and waker drops on the drop paths also run after
 *     unlocking. The one foreign call made under the lock is the clone (and
 *     at most one stale drop) inside waker_clone_from() while poll registers:
 *     that is the price of clause 3, and a clone only takes a reference.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "lab_todo.h"
#include "signal.h"


struct signal_shared;

/* The producer handle. Nothing but the way to the shared state: everything
 * that changes lives in the shared state, behind its lock. */
struct signal {
    struct signal_shared *shared;
};

/* The future handle. Same shape, different rights: only it may poll. */
struct signal_future {
    struct signal_shared *shared;
};

/* What both handles point at. */
struct signal_shared {
    int todo_your_fields_here; /* TODO: a mutex, the outcome so far, the value, the latest waker, whether the future still listens, and how many handles are alive (docs/01-signal.md#the-shared-state) */

    /* The two handles live inside the block they point at: one allocation. */
    struct signal producer;
    struct signal_future future;
};


int signal_new(void (*drop_value)(void *value), struct signal **producer,
               struct signal_future **future)
{
    (void)drop_value;
    (void)producer;
    (void)future;
    LAB_TODO("allocate one shared state, initialize its lock and fields, point both handles at it (docs/01-signal.md#creating-a-signal)");
}

enum signal_status signal_complete(struct signal *producer, void *value)
{
    (void)producer;
    (void)value;
    LAB_TODO("contracts 4 and 5: in which phases is this value refused, and where must the waker be woken so that a task polled inside the wake can take the lock? (docs/01-signal.md#completing)");
}

void signal_drop(struct signal *producer)
{
    (void)producer;
    LAB_TODO("contracts 9 and 10: a producer that leaves without completing is an outcome; who must learn it, how, and who frees the state? (docs/01-signal.md#dropping-the-producer)");
}

enum poll signal_future_poll(struct signal_future *future, struct context *cx,
                             struct signal_output *out)
{
    (void)future;
    (void)cx;
    (void)out;
    LAB_TODO("contracts 1 to 3, 6 and 7: what must be true when this returns Pending, and what could fall between your look at the outcome and your registration? (docs/01-signal.md#polling)");
}

void signal_future_drop(struct signal_future *future)
{
    (void)future;
    LAB_TODO("contract 8: once the future is gone, who still needs its waker, and what must a later signal_complete answer? (docs/01-signal.md#dropping-the-future)");
}

/* ---- the type-erased view -------------------------------------------------
 *
 * An executor does not know what a signal is; it knows struct future (a
 * vtable and a state pointer). These two adapters are the whole translation.
 * The state is the handle itself, and the handle is one pointer, so a runtime
 * may copy it into storage of its own before the first poll (future.h) and
 * poll or drop the copy instead. */

static enum poll signal_future_vt_poll(void *self, struct context *cx, void *out)
{
    return signal_future_poll(self, cx, out);
}

static void signal_future_vt_drop(void *self)
{
    signal_future_drop(self);
}

static const struct future_vtable signal_future_vtable =
    FUTURE_VTABLE_INIT(struct signal_future, sizeof(struct signal_output),
                       signal_future_vt_poll, signal_future_vt_drop);

struct future signal_future_as_future(struct signal_future *future)
{
    return future_of(&signal_future_vtable, future);
}
