/* store_buffer.c - see store_buffer.h.
 *
 * Two signals share the state below: SIGTRAP after every instruction of
 * the stepped thread (the trap flag, set around fn), SIGSEGV on an access
 * to the protected page. The harness's own handlers (harness.c, set before
 * the seal, which refuses code under test a handler of its own) hand both
 * to lab_sb_fault first. The stepped thread's own fields are touched by it
 * alone (in those handlers); `over` and `foreign` may be set by a fault of
 * another thread, so they are atomics. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "harness.h"
#include "store_buffer.h"

#define SB_PAGE 4096

static struct {
    const struct lab_sb *sb;
    long steps, drains;
    bool reprotect;     /* the page was let through for one instruction: protect it again after it */
    bool hold;          /* at() runs after this instruction */
    bool watched;
    long skipped;       /* accesses while buffered let through so far (of sb->skip) */
    atomic_bool over;   /* the watch is over: the page stays open */
    atomic_bool foreign;
} S;

static _Thread_local bool stepped; /* this thread runs fn under the simulation */

#if defined(__x86_64__)

/* Does the instruction at p wait for the store buffer to drain? A lock
 * prefix (every C11 read-modify-write), xchg with a memory operand
 * (implicitly locked: a seq_cst store), or mfence. Legacy prefixes, then
 * at most one REX, then the opcode. */
static bool drains(const uint8_t *p)
{
    int i = 0;
    for (; i < 14; i++) {
        uint8_t b = p[i];
        if (b == 0xf0)
            return true;
        if (b != 0xf2 && b != 0xf3 && b != 0x2e && b != 0x36 && b != 0x3e && b != 0x26 && b != 0x64 &&
            b != 0x65 && b != 0x66 && b != 0x67)
            break;
    }
    if ((p[i] & 0xf0) == 0x40)
        i++;
    if (p[i] == 0x86 || p[i] == 0x87)
        return (p[i + 1] >> 6) != 3;
    return p[i] == 0x0f && p[i + 1] == 0xae && (p[i + 2] & 0xf8) == 0xf0;
}

/* Is the instruction at p a system call (syscall, 0f 05)? */
static bool is_syscall(const uint8_t *p) { return p[0] == 0x0f && p[1] == 0x05; }

static void on_trap(ucontext_t *uc)
{
    const struct lab_sb *sb = S.sb;
    S.steps++;
    if (S.reprotect) {
        S.reprotect = false;
        if (!atomic_load(&S.over))
            mprotect(sb->page, SB_PAGE, PROT_NONE);
    }
    if (S.hold) {
        S.hold = false;
        sb->at(sb->arg); /* the trap flag is off in here: the kernel clears it for a handler */
    }
    const uint8_t *next = (const uint8_t *)uc->uc_mcontext.gregs[REG_RIP];
    if (drains(next) && sb->buffered(sb->arg)) {
        S.drains++;
        sb->drain(sb->arg);
    }
    if (is_syscall(next) && sb->page && !atomic_load(&S.over)) {
        /* the kernel reads the page as the thread would (a futex word): open
         * it for this instruction, protect it again at the trap after it */
        mprotect(sb->page, SB_PAGE, PROT_READ | PROT_WRITE);
        S.reprotect = true;
    }
}

static void on_segv(ucontext_t *uc)
{
    const struct lab_sb *sb = S.sb;
    mprotect(sb->page, SB_PAGE, PROT_READ | PROT_WRITE);
    if (!stepped) {
        /* another thread uses the word: the forced timing no longer holds */
        atomic_store(&S.foreign, true);
        atomic_store(&S.over, true);
        return;
    }
    uc->uc_mcontext.gregs[REG_EFL] |= 0x100; /* the trap after it, whatever happens */
    if (atomic_load(&S.over))
        return;
    if (sb->buffered(sb->arg) && S.skipped < sb->skip) {
        S.skipped++;
        S.reprotect = true;
    } else if (sb->buffered(sb->arg)) {
        atomic_store(&S.over, true);
        S.watched = true;
        S.hold = true;
    } else {
        S.reprotect = true;
    }
}

__attribute__((visibility("hidden"))) bool lab_sb_fault(int sig, siginfo_t *si, void *ucv)
{
    if (sig == SIGTRAP) {
        if (!stepped)
            return false;   /* not a step of ours: a crash */
        on_trap(ucv);
        return true;
    }
    const struct lab_sb *sb = S.sb;
    char *a = si->si_addr;
    if (sig != SIGSEGV || !sb || !sb->page || a < (char *)sb->page || a >= (char *)sb->page + SB_PAGE)
        return false;       /* not our page: a crash */
    on_segv(ucv);
    return true;
}

__attribute__((noinline)) static void run_stepped(void (*fn)(void *), void *fn_arg)
{
    __asm__ volatile("pushfq\n\torq $0x100, (%%rsp)\n\tpopfq" ::: "memory", "cc");
    fn(fn_arg);
    __asm__ volatile("pushfq\n\tandq $-257, (%%rsp)\n\tpopfq" ::: "memory", "cc");
}

bool lab_sb_run(const struct lab_sb *sb, void (*fn)(void *), void *fn_arg, struct lab_sb_result *r)
{
    memset(r, 0, sizeof *r);
    if (sysconf(_SC_PAGESIZE) != SB_PAGE || ((uintptr_t)sb->page & (SB_PAGE - 1)) != 0)
        return false;
    S.sb = sb;
    S.steps = S.drains = S.skipped = 0;
    S.reprotect = S.hold = S.watched = false;
    atomic_store(&S.over, sb->page == NULL);
    atomic_store(&S.foreign, false);
    if (sb->page && mprotect(sb->page, SB_PAGE, PROT_NONE) != 0)
        return false;
    stepped = true;
    run_stepped(fn, fn_arg);
    stepped = false;
    atomic_store(&S.over, true);
    if (sb->page)
        mprotect(sb->page, SB_PAGE, PROT_READ | PROT_WRITE);
    r->steps = S.steps;
    r->drains = S.drains;
    r->watched = S.watched;
    r->foreign = atomic_load(&S.foreign);
    S.sb = NULL;
    return true;
}

#else

__attribute__((visibility("hidden"))) bool lab_sb_fault(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    (void)si;
    (void)ucv;
    return false;
}

bool lab_sb_run(const struct lab_sb *sb, void (*fn)(void *), void *fn_arg, struct lab_sb_result *r)
{
    (void)sb;
    (void)fn;
    (void)fn_arg;
    memset(r, 0, sizeof *r);
    return false;
}

#endif

/* ---- lab_sb_unpark_race ----------------------------------------------------- */

struct sb_race {
    const struct lab_sb_park *sp;
    atomic_bool drained; /* the unpark ran a locked instruction */
    atomic_bool go;      /* the owner may park now */
    atomic_bool parking; /* the owner is calling park */
    atomic_bool back;    /* the owner's park returned */
    atomic_int tid;      /* the owner's thread id */
    atomic_uint_fast64_t park_ns; /* how long the owner's park call took */
    bool slept;
};

static uint64_t sb_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void sb_nap_us(long us)
{
    struct timespec t = { 0, us * 1000 };
    nanosleep(&t, NULL);
}

/* Is thread tid asleep (state S) now? Async-signal-safe: at() runs in the
 * SIGTRAP handler. */
static bool sb_asleep(int tid)
{
    char path[64] = "/proc/self/task/", digits[16], buf[256];
    int k = 0;
    do
        digits[k++] = (char)('0' + tid % 10); /* snprintf is not async-signal-safe */
    while ((tid /= 10) > 0 && k < (int)sizeof digits);
    size_t at = strlen(path);
    while (k > 0)
        path[at++] = digits[--k];
    memcpy(path + at, "/stat", 6);
    if (lab_read_small(path, buf, sizeof buf) < 0)
        return false;
    char *close_paren = strrchr(buf, ')');
    return close_paren && close_paren[1] == ' ' && close_paren[2] == 'S';
}

static void *sb_owner(void *arg)
{
    struct sb_race *st = arg;
    atomic_store(&st->tid, (int)syscall(SYS_gettid));
    while (!atomic_load(&st->go))
        sb_nap_us(500);
    atomic_store(&st->parking, true);
    uint64_t t0 = sb_now_ns();
    st->sp->park(st->sp->arg);
    atomic_store(&st->park_ns, sb_now_ns() - t0);
    atomic_store(&st->back, true);
    return NULL;
}

static bool sb_race_buffered(void *arg) { return !atomic_load(&((struct sb_race *)arg)->drained); }
static void sb_race_drain(void *arg) { atomic_store(&((struct sb_race *)arg)->drained, true); }

/* On the stopped unparker: let the owner park, and wait (2 s at the most)
 * until it sleeps there, or came back. */
static void sb_race_at(void *arg)
{
    struct sb_race *st = arg;
    atomic_store(&st->go, true);
    for (int i = 0; i < 2000 && !atomic_load(&st->parking); i++)
        sb_nap_us(1000);
    for (int i = 0; i < 2000 && !atomic_load(&st->back); i++) {
        if (sb_asleep(atomic_load(&st->tid))) {
            st->slept = true;
            sb_nap_us(5000); /* settled in its wait */
            return;
        }
        sb_nap_us(1000);
    }
}

static void sb_race_unpark(void *arg)
{
    struct sb_race *st = arg;
    st->sp->unpark(st->sp->arg);
}

bool lab_sb_unpark_race(const struct lab_sb_park *sp, struct lab_sb_park_result *r)
{
    memset(r, 0, sizeof *r);
    struct sb_race st;
    memset(&st, 0, sizeof st);
    st.sp = sp;
    atomic_init(&st.drained, false);
    atomic_init(&st.go, false);
    atomic_init(&st.parking, false);
    atomic_init(&st.back, false);
    atomic_init(&st.tid, 0);
    atomic_init(&st.park_ns, 0);
    pthread_t owner;
    if (pthread_create(&owner, NULL, sb_owner, &st) != 0)
        return false;
    while (atomic_load(&st.tid) == 0)
        sb_nap_us(200);
    struct lab_sb sb = { .page = sp->page, .buffered = sb_race_buffered, .drain = sb_race_drain,
                         .at = sb_race_at, .arg = &st };
    struct lab_sb_result res;
    r->ran = lab_sb_run(&sb, sb_race_unpark, &st, &res);
    if (!r->ran)
        sp->unpark(sp->arg); /* unstepped: the owner still needs its token */
    atomic_store(&st.go, true); /* not stopped: the owner parks after the unpark */
    pthread_join(owner, NULL); /* park is timed: it returns by itself */
    /* The park's own length, not the time since the unpark: a loaded
     * machine may start the owner late, but a park that found the token,
     * or was woken, is short; one that was not sleeps out its timeout. */
    r->returned = atomic_load(&st.park_ns) < (uint64_t)sp->wake_ms * 1000000u;
    r->watched = r->ran && res.watched;
    r->foreign = r->ran && res.foreign;
    r->slept = st.slept;
    r->steps = res.steps;
    r->drains = res.drains;
    return true;
}

const char *lab_sb_unpark_unjudged(const struct lab_sb_park_result *r, const char *what, char *note, size_t len)
{
    snprintf(note, len, "the unpark ran %ld instructions, %ld of them locked; it %s %s%s; the owner %s", r->steps,
             r->drains, r->watched ? "read or wrote" : "made a locked instruction before anything else touched",
             what, r->watched ? " before any locked instruction, and was stopped there" : "",
             r->returned ? "returned" : r->slept ? "slept meanwhile, and did not return in time"
                                                 : "did not return in time");
    if (!r->ran)
        return "the unpark could not be single-stepped on this machine";
    if (r->foreign)
        return "another thread touched the parker's page while the unpark was stopped: the timing could not be "
               "forced";
    if (r->watched && !r->slept && !r->returned)
        return "the owner never fell asleep while the unpark was stopped, and did not return in time: the machine "
               "is too loaded to tell";
    return NULL;
}

/* ---- lab_sb_park_race --------------------------------------------------------- */

struct sb_park_race {
    const struct lab_sb_park *sp;
    atomic_bool fired;     /* at() ran: the owner is stopped, the unpark may go */
    atomic_bool unparking; /* the helper is calling unpark */
    atomic_bool unparked;  /* and it returned */
    atomic_bool done;      /* the owner's park returned */
    atomic_bool beyond;    /* the park slept (or ended) before its access number k */
    atomic_int owner, helper;              /* thread ids */
    atomic_uint_fast64_t released_ns;      /* when the stop ended */
    atomic_uint_fast64_t returned_ns;      /* when the park returned */
    bool helper_slept;     /* the helper was seen asleep (blocked) while the owner was stopped */
};

/* The helper: unparks once the owner is stopped; or, when the owner sleeps
 * (20 ms seen asleep) without having been stopped, ends the watch and
 * unparks it, so the run ends (beyond). */
static void *sb_park_helper(void *arg)
{
    struct sb_park_race *st = arg;
    atomic_store(&st->helper, (int)syscall(SYS_gettid));
    int asleep = 0;
    while (!atomic_load(&st->done)) {
        if (atomic_load(&st->fired)) {
            atomic_store(&st->unparking, true);
            st->sp->unpark(st->sp->arg);
            atomic_store(&st->unparked, true);
            return NULL;
        }
        if (sb_asleep(atomic_load(&st->owner)) && ++asleep >= 20) {
            /* asleep for 20 ms: in a wait, so not at a fault; no stop after this */
            atomic_store(&S.over, true);
            if (!atomic_load(&st->fired)) {
                atomic_store(&st->beyond, true);
                st->sp->unpark(st->sp->arg);
                return NULL;
            }
            continue;
        } else if (!sb_asleep(atomic_load(&st->owner))) {
            asleep = 0;
        }
        sb_nap_us(1000);
    }
    if (!atomic_load(&st->fired))
        atomic_store(&st->beyond, true); /* the park ended before access number k */
    return NULL;
}

static bool sb_park_buffered(void *arg) { return !atomic_load(&((struct sb_park_race *)arg)->fired); }
static void sb_park_drain(void *arg) { (void)arg; }

/* On the stopped owner (a signal handler: async-signal-safe calls only):
 * let the helper unpark, and wait (2 s at the most) until its unpark
 * returned, or it is seen asleep (blocked on what the owner holds). */
static void sb_park_at(void *arg)
{
    struct sb_park_race *st = arg;
    atomic_store(&st->fired, true);
    for (int i = 0; i < 2000 && !atomic_load(&st->unparking); i++)
        sb_nap_us(1000);
    for (int i = 0; i < 2000 && !atomic_load(&st->unparked); i++) {
        if (sb_asleep(atomic_load(&st->helper))) {
            st->helper_slept = true;
            sb_nap_us(5000); /* settled in its wait */
            break;
        }
        sb_nap_us(1000);
    }
    atomic_store(&st->released_ns, sb_now_ns());
}

static void sb_park_owner(void *arg)
{
    struct sb_park_race *st = arg;
    st->sp->park(st->sp->arg);
    atomic_store(&st->returned_ns, sb_now_ns());
}

bool lab_sb_park_race(const struct lab_sb_park *sp, long k, struct lab_sb_park_result *r)
{
    memset(r, 0, sizeof *r);
    struct sb_park_race st;
    memset(&st, 0, sizeof st);
    st.sp = sp;
    atomic_init(&st.fired, false);
    atomic_init(&st.unparking, false);
    atomic_init(&st.unparked, false);
    atomic_init(&st.done, false);
    atomic_init(&st.beyond, false);
    atomic_init(&st.owner, (int)syscall(SYS_gettid));
    atomic_init(&st.helper, 0);
    atomic_init(&st.released_ns, 0);
    atomic_init(&st.returned_ns, 0);
    pthread_t helper;
    if (pthread_create(&helper, NULL, sb_park_helper, &st) != 0)
        return false;
    while (atomic_load(&st.helper) == 0)
        sb_nap_us(200);
    struct lab_sb sb = { .page = sp->page, .buffered = sb_park_buffered, .drain = sb_park_drain,
                         .at = sb_park_at, .arg = &st, .skip = k };
    struct lab_sb_result res;
    r->ran = lab_sb_run(&sb, sb_park_owner, &st, &res);
    if (!r->ran)
        sb_park_owner(&st); /* unstepped: the helper sees it sleep and unparks it */
    atomic_store(&st.done, true);
    pthread_join(helper, NULL);
    bool fired = atomic_load(&st.fired);
    r->watched = r->ran && fired;
    r->beyond = !r->watched;
    r->slept = st.helper_slept;
    r->foreign = r->ran && res.foreign && !atomic_load(&st.beyond);
    uint64_t after = atomic_load(&st.returned_ns) - atomic_load(&st.released_ns);
    r->returned = !r->watched || after < (uint64_t)sp->wake_ms * 1000000u;
    r->steps = res.steps;
    r->drains = res.drains;
    return true;
}

const char *lab_sb_park_unjudged(const struct lab_sb_park_result *r, long k, const char *what, char *note,
                                 size_t len)
{
    if (r->watched)
        snprintf(note, len, "park on %s: stopped right after its access number %ld to it (%ld instructions run), an "
                 "unpark ran %s, and park %s", what, k + 1, r->steps,
                 r->slept ? "until it blocked on what the stopped park held" : "to its end",
                 r->returned ? "returned" : "slept on");
    else
        snprintf(note, len, "park on %s: it slept or returned before its access number %ld (%ld instructions run)",
                 what, k + 1, r->steps);
    if (!r->ran)
        return "the park could not be single-stepped on this machine";
    if (r->foreign)
        return "another thread touched the parker's page while the park was watched: the timing could not be "
               "forced";
    return NULL;
}

const char *lab_sb_park_explore(struct lab_sb_park *sp, void (*fresh)(void *ctx, struct lab_sb_park *sp),
                                void (*done)(void *ctx, struct lab_sb_park *sp), void *ctx, long max, long *k,
                                struct lab_sb_park_result *r, const char *what, char *note, size_t len)
{
    const char *why = NULL;
    for (*k = 0; *k < max; ++*k) {
        fresh(ctx, sp);
        if (!lab_sb_park_race(sp, *k, r)) {
            done(ctx, sp);
            snprintf(note, len, "could not start a thread");
            return "could not start a thread (test machine out of resources)";
        }
        done(ctx, sp);
        why = lab_sb_park_unjudged(r, *k, what, note, len);
        if (why || r->beyond || !r->returned)
            return why;
    }
    return NULL;   /* max stops, each kept the token */
}
