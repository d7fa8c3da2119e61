/* probe.c - what the harness's seal (harness.c, seal_code) refuses and
 * allows once a test has begun, and whether a FAIL record stays. Built with
 * the harness by test_seal.py, outside the grader: it prints one line per
 * attempt, "name errno" (0: the call succeeded), and the test compares. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "harness.h"

#define RECORD 1000   /* harness.c's RECORD_FD */

static void report(const char *name, long ret)
{
    printf("%s %d\n", name, ret == -1 ? errno : 0);
}

int main(int argc, char **argv)
{
    lab_test_begin("seal", "probe", 30.0);
    if (argc > 2 && strcmp(argv[2], "fsize") == 0) {
        /* a FAIL line the record refuses (here: past a file-size limit,
         * its signal ignored) ends the process: nothing runs after it */
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = { .rlim_cur = (rlim_t)lseek(RECORD, 0, SEEK_END), .rlim_max = RLIM_INFINITY };
        setrlimit(RLIMIT_FSIZE, &rl);
        lab_check_failed();
        printf("survived\n");
        fflush(stdout);
        _exit(0);
    }
    long page = sysconf(_SC_PAGESIZE);
    void *text = (void *)((uintptr_t)&main & ~(uintptr_t)(page - 1));
    /* refused: code made writable or new code made executable */
    report("mprotect-exec", mprotect(text, (size_t)page, PROT_READ | PROT_WRITE | PROT_EXEC));
    void *m = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    report("mmap-exec", m == MAP_FAILED ? -1 : 0);
    report("open-mem-write", open("/proc/self/mem", O_RDWR));
    report("openat-write", openat(AT_FDCWD, argv[1], O_WRONLY | O_APPEND));
    report("open-truncating", open(argv[1], O_RDONLY | O_TRUNC));
    report("truncate", truncate(argv[1], 0));
    report("ptrace", ptrace(PTRACE_TRACEME, 0, NULL, NULL));
    report("personality", personality(READ_IMPLIES_EXEC));
    report("io-uring-setup", syscall(SYS_io_uring_setup, 4, NULL));
    /* refused: the record's descriptor closed, replaced, changed, cut */
    report("seccomp-stacked", syscall(SYS_seccomp, 1 /* SECCOMP_SET_MODE_FILTER */, 0, NULL));
    report("prctl-seccomp", prctl(PR_SET_SECCOMP, 2, NULL, 0, 0));
    report("close-record", close(RECORD));
    report("dup-record", dup(RECORD));
    report("dup2-record", dup2(0, RECORD));
    report("dup3-record", dup3(0, RECORD, 0));
    report("fcntl-record", fcntl(RECORD, F_SETFL, 0));
    report("ftruncate-record", ftruncate(RECORD, 0));
    report("fallocate-record", fallocate(RECORD, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096));
    int avail;
    report("ioctl-record", ioctl(RECORD, FIONREAD, &avail));
    report("close-range-record", syscall(SYS_close_range, 3, ~0u, 0));
    struct iovec v = { .iov_base = "x", .iov_len = 1 };
    report("pwritev2-record", pwritev2(RECORD, &v, 1, 0, 0));
    /* allowed: what the stages' code and the tests do */
    void *rw = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    report("mmap-rw", rw == MAP_FAILED ? -1 : 0);
    report("mprotect-ro", mprotect(rw, (size_t)page, PROT_READ));
    int fd = open(argv[1], O_RDONLY);
    report("open-read", fd);
    report("close-other", close(fd));
    report("close-range-above", syscall(SYS_close_range, RECORD + 1, ~0u, 0));
    report("fcntl-other", fcntl(1, F_GETFL));
    /* a failed check's record, then an attempt to take it back */
    lab_check_failed();
    report("ftruncate-after-fail", ftruncate(RECORD, 0));
    lab_test_end();
    fflush(stdout);
    _exit(0);
}
