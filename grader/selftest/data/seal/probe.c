/* probe.c - what the harness's seal (harness.c, seal_code) refuses and
 * allows once a test has begun, and what reaches the grader's channel.
 * Built with the harness by test_seal.py, outside the grader, and run with
 * a channel as its standard output ($LAB_CHANNEL_FD=1): the harness moves
 * the channel away and points standard output where standard error goes, so
 * the lines below, one per attempt, "name errno" (0: the call succeeded),
 * come out on standard error. argv[2] picks a case of its own: "shut" (the
 * channel shut down before a check fails), "orphan" (a check that fails in
 * a process that began no test) or "quiet" (nothing tried). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define CHANNEL 1000   /* harness.c's CHANNEL_FD */

extern const char __executable_start[];

static void report(const char *name, long ret)
{
    printf("%s %d\n", name, ret == -1 ? errno : 0);
    fflush(stdout);   /* before a case that ends the process by a signal */
}

static void on_signal(int sig)
{
    (void)sig;
}

int main(int argc, char **argv)
{
    lab_test_begin("seal", "probe", 30.0);
    if (argc > 2 && strcmp(argv[2], "shut") == 0) {
        /* a channel shut down under the harness: the FAIL write fails, and
         * the process ends there, SIGPIPE ignored or not */
        report("ignore-sigpipe", signal(SIGPIPE, SIG_IGN) == SIG_ERR ? -1 : 0);
        shutdown(CHANNEL, SHUT_WR);
        lab_check_failed();
        printf("survived\n");
        fflush(stdout);
        _exit(0);
    }
    if (argc > 2 && strcmp(argv[2], "quiet") == 0) {
        /* begun, and nothing tried: for a run whose seal may be missing */
        lab_test_end();
        _exit(0);
    }
    if (argc > 2 && strcmp(argv[2], "orphan") == 0) {
        /* a test's body run on in a process that began no test */
        pid_t child = fork();
        if (child == 0) {
            lab_check_failed();
            _exit(0);
        }
        waitpid(child, NULL, 0);
        lab_test_end();
        _exit(0);
    }
    long page = sysconf(_SC_PAGESIZE);
    char *text = (char *)((uintptr_t)&main & ~(uintptr_t)(page - 1));
    char *image = (char *)(uintptr_t)__executable_start;
    /* refused: code made writable or new code made executable */
    report("mprotect-exec", mprotect(text, (size_t)page, PROT_READ | PROT_WRITE | PROT_EXEC));
    void *m = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    report("mmap-exec", m == MAP_FAILED ? -1 : 0);
    /* refused: the executable's image changed (its code, its read-only
     * data, its table of library addresses), however the range is given */
    report("mprotect-image-rw", mprotect(text, (size_t)page, PROT_READ | PROT_WRITE));
    char *below = mmap(image - page, (size_t)page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                       -1, 0);
    if (below == image - page)
        report("mprotect-across-image", mprotect(below, 2 * (size_t)page, PROT_READ | PROT_WRITE));
    else
        printf("mprotect-across-image -1\n");   /* no room below: nothing to show */
    void *over = mmap(text, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    report("mmap-fixed-image", over == MAP_FAILED ? -1 : 0);
    report("munmap-image", munmap(text, (size_t)page));
    void *shrunk = mremap(text, 2 * (size_t)page, (size_t)page, 0);   /* its second page unmapped */
    report("mremap-image", shrunk == MAP_FAILED ? -1 : 0);
    void *own = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *onto = mremap(own, (size_t)page, (size_t)page, MREMAP_MAYMOVE | MREMAP_FIXED, text);
    report("mremap-onto-image", onto == MAP_FAILED ? -1 : 0);
    /* refused: an action of its own for a signal that can be made to
     * arrive at a chosen instruction, and the ways to make one arrive */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    report("sigaction-trap", sigaction(SIGTRAP, &sa, NULL));
    report("sigaction-segv", sigaction(SIGSEGV, &sa, NULL));
    report("signal-bus-ignored", signal(SIGBUS, SIG_IGN) == SIG_ERR ? -1 : 0);
    struct perf_event_attr attr;   /* a software clock: asked for, never opened */
    memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.size = sizeof attr;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    report("perf-event-open", syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
    report("userfaultfd", syscall(SYS_userfaultfd, 0));
    /* refused: the kernel's keyrings, which outlive the run */
    report("add-key", syscall(SYS_add_key, "user", "lab-probe", "x", 1, -4 /* KEY_SPEC_USER_KEYRING */));
    report("keyctl", syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -4, 0));
    report("request-key", syscall(SYS_request_key, "user", "lab-probe", NULL, 0));
    /* refused: a file written, emptied, or the process written through */
    report("open-mem-write", open("/proc/self/mem", O_RDWR));
    report("openat-write", openat(AT_FDCWD, argv[1], O_WRONLY | O_APPEND));
    report("open-truncating", open(argv[1], O_RDONLY | O_TRUNC));
    report("truncate", truncate(argv[1], 0));
    report("ptrace", ptrace(PTRACE_TRACEME, 0, NULL, NULL));
    report("personality", personality(READ_IMPLIES_EXEC));
    report("io-uring-setup", syscall(SYS_io_uring_setup, 4, NULL));
    report("seccomp-stacked", syscall(SYS_seccomp, 1 /* SECCOMP_SET_MODE_FILTER */, 0, NULL));
    report("prctl-seccomp", prctl(PR_SET_SECCOMP, 2, NULL, 0, 0));
    /* refused: the channel's descriptor closed, replaced or changed */
    report("close-channel", close(CHANNEL));
    report("dup-channel", dup(CHANNEL));
    report("dup2-channel", dup2(0, CHANNEL));
    report("dup3-channel", dup3(0, CHANNEL, 0));
    report("fcntl-channel", fcntl(CHANNEL, F_SETFL, O_NONBLOCK));
    int avail;
    report("ioctl-channel", ioctl(CHANNEL, FIONREAD, &avail));
    report("close-range-channel", syscall(SYS_close_range, 3, ~0u, 0));
    /* allowed: what the stages' code and the tests do */
    void *rw = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    report("mmap-rw", rw == MAP_FAILED ? -1 : 0);
    report("mprotect-ro", mprotect(rw, (size_t)page, PROT_READ));
    void *two = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *grown = mremap(two, 2 * (size_t)page, 4 * (size_t)page, MREMAP_MAYMOVE);
    report("mremap-own", grown == MAP_FAILED ? -1 : 0);
    report("munmap-own", munmap(grown, 4 * (size_t)page));
    report("sigaction-query", sigaction(SIGTRAP, NULL, &sa));
    report("sigaction-other", sigaction(SIGALRM, &sa, NULL));   /* asynchronous: a test's own (SIGPIPE, say) */
    int fd = open(argv[1], O_RDONLY);
    report("open-read", fd);
    report("close-other", close(fd));
    report("close-range-above", syscall(SYS_close_range, CHANNEL + 2, ~0u, 0));
    report("fcntl-other", fcntl(1, F_GETFL));
    /* a failed check: its FAIL reaches the channel, whatever follows */
    lab_check_failed();
    lab_test_end();
    fflush(stdout);
    _exit(0);
}
