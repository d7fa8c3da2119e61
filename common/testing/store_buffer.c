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
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "store_buffer.h"

#define SB_PAGE 4096

static struct {
    const struct lab_sb *sb;
    long steps, drains;
    bool reprotect;     /* the page was let through for one instruction: protect it again after it */
    bool hold;          /* at() runs after this instruction */
    bool watched;
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
    if (drains((const uint8_t *)uc->uc_mcontext.gregs[REG_RIP]) && sb->buffered(sb->arg)) {
        S.drains++;
        sb->drain(sb->arg);
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
    if (sb->buffered(sb->arg)) {
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
    S.steps = S.drains = 0;
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
