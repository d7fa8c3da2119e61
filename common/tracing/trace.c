/* trace.c - the recorder behind trace.h (built only with -DLAB_TRACE).
 *
 * Each thread records into a buffer of its own: a list of fixed-size chunks
 * that only that thread appends to. A record is written first, then the
 * chunk's count is raised with a release store; the writer of the file reads
 * the count with an acquire load and reads only the records below it. So the
 * hot path takes no lock and makes no read-modify-write on shared memory;
 * trace_write() can run while other threads go on recording.
 *
 * Buffers are linked into one global list when a thread records its first
 * event (one CAS) and stay until the process ends: a thread that exits
 * before the file is written still has its events in it.
 *
 * The file is Chrome Trace Event JSON ("JSON Object Format" with a
 * traceEvents array): B/E pairs for polls, wakes, parks and driver turns, i
 * for instants, s/f pairs with an id for the wake arrows, M for the names of
 * the process and the threads. Timestamps are microseconds since the program
 * started, per thread in the order they were recorded (so never decreasing).
 */
#ifdef LAB_TRACE

#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "trace.h"

enum rec_kind {
    R_SPAWN, R_POLL_B, R_POLL_E, R_WAKE_B, R_WAKE_E, R_COMPLETE,
    R_PARK_B, R_PARK_E, R_UNPARK, R_BUDGET, R_SRC_B, R_SRC_E, R_TIMER_FIRE, R_IO_READY,
    R_STEAL, R_INJECTOR, R_STALL,
};

/* 32 bytes; what a, p and b hold depends on the kind (see each put call). */
struct rec {
    uint64_t ts;   /* ticks since trace_t0 */
    uint64_t a;
    uint64_t p;    /* a pointer (spawn site file), or a wake arrow's id */
    uint32_t task; /* task id, or 0 */
    uint32_t bk;   /* low 24 bits: b; high 8 bits: the kind */
};

#define REC_KIND(r) ((r)->bk >> 24)
#define REC_B(r) ((r)->bk & 0xffffffu)

/* A chunk is 2 MiB, aligned, and advised to be one transparent huge page:
 * the first write faults it in at once instead of 512 times (a benchmark
 * that records millions of events spent a third of its time in page faults
 * with 160 KiB chunks). Nothing but the header is zeroed. */
#define CHUNK_BYTES (2u << 20)

struct chunk {
    _Atomic(struct chunk *) next; /* release by the owner, acquire by the writer */
    _Atomic uint32_t n;           /* records published; release by the owner, acquire by the writer */
    struct rec rec[];
};

#define CHUNK_RECS ((uint32_t)((CHUNK_BYTES - sizeof(struct chunk)) / sizeof(struct rec)))

static struct chunk *chunk_new(void)
{
    struct chunk *c = aligned_alloc(CHUNK_BYTES, CHUNK_BYTES);
    if (!c)
        return NULL;
    madvise(c, CHUNK_BYTES, MADV_HUGEPAGE); /* a hint; without it, small pages */
    atomic_init(&c->next, NULL);
    atomic_init(&c->n, 0);
    /* fault the chunk in now (the kernel zeroes 2 MiB: a few hundred µs in
     * a VM), so that the cost lands here, once every CHUNK_RECS events, and
     * not spread over the records that follow */
    memset(&c->rec[CHUNK_RECS - 1], 0, sizeof c->rec[0]);
    memset(&c->rec[0], 0, sizeof c->rec[0]);
    return c;
}

/* A thread's name; a renamed thread keeps its old names (trace_write may be
 * reading one), linked so that they stay reachable. */
struct name {
    struct name *older;
    char s[];
};

static struct name *name_new(const char *s, struct name *older)
{
    size_t n = strlen(s) + 1;
    struct name *nm = malloc(sizeof *nm + n);
    if (nm) {
        nm->older = older;
        memcpy(nm->s, s, n);
    }
    return nm;
}

struct buf {
    struct buf *next;         /* immutable once the buffer is on the list */
    struct chunk *head;       /* immutable */
    struct chunk *tail;       /* the owner thread only */
    uint64_t recs;            /* records appended; the owner thread only */
    _Atomic uint64_t dropped; /* relaxed: a count, read once at write time */
    _Atomic(struct name *) name; /* release by the owner, acquire by the writer */
    uint32_t tid;             /* immutable */
};

/* Set once by the constructor, before main and any thread: plain reads
 * (trace.h's inline hooks test it before calling in). */
bool trace_on_;
static uint64_t trace_t0;
static uint64_t stall_ns = 10u * 1000000u;
static uint64_t max_recs = 4000000u;
static const char *out_path = "trace.json";

static _Atomic(struct buf *) all_bufs;     /* CAS release on push, acquire by the writer */
static _Atomic uint32_t next_tid = 1;      /* relaxed: only a unique number */
static _Atomic uint32_t next_task = 1;     /* relaxed: only a unique number */
static _Atomic uint32_t next_flow = 1;     /* relaxed: only a unique number */

static _Thread_local struct buf *my_buf;
static _Thread_local uint32_t cur_task;     /* the task being polled on this thread, 0: none */
static _Thread_local unsigned char cur_src; /* enum trace_source of this thread's driver turn */
static _Thread_local uint64_t src_wakes;    /* wakes made since trace_source_begin */
/* Turns nest: stage 06's reactor dispatches inside the I/O driver's park,
 * which stage 05's time driver calls inside its own turn. A turn's end gives
 * the outer turn back its source and its count. */
#define SRC_DEPTH 8
static _Thread_local unsigned char outer_src[SRC_DEPTH];
static _Thread_local uint64_t outer_wakes[SRC_DEPTH];
static _Thread_local unsigned src_depth;
static _Thread_local uint64_t last_ts;      /* the timestamp of this thread's latest record */
static _Thread_local const char *site_file;
static _Thread_local int site_line;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool use_tsc;          /* set once by the constructor */
static double ns_per_tick = 1;
static uint64_t t0_ns;        /* CLOCK_MONOTONIC at trace_t0 */

static bool kernel_uses_tsc(void)
{
#if defined(__x86_64__)
    char cs[32] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f)
        return false;
    bool ok = fgets(cs, sizeof cs, f) && strncmp(cs, "tsc", 3) == 0;
    fclose(f);
    return ok && !getenv("LAB_TRACE_NO_TSC");
#else
    return false;
#endif
}

/* ns per tick between the start and now, or over a millisecond at start. */
static void calibrate(void)
{
#if defined(__x86_64__)
    if (!use_tsc)
        return;
    uint64_t ns = mono_ns(), tk = __rdtsc();
    if (ns - t0_ns < 1000000u) { /* at start: wait a millisecond */
        while ((ns = mono_ns()) - t0_ns < 1000000u)
            ;
        tk = __rdtsc();
    }
    if (tk > trace_t0)
        ns_per_tick = (double)(ns - t0_ns) / (double)(tk - trace_t0);
#endif
}

static void write_at_exit(void) { trace_write(); }

static struct buf *buf_new(void);

__attribute__((constructor)) static void trace_init(void)
{
    const char *on = getenv("LAB_TRACE");
    if (on && strcmp(on, "0") == 0)
        return; /* compiled in, switched off: every hook returns at its first test */
    const char *s = getenv("LAB_TRACE_STALL_MS");
    if (s && *s)
        stall_ns = (uint64_t)(strtod(s, NULL) * 1e6);
    s = getenv("LAB_TRACE_MAX_EVENTS");
    if (s && *s)
        max_recs = strtoull(s, NULL, 10);
    s = getenv("LAB_TRACE_FILE");
    if (s)
        out_path = s; /* "" records without writing (for measurements) */
    use_tsc = kernel_uses_tsc();
#if defined(__x86_64__)
    trace_t0 = use_tsc ? __rdtsc() : mono_ns();
#else
    trace_t0 = mono_ns();
#endif
    t0_ns = mono_ns();
    calibrate();
    my_buf = buf_new(); /* the main thread's buffer, faulted in before the trace starts */
#if defined(__x86_64__)
    if (use_tsc) { /* the trace starts after the calibration's millisecond */
        trace_t0 = __rdtsc();
        t0_ns = mono_ns();
    }
#endif
    trace_on_ = true;
    atexit(write_at_exit);
}

static struct buf *buf_new(void)
{
    struct buf *b = calloc(1, sizeof *b);
    struct chunk *c = chunk_new();
    if (!b || !c) {
        free(b);
        free(c);
        return NULL;
    }
    b->head = b->tail = c;
    b->tid = atomic_fetch_add_explicit(&next_tid, 1, memory_order_relaxed);
    char dflt[32];
    if ((pid_t)syscall(SYS_gettid) == getpid())
        snprintf(dflt, sizeof dflt, "main");
    else
        snprintf(dflt, sizeof dflt, "thread %u", (unsigned)b->tid);
    atomic_init(&b->name, name_new(dflt, NULL));
    struct buf *head = atomic_load_explicit(&all_bufs, memory_order_relaxed);
    do
        b->next = head;
    /* release: publishes b's fields; pairs with the acquire load in trace_write */
    while (!atomic_compare_exchange_weak_explicit(&all_bufs, &head, b, memory_order_release,
                                                  memory_order_relaxed));
    return b;
}

/* Appends one record to this thread's buffer. */
static void put(unsigned kind, uint64_t ts, uint32_t task, uint64_t a, uint32_t b, uint64_t p)
{
    struct buf *bf = my_buf;
    if (!bf) {
        bf = my_buf = buf_new();
        if (!bf)
            return;
    }
    struct chunk *c = bf->tail;
    /* relaxed: only this thread writes n */
    uint32_t n = atomic_load_explicit(&c->n, memory_order_relaxed);
    if (n == CHUNK_RECS) {
        struct chunk *nc = bf->recs < max_recs ? chunk_new() : NULL;
        if (!nc) {
            atomic_fetch_add_explicit(&bf->dropped, 1, memory_order_relaxed); /* a count only */
            return;
        }
        /* release: publishes the new chunk's header (n = 0); pairs with the
         * acquire load of next in FOR_EACH_REC */
        atomic_store_explicit(&c->next, nc, memory_order_release);
        bf->tail = c = nc;
        n = 0;
    }
    c->rec[n] = (struct rec){ .ts = ts, .a = a, .p = p, .task = task,
                              .bk = (b & 0xffffffu) | (uint32_t)kind << 24 };
    last_ts = ts;
    bf->recs++;
    /* release: publishes rec[n]; pairs with the acquire load in trace_write */
    atomic_store_explicit(&c->n, n + 1, memory_order_release);
}

/* Timestamps are ticks: the CPU's time-stamp counter where the kernel itself
 * keeps time with it (x86-64, clocksource "tsc": it then runs at a constant
 * rate and agrees across CPUs), else CLOCK_MONOTONIC nanoseconds. Reading the
 * counter costs half of what clock_gettime does in a VM, and a trace reads
 * the time for nearly every event (docs/tracing.md#overhead). Ticks become
 * nanoseconds with ns_per_tick, measured over the whole run when the file is
 * written (and over a millisecond at start, for the stall lamp). */
static inline uint64_t ticks(void)
{
#if defined(__x86_64__)
    if (use_tsc)
        return __rdtsc();
#endif
    return mono_ns();
}

static inline uint64_t now(void) { return ticks() - trace_t0; }

/* now(), not taken before the instructions before it have completed, nor
 * after the ones after it have begun: the two ends of a wake arrow are read
 * on two threads, ordered by an atomic (see trace_poll_begin_). */
static inline uint64_t now_fenced(void)
{
#if defined(__x86_64__)
    if (use_tsc) {
        _mm_lfence();
        uint64_t t = __rdtsc() - trace_t0;
        _mm_lfence();
        return t;
    }
#endif
    return now();
}

/* ns per tick measured from the start to now (1 without the counter). */
static double scale_now(void)
{
#if defined(__x86_64__)
    if (use_tsc) {
        uint64_t ns = mono_ns(), tk = __rdtsc();
        if (tk > trace_t0 && ns > t0_ns + 1000000u) /* over at least a millisecond */
            return (double)(ns - t0_ns) / (double)(tk - trace_t0);
        return ns_per_tick;
    }
#endif
    return 1;
}

static inline uint64_t to_ns(uint64_t t) { return use_tsc ? (uint64_t)((double)t * ns_per_tick) : t; }

void trace_spawn_site_(const char *file, int line)
{
    site_file = file;
    site_line = line;
}

void trace_task_spawn_(struct trace_task *tt, const char *future_name)
{
    tt->file = site_file;
    tt->line = site_line;
    tt->name = future_name;
    atomic_init(&tt->flow, 0);
    site_file = NULL;
    site_line = 0;
    tt->id = atomic_fetch_add_explicit(&next_task, 1, memory_order_relaxed);
    put(R_SPAWN, now(), tt->id, (uintptr_t)tt->name, (uint32_t)tt->line, (uintptr_t)tt->file);
}

struct trace_poll trace_poll_begin_(struct trace_task *tt, bool cancelled)
{
    struct trace_poll p = { .id = tt->id, .file = tt->file, .name = tt->name, .line = tt->line,
                            .outer = cur_task };
    if (!trace_on_)
        return p;
    /* acquire: pairs with the release CAS in trace_wake_begin, so the wake's
     * timestamp, read before that CAS, is earlier than ours, read after: an
     * arrow never points back in time. (Its "s" record is published by the
     * waking thread's own buffer.) */
    uint32_t flow = atomic_exchange_explicit(&tt->flow, 0, memory_order_acquire);
    p.t0 = flow ? now_fenced() : now();
    put(R_POLL_B, p.t0, p.id, cancelled, 0, flow);
    cur_task = p.id;
    return p;
}

void trace_poll_end_(struct trace_poll p)
{
    if (!trace_on_)
        return;
    cur_task = p.outer;
    uint64_t t = now(), dur = t - p.t0; /* ticks */
    put(R_POLL_E, t, p.id, dur, 0, 0);
    /* a rough test with the start-up calibration, then the exact one */
    if (stall_ns && (double)to_ns(dur) * 1.05 > (double)stall_ns &&
        (dur = (uint64_t)((double)dur * scale_now())) > stall_ns) {
        put(R_STALL, t, p.id, dur, (uint32_t)p.line, (uintptr_t)p.file);
        fprintf(stderr, "trace: stall: task %u (%s:%d, %s) polled for %.1f ms (threshold %g ms)\n",
                (unsigned)p.id, p.file ? p.file : "unknown site", p.line,
                p.name ? p.name : "?", (double)dur / 1e6, (double)stall_ns / 1e6);
    }
}

void trace_task_complete_(const struct trace_task *tt)
{
    if (trace_on_)
        put(R_COMPLETE, now(), tt->id, 0, 0, 0);
}

void trace_wake_begin_(struct trace_task *tt, bool arrow)
{
    uint64_t t = arrow ? now_fenced() : now();
    uint32_t src = cur_task ? TRACE_SRC_TASK : cur_src;
    if (!cur_task && cur_src)
        src_wakes++;
    uint32_t id = 0;
    if (arrow && tt->id) {
        uint32_t none = 0;
        id = atomic_fetch_add_explicit(&next_flow, 1, memory_order_relaxed);
        /* release: pairs with the acquire exchange in trace_poll_begin_
         * (timestamps in order). Fails when an arrow is already pending: the
         * task is queued once, and so gets one arrow (the first wake's). */
        if (!atomic_compare_exchange_strong_explicit(&tt->flow, &none, id, memory_order_release,
                                                     memory_order_relaxed))
            id = 0;
    }
    put(R_WAKE_B, t, tt->id, cur_task, src, id);
}

void trace_wake_end_(void)
{
    /* A wake takes a few dozen nanoseconds: its slice ends at the last event
     * recorded inside it (or at its own begin), without reading the clock. */
    put(R_WAKE_E, last_ts, 0, 0, 0, 0);
}

void trace_source_begin(enum trace_source src)
{
    if (src_depth < SRC_DEPTH) {
        outer_src[src_depth] = cur_src;
        outer_wakes[src_depth] = src_wakes;
    }
    src_depth++;
    cur_src = (unsigned char)src;
    src_wakes = 0;
    if (trace_on_)
        put(R_SRC_B, now(), 0, 0, (uint32_t)src, 0);
}

void trace_source_end(void)
{
    if (trace_on_) {
        uint64_t t = now();
        if (cur_src == TRACE_SRC_TIMER && src_wakes)
            put(R_TIMER_FIRE, t, 0, src_wakes, 0, 0); /* each fired timer woke once */
        put(R_SRC_E, t, 0, 0, cur_src, 0);
    }
    if (src_depth > 0 && --src_depth < SRC_DEPTH) {
        cur_src = outer_src[src_depth];
        src_wakes = outer_wakes[src_depth];
    } else {
        cur_src = TRACE_SRC_OUTSIDE; /* deeper than SRC_DEPTH, or unbalanced */
    }
}

void trace_park_begin_(int64_t timeout_ns)
{
    if (trace_on_)
        put(R_PARK_B, now(), 0, (uint64_t)timeout_ns, 0, 0);
}

void trace_park_end_(bool woken)
{
    if (trace_on_)
        put(R_PARK_E, now(), 0, woken, 0, 0);
}

void trace_unpark_(void)
{
    if (trace_on_)
        put(R_UNPARK, now(), 0, 0, 0, 0);
}

void trace_budget_exhausted_(void)
{
    if (trace_on_)
        put(R_BUDGET, now(), cur_task, 0, 0, 0);
}

void trace_timer_fire(uint64_t count)
{
    if (trace_on_)
        put(R_TIMER_FIRE, now(), 0, count, 0, 0);
}

void trace_io_ready(uint64_t token, uint32_t events)
{
    if (trace_on_)
        put(R_IO_READY, now(), 0, token, 0, events);
}

void trace_steal(uint32_t victim, uint32_t n)
{
    if (trace_on_)
        put(R_STEAL, now(), 0, victim, n, 0);
}

void trace_injector_pull(uint32_t n)
{
    if (trace_on_)
        put(R_INJECTOR, now(), 0, 0, n, 0);
}

void trace_thread_name(const char *name)
{
    if (!trace_on_)
        return;
    if (!my_buf && !(my_buf = buf_new()))
        return;
    /* relaxed: this thread is the only one that stores the name */
    struct name *old = atomic_load_explicit(&my_buf->name, memory_order_relaxed);
    if (old && strcmp(old->s, name) == 0)
        return;
    struct name *nm = name_new(name, old);
    if (nm) /* release: publishes the copy; pairs with trace_write's acquire load */
        atomic_store_explicit(&my_buf->name, nm, memory_order_release);
}

/* ---- writing ---------------------------------------------------------------- */

static const char *src_name(uint32_t s)
{
    switch (s) {
    case TRACE_SRC_TASK: return "task";
    case TRACE_SRC_TIMER: return "timer";
    case TRACE_SRC_IO: return "io";
    default: return "outside";
    }
}

static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned)(unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static const char *base(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path;
}

/* "file:line" of a spawn site, or null */
static void put_site(FILE *f, const struct rec *r)
{
    char site[96];
    const char *file = (const char *)(uintptr_t)r->p;
    if (!file) {
        fputs("null", f);
        return;
    }
    snprintf(site, sizeof site, "%s:%u", base(file), (unsigned)REC_B(r));
    put_str(f, site);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static bool has(const uint32_t *v, size_t n, uint32_t x)
{
    return n && bsearch(&x, v, n, sizeof x, cmp_u32) != NULL;
}

/* Visits every published record of a buffer. Acquire loads: next pairs with
 * put()'s release store of it, n with put()'s release store of the count
 * (so every record below n is whole). */
#define FOR_EACH_REC(bf, r, ...)                                                              \
    for (struct chunk *c_ = (bf)->head; c_;                                                    \
         c_ = atomic_load_explicit(&c_->next, memory_order_acquire)) {                         \
        uint32_t n_ = atomic_load_explicit(&c_->n, memory_order_acquire);                      \
        for (uint32_t i_ = 0; i_ < n_; i_++) {                                                 \
            const struct rec *r = &c_->rec[i_];                                                \
            __VA_ARGS__                                                                        \
        }                                                                                      \
    }

/* ns per tick for the file being written: measured over the whole run by
 * the writing thread (a global would race with the stall lamp's reads). */
static _Thread_local double write_scale = 1;

static uint64_t write_ns(uint64_t t) { return use_tsc ? (uint64_t)((double)t * write_scale) : t; }

/* Opens an event object: phase, name, category, time (ticks), thread. */
static void ev(FILE *f, bool *first, const char *ph, const char *name, const char *cat,
               uint64_t ticks_, uint32_t tid)
{
    uint64_t ts = write_ns(ticks_);
    fputs(*first ? "\n" : ",\n", f);
    *first = false;
    fprintf(f, "{\"ph\":\"%s\",\"name\":", ph);
    put_str(f, name);
    fprintf(f, ",\"cat\":\"%s\",\"ts\":%llu.%03u,\"pid\":%d,\"tid\":%u", cat,
            (unsigned long long)(ts / 1000), (unsigned)(ts % 1000), (int)getpid(), (unsigned)tid);
}

/* The arrow that starts (s) or ends (f) at r, when both its ends were recorded. */
static void put_flow(FILE *f, bool *first, const struct rec *r, const char *ph, const uint32_t *fs,
                     size_t ns, const uint32_t *ff, size_t nf, uint32_t tid)
{
    uint32_t id = (uint32_t)r->p;
    if (!id || !has(fs, ns, id) || !has(ff, nf, id))
        return;
    ev(f, first, ph, "wake", "wake", r->ts, tid);
    fprintf(f, ",\"id\":%u%s}", (unsigned)id, *ph == 'f' ? ",\"bp\":\"e\"" : "");
}

int trace_write(void)
{
    if (!trace_on_ || !*out_path)
        return 0;
    write_scale = scale_now();
    /* acquire: pairs with buf_new's release CAS */
    struct buf *bufs = atomic_load_explicit(&all_bufs, memory_order_acquire);

    /* An arrow is written only when both its ends were recorded: a wake of a
     * task that never ran again has no end. */
    size_t ns = 0, nf = 0, cap_s = 64, cap_f = 64;
    uint32_t *fs = malloc(cap_s * sizeof *fs), *ff = malloc(cap_f * sizeof *ff);
    if (!fs || !ff) {
        free(fs);
        free(ff);
        return -1;
    }
    for (struct buf *bf = bufs; bf; bf = bf->next) {
        FOR_EACH_REC(bf, r, {
            uint32_t **v = !r->p ? NULL : REC_KIND(r) == R_WAKE_B ? &fs : REC_KIND(r) == R_POLL_B ? &ff : NULL;
            if (v) {
                size_t *n = v == &fs ? &ns : &nf, *cap = v == &fs ? &cap_s : &cap_f;
                if (*n == *cap) {
                    uint32_t *g = realloc(*v, 2 * *cap * sizeof **v);
                    if (!g) {
                        free(fs);
                        free(ff);
                        return -1;
                    }
                    *v = g;
                    *cap *= 2;
                }
                (*v)[(*n)++] = (uint32_t)r->p;
            }
        })
    }
    qsort(fs, ns, sizeof *fs, cmp_u32);
    qsort(ff, nf, sizeof *ff, cmp_u32);

    FILE *f = fopen(out_path, "w");
    if (!f) {
        int e = errno;
        fprintf(stderr, "trace: cannot write %s: %s\n", out_path, strerror(e));
        free(fs);
        free(ff);
        errno = e;
        return -1;
    }
    bool first = true;
    uint64_t dropped = 0;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
    ev(f, &first, "M", "process_name", "__metadata", 0, 0);
    fputs(",\"args\":{\"name\":\"lab runtime\"}}", f);
    char name[64];
    for (struct buf *bf = bufs; bf; bf = bf->next) {
        /* acquire: pairs with trace_thread_name's release store */
        struct name *nm = atomic_load_explicit(&bf->name, memory_order_acquire);
        const char *tn = nm ? nm->s : "thread";
        ev(f, &first, "M", "thread_name", "__metadata", 0, bf->tid);
        fputs(",\"args\":{\"name\":", f);
        put_str(f, tn);
        fputs("}}", f);
        ev(f, &first, "M", "thread_sort_index", "__metadata", 0, bf->tid);
        fprintf(f, ",\"args\":{\"sort_index\":%u}}", (unsigned)bf->tid);
        dropped += atomic_load_explicit(&bf->dropped, memory_order_relaxed); /* a count */
        FOR_EACH_REC(bf, r, {
            uint32_t tid = bf->tid;
            switch ((enum rec_kind)REC_KIND(r)) {
            case R_SPAWN:
                snprintf(name, sizeof name, "spawn task %u", (unsigned)r->task);
                ev(f, &first, "i", name, "task", r->ts, tid);
                fprintf(f, ",\"s\":\"t\",\"args\":{\"task\":%u,\"future\":", (unsigned)r->task);
                put_str(f, (const char *)(uintptr_t)r->a);
                fputs(",\"site\":", f);
                put_site(f, r);
                fputs("}}", f);
                break;
            case R_POLL_B:
                snprintf(name, sizeof name, "task %u", (unsigned)r->task);
                ev(f, &first, "B", name, r->a ? "cancel" : "poll", r->ts, tid);
                fprintf(f, ",\"args\":{\"task\":%u}}", (unsigned)r->task);
                put_flow(f, &first, r, "f", fs, ns, ff, nf, tid);
                break;
            case R_POLL_E:
                ev(f, &first, "E", "", "poll", r->ts, tid);
                fprintf(f, ",\"args\":{\"task\":%u,\"us\":%.3f}}", (unsigned)r->task,
                        (double)write_ns(r->a) / 1e3);
                break;
            case R_WAKE_B:
                snprintf(name, sizeof name, "wake task %u", (unsigned)r->task);
                ev(f, &first, "B", name, "wake", r->ts, tid);
                fprintf(f, ",\"args\":{\"task\":%u,\"source\":\"%s\"", (unsigned)r->task,
                        src_name(REC_B(r)));
                if (REC_B(r) == TRACE_SRC_TASK)
                    fprintf(f, ",\"by\":%llu", (unsigned long long)r->a);
                fputs("}}", f);
                put_flow(f, &first, r, "s", fs, ns, ff, nf, tid);
                break;
            case R_WAKE_E:
                ev(f, &first, "E", "", "wake", r->ts, tid);
                fputs("}", f);
                break;
            case R_COMPLETE:
                snprintf(name, sizeof name, "complete task %u", (unsigned)r->task);
                ev(f, &first, "i", name, "task", r->ts, tid);
                fprintf(f, ",\"s\":\"t\",\"args\":{\"task\":%u}}", (unsigned)r->task);
                break;
            case R_PARK_B:
                ev(f, &first, "B", "park", "park", r->ts, tid);
                if ((int64_t)r->a < 0)
                    fputs(",\"args\":{\"timeout_ms\":null}}", f);
                else
                    fprintf(f, ",\"args\":{\"timeout_ms\":%.3f}}", (double)r->a / 1e6);
                break;
            case R_PARK_E:
                ev(f, &first, "E", "", "park", r->ts, tid);
                fprintf(f, ",\"args\":{\"unparked\":%s}}", r->a ? "true" : "false");
                break;
            case R_UNPARK:
                ev(f, &first, "i", "unpark", "park", r->ts, tid);
                fputs(",\"s\":\"t\"}", f);
                break;
            case R_BUDGET:
                ev(f, &first, "i", "budget exhausted", "task", r->ts, tid);
                fprintf(f, ",\"s\":\"t\",\"args\":{\"task\":%u}}", (unsigned)r->task);
                break;
            case R_SRC_B:
                ev(f, &first, "B", REC_B(r) == TRACE_SRC_IO ? "reactor" : "time driver", "driver",
                   r->ts, tid);
                fputs("}", f);
                break;
            case R_SRC_E:
                ev(f, &first, "E", "", "driver", r->ts, tid);
                fputs("}", f);
                break;
            case R_TIMER_FIRE:
                ev(f, &first, "i", "timer fire", "timer", r->ts, tid);
                fprintf(f, ",\"s\":\"t\",\"args\":{\"count\":%llu}}", (unsigned long long)r->a);
                break;
            case R_IO_READY:
                ev(f, &first, "i", "readiness", "io", r->ts, tid);
                fprintf(f, ",\"s\":\"t\",\"args\":{\"token\":%llu,\"events\":%u}}",
                        (unsigned long long)r->a, (unsigned)r->p);
                break;
            case R_STEAL:
                ev(f, &first, "i", "steal", "sched", r->ts, tid);
                fprintf(f, ",\"s\":\"t\",\"args\":{\"victim\":%llu,\"count\":%u}}",
                        (unsigned long long)r->a, (unsigned)REC_B(r));
                break;
            case R_INJECTOR:
                ev(f, &first, "i", "injector pull", "sched", r->ts, tid);
                fprintf(f, ",\"s\":\"t\",\"args\":{\"count\":%u}}", (unsigned)REC_B(r));
                break;
            case R_STALL:
                snprintf(name, sizeof name, "stall task %u", (unsigned)r->task);
                ev(f, &first, "i", name, "stall", r->ts, tid);
                fprintf(f, ",\"s\":\"t\",\"args\":{\"task\":%u,\"ms\":%.3f,\"site\":",
                        (unsigned)r->task, (double)r->a / 1e6);
                put_site(f, r);
                fputs("}}", f);
                break;
            }
        })
    }
    fprintf(f, "\n],\"otherData\":{\"dropped_events\":%llu,\"stall_ms\":%.3f}}\n",
            (unsigned long long)dropped, (double)stall_ns / 1e6);
    free(fs);
    free(ff);
    if (dropped)
        fprintf(stderr, "trace: %llu events dropped (LAB_TRACE_MAX_EVENTS per thread)\n",
                (unsigned long long)dropped);
    return fclose(f) == 0 ? 0 : -1;
}

#else
/* Without -DLAB_TRACE, trace.h's hooks are empty inline functions and this
 * file has nothing to add. */
typedef int trace_off_;
#endif
