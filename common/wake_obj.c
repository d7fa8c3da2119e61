/* wake_obj.c - refcounting for wakeable objects. */
#include "wake_obj.h"

void wake_obj_init(struct wake_obj *obj, const struct wake_obj_ops *ops)
{
    atomic_init(&obj->refs, 1); /* the creator's reference */
    obj->ops = ops;
}

void wake_obj_retain(struct wake_obj *obj)
{
    /* relaxed: a new reference is made from an existing one, which already
     * keeps the object alive; nothing is published by the increment. */
    atomic_fetch_add_explicit(&obj->refs, 1, memory_order_relaxed); /* +1 */
}

void wake_obj_release(struct wake_obj *obj)
{
    /* acq_rel: the release half orders this holder's earlier writes before
     * the decrement; the acquire half, taken by the holder that reaches zero,
     * pairs with every other holder's release so free() sees all their writes. */
    if (atomic_fetch_sub_explicit(&obj->refs, 1, memory_order_acq_rel) == 1) /* -1 */
        obj->ops->free(obj);
}

static struct waker wo_clone(const void *data)
{
    struct wake_obj *obj = (struct wake_obj *)data;
    wake_obj_retain(obj); /* +1: the clone's reference */
    return (struct waker){ .data = obj, .vtable = &wake_obj_waker_vtable };
}

static void wo_wake_by_ref(const void *data)
{
    struct wake_obj *obj = (struct wake_obj *)data;
    obj->ops->wake(obj);
}

static void wo_wake(const void *data)
{
    struct wake_obj *obj = (struct wake_obj *)data;
    obj->ops->wake(obj);
    wake_obj_release(obj); /* -1: wake consumes the waker's reference */
}

static void wo_drop(const void *data)
{
    wake_obj_release((struct wake_obj *)data); /* -1: the dropped waker's reference */
}

const struct waker_vtable wake_obj_waker_vtable = {
    .clone = wo_clone,
    .wake = wo_wake,
    .wake_by_ref = wo_wake_by_ref,
    .drop = wo_drop,
};

struct waker wake_obj_waker(struct wake_obj *obj)
{
    return wo_clone(obj); /* +1: the new waker's reference */
}
