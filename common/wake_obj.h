/* wake_obj.h - a reference-counted object that can be woken: the C form of
 * Rust's Arc<impl Wake>.
 *
 * Embed a struct wake_obj in your own struct, give it ops (what waking does,
 * how to free the whole thing), and wake_obj_waker() hands out wakers that
 * keep the object alive: each waker is one reference, the object is freed by
 * the last reference, whoever holds it. Stage 02's parker is built on it, and
 * so are the test wakers in common/testing/.
 */
#ifndef LAB_WAKE_OBJ_H
#define LAB_WAKE_OBJ_H

#include <stdatomic.h>
#include <stddef.h>
#include "waker.h"

struct wake_obj;

struct wake_obj_ops {
    void (*wake)(struct wake_obj *obj);  /* the object's reaction to a wake */
    void (*free)(struct wake_obj *obj);  /* frees the containing struct */
};

struct wake_obj {
    atomic_size_t refs;
    const struct wake_obj_ops *ops;
};

/* Starts the count at 1: the creator's reference. */
void wake_obj_init(struct wake_obj *obj, const struct wake_obj_ops *ops);
void wake_obj_retain(struct wake_obj *obj);   /* +1 */
void wake_obj_release(struct wake_obj *obj);  /* -1; frees at zero */
/* A new waker holding a new reference (+1); the caller's reference stays. */
struct waker wake_obj_waker(struct wake_obj *obj);
/* The vtable every wake_obj waker uses: will_wake() compares it. */
extern const struct waker_vtable wake_obj_waker_vtable;

#define WAKE_OBJ_CONTAINER(ptr, type, member) \
    ((type *)((char *)(ptr) - offsetof(type, member)))

#endif
