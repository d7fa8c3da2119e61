/* harness.c - records, completion sentinel, crash and hang backtraces. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <valgrind/valgrind.h>

#include "harness.h"
#include "../lab_todo.h"

static int record_fd = 2;             /* the record, or stderr */
/* Under the grader, the grader's channel: a socket whose other end the
 * grader holds outside the jail (grader/lab_grader/channel.py). A test says
 * on it that it began (BEGIN suite::test) and that a check failed (FAIL),
 * and what it said is gone from its reach as it is written: a socket cannot
 * be truncated, seeked, renamed or read back by the writer. The kernel
 * stamps every message with the writer's process, so no process can speak
 * for another. The seal (seal_code) keeps this number from being closed or
 * replaced, so lab_check_failed writes to a number, not to a variable code
 * under test could change. Below the jail's RLIMIT_NOFILE (4096, invoke.py)
 * and a default shell's 1024. */
#define CHANNEL_FD 1000
/* The record file ($LAB_RUN_DIR/suite.test.log): everything else the grader
 * reads of a test (END, SITES, HANG, CRASH, ...). Code under test can
 * rewrite it; what it can gain by that, the channel and the transcript
 * check take away (docs/instructors.md, the threat model). */
#define LOG_FD 1001
static char test_id[256];             /* "suite::test" */
static double test_timeout_s;
static atomic_bool test_done;         /* set by lab_test_end; read by the watchdog */
/* The completion record's proof (see take_nonce), kept masked: its bytes
 * XOR a mask drawn at start-up, so no copy of the grader's string sits in
 * memory for a scan to find; unmasked on the stack only to write a record. */
static unsigned char nonce_masked[80];
static unsigned char nonce_mask[80];
static size_t nonce_len;

#define DUMP_SIGNAL (SIGRTMIN + 4)

/* The checks this test has reached (lab_site): an open-addressed set of
 * return addresses, filled by any thread of the test without a lock. A slot
 * goes from 0 to an address once, by compare-and-swap, and never changes
 * again. The orders are relaxed: lab_test_end reads the set after the body
 * returned, and every thread whose checks count was joined by then (the join
 * orders its stores before the read); a check still running in a thread
 * nobody joined may be missed, as it may be missed by the reference's run. */
#define SITE_SLOTS 2048u
static _Atomic uintptr_t site_slot[SITE_SLOTS];
static atomic_uint sites_over; /* checks that found the set full */
extern const char __executable_start[]; /* the linker's: the first byte of the executable's image */

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    /* one write() per line: O_APPEND keeps lines whole across threads */
    ssize_t ignored = write(record_fd, line, (size_t)n);
    (void)ignored;
}

/* ---- a failed check ------------------------------------------------------ */

/* Bare system calls: no C library function, so no entry in a table of
 * addresses that code under test could point elsewhere. */
static long bare_syscall3(long nr, long a, long b, long c)
{
#if defined(__x86_64__)
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "0"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return ret;
#else
    return syscall(nr, a, b, c);
#endif
}

/* What a failed check says on the channel: read-only data of the executable,
 * which the seal keeps from being written or mapped over, so that another
 * thread of code under test cannot change the message between the check and
 * the write (a line built on the stack could be turned into a BEGIN). */
static const char fail_message[] = "FAIL\n";

/* send(fd, buf, len, flags) as sendto with no address, bare. */
static long bare_send(long fd, const void *buf, long len, long flags)
{
#if defined(__x86_64__)
    long ret;
    register long r10 __asm__("r10") = flags;
    register long r8 __asm__("r8") = 0;
    register long r9 __asm__("r9") = 0;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)SYS_sendto), "D"(fd), "S"(buf), "d"(len), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
#else
    return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
#endif
}

__attribute__((noinline)) void lab_check_failed(void)
{
    /* the channel first: once the kernel has the message, it is the
     * grader's. It never waits (a full channel is a refusal), so no signal
     * finds the write half done; and it cannot be silenced: it is sent, or
     * the process ends. */
    for (;;) {
        long n = bare_send(CHANNEL_FD, fail_message, (long)(sizeof fail_message - 1), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n == -EINTR)
            continue;
        if (n == -EBADF)
            break;    /* no grader (no channel): the failure itself is reported as ever */
        if (n != (long)(sizeof fail_message - 1))   /* refused (shut down, full, not a socket): failed here */
            bare_syscall3(SYS_exit_group, 70, 0, 0);
        break;
    }
    /* then the record file, for the report's sake: "FAIL pid" on a line of
     * its own, whatever code under test wrote before it */
    char line[40] = "\nFAIL ";
    char digits[16];
    long pid = bare_syscall3(SYS_getpid, 0, 0, 0);
    int nd = 0;
    do {
        digits[nd++] = (char)('0' + pid % 10);
        pid /= 10;
    } while (pid > 0 && nd < (int)sizeof digits);
    size_t len = 6;
    while (nd > 0)
        line[len++] = digits[--nd];
    line[len++] = '\n';
    (void)bare_syscall3(SYS_write, LOG_FD, (long)line, (long)len);
}

/* Writes the calling thread's backtrace; async-signal tolerant once warmed. */
static void write_backtrace(const char *why)
{
    void *frames[64];
    int n = backtrace(frames, 64);
    char head[128];
    int len = snprintf(head, sizeof head, "BT-BEGIN %d %ld %s\n", (int)getpid(),
                       (long)syscall(SYS_gettid), why);
    ssize_t ignored = write(record_fd, head, (size_t)len);
    backtrace_symbols_fd(frames, n, record_fd);
    len = snprintf(head, sizeof head, "BT-END\n");
    ignored = write(record_fd, head, (size_t)len);
    (void)ignored;
}

void lab_record_sites(const char *why, void *const *sites, const unsigned *counts, int n)
{
    char head[160];
    int len = snprintf(head, sizeof head, "BT-BEGIN %d %ld %s\n", (int)getpid(), (long)syscall(SYS_gettid), why);
    ssize_t ignored = write(record_fd, head, (size_t)len);
    backtrace_symbols_fd((void *const *)sites, n, record_fd);
    ignored = write(record_fd, "BT-END\n", 7);
    (void)ignored;
    char line[256];
    len = snprintf(line, sizeof line, "COUNTS %d %s", (int)getpid(), why);
    for (int i = 0; i < n && len < (int)sizeof line - 12; i++)
        len += snprintf(line + len, sizeof line - (size_t)len, " %u", counts[i]);
    record("%s\n", line);
}

/* ---- hang dump: the watchdog signals each thread in turn ---------------- */

static atomic_int dump_ack; /* set by the signalled thread once its backtrace is out */

static void dump_handler(int sig)
{
    (void)sig;
    int saved = errno;
    write_backtrace("hang");
    atomic_store_explicit(&dump_ack, 1, memory_order_release); /* pairs with the watchdog's acquire poll */
    errno = saved;
}

/* The value of the line that starts with `key` in thread `tid`'s status
 * file (proc(5)), into out; false when the file or the line is missing. */
static bool task_status(long tid, const char *key, char *out, size_t size)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool found = false;
    size_t klen = strlen(key);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) == 0) {
            snprintf(out, size, "%s", line + klen);
            found = true;
        }
    }
    fclose(f);
    return found;
}

/* Does thread `tid` block DUMP_SIGNAL? (SigBlk, a hex mask) */
static bool blocks_dump_signal(long tid)
{
    char value[128];
    if (!task_status(tid, "SigBlk:", value, sizeof value))
        return false;
    unsigned long long mask = strtoull(value, NULL, 16);
    return (mask >> (DUMP_SIGNAL - 1)) & 1u;
}

/* The id of thread `tid` (a name in /proc/self/task) as this process sees
 * it. The grader starts each run in a PID namespace of its own but leaves
 * the machine's /proc mounted, whose names are the ids of the namespace
 * above; the status file's NSpid line lists the id in each namespace, this
 * one's last (proc(5)). Without a namespace, or on a kernel before 4.1 with
 * no NSpid line, the name is the id. */
static long own_tid(long tid)
{
    char value[128];
    if (!task_status(tid, "NSpid:", value, sizeof value))
        return tid;
    long own = tid;
    char *p = value, *end;
    for (long v = strtol(p, &end, 10); end != p; v = strtol(p, &end, 10)) {
        own = v;
        p = end;
    }
    return own;
}

static void dump_all_threads(void)
{
    pid_t pid = getpid();
    long self = syscall(SYS_gettid);
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        long tid = strtol(e->d_name, NULL, 10);   /* its name in /proc, for the files below */
        long id = own_tid(tid);                   /* its id here, for the records and tgkill */
        if (id == self)
            continue;
        char path[64], comm[64] = "?";
        snprintf(path, sizeof path, "/proc/self/task/%ld/comm", tid);
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            ssize_t n = read(fd, comm, sizeof comm - 1);
            comm[n > 0 ? n : 0] = 0;
            comm[strcspn(comm, "\n")] = 0;
            close(fd);
        }
        if (blocks_dump_signal(tid)) {
            /* Criterion's own I/O thread blocks every signal; it is not
             * the code under test, and waiting for it would waste the time
             * left before the timeout. */
            record("THREAD %d %ld %s blocked\n", (int)pid, id, comm);
            continue;
        }
        char state = '?';
        snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
        FILE *f = fopen(path, "r");
        if (f) {
            char buf[512];
            if (fgets(buf, sizeof buf, f)) {
                char *p = strrchr(buf, ')');
                if (p && p[1] == ' ')
                    state = p[2];
            }
            fclose(f);
        }
        record("THREAD %d %ld %s %c\n", (int)pid, id, comm, state);
        atomic_store_explicit(&dump_ack, 0, memory_order_relaxed);
        if (syscall(SYS_tgkill, pid, id, DUMP_SIGNAL) != 0)
            continue;
        for (int i = 0; i < 60 && !atomic_load_explicit(&dump_ack, memory_order_acquire); i++)
            lab_sleep_ms(5); /* a thread that cannot take the signal gets 0.3 s */
    }
    closedir(d);
}

/* ---- a stall: no thread of the test can ever run again ------------------- */

ssize_t lab_read_small(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, buf, n - 1);
    close(fd);
    if (got <= 0)
        return -1;
    buf[got] = 0;
    return got;
}

/* Does thread `tid` (its /proc name) sleep in a futex wait without a
 * timeout (a mutex, a condition wait, a join, an untimed park)? Only
 * another thread of this process can end such a wait: the test shares no
 * futex with any other process. Everything else (running, a timed wait, a
 * sleep, epoll, a read: a timer or another process may end those) is no. */
static bool waits_forever(long tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%ld/syscall", tid);
    if (lab_read_small(path, buf, sizeof buf) < 0)
        return false;
    long nr;
    unsigned long uaddr, op, val, timeout;
    if (sscanf(buf, "%ld %lx %lx %lx %lx", &nr, &uaddr, &op, &val, &timeout) != 5 || nr != SYS_futex)
        return false; /* "running", or another call */
    unsigned cmd = (unsigned)(op & 127u); /* without FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME */
    bool waits = cmd == 0 /* WAIT */ || cmd == 9 /* WAIT_BITSET */ || cmd == 6 /* LOCK_PI */ ||
                 cmd == 11 /* WAIT_REQUEUE_PI */ || cmd == 13 /* LOCK_PI2 */;
    return waits && timeout == 0;
}

/* Context switches of thread `tid` so far: a thread that ran at all since
 * the last look has more. */
static unsigned long long switches(long tid)
{
    char value[64];
    unsigned long long n = 0;
    if (task_status(tid, "voluntary_ctxt_switches:", value, sizeof value))
        n += strtoull(value, NULL, 10);
    if (task_status(tid, "nonvoluntary_ctxt_switches:", value, sizeof value))
        n += strtoull(value, NULL, 10);
    return n;
}

/* One look at every thread but this one: true when each waits forever
 * (Criterion's own I/O thread, which talks to the runner, only needs to be
 * asleep); *total gets their context switches. */
static bool all_wait_forever(unsigned long long *total)
{
    long self = syscall(SYS_gettid);
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return false;
    bool all = true;
    unsigned seen = 0;
    *total = 0;
    struct dirent *e;
    while (all && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        long tid = strtol(e->d_name, NULL, 10);
        if (own_tid(tid) == self)
            continue;
        *total += switches(tid);
        if (blocks_dump_signal(tid))
            continue;
        seen++;
        all = waits_forever(tid);
    }
    closedir(d);
    return all && seen > 0;
}

static void sleep_s(double s) { lab_sleep_ms((unsigned)(s * 1000.0 + 0.5)); }

#define STALL_LOOK_S 0.1  /* how often the watchdog looks */
#define STALL_S 2.0       /* how long every thread must have waited, none running, to be a stall */

static void *watchdog(void *arg)
{
    (void)arg;
    /* Fire at 80% of the timeout, and at least 0.3 s before it. */
    double at = test_timeout_s * 0.8;
    if (test_timeout_s - at < 0.3)
        at = test_timeout_s - 0.3;
    if (at < 0.1)
        at = 0.1;
    /* Until then, look for a stall: every thread of the test in a futex wait
     * with no timeout, and not one context switch in STALL_S. Nothing is left
     * that could wake any of them (a lost wakeup, a deadlock), so waiting for
     * the limit would only cost time: the test ends now, as a hang. Tools
     * that run threads one at a time (Valgrind) or keep a thread of their own
     * (ThreadSanitizer) never look stalled; their tests wait for the limit. */
    double waited = 0, stalled = 0;
    unsigned long long last = 0;
    while (waited + STALL_LOOK_S < at) {
        sleep_s(STALL_LOOK_S);
        waited += STALL_LOOK_S;
        if (atomic_load_explicit(&test_done, memory_order_acquire)) /* pairs with lab_test_end's release */
            return NULL;
        unsigned long long total = 0;
        bool forever = all_wait_forever(&total);
        stalled = forever && total == last ? stalled + STALL_LOOK_S : 0;
        last = total;
        if (stalled >= STALL_S) {
            record("HANG %d %s stalled after %.1f s of its %.1f s limit: every thread of the test had waited "
                   "%.1f s on a lock, a condition or a join with no timeout, and none had run since\n",
                   (int)getpid(), test_id, waited, test_timeout_s, stalled);
            dump_all_threads();
            record("HANG-END %d\n", (int)getpid());
            kill(getpid(), SIGKILL);
        }
    }
    sleep_s(at - waited);
    if (atomic_load_explicit(&test_done, memory_order_acquire)) /* pairs with lab_test_end's release */
        return NULL;
    record("HANG %d %s still running after %.1f s of its %.1f s limit\n", (int)getpid(),
           test_id, at, test_timeout_s);
    dump_all_threads();
    record("HANG-END %d\n", (int)getpid());
    /* Criterion ends the test at its limit, but has been seen to miss a
     * worker (a spinning test in a -j2 run under the grader's jail), and
     * then the whole run waits for the grader's backstop. A second past the
     * limit, the test ends here. */
    sleep_s(test_timeout_s - at + 1.0);
    if (atomic_load_explicit(&test_done, memory_order_acquire)) /* pairs with lab_test_end's release */
        return NULL;
    record("HANG %d %s killed after %.1f s of its %.1f s limit: the runner had not stopped it\n", (int)getpid(),
           test_id, test_timeout_s + 1.0, test_timeout_s);
    kill(getpid(), SIGKILL);
    return NULL;
}

/* ---- crashes ------------------------------------------------------------ */

static void crash_record(int sig)
{
    char line[128];
    int len = snprintf(line, sizeof line, "CRASH %d %s\n", (int)getpid(), sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    ssize_t ignored = write(record_fd, line, (size_t)len);
    (void)ignored;
    write_backtrace("crash");
}

/* Recorded, then the process ends with the shell's status for the signal
 * (128 + its number): after the seal a signal's action can no longer be
 * reset to the default to die by it, and under TSan, whose own handler
 * stands in front of this one, a raise would come back here. */
static void crash_handler(int sig)
{
    crash_record(sig);
    bare_syscall3(SYS_exit_group, 128 + sig, 0, 0);
}

/* store_buffer.c's (every test binary links it): a SIGTRAP of the thread it
 * single-steps, or a SIGSEGV on the page it watches, is its own (true).
 * Weak, so that a binary without it links. */
extern bool lab_sb_fault(int sig, siginfo_t *si, void *uc) __attribute__((weak));

/* A test's own SIGTRAP handler (lab_set_step_handler), or null. */
static void (*_Atomic step_handler)(int, siginfo_t *, void *);

bool lab_set_step_handler(void (*fn)(int, siginfo_t *, void *))
{
    atomic_store_explicit(&step_handler, fn, memory_order_relaxed);   /* read by this thread's own traps */
    return true;
}

/* SIGSEGV and SIGTRAP stay with this handler for the whole test: the seal
 * refuses code under test any later change of their action. A fault that
 * is the store buffer's, or a step of a test's own, goes there; any other
 * is a crash (crash_handler). */
static void fault_handler(int sig, siginfo_t *si, void *uc)
{
    if (lab_sb_fault && lab_sb_fault(sig, si, uc))
        return;
    /* relaxed: a step traps on the thread that set the handler before
     * setting the trap flag, so its own store is what it reads */
    void (*step)(int, siginfo_t *, void *) = atomic_load_explicit(&step_handler, memory_order_relaxed);
    if (sig == SIGTRAP && step) {
        step(sig, si, uc);
        return;
    }
    crash_handler(sig);
}

static void install_handlers(void)
{
    static char altstack[1 << 18];   /* a step handler runs the store buffer's callbacks here */
    stack_t ss = { .ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0 };
    sigaltstack(&ss, NULL);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = crash_handler;
    sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    /* SIGXFSZ and SIGXCPU: the grader's output and CPU-time limits */
    const int crash_signals[] = { SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGXFSZ, SIGXCPU };
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
        sigaction(crash_signals[i], &sa, NULL);

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fault_handler;
    /* on a stack of its own: a stack overflow's fault needs one, and a
     * stepped function's stack shows no sign of the steps (a test that
     * steps sets the thread's own, sigaltstack) */
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGTRAP, &sa, NULL);

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = dump_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(DUMP_SIGNAL, &sa, NULL);
}

/* ---- the test's code stays as compiled ---------------------------------- */

/* Defined by a stage's test support that must make something before the
 * seal: stage 08's rings (grader/tests/08-uring/uring_guard.c), which
 * the seal then keeps anything else from making. Weak: absent, null. */
extern void lab_before_seal(void) __attribute__((weak));

#if defined(__SANITIZE_THREAD__)
void __sanitizer_set_report_fd(void *fd);

/* ThreadSanitizer opens its log (TSAN_OPTIONS log_path=P: the file P.pid)
 * at its first report, after the seal, which refuses the open: open it
 * here and hand it over. */
static void open_tsan_log(void)
{
    const char *opts = getenv("TSAN_OPTIONS");
    const char *at = opts ? strstr(opts, "log_path=") : NULL;
    if (!at)
        return;
    at += strlen("log_path=");
    char path[4096];
    size_t n = strcspn(at, " :,");
    if (n == 0 || n + 24 >= sizeof path)
        return;
    snprintf(path, sizeof path, "%.*s.%d", (int)n, at, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0)
        __sanitizer_set_report_fd((void *)(intptr_t)fd);
}
#endif

/* ---- the seal -----------------------------------------------------------
 *
 * From here on the process can neither make memory executable nor change
 * the executable's own image, nor take back what it said on the channel:
 * - no mprotect, pkey_mprotect or mmap with PROT_EXEC;
 * - no mprotect, pkey_mprotect, munmap, mremap or MAP_FIXED mmap over any
 *   byte of the executable's image (__executable_start to _end): its code,
 *   its read-only data (the FAIL message) and, linked -z now, its table of
 *   library addresses, which a hook through the table would need to write;
 * - no action of its own for the signals that code can make arrive at a
 *   chosen instruction (SIGTRAP: the trap flag; SIGSEGV, SIGBUS: a page it
 *   took away; SIGILL, SIGFPE, SIGSYS), and no perf_event_open (a
 *   breakpoint that signals) or userfaultfd (a fault that waits for a
 *   signal): a handler there could move a failed check past its FAIL
 *   write. The harness's handlers for them are set before the seal
 *   (install_handlers); a test that single-steps gives its own through
 *   lab_set_step_handler. The FAIL write itself never waits (MSG_DONTWAIT),
 *   so no other signal finds it half done;
 * - no open for writing (which /proc/self/mem would need: it writes through
 *   page protections) or with O_TRUNC, no creat, openat2, truncate, ptrace,
 *   process_vm_writev, personality (read-implies-exec), shmat,
 *   remap_file_pages, pidfd_getfd; no io_uring_setup (a ring's operations do
 *   not pass through this filter: stage 08's rings are made before,
 *   restricted, grader/tests/08-uring/uring_guard.c);
 * - the channel's descriptor (CHANNEL_FD) cannot be closed, duplicated into
 *   a number of the code's choosing, replaced (dup2, dup3) or changed
 *   (fcntl, ioctl); and no filter can be stacked on this one (seccomp,
 *   PR_SET_SECCOMP), which could trap the FAIL write and fake its success;
 * - no add_key, keyctl or request_key: a key is the kernel's, not the
 *   run's, and one added to a keyring outlived its run and was read back
 *   by a later grading's (issue 25, red-team pass 6).
 * Each rule answers an attack of issue 25's red-team passes
 * (docs/instructors.md, the threat model). Under Valgrind, all but the
 * first and the handlers (below); not off x86-64. */

#if defined(__x86_64__)
#define SEAL_MAX 512
#define TO_NEXT 0xfd    /* a jump to the next block: not this block's call */
#define TO_DENY 0xfe    /* to the block's DENY */
#define TO_ALLOW 0xff   /* to the block's ALLOW */
#define TO_AFTER 0xfc   /* past the range test being emitted (range_denied) */
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#define ARG_HI(i) (offsetof(struct seccomp_data, args) + 8 * (i) + 4)

struct seal {
    struct sock_filter f[SEAL_MAX];
    unsigned n, block, range;
};

static void put(struct seal *s, struct sock_filter insn)
{
    if (s->n < SEAL_MAX)
        s->f[s->n++] = insn;
}

static void jump(struct seal *s, unsigned short op, unsigned k, unsigned char jt, unsigned char jf)
{
    put(s, (struct sock_filter)BPF_JUMP(BPF_JMP | op, k, jt, jf));
}

static void load(struct seal *s, unsigned offset)
{
    put(s, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset));
}

/* Every conditional jump from `from` on whose target is `mark` goes to `to`. */
static void patch(struct seal *s, unsigned from, unsigned char mark, unsigned to)
{
    for (unsigned i = from; i < s->n; i++) {
        struct sock_filter *x = &s->f[i];
        if (BPF_CLASS(x->code) != BPF_JMP || BPF_OP(x->code) == BPF_JA)
            continue;
        if (x->jt == mark)
            x->jt = (unsigned char)(to - i - 1);
        if (x->jf == mark)
            x->jf = (unsigned char)(to - i - 1);
    }
}

/* A block: the call's number is in the accumulator; not this call, the next
 * block; this call, the block's tests, then ALLOW, then DENY. */
static void block_begin(struct seal *s, unsigned nr)
{
    s->block = s->n;
    jump(s, BPF_JEQ | BPF_K, nr, 0, TO_NEXT);
}

static void block_end(struct seal *s, int err)
{
    unsigned allow = s->n;
    put(s, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    put(s, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err));
    patch(s, s->block, TO_ALLOW, allow);
    patch(s, s->block, TO_DENY, allow + 1);
    patch(s, s->block, TO_NEXT, s->n);
}

/* To the block's DENY when argument `bits_arg` has any of `bits`. */
static void denied_if_set(struct seal *s, unsigned bits_arg, unsigned bits)
{
    load(s, ARG_LO(bits_arg));
    jump(s, BPF_JSET | BPF_K, bits, TO_DENY, 0);
}

/* To the block's DENY when [args[a], args[a] + args[l]) meets [lo, hi):
 * a < hi and a + l > lo, in 64 bits from 32-bit halves (a carry from the
 * low halves' sum kept in M[1]); otherwise on past it. */
static void range_denied(struct seal *s, unsigned a, unsigned l, uint64_t lo, uint64_t hi)
{
    unsigned start = s->n;
    load(s, ARG_HI(a));
    jump(s, BPF_JGT | BPF_K, (unsigned)(hi >> 32), TO_AFTER, 0);  /* a's high half above hi's: a >= hi */
    jump(s, BPF_JEQ | BPF_K, (unsigned)(hi >> 32), 0, 2);         /* below: a < hi, on to the end */
    load(s, ARG_LO(a));
    jump(s, BPF_JGE | BPF_K, (unsigned)hi, TO_AFTER, 0);
    load(s, ARG_LO(a));
    put(s, (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TAX, 0));
    load(s, ARG_LO(l));
    put(s, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_ADD | BPF_X, 0));   /* the low halves' sum */
    put(s, (struct sock_filter)BPF_STMT(BPF_ST, 0));
    jump(s, BPF_JGE | BPF_X, 0, 2, 0);                                      /* sum >= a's low half: no carry */
    put(s, (struct sock_filter)BPF_STMT(BPF_LD | BPF_IMM, 1));
    put(s, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 1));
    put(s, (struct sock_filter)BPF_STMT(BPF_LD | BPF_IMM, 0));
    put(s, (struct sock_filter)BPF_STMT(BPF_ST, 1));
    load(s, ARG_HI(a));
    put(s, (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TAX, 0));
    load(s, ARG_HI(l));
    put(s, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_ADD | BPF_X, 0));
    put(s, (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TAX, 0));
    put(s, (struct sock_filter)BPF_STMT(BPF_LD | BPF_MEM, 1));
    put(s, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_ADD | BPF_X, 0));   /* the high halves' sum, and the carry */
    jump(s, BPF_JGT | BPF_K, (unsigned)(lo >> 32), TO_DENY, 0);
    jump(s, BPF_JEQ | BPF_K, (unsigned)(lo >> 32), 0, TO_AFTER);
    put(s, (struct sock_filter)BPF_STMT(BPF_LD | BPF_MEM, 0));
    jump(s, BPF_JGT | BPF_K, (unsigned)lo, TO_DENY, TO_AFTER);
    patch(s, start, TO_AFTER, s->n);
}

extern const char _end[];   /* the linker's: past the executable's last byte (its .bss) */
#endif

static void seal_code(void)
{
#if defined(__x86_64__)
    /* Under Valgrind, whose own translations need executable memory and
     * which keeps the code's signal handlers to itself: all but those two
     * rules, installed through prctl, the call it passes on (it has no
     * wrapper for seccomp(2)), on this thread and the threads it starts. */
    bool vg = RUNNING_ON_VALGRIND;
#if defined(__SANITIZE_THREAD__)
    open_tsan_log();
#endif
    long page = sysconf(_SC_PAGESIZE);
    uint64_t image_lo = (uint64_t)(uintptr_t)__executable_start;
    uint64_t image_hi = ((uint64_t)(uintptr_t)_end + (uint64_t)page - 1) & ~(uint64_t)(page - 1);
    static struct seal s;   /* 4 KB: off the stack */
    s.n = 0;
    load(&s, offsetof(struct seccomp_data, arch));
    jump(&s, BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
    put(&s, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));   /* another ABI: int 0x80 */
    load(&s, offsetof(struct seccomp_data, nr));
    jump(&s, BPF_JGE | BPF_K, 0x40000000u, 0, 1);                                        /* x32 numbers */
    put(&s, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));

    /* memory: nothing executable made, nothing of the image changed */
    const unsigned protects[] = { SYS_mprotect, SYS_pkey_mprotect };
    for (unsigned i = 0; i < 2; i++) {
        block_begin(&s, protects[i]);
        if (!vg)
            denied_if_set(&s, 2, PROT_EXEC);
        range_denied(&s, 0, 1, image_lo, image_hi);
        block_end(&s, EPERM);
    }
    block_begin(&s, SYS_mmap);
    if (!vg)
        denied_if_set(&s, 2, PROT_EXEC);
    load(&s, ARG_LO(3));
    jump(&s, BPF_JSET | BPF_K, MAP_FIXED, 0, TO_ALLOW);   /* without MAP_FIXED it replaces nothing */
    range_denied(&s, 0, 1, image_lo, image_hi);
    block_end(&s, EPERM);
    block_begin(&s, SYS_munmap);
    range_denied(&s, 0, 1, image_lo, image_hi);
    block_end(&s, EPERM);
    block_begin(&s, SYS_mremap);
    range_denied(&s, 0, 1, image_lo, image_hi);          /* moved or shrunk away */
    load(&s, ARG_LO(3));
    jump(&s, BPF_JSET | BPF_K, MREMAP_FIXED, 0, TO_ALLOW);
    range_denied(&s, 4, 2, image_lo, image_hi);          /* or moved onto it */
    block_end(&s, EPERM);
    /* signals: no handler of the code's own (the act argument, 64 bits, not null) */
    if (!vg) {
        const unsigned kept[] = { SIGTRAP, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS };
        const unsigned nkept = sizeof kept / sizeof kept[0];
        block_begin(&s, SYS_rt_sigaction);
        load(&s, ARG_LO(0));
        for (unsigned i = 0; i < nkept; i++)   /* one of them: on to the action's test */
            jump(&s, BPF_JEQ | BPF_K, kept[i], (unsigned char)(nkept - i), 0);
        jump(&s, BPF_JEQ | BPF_K, 0, TO_ALLOW, TO_ALLOW);   /* none of them: allowed */
        load(&s, ARG_LO(1));                     /* the action: null (a query) passes */
        jump(&s, BPF_JEQ | BPF_K, 0, 0, TO_DENY);
        load(&s, ARG_HI(1));
        jump(&s, BPF_JEQ | BPF_K, 0, TO_ALLOW, TO_DENY);
        block_end(&s, EPERM);
    }
    /* files: nothing opened for writing, nothing emptied */
    block_begin(&s, SYS_openat);
    denied_if_set(&s, 2, O_WRONLY | O_RDWR | O_TRUNC);   /* O_TRUNC empties even read-only */
    block_end(&s, EACCES);
    block_begin(&s, SYS_open);
    denied_if_set(&s, 1, O_WRONLY | O_RDWR | O_TRUNC);
    block_end(&s, EACCES);
    /* the channel's descriptor: closed, duplicated, replaced, changed */
    const struct { unsigned nr, arg, value; } when_equal[] = {
        { SYS_close, 0, CHANNEL_FD }, { SYS_dup, 0, CHANNEL_FD }, { SYS_dup2, 1, CHANNEL_FD },
        { SYS_dup3, 1, CHANNEL_FD }, { SYS_fcntl, 0, CHANNEL_FD }, { SYS_ioctl, 0, CHANNEL_FD },
        { SYS_prctl, 0, PR_SET_SECCOMP },
    };
    for (unsigned i = 0; i < sizeof when_equal / sizeof when_equal[0]; i++) {
        block_begin(&s, when_equal[i].nr);
        load(&s, ARG_LO(when_equal[i].arg));
        jump(&s, BPF_JEQ | BPF_K, when_equal[i].value, TO_DENY, TO_ALLOW);
        block_end(&s, EPERM);
    }
    block_begin(&s, SYS_close_range);                    /* first <= CHANNEL_FD <= last */
    load(&s, ARG_LO(0));
    jump(&s, BPF_JGT | BPF_K, CHANNEL_FD, TO_ALLOW, 0);
    load(&s, ARG_LO(1));
    jump(&s, BPF_JGE | BPF_K, CHANNEL_FD, TO_DENY, TO_ALLOW);
    block_end(&s, EPERM);
    /* denied outright */
    const unsigned denied[] = { SYS_creat, SYS_openat2, SYS_truncate, SYS_ptrace, SYS_process_vm_writev,
                                SYS_personality, SYS_shmat, SYS_remap_file_pages, SYS_io_uring_setup,
                                SYS_seccomp, SYS_pidfd_getfd, SYS_perf_event_open, SYS_userfaultfd,
                                SYS_add_key, SYS_keyctl, SYS_request_key };
    const unsigned ndenied = sizeof denied / sizeof denied[0];
    for (unsigned i = 0; i < ndenied; i++)   /* each: to the DENY after the ALLOW below */
        jump(&s, BPF_JEQ | BPF_K, denied[i], (unsigned char)(ndenied - i), 0);
    put(&s, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    put(&s, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
    if (s.n >= SEAL_MAX)
        return;   /* cannot happen: SEAL_MAX has room for every block above */
    struct sock_fprog prog = { .len = (unsigned short)s.n, .filter = s.f };
    int failed = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (failed == 0 && vg)
        failed = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
    else if (failed == 0 && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
        failed = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog); /* this thread and those it starts */
    if (failed != 0) {
        /* the machine's doing (a container that refuses seccomp, say), not
         * the code's, which has not run yet: the grader says so beside the
         * score (channel.py) */
        char said[160];
        int n = snprintf(said, sizeof said, "UNSEALED %s", strerror(errno));
        ssize_t ignored = write(CHANNEL_FD, said, (size_t)n);
        (void)ignored;
    }
#endif
}

/* ---- the checks reached ----------------------------------------------- */

__attribute__((noinline)) void lab_site(void)
{
    uintptr_t at = (uintptr_t)__builtin_return_address(0);
    uint64_t h = (uint64_t)at * UINT64_C(0x9e3779b97f4a7c15);
    for (unsigned i = 0; i < SITE_SLOTS; i++) {
        unsigned k = (unsigned)((h >> 40) + i) & (SITE_SLOTS - 1);
        uintptr_t seen = atomic_load_explicit(&site_slot[k], memory_order_relaxed);
        if (seen == 0 && atomic_compare_exchange_strong_explicit(&site_slot[k], &seen, at, memory_order_relaxed,
                                                                 memory_order_relaxed))
            return;
        if (seen == at)
            return;
    }
    atomic_fetch_add_explicit(&sites_over, 1, memory_order_relaxed);
}

static void forget_sites(void)
{
    for (unsigned k = 0; k < SITE_SLOTS; k++)
        atomic_store_explicit(&site_slot[k], 0, memory_order_relaxed);
    atomic_store_explicit(&sites_over, 0, memory_order_relaxed);
}

/* SITES pid off off ... (hexadecimal offsets from the executable's first
 * byte), as many lines as it takes; SITES pid over n when the set filled. */
static void write_sites(void)
{
    char line[960];
    int head = snprintf(line, sizeof line, "SITES %d", (int)getpid());
    int len = head;
    for (unsigned k = 0; k < SITE_SLOTS; k++) {
        uintptr_t at = atomic_load_explicit(&site_slot[k], memory_order_relaxed);
        if (at == 0)
            continue;
        if (len > (int)sizeof line - 24) {
            record("%s\n", line);
            len = head;
        }
        len += snprintf(line + len, sizeof line - (size_t)len, " %lx",
                        (unsigned long)(at - (uintptr_t)__executable_start));
    }
    if (len > head)
        record("%s\n", line);
    unsigned over = atomic_load_explicit(&sites_over, memory_order_relaxed);
    if (over)
        record("SITES %d over %u\n", (int)getpid(), over);
}

/* ---- begin / end ------------------------------------------------------- */

void lab_test_begin(const char *suite, const char *name, double timeout_s)
{
    snprintf(test_id, sizeof test_id, "%s::%s", suite, name);
    test_timeout_s = timeout_s;
    char *env_nonce = getenv("LAB_NONCE");
    if (env_nonce)
        memset(env_nonce, 'x', strlen(env_nonce)); /* unsetenv leaves the string in the heap */
    unsetenv("LAB_NONCE"); /* the masked copy is enough from here on (take_nonce) */
    atomic_store_explicit(&test_done, false, memory_order_relaxed);
    forget_sites();

    /* the grader's channel, handed down as standard output (with standard
     * input and error, the numbers that Criterion's runner leaves open in
     * the processes it starts; it takes standard input for itself): moved
     * to its own number, standard output then going where standard error
     * goes, the variable gone before the body runs */
    const char *channel = getenv("LAB_CHANNEL_FD");
    if (channel && *channel) {
        int fd = atoi(channel);
        if (fd != CHANNEL_FD && dup3(fd, CHANNEL_FD, O_CLOEXEC) != CHANNEL_FD)
            _exit(70);   /* no BEGIN on the channel: the grader counts the test as failed */
        if (fd != STDERR_FILENO && dup2(STDERR_FILENO, fd) != fd)
            _exit(70);
        unsetenv("LAB_CHANNEL_FD");
        char begin[sizeof test_id + 8];
        int n = snprintf(begin, sizeof begin, "BEGIN %s", test_id);
        if (write(CHANNEL_FD, begin, (size_t)n) != n)
            _exit(70);
    }

    const char *dir = getenv("LAB_RUN_DIR");
    if (dir && *dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.%s.log", dir, suite, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            if (fd != LOG_FD && dup3(fd, LOG_FD, O_CLOEXEC) != LOG_FD) {
                dprintf(fd, "BEGIN %d %s\nNOTE %d the record could not move to descriptor %d: %s\n",
                        (int)getpid(), test_id, (int)getpid(), LOG_FD, strerror(errno));
                _exit(70);   /* no END: the grader counts the test as failed */
            }
            if (fd != LOG_FD)
                close(fd);
            record_fd = LOG_FD;
            lab_todo_record_fd = LOG_FD;
        }
    }

    void *warm[2];
    backtrace(warm, 2); /* loads the unwinder now, not inside a signal handler */
    install_handlers();
    record("BEGIN %d %s\n", (int)getpid(), test_id);
    if (lab_before_seal)
        lab_before_seal();
    seal_code();

    const char *no_watchdog = getenv("LAB_NO_WATCHDOG"); /* make debug: a debugger is in charge */
    if (no_watchdog && *no_watchdog)
        return;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, watchdog, NULL) == 0)
        pthread_setname_np(t, "lab-watchdog");
    pthread_attr_destroy(&attr);
}

/* The grader's nonce proves that END was written here, at the end of a test
 * body, and not by code under test that exits early and fakes the record. So
 * code under test must not find it: not with getenv, not in
 * /proc/self/environ, not in the runner's /proc/<pid>/environ. Those files
 * show a process's original environment block, so this constructor (it runs
 * before main in every process that execs the binary: the runner, and each
 * of Criterion's workers, which it re-executes) keeps a private copy, wipes
 * the bytes in the block, and puts the variable back as a heap string, which
 * the block never shows, for a worker that is executed next. Each test then
 * removes the variable (lab_test_begin) before its body runs; a worker that
 * is forked without exec (the stand-in runner) has the private copy already.
 * Reading another process's heap takes ptrace rights: out of scope here. */
__attribute__((constructor(101))) static void take_nonce(void)
{
    char *v = getenv("LAB_NONCE");
    if (!v)
        return;
    size_t n = strnlen(v, sizeof nonce_masked - 1);
    uint64_t state = (uint64_t)(uintptr_t)&state ^ (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    ssize_t got = getrandom(nonce_mask, n, 0);
    for (size_t i = 0; i < n; i++) {
        if (got != (ssize_t)n)
            nonce_mask[i] ^= (unsigned char)lab_rand(&state);
        nonce_masked[i] = (unsigned char)v[i] ^ nonce_mask[i];
    }
    nonce_len = n;
    char copy[sizeof nonce_masked];
    memcpy(copy, v, n);
    copy[n] = '\0';
    memset(v, 'x', n);
    setenv("LAB_NONCE", copy, 1); /* for a worker executed next; wiped again by lab_test_begin */
    memset(copy, 0, sizeof copy);
}

/* The nonce, unmasked into out (at least sizeof nonce_masked bytes); "-"
 * when the grader gave none. */
static void nonce_text(char *out)
{
    if (nonce_len == 0) {
        strcpy(out, "-");
        return;
    }
    for (size_t i = 0; i < nonce_len; i++)
        out[i] = (char)(nonce_masked[i] ^ nonce_mask[i]);
    out[nonce_len] = '\0';
}

void lab_test_end(void)
{
    atomic_store_explicit(&test_done, true, memory_order_release); /* pairs with the watchdog's acquire */
    write_sites();
    char n[sizeof nonce_masked];
    nonce_text(n);
    record("END %d %s %s\n", (int)getpid(), test_id, n);
    memset(n, 0, sizeof n);
}

/* ---- seeds, scale, notes ------------------------------------------------- */

uint64_t lab_rand(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

uint64_t lab_seed(void)
{
    uint64_t seed;
    const char *env = getenv("LAB_SEED");
    if (env && *env) {
        seed = strtoull(env, NULL, 0);
    } else {
        seed = UINT64_C(1469598103934665603); /* FNV-1a of the test's name */
        for (const char *p = test_id; *p; p++)
            seed = (seed ^ (unsigned char)*p) * UINT64_C(1099511628211);
        seed &= UINT64_C(0xffffffff);
    }
    record("SEED %d %llu\n", (int)getpid(), (unsigned long long)seed);
    if (record_fd != 2)
        fprintf(stderr, "%s: seed %llu (replay with SEED=%llu)\n", test_id,
                (unsigned long long)seed, (unsigned long long)seed);
    return seed;
}

unsigned lab_scale(unsigned n, unsigned min)
{
    const char *env = getenv("LAB_SCALE");
    double f = env && *env ? strtod(env, NULL) : 1.0;
    if (!(f > 0))
        f = 1.0;
    double scaled = (double)n * f;
    return scaled < (double)min ? min : (unsigned)scaled;
}

void lab_note(const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    record("NOTE %d %s\n", (int)getpid(), msg);
    if (record_fd != 2)
        fprintf(stderr, "%s: %s\n", test_id, msg);
}

void lab_unjudged(const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *c = msg; *c; c++)
        if (*c == '\n')
            *c = ' '; /* one record, one line */
    char n[sizeof nonce_masked];
    nonce_text(n);
    record("UNJUDGED %d %s %s\n", (int)getpid(), n, msg);
    memset(n, 0, sizeof n);
}

void lab_sleep_ms(unsigned ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void lab_spin_pause(unsigned turns)
{
    if (turns < (1u << 16)) {
        sched_yield();
        return;
    }
    struct timespec pause = { .tv_sec = 0, .tv_nsec = 20000 };
    nanosleep(&pause, NULL);
}

bool lab_two_cpus(int *a, int *b)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return false;
    int found = 0;
    for (int c = 0; c < CPU_SETSIZE && found < 2; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        *(found == 0 ? a : b) = c;
        found++;
    }
    return found == 2;
}

void lab_pin_thread(pthread_t t, int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    (void)pthread_setaffinity_np(t, sizeof one, &one); /* a hint: the race is valid either way */
}

void lab_monotonic_cond_init(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

void lab_deadline_after_ms(struct timespec *ts, unsigned ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}
