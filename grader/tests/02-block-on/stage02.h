/* stage02.h - what the stage 02 tests share: a "done" flag with a timed
 * wait, and park / block_on run on a watched thread of their own.
 *
 * A lost wakeup hangs a thread forever. A test that calls park or block_on
 * on its own thread would then hang too, and the student would see only
 * "timed out". Instead the call runs on a helper thread and the test thread
 * waits for it with a deadline: past the deadline the test fails with a
 * sentence that says what was lost. Where it can, it also rescues the helper
 * (an extra unpark) so the test ends cleanly; a hung block_on cannot be
 * rescued from outside, and is left behind when the test fails.
 */
#ifndef STAGE02_H
#define STAGE02_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "lab_test.h"
#include "gate.h"      /* a flag one thread sets (gate_open) and another waits for */
#include "measure.h"
#include "parker.h"
#include "block_on.h"

/* How long a test waits for something that should happen at once before it
 * calls it a hang: generous, and stretched in the Valgrind lane. */
#define STAGE02_RESCUE_MS (2000u * (unsigned)LAB_TIMEOUT_SCALE)

#define MS_NS UINT64_C(1000000)

/* The most CPU a thread may burn while it only waits (parks) for a wake.
 * Parking costs microseconds; a spinning thread burns all of the wait. The
 * Valgrind lane stretches it: there, starting a thread alone costs ~20 ms. */
#define STAGE02_WAIT_CPU_NS (20 * MS_NS * (uint64_t)LAB_TIMEOUT_SCALE)

/* ---- park on a watched thread -------------------------------------------- */

struct bg_park {
    struct parker *p;      /* borrowed: the test keeps its reference */
    int64_t timeout_ns;    /* < 0: parker_park; else parker_park_timeout */
    bool result;           /* park_timeout's answer (true for parker_park) */
    uint64_t elapsed_ns;   /* wall time inside the call */
    struct gate done; /* set when the call returned */
    pthread_t thread;
};

static inline void *bg_park_main(void *arg)
{
    struct bg_park *b = arg;
    uint64_t t0 = monotonic_ns();
    if (b->timeout_ns < 0) {
        parker_park(b->p);
        b->result = true;
    } else {
        b->result = parker_park_timeout(b->p, (uint64_t)b->timeout_ns);
    }
    b->elapsed_ns = monotonic_ns() - t0;
    gate_open(&b->done);
    return NULL;
}

/* The helper becomes the parker's owner: the test thread must not park on p
 * until bg_park_finish() has returned. */
static inline void bg_park_start(struct bg_park *b, struct parker *p, int64_t timeout_ns)
{
    b->p = p;
    b->timeout_ns = timeout_ns;
    b->result = false;
    b->elapsed_ns = 0;
    gate_init(&b->done);
    if (pthread_create(&b->thread, NULL, bg_park_main, b) != 0)
        cr_assert_fail("could not start a thread (test machine out of resources)");
}

/* Waits up to `ms` for the park to return. True when it did. False when it
 * was still asleep: then the helper is rescued with unparks, so the test can
 * fail cleanly; the helper is joined if the rescue worked (an unpark that
 * wakes nobody cannot rescue it: it is then left asleep, and the test, which
 * fails anyway, ends with it). */
static inline bool bg_park_finish(struct bg_park *b, unsigned ms)
{
    if (gate_wait(&b->done, ms)) {
        pthread_join(b->thread, NULL);
        gate_destroy(&b->done);
        return true;
    }
    for (unsigned waited = 0; waited < STAGE02_RESCUE_MS; waited += 10) {
        parker_unpark(b->p); /* the rescue: whatever was lost, give a token now */
        if (gate_wait(&b->done, 10)) {
            pthread_join(b->thread, NULL);
            gate_destroy(&b->done);
            break;
        }
    }
    return false;
}

/* CPU time used so far by another thread of this process. */
static inline uint64_t thread_cpu_ns_of(pthread_t t)
{
    clockid_t id;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &id) != 0 || clock_gettime(id, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- block_on on a watched thread ---------------------------------------- */

struct bg_block_on {
    struct future fut;
    void *out;
    unsigned long polls;   /* block_on's answer */
    uint64_t cpu_ns;       /* CPU time of the blocking thread inside block_on */
    uint64_t elapsed_ns;   /* wall time inside block_on */
    struct gate done; /* set when block_on returned */
    pthread_t thread;
};

static inline void *bg_block_on_main(void *arg)
{
    struct bg_block_on *b = arg;
    uint64_t t0 = monotonic_ns(), c0 = thread_cpu_ns();
    b->polls = block_on(b->fut, b->out);
    b->cpu_ns = thread_cpu_ns() - c0;
    b->elapsed_ns = monotonic_ns() - t0;
    gate_open(&b->done);
    return NULL;
}

static inline void bg_block_on_start(struct bg_block_on *b, struct future fut, void *out)
{
    b->fut = fut;
    b->out = out;
    b->polls = 0;
    b->cpu_ns = b->elapsed_ns = 0;
    gate_init(&b->done);
    if (pthread_create(&b->thread, NULL, bg_block_on_main, b) != 0)
        cr_assert_fail("could not start a thread (test machine out of resources)");
}

/* Waits up to `ms` for block_on to return; true (and joined) when it did.
 * False: block_on is still blocked; the thread is left as it is (a hung
 * block_on cannot be rescued from outside) and the caller fails the test. */
static inline bool bg_block_on_finish(struct bg_block_on *b, unsigned ms)
{
    if (!gate_wait(&b->done, ms))
        return false;
    pthread_join(b->thread, NULL);
    gate_destroy(&b->done);
    return true;
}

#endif
