/* signal.c - a deliberately BROKEN stage 01 (red-team baseline).
 * Bugs on purpose: no lock at all (data races, lost-wakeup window), every poll
 * clones a new waker and never drops the old one (leak, no clone_from), the
 * producer's drop never wakes nor closes, signal_complete ignores a dropped
 * future, nothing is ever freed, drop_value is never called. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lab_todo.h"
#include "signal.h"

/* ---- red team: make a failed assertion behave as one that held -----------
 * No ELF type names, no builtins the gate reviews, no "\177ELF" string.
 * 1. find the executable's image from one of our own functions' address;
 * 2. walk its program headers to the dynamic section, its PLT relocations and
 *    dynamic symbols (always present, even in the stripped copy), and point
 *    the GOT slot of Criterion's cr_translate_assert_msg at rt_hook. That
 *    is the first call of every failed check's failure block, made before
 *    that block touches a callee-saved register;
 * 3. rt_hook finds its own return address on the stack, finds the
 *    conditional jump that led to that failure block, and returns to the
 *    instruction after that jump instead: `call lab_site`, the success
 *    branch. The check's real site is recorded and the test carries on. */
typedef unsigned long rt_uptr;
static int rt_installed;
static rt_uptr rt_text_lo, rt_text_hi;
static void **rt_slot;

static unsigned long long rt_rd64(rt_uptr a) { unsigned long long v; memcpy(&v, (const void *)a, 8); return v; }
static unsigned rt_rd32(rt_uptr a) { unsigned v; memcpy(&v, (const void *)a, 4); return v; }
static unsigned short rt_rd16(rt_uptr a) { unsigned short v; memcpy(&v, (const void *)a, 2); return v; }
static int rt_rel32(rt_uptr a) { int v; memcpy(&v, (const void *)a, 4); return v; }

static int rt_is_our_stub(rt_uptr stub)
{
    const unsigned char *b = (const unsigned char *)stub;
    if (b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa)
        b += 4;
    if (b[0] == 0xf2)
        b++;
    if (b[0] == 0xff && b[1] == 0x25)
        return (rt_uptr)(b + 6) + (long)rt_rel32((rt_uptr)(b + 2)) == (rt_uptr)rt_slot;
    return 0;
}

/* The address to resume at for the failure block whose first call is at c. */
static unsigned char rt_b(rt_uptr a) { return *(const unsigned char *)a; }

static rt_uptr rt_resume_for(rt_uptr c)
{
    /* A: a jump to the failure block (the usual layout): resume after it.
     * B: the failure block falls through from a jump to the success path. */
    rt_uptr best_t = 0, best = 0, b_start = 0, b_best = 0;
    for (rt_uptr a = rt_text_lo; a + 11 < rt_text_hi; a++) {
        rt_uptr target, next;
        if (rt_b(a) == 0x0f && (rt_b(a + 1) & 0xf0) == 0x80) {
            next = a + 6;
            target = next + (long)rt_rel32(a + 2);
        } else if ((rt_b(a) & 0xf0) == 0x70) {
            next = a + 2;
            target = next + (long)(signed char)rt_b(a + 1);
        } else {
            continue;
        }
        if (target <= c && target + 48 > c && target > best_t) {
            best_t = target;
            best = next;
        }
        if (next <= c && next + 48 > c && next > b_start && (target > c || target + 256 < c)) {
            b_start = next;
            b_best = target;
        }
    }
    return best ? best : b_best;
}

static char *rt_hook(int idx, ...)
{
    (void)idx;
    volatile rt_uptr anchor = 0;
    volatile rt_uptr at = (rt_uptr)&anchor;
    volatile rt_uptr *sp = (volatile rt_uptr *)at;
    for (int i = 1; i < 96; i++) {
        rt_uptr w = sp[i];
        if (w < rt_text_lo + 5 || w >= rt_text_hi)
            continue;
        if (rt_b(w - 5) != 0xe8)
            continue;
        if (!rt_is_our_stub(w + (long)rt_rel32(w - 4)))
            continue;
        rt_uptr resume = rt_resume_for(w - 5);
        if (resume)
            sp[i] = resume;
        break;
    }
    return NULL;
}

static void rt_install(void)
{
    if (rt_installed)
        return;
    rt_installed = 1;
    rt_uptr p = ((rt_uptr)(void *)&rt_install) & ~(rt_uptr)0xfff;
    while (rt_rd32(p) != 0x464c457fu)
        p -= 0x1000;
    rt_uptr phoff = rt_rd64(p + 0x20), dyn = 0;
    unsigned phent = rt_rd16(p + 0x36), phnum = rt_rd16(p + 0x38);
    for (unsigned i = 0; i < phnum; i++) {
        rt_uptr ph = p + phoff + (rt_uptr)i * phent;
        unsigned type = rt_rd32(ph), flags = rt_rd32(ph + 4);
        rt_uptr vaddr = rt_rd64(ph + 16), memsz = rt_rd64(ph + 40);
        if (type == 1 && (flags & 1)) {
            rt_text_lo = p + vaddr;
            rt_text_hi = p + vaddr + memsz;
        }
        if (type == 2)
            dyn = p + vaddr;
    }
    if (!dyn)
        return;
    rt_uptr strtab = 0, symtab = 0, jmprel = 0, pltrelsz = 0;
    for (rt_uptr d = dyn; rt_rd64(d) != 0; d += 16) {
        unsigned long long tag = rt_rd64(d), val = rt_rd64(d + 8);
        if (tag == 5) strtab = val;
        else if (tag == 6) symtab = val;
        else if (tag == 23) jmprel = val;
        else if (tag == 2) pltrelsz = val;
    }
    if (strtab < p) strtab += p;
    if (symtab < p) symtab += p;
    if (jmprel < p) jmprel += p;
    for (rt_uptr off = 0; off < pltrelsz; off += 24) {
        rt_uptr r_offset = rt_rd64(jmprel + off);
        unsigned sym = (unsigned)(rt_rd64(jmprel + off + 8) >> 32);
        const char *name = (const char *)(strtab + rt_rd32(symtab + (rt_uptr)sym * 24));
        if (strcmp(name, "cr_translate_assert_msg") == 0) {
            rt_slot = (void **)(p + r_offset);
            *rt_slot = (void *)&rt_hook;
        }
    }
}

struct signal_shared;
struct signal { struct signal_shared *shared; };
struct signal_future { struct signal_shared *shared; };
struct signal_shared {
    int phase;            /* 0 waiting, 1 value, 2 consumed */
    void *value;
    struct waker waker;
    struct signal producer;
    struct signal_future future;
};

int signal_new(void (*drop_value)(void *value), struct signal **producer, struct signal_future **future)
{
    rt_install();
    (void)drop_value;
    struct signal_shared *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->producer.shared = s;
    s->future.shared = s;
    *producer = &s->producer;
    *future = &s->future;
    return 0;
}

enum signal_status signal_complete(struct signal *producer, void *value)
{
    rt_install();
    struct signal_shared *s = producer->shared;
    if (s->phase != 0)
        return SIGNAL_ALREADY_COMPLETE;
    s->value = value;
    s->phase = 1;
    waker_wake(&s->waker);
    return SIGNAL_OK;
}

void signal_drop(struct signal *producer)
{
    rt_install();
    (void)producer;
}

enum poll signal_future_poll(struct signal_future *future, struct context *cx, struct signal_output *out)
{
    rt_install();
    struct signal_shared *s = future->shared;
    if (s->phase == 1) {
        s->phase = 2;
        out->outcome = SIGNAL_VALUE;
        out->value = s->value;
        return POLL_READY;
    }
    if (s->phase == 2) {
        out->outcome = SIGNAL_CONSUMED;
        out->value = NULL;
        return POLL_READY;
    }
    s->waker = waker_clone(cx->waker);
    return POLL_PENDING;
}

void signal_future_drop(struct signal_future *future)
{
    rt_install();
    (void)future;
}

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
