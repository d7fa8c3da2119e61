/* combinators.c - stage 05: join2, select2 and timeout. */
#include "combinators.h"

/* ---- join2 --------------------------------------------------------------- */

struct join2 join2_new(struct future a, void *a_out, struct future b, void *b_out)
{
    return (struct join2){ .child = { a, b }, .out = { a_out, b_out },
                           .done = { false, false }, .dropped = false };
}

enum poll join2_poll(struct join2 *j, struct context *cx)
{
    /* BEGIN STUDENT: combinators.h: a child that is Ready is never polled again; when is join Ready? (docs/05-timer.md#join-and-select) */
    for (int i = 0; i < 2; i++) {
        if (j->done[i])
            continue;
        if (future_poll(j->child[i], cx, j->out[i]) == POLL_READY) {
            j->done[i] = true;
            future_drop(j->child[i]);
        }
    }
    return j->done[0] && j->done[1] ? POLL_READY : POLL_PENDING;
    /* END STUDENT */
}

void join2_drop(struct join2 *j)
{
    /* BEGIN STUDENT: combinators.h: the join owns each child until when, and which of them does it still own now? (docs/05-timer.md#join-and-select) */
    for (int i = 0; i < 2; i++) {
        if (!j->done[i]) {
            j->done[i] = true;
            future_drop(j->child[i]);
        }
    }
    j->dropped = true;
    /* END STUDENT */
}

static enum poll join2_vpoll(void *self, struct context *cx, void *out)
{
    (void)out;
    return join2_poll(self, cx);
}
static void join2_vdrop(void *self) { join2_drop(self); }
const struct future_vtable join2_vtable = FUTURE_VTABLE_INIT(struct join2, 0, join2_vpoll, join2_vdrop);
struct future join2_future(struct join2 *j) { return future_of(&join2_vtable, j); }

/* ---- select2 ------------------------------------------------------------- */

struct select2 select2_new(struct future a, void *a_out, struct future b, void *b_out)
{
    return (struct select2){ .child = { a, b }, .out = { a_out, b_out }, .winner = -1,
                             .live = { true, true } };
}

enum poll select2_poll(struct select2 *s, struct context *cx, int *winner)
{
    /* BEGIN STUDENT: combinators.h: when one child wins, what becomes of the other, and when? (docs/05-timer.md#join-and-select) */
    if (s->winner < 0) {
        for (int i = 0; i < 2; i++) {
            if (future_poll(s->child[i], cx, s->out[i]) == POLL_READY) {
                s->winner = i;
                break;
            }
        }
        if (s->winner < 0)
            return POLL_PENDING;
        for (int i = 0; i < 2; i++) {
            if (s->live[i]) {
                s->live[i] = false;
                future_drop(s->child[i]);
            }
        }
    }
    if (winner)
        *winner = s->winner;
    return POLL_READY;
    /* END STUDENT */
}

void select2_drop(struct select2 *s)
{
    /* BEGIN STUDENT: combinators.h: a select dropped before a winner, after one: which children does it still own? (docs/05-timer.md#join-and-select) */
    for (int i = 0; i < 2; i++) {
        if (s->live[i]) {
            s->live[i] = false;
            future_drop(s->child[i]);
        }
    }
    /* END STUDENT */
}

static enum poll select2_vpoll(void *self, struct context *cx, void *out)
{
    return select2_poll(self, cx, out);
}
static void select2_vdrop(void *self) { select2_drop(self); }
const struct future_vtable select2_vtable = FUTURE_VTABLE_INIT(struct select2, sizeof(int), select2_vpoll, select2_vdrop);
struct future select2_future(struct select2 *s) { return future_of(&select2_vtable, s); }

/* ---- timeout ------------------------------------------------------------- */

struct timeout timeout_new(struct future inner, void *inner_out, struct time_driver *td,
                           uint64_t duration_ns)
{
    struct timeout t;
    t.inner = inner;
    t.inner_out = inner_out;
    t.sleep = sleep_for(td, duration_ns);
    t.started = false;
    t.race = select2_new(inner, inner_out, inner, inner_out); /* rebuilt at the first poll */
    return t;
}

enum poll timeout_poll(struct timeout *t, struct context *cx, enum timeout_result *res)
{
    /* BEGIN STUDENT: combinators.h: a timeout is a race you have already written; between which two futures, and which should win a tie? (docs/05-timer.md#timeout) */
    if (!t->started) {
        t->race = select2_new(t->inner, t->inner_out, sleep_future(&t->sleep), NULL);
        t->started = true;
    }
    int winner;
    if (select2_poll(&t->race, cx, &winner) == POLL_PENDING)
        return POLL_PENDING;
    if (res)
        *res = winner == 0 ? TIMEOUT_OK : TIMEOUT_ELAPSED;
    return POLL_READY;
    /* END STUDENT */
}

void timeout_drop(struct timeout *t)
{
    /* BEGIN STUDENT: combinators.h, sleep.h contract 3: what does a timeout own before its first poll, and what once it has started the race? (docs/05-timer.md#timeout) */
    if (!t->started) {
        future_drop(t->inner);
        sleep_drop(&t->sleep);
        return;
    }
    select2_drop(&t->race);
    /* END STUDENT */
}

static enum poll timeout_vpoll(void *self, struct context *cx, void *out)
{
    return timeout_poll(self, cx, out);
}
static void timeout_vdrop(void *self) { timeout_drop(self); }
const struct future_vtable timeout_vtable =
    FUTURE_VTABLE_INIT(struct timeout, sizeof(enum timeout_result), timeout_vpoll, timeout_vdrop);
struct future timeout_future(struct timeout *t) { return future_of(&timeout_vtable, t); }
