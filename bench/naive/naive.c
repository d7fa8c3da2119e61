/* naive.c - the tiny executor of seed 004, ported to C. See naive.h.
 *
 * The Rust original, for reference (its shape is kept line for line where C
 * allows):
 *
 *   struct Task { future: Mutex<Option<BoxFuture>>, queue: SyncSender<Arc<Task>> }
 *   impl Wake for Task { fn wake(self: Arc<Self>) { self.queue.send(self.clone()) } }
 *   run: while let Ok(task) = ready.recv() {
 *            let mut slot = task.future.lock();
 *            if let Some(mut fut) = slot.take() {
 *                let waker = Waker::from(task.clone());
 *                if fut.poll(&mut Context::from_waker(&waker)).is_pending() { *slot = Some(fut) }
 *            }
 *        }
 *
 * Allocations: per task, the task (the Arc) and the future's box; per spawn
 * and per wake, one queue node; per join handle, its slot; per executor, the
 * channel.
 */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "naive.h"

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "naive: out of memory\n");
        abort();
    }
    return p;
}

/* ---- the channel: sync_channel(capacity) of task references -------------- */

struct naive_task;

struct chan_node {
    struct chan_node *next;
    struct naive_task *task; /* the entry's task reference */
};

struct chan {
    pthread_mutex_t lock;      /* protects every field below */
    pthread_cond_t not_empty;  /* signalled on send and when the last sender leaves */
    pthread_cond_t not_full;   /* signalled on receive */
    struct chan_node *head, *tail;
    size_t len, cap;
    size_t senders;            /* live SyncSenders: the spawner's and one per live task */
    bool receiver;             /* the executor has not finished run() */
};

static void task_release(struct naive_task *t);

static struct chan *chan_new(size_t cap)
{
    struct chan *c = xmalloc(sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->not_empty, NULL);
    pthread_cond_init(&c->not_full, NULL);
    c->head = c->tail = NULL;
    c->len = 0;
    c->cap = cap;
    c->senders = 1; /* the first spawner */
    c->receiver = true;
    return c;
}

static void chan_free(struct chan *c)
{
    pthread_cond_destroy(&c->not_full);
    pthread_cond_destroy(&c->not_empty);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static void chan_sender_clone(struct chan *c)
{
    pthread_mutex_lock(&c->lock);
    c->senders++; /* +1 sender */
    pthread_mutex_unlock(&c->lock);
}

/* The channel is freed by whichever side leaves last. */
static void chan_sender_drop(struct chan *c)
{
    pthread_mutex_lock(&c->lock);
    c->senders--; /* -1 sender */
    bool last = c->senders == 0;
    bool free_it = last && !c->receiver;
    if (last)
        pthread_cond_signal(&c->not_empty); /* a blocked recv sees the close */
    pthread_mutex_unlock(&c->lock);
    if (free_it)
        chan_free(c);
}

/* Takes over the caller's reference to t. Blocks while the queue is full
 * (one thread: for ever). A send after the receiver is gone drops it. */
static void chan_send(struct chan *c, struct naive_task *t)
{
    struct chan_node *n = xmalloc(sizeof *n); /* the per-wake allocation */
    n->next = NULL;
    n->task = t;
    pthread_mutex_lock(&c->lock);
    if (!c->receiver) {
        pthread_mutex_unlock(&c->lock);
        free(n);
        task_release(t); /* -1: nobody will receive it (send's Err, ignored) */
        return;
    }
    while (c->len == c->cap)
        pthread_cond_wait(&c->not_full, &c->lock);
    if (c->tail)
        c->tail->next = n;
    else
        c->head = n;
    c->tail = n;
    c->len++;
    pthread_cond_signal(&c->not_empty);
    pthread_mutex_unlock(&c->lock);
}

/* The next task reference (now the caller's), or NULL once the queue is
 * empty and every sender is gone. Blocks while empty with senders alive. */
static struct naive_task *chan_recv(struct chan *c)
{
    pthread_mutex_lock(&c->lock);
    while (c->len == 0 && c->senders > 0)
        pthread_cond_wait(&c->not_empty, &c->lock);
    struct chan_node *n = c->head;
    if (!n) {
        pthread_mutex_unlock(&c->lock);
        return NULL;
    }
    c->head = n->next;
    if (!c->head)
        c->tail = NULL;
    c->len--;
    pthread_cond_signal(&c->not_full);
    pthread_mutex_unlock(&c->lock);
    struct naive_task *t = n->task;
    free(n);
    return t;
}

/* ---- tasks: Arc<Task> ------------------------------------------------------ */

struct naive_task {
    atomic_size_t refs;             /* queue entries, wakers, the run loop's borrow */
    pthread_mutex_t lock;           /* protects fut (the Mutex<Option<..>>) */
    void *fut;                      /* the boxed future state; NULL once finished */
    const struct future_vtable *vt; /* fut's vtable */
    struct chan *queue;             /* this task's sender (one of chan->senders) */
};

static void task_free(struct naive_task *t)
{
    if (t->fut) { /* never finished: drop the future with the task */
        if (t->vt->drop)
            t->vt->drop(t->fut);
        free(t->fut);
    }
    struct chan *q = t->queue;
    pthread_mutex_destroy(&t->lock);
    free(t);
    chan_sender_drop(q); /* -1 sender: the task's */
}

static void task_retain(struct naive_task *t)
{
    /* relaxed: made from a reference that already keeps t alive */
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); /* +1 */
}

static void task_release(struct naive_task *t)
{
    /* acq_rel: the last holder sees every other holder's writes before freeing */
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) /* -1 */
        task_free(t);
}

static const struct waker_vtable task_waker_vt;

static struct waker task_waker_clone(const void *data)
{
    task_retain((struct naive_task *)data); /* +1: the new waker's */
    return (struct waker){ .data = data, .vtable = &task_waker_vt };
}

/* Wake: send a new reference to the queue (Arc::clone + send). */
static void task_waker_wake_by_ref(const void *data)
{
    struct naive_task *t = (struct naive_task *)data;
    task_retain(t);        /* +1: the queue entry's */
    chan_send(t->queue, t); /* the entry takes it */
}

static void task_waker_wake(const void *data)
{
    task_waker_wake_by_ref(data);
    task_release((struct naive_task *)data); /* -1: the consumed waker's */
}

static void task_waker_drop(const void *data)
{
    task_release((struct naive_task *)data); /* -1: the dropped waker's */
}

static const struct waker_vtable task_waker_vt = {
    .clone = task_waker_clone,
    .wake = task_waker_wake,
    .wake_by_ref = task_waker_wake_by_ref,
    .drop = task_waker_drop,
};

/* ---- executor and spawner ------------------------------------------------- */

struct naive_executor {
    struct chan *ready;
};

struct naive_spawner {
    struct chan *queue;
};

void naive_new(size_t capacity, struct naive_executor **ex, struct naive_spawner **sp)
{
    struct chan *c = chan_new(capacity);
    *ex = xmalloc(sizeof **ex);
    (*ex)->ready = c;
    *sp = xmalloc(sizeof **sp);
    (*sp)->queue = c; /* the sender chan_new counted */
}

struct naive_spawner *naive_spawner_clone(struct naive_spawner *sp)
{
    chan_sender_clone(sp->queue); /* +1 sender */
    struct naive_spawner *c = xmalloc(sizeof *c);
    c->queue = sp->queue;
    return c;
}

void naive_spawner_drop(struct naive_spawner *sp)
{
    struct chan *q = sp->queue;
    free(sp);
    chan_sender_drop(q); /* -1 sender */
}

/* A new task around an already boxed future, queued (its one reference goes
 * into the queue, as Arc::new + send) */
static void spawn_boxed(struct naive_spawner *sp, const struct future_vtable *vt, void *box)
{
    struct naive_task *t = xmalloc(sizeof *t);
    atomic_init(&t->refs, 1); /* Arc::new: the reference send() moves into the queue */
    pthread_mutex_init(&t->lock, NULL);
    t->fut = box;
    t->vt = vt;
    chan_sender_clone(sp->queue); /* +1 sender: queue: self.queue.clone() */
    t->queue = sp->queue;
    chan_send(sp->queue, t);
}

void naive_spawn(struct naive_spawner *sp, const struct future_vtable *vt, const void *state)
{
    void *box = xmalloc(vt->size ? vt->size : 1); /* Box::pin(fut) */
    memcpy(box, state, vt->size);
    spawn_boxed(sp, vt, box);
}

void naive_run(struct naive_executor *ex)
{
    struct chan *c = ex->ready;
    struct naive_task *t;
    alignas(max_align_t) unsigned char out[64]; /* outputs of spawn(): discarded */
    while ((t = chan_recv(c))) { /* the entry's reference is ours now */
        pthread_mutex_lock(&t->lock);
        if (t->fut) { /* None: finished earlier, a stale wake */
            struct waker w = task_waker_clone(t); /* +1: Waker::from(Arc::clone(&task)) */
            struct context cx = context_from_waker(&w);
            if (t->vt->poll(t->fut, &cx, out) == POLL_READY) {
                if (t->vt->drop)
                    t->vt->drop(t->fut);
                free(t->fut); /* the Box goes; the slot stays None */
                t->fut = NULL;
            }
            waker_drop(&w); /* -1; never the last: the entry's reference is held */
        }
        pthread_mutex_unlock(&t->lock);
        task_release(t); /* -1: the entry's */
    }
    /* empty and closed: every sender is gone, so the channel is ours to free */
    pthread_mutex_lock(&c->lock);
    c->receiver = false;
    bool free_it = c->senders == 0;
    pthread_mutex_unlock(&c->lock);
    if (free_it)
        chan_free(c);
    free(ex);
}

/* ---- join handles: Arc<Mutex<JoinSlot>> ----------------------------------- */

struct naive_join {
    atomic_size_t refs;   /* 2: the handle and the task's wrapper */
    pthread_mutex_t lock; /* protects done, out and waker */
    bool done;
    size_t out_size;      /* the task's output_size */
    alignas(max_align_t) unsigned char out[NAIVE_JOIN_MAX_OUTPUT];
    struct waker waker;   /* the joiner's latest waker, or none */
};

static void join_release(struct naive_join *j)
{
    /* acq_rel: as task_release */
    if (atomic_fetch_sub_explicit(&j->refs, 1, memory_order_acq_rel) == 1) { /* -1 */
        waker_drop(&j->waker); /* -1: a waker stored by a joiner that never saw Ready */
        pthread_mutex_destroy(&j->lock);
        free(j);
    }
}

/* The spawned future: async move { let v = fut.await; slot.set(v); } */
struct join_wrap {
    struct naive_join *slot;
    const struct future_vtable *inner_vt;
    bool finished; /* the inner future returned Ready (and is dropped) */
    alignas(max_align_t) unsigned char inner[];
};

static enum poll join_wrap_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct join_wrap *w = self;
    alignas(max_align_t) unsigned char v[NAIVE_JOIN_MAX_OUTPUT];
    if (w->inner_vt->poll(w->inner, cx, v) == POLL_PENDING)
        return POLL_PENDING;
    if (w->inner_vt->drop)
        w->inner_vt->drop(w->inner);
    w->finished = true;
    struct naive_join *j = w->slot;
    pthread_mutex_lock(&j->lock);
    memcpy(j->out, v, w->inner_vt->output_size);
    j->done = true;
    struct waker to_wake = waker_take(&j->waker); /* ours now */
    pthread_mutex_unlock(&j->lock);
    waker_wake(&to_wake); /* outside the lock; consumes it */
    return POLL_READY;
}

static void join_wrap_drop(void *self)
{
    struct join_wrap *w = self;
    if (!w->finished && w->inner_vt->drop)
        w->inner_vt->drop(w->inner);
    join_release(w->slot); /* -1: the wrapper's */
}

static const struct future_vtable join_wrap_vt = {
    .poll = join_wrap_poll,
    .drop = join_wrap_drop,
    .size = sizeof(struct join_wrap), /* plus the inner state: not needed after boxing */
    .align = alignof(struct join_wrap),
    .output_size = 0,
    .name = "naive join wrapper",
};

struct naive_join *naive_spawn_join(struct naive_spawner *sp, const struct future_vtable *vt,
                                    const void *state)
{
    if (vt->output_size > NAIVE_JOIN_MAX_OUTPUT) {
        fprintf(stderr, "naive: output of %s too large\n", vt->name);
        abort();
    }
    struct naive_join *j = xmalloc(sizeof *j);
    atomic_init(&j->refs, 2); /* the handle's and the wrapper's */
    pthread_mutex_init(&j->lock, NULL);
    j->done = false;
    j->out_size = vt->output_size;
    j->waker = WAKER_NONE;

    struct join_wrap *w = xmalloc(sizeof *w + vt->size); /* one Box: wrapper + future */
    w->slot = j;
    w->inner_vt = vt;
    w->finished = false;
    memcpy(w->inner, state, vt->size);
    spawn_boxed(sp, &join_wrap_vt, w);
    return j;
}

enum poll naive_join_poll(struct naive_join *j, struct context *cx, void *out)
{
    pthread_mutex_lock(&j->lock);
    if (j->done) {
        if (out)
            memcpy(out, j->out, j->out_size);
        pthread_mutex_unlock(&j->lock);
        return POLL_READY;
    }
    waker_clone_from(&j->waker, cx->waker); /* checked and registered under one lock */
    pthread_mutex_unlock(&j->lock);
    return POLL_PENDING;
}

void naive_join_drop(struct naive_join *j)
{
    join_release(j); /* -1: the handle's */
}
